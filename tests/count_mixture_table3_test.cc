// Table 3 of the thesis (§3.4.1) at the setting (issue 17, item 5):
// three components with Table 3's shapes, 50 counts over 3 terms. The
// criterion: over 5 seeds, with the engine's defaults and a bounded number
// of passes, the learned components separate (assignment accuracy within
// 0.05 of the Bayes-optimal accuracy with the true parameters under the true
// DCM) and recover the shapes (mean relative error <= 20 % after matching
// components by permutation). bench/COUNT_MIXTURE_TABLE3.md has the
// measurements and the reasons behind the settings used here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/sep_engine.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::MakeDoc;
using testing::TextSchema;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

using Shapes = std::vector<std::vector<double>>;
const Shapes kTable3 = {{0.610, 0.318, 0.646}, {0.556, 0.188, 0.848}, {0.129, 0.891, 0.507}};
constexpr uint32_t kLength = 50;  // the "50 counts over 3 dimensions"

struct Corpus {
  std::vector<DocumentBuffer> docs;
  std::vector<uint32_t> labels;
  std::vector<std::vector<double>> counts;  // dense, for the reference classifiers
};

// DCM draws: p ~ Dir(shape), counts ~ Mult(length, p); `per_component`
// documents of each component, shuffled.
Corpus SampleDcm(const Shapes& shapes, uint32_t per_component, uint32_t length, uint64_t seed) {
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
double LogDcm(const std::vector<double>& x, const std::vector<double>& a) {
  const double s = std::accumulate(a.begin(), a.end(), 0.0), n = std::accumulate(x.begin(), x.end(), 0.0);
  double v = std::lgamma(s) - std::lgamma(s + n);
  for (size_t w = 0; w < x.size(); ++w) v += std::lgamma(x[w] + a[w]) - std::lgamma(a[w]);
  return v;
}
double LogEdcm(const std::vector<double>& x, const std::vector<double>& a) {
  const double s = std::accumulate(a.begin(), a.end(), 0.0), n = std::accumulate(x.begin(), x.end(), 0.0);
  double v = std::lgamma(s) - std::lgamma(s + n);
  for (size_t w = 0; w < x.size(); ++w) v += x[w] > 0 ? std::log(a[w]) : 0.0;
  return v;
}

// Accuracy of argmax_k log p(x | a_k) with the true shapes (uniform weights).
template <typename LogLik>
double BayesAccuracy(const Corpus& c, const Shapes& shapes, LogLik log_lik) {
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

ModelSchema Schema(uint32_t vocab, uint32_t classes) {
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
  double seconds = 0;
};

// `passes` shuffled passes of SEP with the engine's defaults (N = the number
// of documents, damping 1/N) over the corpus.
Result Learn(const Corpus& c, const char* family, const Options& options, uint64_t seed, uint32_t passes,
             const Shapes& truth = kTable3) {
  const uint32_t K = static_cast<uint32_t>(truth.size()), V = static_cast<uint32_t>(truth[0].size());
  const auto start = std::chrono::steady_clock::now();
  Result r;
  Options opts = options;
  opts.emplace_back("components", std::to_string(K));
  auto mr = Model::Create(BuiltinFamily(family), nullptr, Schema(V, K), opts, seed);
  EXPECT_TRUE(mr.ok()) << mr.status().ToString();
  if (!mr.ok()) return r;
  auto m = std::move(mr).value();
  SepOptions so;
  so.effective_size = static_cast<double>(c.docs.size());
  so.seed = seed;
  auto l = SepLearner::Create(m.get(), so);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  std::vector<size_t> order(c.docs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed * 7 + 3);
  for (uint32_t e = 0; e < passes; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) EXPECT_TRUE(l.value()->Learn(c.docs[i].View()).ok());
  }
  r.skipped = l.value()->counters().skipped_infeasible;
  auto st = m->NewScoringState();
  EXPECT_TRUE(st.ok());
  std::vector<uint32_t> cluster;
  std::vector<double> s(K);
  for (const auto& d : c.docs) {
    EXPECT_TRUE(m->Score(d.View(), st.value().get(), s.data()).ok());
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
  auto sr = SepLearner::Summary(*m, visit, &r);
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
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

void Print(const char* what, uint64_t seed, const Result& r, double bayes_dcm, double bayes_edcm) {
  std::printf(
      "%s seed %llu: accuracy %.3f (Bayes-optimal DCM %.3f, EDCM %.3f), mean shape error %.3f, skipped %llu, %.2f s, "
      "E[pi]",
      what, static_cast<unsigned long long>(seed), r.accuracy, bayes_dcm, bayes_edcm, r.mean_rel_error,
      static_cast<unsigned long long>(r.skipped), r.seconds);
  for (double p : r.pi) std::printf(" %.3f", p);
  std::printf("\n");
  for (size_t k = 0; k < r.shapes.size(); ++k) {
    std::printf("    component %zu: alpha (%.3f %.3f %.3f)\n", k, r.shapes[k][0], r.shapes[k][1], r.shapes[k][2]);
  }
}

// The mixture's mean log-likelihood per document under eq. 14 (EDCM, the
// default likelihood at scale 1): at the true parameters, and from the
// model's scores (which include log n! - sum_w log x_w, added here too).
double MeanLogEdcmAtTruth(const Corpus& c) {
  double total = 0;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    const trib_document d = c.docs[i].View();
    double c0 = std::lgamma(d.total_count + 1);
    for (uint32_t t = 0; t < d.num_terms; ++t) c0 -= std::log(d.term_counts[t]);
    std::array<double, 3> l{};
    for (uint32_t k = 0; k < 3; ++k) l[k] = std::log(1.0 / 3) + c0 + LogEdcm(c.counts[i], kTable3[k]);
    const double mx = *std::max_element(l.begin(), l.end());
    total += mx + std::log(std::exp(l[0] - mx) + std::exp(l[1] - mx) + std::exp(l[2] - mx));
  }
  return total / static_cast<double>(c.docs.size());
}

// What holds with the thesis's likelihood (eq. 14 / 45, the default) at the
// issue's setting, and why the criterion cannot: Table 3's set (3 x 70
// documents), now with 50 counts each, 20 passes. The learned mixture is
// MORE likely under eq. 14 than the true parameters, and its components are
// copies of one another (every shape within 0.05 of the same component's,
// accuracy 1/3): eq. 14's maximum at these shapes is one component, so a
// learner that fits eq. 14 well cannot separate them (bench/
// COUNT_MIXTURE_TABLE3.md: batch EM on eq. 14 started at the true
// parameters ends there too). The Bayes-optimal accuracies are printed: the
// true DCM ~0.61, eq. 14 with the true parameters ~0.58.
TEST(CountMixtureTable3Test, ThesisLikelihoodPrefersOneComponentAtFiftyCounts) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const Corpus c = SampleDcm(kTable3, 70, kLength, 100 + seed);
    const Result r = Learn(c, "emsd-mixture", {}, seed, 20);
    Print("emsd-mixture", seed, r, BayesAccuracy(c, kTable3, LogDcm), BayesAccuracy(c, kTable3, LogEdcm));
    const double truth_ll = MeanLogEdcmAtTruth(c);
    std::printf("  eq. 14 log-lik/doc: learned %.4f, true parameters %.4f\n", r.log_lik, truth_ll);
    EXPECT_GT(r.log_lik, truth_ll) << "seed " << seed;
    double spread = 0;
    for (size_t k = 1; k < r.shapes.size(); ++k) {
      for (size_t w = 0; w < r.shapes[k].size(); ++w)
        spread = std::max(spread, std::fabs(r.shapes[k][w] - r.shapes[0][w]));
    }
    EXPECT_LT(spread, 0.05) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
}

// The criterion with likelihood=dcm (the exact DCM, eq. 13), SEP
// with the engine's defaults. What it reaches (bench/COUNT_MIXTURE_TABLE3.md)
// on 3 x 300 documents of 50 counts in 50 passes: accuracy 0.52-0.59 against
// Bayes-optimal 0.60-0.64 (gap 0.04-0.11) and mean shape errors 0.16-0.37:
// the components separate (accuracy 1/3 with the default likelihood), but
// the criterion (gap <= 0.05 and error <= 0.2 on every seed) is met on one
// seed of five; more documents and passes get closer (3 x 1000: two of five
// at 60 passes, four of five at 150, ~30 s per seed, the fifth keeping a
// dead component), as batch EM on the exact DCM from random starts does
// (3 x 300: two of five; 3 x 1000: four of five). Asserted: what holds on
// every seed, with margin. Under sanitizers one seed.
TEST(CountMixtureTable3Test, ExactDcmSeparatesTheComponents) {
  const std::vector<uint64_t> seeds = kSanitized ? std::vector<uint64_t>{2} : std::vector<uint64_t>{1, 2, 3, 4, 5};
  size_t met = 0;
  double total_seconds = 0;
  for (uint64_t seed : seeds) {
    const Corpus c = SampleDcm(kTable3, 300, kLength, 100 + seed);
    const Result r = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}}, seed, 50);
    const double bayes = BayesAccuracy(c, kTable3, LogDcm);
    Print("emsd-mixture likelihood=dcm", seed, r, bayes, BayesAccuracy(c, kTable3, LogEdcm));
    const bool criterion = r.accuracy >= bayes - 0.05 && r.mean_rel_error <= 0.2;
    met += criterion ? 1 : 0;
    total_seconds += r.seconds;
    EXPECT_GT(r.accuracy, 0.48) << "seed " << seed;
    EXPECT_GT(r.accuracy, bayes - 0.15) << "seed " << seed;
    EXPECT_LT(r.mean_rel_error, 0.45) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
  std::printf(
      "issue 17's criterion (accuracy within 0.05 of Bayes-optimal, mean shape error <= 0.2) met on %zu of %zu "
      "seeds; %.1f s of training\n",
      met, seeds.size(), total_seconds);
}

// Regression: with components=1 every update used to be skipped (the
// Dirichlet's Newton step on pi is 0 / 0 when K = 1), so the model stayed at
// its prior. Now one component learns: with likelihood=dcm its shapes come
// within 15 % on average of Table 3's first component (300 documents of 50
// counts, 40 passes; measured 0.03-0.11, the maximum-likelihood DCM's own
// errors being 0.035-0.095 on these corpora; after 10 passes the shapes were
// still 3-20 % below the maximum-likelihood ones: the DCM's precision s
// converges slowly, as Minka's fixed point for it does), and with the
// default likelihood no update is skipped.
TEST(CountMixtureTable3Test, OneComponentLearns) {
  const Shapes truth = {kTable3[0]};
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    if (kSanitized && seed > 1) break;
    const Corpus c = SampleDcm(truth, 300, kLength, 100 + seed);
    const Result dcm = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}}, seed, 40, truth);
    const Result edcm = Learn(c, "edcm-mixture", {}, seed, 10, truth);
    std::printf("seed %llu: likelihood=dcm alpha (%.3f %.3f %.3f), error %.3f; edcm-mixture alpha (%.3f %.3f %.3f)\n",
                static_cast<unsigned long long>(seed), dcm.shapes[0][0], dcm.shapes[0][1], dcm.shapes[0][2],
                dcm.mean_rel_error, edcm.shapes[0][0], edcm.shapes[0][1], edcm.shapes[0][2]);
    EXPECT_EQ(dcm.skipped, 0u) << "seed " << seed;
    EXPECT_EQ(edcm.skipped, 0u) << "seed " << seed;
    EXPECT_LT(dcm.mean_rel_error, 0.15) << "seed " << seed;
  }
}

// The measurement behind bench/COUNT_MIXTURE_TABLE3.md (run by
// bench/count_mixture_table3.sh): TABLE3_PER (documents per component),
// TABLE3_PASSES, TABLE3_FAMILY, TABLE3_OPTS (k=v,k=v) and TABLE3_SINGLE=1
// (Table 3's first component alone, components=1) from the environment.
TEST(CountMixtureTable3Test, DISABLED_Measure) {
  auto env = [](const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : fallback);
  };
  const uint32_t per = static_cast<uint32_t>(std::stoul(env("TABLE3_PER", "70")));
  const uint32_t passes = static_cast<uint32_t>(std::stoul(env("TABLE3_PASSES", "20")));
  const std::string family = env("TABLE3_FAMILY", "emsd-mixture");
  Options opts;
  const std::string spec = env("TABLE3_OPTS", "");
  for (size_t p = 0; p < spec.size();) {
    size_t q = spec.find(',', p);
    if (q == std::string::npos) q = spec.size();
    const std::string kv = spec.substr(p, q - p);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) opts.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    p = q + 1;
  }
  const bool single = env("TABLE3_SINGLE", "0") == "1";  // one component (Table 3's first), K = 1
  const Shapes truth = single ? Shapes{kTable3[0]} : kTable3;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const Corpus c = SampleDcm(truth, per, kLength, 100 + seed);
    const Result r = Learn(c, family.c_str(), opts, seed, passes, truth);
    Print(family.c_str(), seed, r, BayesAccuracy(c, truth, LogDcm), BayesAccuracy(c, truth, LogEdcm));
  }
}

}  // namespace
}  // namespace tributary
