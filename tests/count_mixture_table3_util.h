// Helpers shared by the Table 3 tests (tests/count_mixture_table3_test.cc)
// and the measurement program behind bench/COUNT_MIXTURE_TABLE3.md
// (tests/count_mixture_table3_measure.cc): the DCM sampler, the Bayes-optimal
// accuracies with the true shapes, and SEP learning with the engine's
// defaults. Learn and Schema report failures with gtest's EXPECT_* (inside a
// test they fail it; in the program they are counted in gtest's ad hoc
// result).
#ifndef TRIBUTARY_TESTS_COUNT_MIXTURE_TABLE3_UTIL_H_
#define TRIBUTARY_TESTS_COUNT_MIXTURE_TABLE3_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/sep_engine.h"

namespace tributary::table3 {

using testing::BuiltinFamily;
using testing::MakeDoc;
using testing::TextSchema;

using Shapes = std::vector<std::vector<double>>;
inline const Shapes kTable3 = {{0.610, 0.318, 0.646}, {0.556, 0.188, 0.848}, {0.129, 0.891, 0.507}};
inline constexpr uint32_t kLength = 50;  // the "50 counts over 3 dimensions"

struct Corpus {
  std::vector<DocumentBuffer> docs;
  std::vector<uint32_t> labels;
  std::vector<std::vector<double>> counts;  // dense, for the reference classifiers
};

// DCM draws: p ~ Dir(shape), counts ~ Mult(length, p); `per_component`
// documents of each component, shuffled.
inline Corpus SampleDcm(const Shapes& shapes, uint32_t per_component, uint32_t length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Corpus c;
  const uint32_t K = static_cast<uint32_t>(shapes.size());
  const size_t V = shapes[0].size();
  for (uint32_t k = 0; k < K; ++k) c.labels.insert(c.labels.end(), per_component, k);
  std::shuffle(c.labels.begin(), c.labels.end(), rng);
  std::vector<double> p(V);
  for (size_t i = 0; i < c.labels.size(); ++i) {
    std::vector<double> counts(V, 0.0);
    for (size_t w = 0; w < V; ++w) p[w] = std::gamma_distribution<double>(shapes[c.labels[i]][w], 1.0)(rng) + 1e-300;
    std::discrete_distribution<uint32_t> pick(p.begin(), p.end());
    for (uint32_t t = 0; t < length; ++t) counts[pick(rng)] += 1;
    std::vector<std::pair<uint32_t, double>> terms;
    for (size_t w = 0; w < V; ++w) {
      if (counts[w] > 0) terms.emplace_back(static_cast<uint32_t>(w), counts[w]);
    }
    c.docs.push_back(MakeDoc(i, c.labels[i], terms));
    c.counts.push_back(counts);
  }
  return c;
}

// log DCM(x | a) (eq. 13) and log EDCM(x | a) (eq. 14) without the parts
// shared by all components.
inline double LogDcm(const std::vector<double>& x, const std::vector<double>& a) {
  const double s = std::accumulate(a.begin(), a.end(), 0.0), n = std::accumulate(x.begin(), x.end(), 0.0);
  double v = std::lgamma(s) - std::lgamma(s + n);
  for (size_t w = 0; w < x.size(); ++w) v += std::lgamma(x[w] + a[w]) - std::lgamma(a[w]);
  return v;
}
inline double LogEdcm(const std::vector<double>& x, const std::vector<double>& a) {
  const double s = std::accumulate(a.begin(), a.end(), 0.0), n = std::accumulate(x.begin(), x.end(), 0.0);
  double v = std::lgamma(s) - std::lgamma(s + n);
  for (size_t w = 0; w < x.size(); ++w) v += x[w] > 0 ? std::log(a[w]) : 0.0;
  return v;
}

// Accuracy of argmax_k log p(x | a_k) with the true shapes (uniform weights).
template <typename LogLik>
inline double BayesAccuracy(const Corpus& c, const Shapes& shapes, LogLik log_lik) {
  size_t hit = 0;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    uint32_t best = 0;
    double best_v = -INFINITY;
    for (uint32_t k = 0; k < shapes.size(); ++k) {
      const double v = log_lik(c.counts[i], shapes[k]);
      if (v > best_v) best_v = v, best = k;
    }
    hit += best == c.labels[i] ? 1 : 0;
  }
  return static_cast<double>(hit) / static_cast<double>(c.docs.size());
}

inline ModelSchema Schema(uint32_t vocab, uint32_t classes) {
  auto s = ModelSchema::FromProto(TextSchema(vocab, classes));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

struct Result {
  double accuracy = 0;        // best over the K! matchings of clusters to labels
  double mean_rel_error = 0;  // mean |E[alpha] - alpha| / alpha, best over the matchings
  std::vector<double> pi;
  Shapes shapes;
  double log_lik = 0;  // mean log p(x) of the learned model (its scores)
  uint64_t skipped = 0;
  uint64_t moves = 0;  // the family's structural moves (revivals)
  double seconds = 0;
  uint64_t kept_seed = 0;             // restarts > 1: the seed kept at the end of the window
  std::vector<double> restart_log_z;  // restarts > 1: each replica's sum of log Z_i in the window
};

// Scores every document of `c` with `m` (clusters by argmax), and fills the
// accuracy, shape error (best over the K! matchings), E[pi], shapes and the
// mean log-likelihood of `r`.
inline void Evaluate(const Model& m, const Corpus& c, const Shapes& truth, Result& r) {
  const uint32_t K = static_cast<uint32_t>(truth.size()), V = static_cast<uint32_t>(truth[0].size());
  r.accuracy = 0;
  r.log_lik = 0;
  auto st = m.NewScoringState();
  EXPECT_TRUE(st.ok());
  std::vector<uint32_t> cluster;
  std::vector<double> s(K);
  for (const auto& d : c.docs) {
    EXPECT_TRUE(m.Score(d.View(), st.value().get(), s.data()).ok());
    const auto arg = std::max_element(s.begin(), s.end());
    cluster.push_back(static_cast<uint32_t>(arg - s.begin()));
    double acc = 0;
    for (double v : s) acc += std::exp(v - *arg);
    r.log_lik += (*arg + std::log(acc)) / static_cast<double>(c.docs.size());
  }
  r.shapes.assign(K, {});
  auto visit = [](void* ctx, const char* name, uint32_t k, const double* v, size_t n) {
    auto* res = static_cast<Result*>(ctx);
    const std::string nm = name;
    if (nm == "mixing_weights") res->pi.assign(v, v + n);
    if (nm == "alpha_mean" || nm == "beta_mean") {
      if (k < res->shapes.size() && (nm == "alpha_mean" || res->shapes[k].empty())) res->shapes[k].assign(v, v + n);
    }
  };
  auto sr = SepLearner::Summary(m, visit, &r);
  EXPECT_TRUE(sr.ok() && sr.value());
  std::vector<uint32_t> perm(K);
  std::iota(perm.begin(), perm.end(), 0u);
  r.mean_rel_error = INFINITY;
  do {
    size_t hit = 0;
    for (size_t i = 0; i < cluster.size(); ++i) hit += perm[cluster[i]] == c.labels[i] ? 1 : 0;
    r.accuracy = std::max(r.accuracy, static_cast<double>(hit) / static_cast<double>(cluster.size()));
    double e = 0;
    for (uint32_t k = 0; k < K; ++k) {
      for (uint32_t w = 0; w < V; ++w) e += std::fabs(r.shapes[k][w] - truth[perm[k]][w]) / truth[perm[k]][w];
    }
    r.mean_rel_error = std::min(r.mean_rel_error, e / (K * V));
  } while (std::next_permutation(perm.begin(), perm.end()));
}

// `passes` shuffled passes of SEP with the engine's defaults (N = the number
// of documents, damping 1/N) over the corpus. `restarts` > 1: as `tributary
// train --restarts R` (streams/cli/commands/train.cc), R models with seeds
// seed .. seed + R - 1 learn the first pass (the same order), and the one
// whose documents had the highest sum of log Z_i (each before its document
// was learned) is kept for the remaining passes; `window` > 1 passes: chosen
// at the end of that pass instead (train's --restart-window, in documents).
// `model_seed` > 0: the models' seeds start there instead of at `seed` (the
// shuffles still follow `seed`). `trace` > 0: prints the accuracy, shape
// error and E[pi] every `trace` passes.
inline Result Learn(const Corpus& c, const char* family, const Options& options, uint64_t seed, uint32_t passes,
                    const Shapes& truth = kTable3, uint32_t restarts = 1, uint32_t window = 1, uint64_t model_seed = 0,
                    uint32_t trace = 0) {
  const uint64_t first = model_seed > 0 ? model_seed : seed;
  const uint32_t K = static_cast<uint32_t>(truth.size()), V = static_cast<uint32_t>(truth[0].size());
  const auto start = std::chrono::steady_clock::now();
  Result r;
  Options opts = options;
  opts.emplace_back("components", std::to_string(K));
  struct Replica {
    std::unique_ptr<Model> model;
    std::unique_ptr<SepLearner> learner;
    double log_z = 0;
    uint64_t scored = 0;
  };
  std::vector<Replica> reps;
  for (uint32_t q = 0; q < std::max(restarts, 1u); ++q) {
    auto mr = Model::Create(BuiltinFamily(family), nullptr, Schema(V, K), opts, first + q);
    EXPECT_TRUE(mr.ok()) << mr.status().ToString();
    if (!mr.ok()) return r;
    Replica rep;
    rep.model = std::move(mr).value();
    SepOptions so;
    so.effective_size = static_cast<double>(c.docs.size());
    so.seed = first + q;
    auto l = SepLearner::Create(rep.model.get(), so);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (!l.ok()) return r;
    rep.learner = std::move(l).value();
    reps.push_back(std::move(rep));
  }
  std::vector<size_t> order(c.docs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed * 7 + 3);
  for (uint32_t e = 0; e < passes; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      for (Replica& rep : reps) {
        SepOutcome o;
        EXPECT_TRUE(rep.learner->Learn(c.docs[i].View(), &o).ok());
        if (std::isfinite(o.log_z) && !o.skipped) rep.log_z += o.log_z, ++rep.scored;
      }
    }
    if (reps.size() > 1 && (e + 1 >= window || e + 1 == passes)) {  // the end of the window's last pass
      size_t best = 0;
      for (size_t q = 1; q < reps.size(); ++q) {
        if (reps[q].scored > reps[best].scored ||
            (reps[q].scored == reps[best].scored && reps[q].log_z > reps[best].log_z))
          best = q;
      }
      r.kept_seed = first + best;
      for (const Replica& rep : reps) r.restart_log_z.push_back(rep.log_z);
      Replica kept = std::move(reps[best]);
      reps.clear();
      reps.push_back(std::move(kept));
    }
    if (trace > 0 && (e + 1) % trace == 0 && reps.size() == 1) {
      Result t;
      Evaluate(*reps[0].model, c, truth, t);
      std::printf("  pass %u: accuracy %.4f, mean shape error %.4f, E[pi]", e + 1, t.accuracy, t.mean_rel_error);
      for (double p : t.pi) std::printf(" %.3f", p);
      std::printf("\n");
    }
  }
  std::unique_ptr<Model> m = std::move(reps[0].model);
  std::unique_ptr<SepLearner> learner = std::move(reps[0].learner);
  r.skipped = learner->counters().skipped_infeasible;
  r.moves = learner->counters().moves;
  Evaluate(*m, c, truth, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

inline void Print(const char* what, uint64_t seed, const Result& r, double bayes_dcm, double bayes_edcm) {
  std::printf(
      "%s seed %llu: accuracy %.4f (Bayes-optimal DCM %.4f, EDCM %.4f), mean shape error %.4f, skipped %llu, "
      "moves %llu, %.2f s, E[pi]",
      what, static_cast<unsigned long long>(seed), r.accuracy, bayes_dcm, bayes_edcm, r.mean_rel_error,
      static_cast<unsigned long long>(r.skipped), static_cast<unsigned long long>(r.moves), r.seconds);
  for (double p : r.pi) std::printf(" %.3f", p);
  std::printf("\n");
  for (size_t k = 0; k < r.shapes.size(); ++k) {
    std::printf("    component %zu: alpha (%.3f %.3f %.3f)\n", k, r.shapes[k][0], r.shapes[k][1], r.shapes[k][2]);
  }
}

}  // namespace tributary::table3

#endif  // TRIBUTARY_TESTS_COUNT_MIXTURE_TABLE3_UTIL_H_
