#!/usr/bin/env bash
# Table 3 of the thesis at issue 17's setting (3 components, Table 3's shapes,
# 50 counts over 3 terms): the measurements of bench/COUNT_MIXTURE_TABLE3.md.
#   bash bench/count_mixture_table3.sh BUILD_DIR
# 1. Batch references (the C++ program below, built with the system
#    compiler): Bayes-optimal accuracies with the true parameters, batch EM on
#    eq. 14 and on the exact DCM from the truth, random shapes and K-means.
# 2. SEP (the engine's defaults) through the measurement program
#    BUILD_DIR/bin/count_mixture_table3_measure
#    (tests/count_mixture_table3_measure.cc), for each family option set below.
# About 15 minutes on one idle core, and ~25 more for the restarts of
# section 8.
set -euo pipefail
BUILD=${1:?usage: count_mixture_table3.sh BUILD_DIR}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/ref.cc" <<'CPP'
// Batch references for Table 3 at 50 counts (bench/COUNT_MIXTURE_TABLE3.md):
// Bayes-optimal accuracies with the true parameters, and batch EM
// (maximum likelihood) on eq. 14 (EDCM) and on the exact DCM (eq. 13),
// started at the true parameters, at random shapes, and at K-means (cosine)
// clusters with method-of-moments shapes (the thesis's §2.3.3).
// Usage: ref PER_COMPONENT  (documents per component; 5 seeds; same corpora
// as tests/count_mixture_table3_test.cc's std::mt19937_64 draws), or
// ref 0: the Bayes-optimal accuracies on 3 x 20,000 documents and those of
// the best classifier that sees only which terms are present.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

using Vec = std::vector<double>;
using Shapes = std::vector<Vec>;
const Shapes kTable3 = {{0.610, 0.318, 0.646}, {0.556, 0.188, 0.848}, {0.129, 0.891, 0.507}};
struct Doc {
  Vec x;
  double n;
  int y;
};

double Digamma(double x) {
  double r = 0;
  for (; x < 6; x += 1) r -= 1 / x;
  const double f = 1 / (x * x);
  return r + std::log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

// The test's sampler: labels shuffled, p ~ Dir(shape), 50 draws.
std::vector<Doc> Sample(int per, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> lab;
  for (int k = 0; k < 3; ++k) lab.insert(lab.end(), per, k);
  std::shuffle(lab.begin(), lab.end(), rng);
  std::vector<Doc> docs;
  for (int y : lab) {
    Vec p(3), c(3, 0);
    for (int w = 0; w < 3; ++w) p[w] = std::gamma_distribution<double>(kTable3[y][w], 1.0)(rng) + 1e-300;
    std::discrete_distribution<int> pick(p.begin(), p.end());
    for (int t = 0; t < 50; ++t) c[pick(rng)] += 1;
    docs.push_back({c, 50.0, y});
  }
  return docs;
}

double LogDcm(const Doc& d, const Vec& a) {
  const double s = a[0] + a[1] + a[2];
  double v = std::lgamma(s) - std::lgamma(s + d.n);
  for (int w = 0; w < 3; ++w) v += d.x[w] > 0 ? std::lgamma(d.x[w] + a[w]) - std::lgamma(a[w]) : 0.0;
  return v;
}
double LogEdcm(const Doc& d, const Vec& a) {
  const double s = a[0] + a[1] + a[2];
  double v = std::lgamma(s) - std::lgamma(s + d.n);
  for (int w = 0; w < 3; ++w) v += d.x[w] > 0 ? std::log(a[w]) : 0.0;
  return v;
}
double Lik(bool dcm, const Doc& d, const Vec& a) { return dcm ? LogDcm(d, a) : LogEdcm(d, a); }

// Accuracy (best matching) and mean relative shape error (best matching).
void Evaluate(const std::vector<Doc>& docs, const Shapes& s, const Vec& pi, bool dcm, double* acc, double* rel) {
  std::vector<int> cl;
  for (const Doc& d : docs) {
    int b = 0;
    double bv = -INFINITY;
    for (int k = 0; k < 3; ++k) {
      const double v = std::log(pi[k]) + Lik(dcm, d, s[k]);
      if (v > bv) bv = v, b = k;
    }
    cl.push_back(b);
  }
  std::array<int, 3> perm = {0, 1, 2};
  *acc = 0;
  *rel = INFINITY;
  do {
    int hit = 0;
    for (size_t i = 0; i < docs.size(); ++i) hit += perm[cl[i]] == docs[i].y;
    *acc = std::max(*acc, static_cast<double>(hit) / docs.size());
    double r = 0;
    for (int k = 0; k < 3; ++k)
      for (int w = 0; w < 3; ++w) r += std::fabs(s[k][w] - kTable3[perm[k]][w]) / kTable3[perm[k]][w] / 9;
    *rel = std::min(*rel, r);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

double BayesAccuracy(const std::vector<Doc>& docs, bool dcm) {
  double acc, rel;
  Evaluate(docs, kTable3, {1.0 / 3, 1.0 / 3, 1.0 / 3}, dcm, &acc, &rel);
  return acc;
}

// EM: responsibilities, then the M step by fixed point (Minka's for the
// DCM; for eq. 14 a_w = sum_{i: x_iw > 0} r_i / sum_i r_i (psi(s + n_i) -
// psi(s))).
void Em(const std::vector<Doc>& docs, Shapes* s, Vec* pi, bool dcm, int iters) {
  const size_t N = docs.size();
  std::vector<std::array<double, 3>> r(N);
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < N; ++i) {
      double l[3], mx = -INFINITY, z = 0;
      for (int k = 0; k < 3; ++k) mx = std::max(mx, l[k] = std::log((*pi)[k]) + Lik(dcm, docs[i], (*s)[k]));
      for (int k = 0; k < 3; ++k) z += (l[k] = std::exp(l[k] - mx));
      for (int k = 0; k < 3; ++k) r[i][k] = l[k] / z;
    }
    for (int k = 0; k < 3; ++k) {
      double rk = 0;
      for (size_t i = 0; i < N; ++i) rk += r[i][k];
      (*pi)[k] = std::max(rk / N, 1e-12);
      Vec& a = (*s)[k];
      for (int fp = 0; fp < 50; ++fp) {
        const double sum = a[0] + a[1] + a[2];
        double den = 0;
        for (size_t i = 0; i < N; ++i) den += r[i][k] * (Digamma(sum + docs[i].n) - Digamma(sum));
        Vec next(3);
        for (int w = 0; w < 3; ++w) {
          double num = 0;
          for (size_t i = 0; i < N; ++i) {
            if (docs[i].x[w] > 0) {
              num += dcm ? r[i][k] * (Digamma(docs[i].x[w] + a[w]) - Digamma(a[w])) * a[w] : r[i][k];
            }
          }
          next[w] = std::max(num / den, 1e-6);
        }
        a = next;
      }
    }
  }
}

// K-means with the cosine (the thesis's NLTK K-means), then per cluster the
// DCM's method of moments (mean proportions m, precision s from their
// variance: Var p_w = m_w (1 - m_w) / (s + 1)).
Shapes KMeansMoments(const std::vector<Doc>& docs, uint64_t seed, Vec* pi) {
  std::mt19937_64 rng(seed);
  const size_t N = docs.size();
  std::vector<std::array<double, 3>> u(N);
  for (size_t i = 0; i < N; ++i) {
    const double nn = std::sqrt(docs[i].x[0] * docs[i].x[0] + docs[i].x[1] * docs[i].x[1] + docs[i].x[2] * docs[i].x[2]);
    for (int w = 0; w < 3; ++w) u[i][w] = docs[i].x[w] / nn;
  }
  std::vector<std::array<double, 3>> c(3);
  for (int k = 0; k < 3; ++k) c[k] = u[std::uniform_int_distribution<size_t>(0, N - 1)(rng)];
  std::vector<int> as(N);
  for (int it = 0; it < 50; ++it) {
    for (size_t i = 0; i < N; ++i) {
      double bv = -2;
      for (int k = 0; k < 3; ++k) {
        const double v = u[i][0] * c[k][0] + u[i][1] * c[k][1] + u[i][2] * c[k][2];
        if (v > bv) bv = v, as[i] = k;
      }
    }
    for (int k = 0; k < 3; ++k) {
      std::array<double, 3> t{};
      for (size_t i = 0; i < N; ++i)
        if (as[i] == k)
          for (int w = 0; w < 3; ++w) t[w] += u[i][w];
      const double nn = std::sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
      if (nn > 0)
        for (int w = 0; w < 3; ++w) c[k][w] = t[w] / nn;
    }
  }
  Shapes s(3, Vec(3, 0.5));
  pi->assign(3, 1.0 / 3);
  for (int k = 0; k < 3; ++k) {
    Vec m(3, 0), m2(3, 0);
    int cnt = 0;
    for (size_t i = 0; i < N; ++i) {
      if (as[i] != k) continue;
      ++cnt;
      for (int w = 0; w < 3; ++w) {
        const double p = docs[i].x[w] / docs[i].n;
        m[w] += p;
        m2[w] += p * p;
      }
    }
    if (cnt == 0) continue;
    (*pi)[k] = static_cast<double>(cnt) / N;
    double prec = 0;
    int used = 0;
    for (int w = 0; w < 3; ++w) {
      m[w] /= cnt;
      const double v = m2[w] / cnt - m[w] * m[w];
      if (v > 1e-9 && m[w] > 1e-9) prec += m[w] * (1 - m[w]) / v - 1, ++used;
    }
    const double sum = used > 0 ? std::max(prec / used, 0.05) : 1.0;
    for (int w = 0; w < 3; ++w) s[k][w] = std::max(m[w] * sum, 1e-3);
  }
  return s;
}

// The best accuracy of any function of the presence pattern (x_w > 0).
double PresenceOracle(const std::vector<Doc>& docs) {
  int count[8][3] = {};
  for (const Doc& d : docs) ++count[(d.x[0] > 0) | (d.x[1] > 0) << 1 | (d.x[2] > 0) << 2][d.y];
  int hit = 0;
  for (auto& c : count) hit += *std::max_element(c, c + 3);
  return static_cast<double>(hit) / docs.size();
}

int main(int argc, char** argv) {
  const int per = argc > 1 ? std::atoi(argv[1]) : 70;
  if (per == 0) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const std::vector<Doc> docs = Sample(20000, 900 + seed);
      std::printf("3 x 20000 documents, seed %llu: Bayes-optimal DCM %.3f, eq. 14 %.3f, presence pattern only %.3f\n",
                  static_cast<unsigned long long>(seed), BayesAccuracy(docs, true), BayesAccuracy(docs, false),
                  PresenceOracle(docs));
    }
    return 0;
  }
  std::printf("3 x %d documents of 50 counts; EM: 300 iterations; accuracy / mean relative shape error\n", per);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const std::vector<Doc> docs = Sample(per, 100 + seed);
    std::printf("seed %llu: Bayes-optimal DCM %.3f, eq. 14 %.3f |", static_cast<unsigned long long>(seed),
                BayesAccuracy(docs, true), BayesAccuracy(docs, false));
    for (int dcm = 0; dcm < 2; ++dcm) {
      for (int start = 0; start < 3; ++start) {
        Shapes s = kTable3;
        Vec pi(3, 1.0 / 3);
        if (start == 1) {
          std::mt19937_64 rng(seed);
          for (Vec& a : s)
            for (double& v : a) v = 0.5 * std::exp(std::uniform_real_distribution<double>(-0.5, 0.5)(rng));
        } else if (start == 2) {
          s = KMeansMoments(docs, seed, &pi);
        }
        Em(docs, &s, &pi, dcm == 1, 300);
        double acc, rel;
        Evaluate(docs, s, pi, dcm == 1, &acc, &rel);
        std::printf(" %s/%s %.3f/%.3f", dcm ? "dcm" : "eq14", start == 0 ? "truth" : start == 1 ? "random" : "kmeans",
                    acc, rel);
      }
    }
    std::printf("\n");
  }
}
CPP
c++ -O2 -std=c++17 -o "$TMP/ref" "$TMP/ref.cc"
for per in 0 70 300 1000; do "$TMP/ref" "$per"; done

run() {  # PER PASSES OPTIONS [RESTARTS [WINDOW_PASSES [SEEDS]]]
  echo "== SEP: 3 x $1 documents, $2 passes, options '$3', restarts ${4:-1}, window ${5:-1} pass(es)"
  TABLE3_PER=$1 TABLE3_PASSES=$2 TABLE3_OPTS=$3 TABLE3_RESTARTS=${4:-1} TABLE3_WINDOW=${5:-1} \
    TABLE3_SEEDS=${6:-1 2 3 4 5} "$BUILD/bin/count_mixture_table3_measure" |
    grep -E '^ *(emsd|component|restarts)'
}
run 70 20 "revive=off"
run 70 20 "scale=learn,revive=off"
run 70 20 "init=kmeans,revive=off"
run 70 20 "likelihood=dcm,revive=off"
run 300 50 "likelihood=dcm,revive=off"
run 300 50 "likelihood=dcm,init=kmeans,revive=off"
run 1000 20 "likelihood=dcm,revive=off"
run 1000 60 "likelihood=dcm,revive=off"
run 1000 150 "likelihood=dcm,revive=off"
# 2026-11-27 (section 8): --restarts, chosen by the sum of log Z_i after the
# first pass (train's default window), after 50 passes, after all 150.
run 1000 150 "likelihood=dcm,revive=off" 3
run 1000 150 "likelihood=dcm,revive=off" 5 1 1
run 1000 150 "likelihood=dcm,revive=off" 3 50 1
run 1000 150 "likelihood=dcm,revive=off" 3 150 1
run 1000 150 "likelihood=dcm,revive=off" 5 150 1
for ms in 3 4; do  # seed 1's corpus and shuffles, models seeded 3 and 4 (no restarts)
  echo "== SEP: 3 x 1000 documents, 150 passes, likelihood=dcm, seed 1's corpus, model seed $ms"
  TABLE3_PER=1000 TABLE3_PASSES=150 TABLE3_OPTS=likelihood=dcm,revive=off TABLE3_SEEDS=1 TABLE3_MODEL_SEED=$ms \
    "$BUILD/bin/count_mixture_table3_measure" | grep -E '^ *(emsd|component)'
done
# 2026-11-27 (section 9): revival of dead components (revive=split, the
# default since version 1.4.0; sections 1-8 predate it, hence revive=off
# above): the criterion's setting, and the accuracy every 25 passes of seed 1.
run 300 10 "likelihood=dcm,revive=off"
run 300 10 "likelihood=dcm"
run 1000 150 "likelihood=dcm"
echo "== SEP: 3 x 1000 documents, 300 passes, likelihood=dcm, seed 1, every 25 passes"
TABLE3_PER=1000 TABLE3_PASSES=300 TABLE3_OPTS=likelihood=dcm TABLE3_SEEDS=1 TABLE3_TRACE=25 \
  "$BUILD/bin/count_mixture_table3_measure" | grep -E '^ *(emsd|component|pass)'
