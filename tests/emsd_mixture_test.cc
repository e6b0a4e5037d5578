// Tests of the "emsd-mixture" family trained by SEP (thesis ch. 3): the
// synthetic recovery of Table 3, options, the sdEM refusal, snapshots.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
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
using testing::BuiltinLoss;
using testing::BuiltinRegistry;
using testing::MakeDoc;
using testing::TextSchema;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// Table 3 (§3.4.1): three components over three terms, scale 1 (mixing
// weights 0.333 / 0.333 / 0.334).
using Shapes = std::vector<std::vector<double>>;
const Shapes kTable3 = {{0.610, 0.318, 0.646}, {0.556, 0.188, 0.848}, {0.129, 0.891, 0.507}};

struct Corpus {
  std::vector<DocumentBuffer> docs;
  std::vector<uint32_t> labels;
};

// Dirichlet-compound-multinomial draws (EMSD approximates the MSD, which is
// the DCM at scale 1): p ~ Dir(shape), counts ~ Mult(length, p).
// `per_component` documents of each component, shuffled.
Corpus SampleDcm(const Shapes& shapes, uint32_t per_component, uint32_t length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Corpus c;
  const uint32_t K = static_cast<uint32_t>(shapes.size());
  const size_t V = shapes[0].size();
  for (uint32_t k = 0; k < K; ++k) c.labels.insert(c.labels.end(), per_component, k);
  std::shuffle(c.labels.begin(), c.labels.end(), rng);
  std::vector<double> p(V), counts(V);
  for (size_t i = 0; i < c.labels.size(); ++i) {
    std::vector<std::pair<uint32_t, double>> terms;
    while (terms.empty()) {
      for (size_t w = 0; w < V; ++w) {
        p[w] = std::gamma_distribution<double>(shapes[c.labels[i]][w], 1.0)(rng) + 1e-300;
      }
      std::discrete_distribution<uint32_t> pick(p.begin(), p.end());
      std::fill(counts.begin(), counts.end(), 0.0);
      for (uint32_t t = 0; t < length; ++t) counts[pick(rng)] += 1;
      for (size_t w = 0; w < V; ++w) {
        if (counts[w] > 0) terms.emplace_back(static_cast<uint32_t>(w), counts[w]);
      }
    }
    c.docs.push_back(MakeDoc(i, c.labels[i], terms));
  }
  return c;
}

// log EMSD(x | a) (eq. 45, scale 1).
double LogEmsd(const trib_document& d, const std::vector<double>& a) {
  const double s = std::accumulate(a.begin(), a.end(), 0.0), n = d.total_count;
  double v = std::lgamma(n + 1) + std::lgamma(s) - std::lgamma(s + n);
  for (uint32_t t = 0; t < d.num_terms; ++t) v += std::log(a[d.term_ids[t]]) - std::log(d.term_counts[t]);
  return v;
}

// The Bayes-optimal accuracy of the EMSD mixture at the true parameters
// (argmax_k pi_k EMSD(x | a_k)) and its mean log-likelihood per document.
std::pair<double, double> TrueEmsd(const Corpus& c, const Shapes& shapes) {
  const uint32_t K = static_cast<uint32_t>(shapes.size());
  size_t hit = 0;
  double ll = 0;
  std::vector<double> l(K);
  for (size_t i = 0; i < c.docs.size(); ++i) {
    const trib_document d = c.docs[i].View();
    for (uint32_t k = 0; k < K; ++k) l[k] = std::log(1.0 / K) + LogEmsd(d, shapes[k]);
    const uint32_t arg = static_cast<uint32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    hit += arg == c.labels[i] ? 1 : 0;
    const double mx = l[arg];
    double acc = 0;
    for (double v : l) acc += std::exp(v - mx);
    ll += mx + std::log(acc);
  }
  const double n = static_cast<double>(c.docs.size());
  return {static_cast<double>(hit) / n, ll / n};
}

ModelSchema Schema(uint32_t vocab, uint32_t classes) {
  auto s = ModelSchema::FromProto(TextSchema(vocab, classes));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

// Best accuracy over the K! matchings of clusters to labels.
double MatchedAccuracy(const std::vector<uint32_t>& cluster, const std::vector<uint32_t>& label, uint32_t K,
                       std::vector<uint32_t>* best_perm) {
  std::vector<uint32_t> perm(K);
  std::iota(perm.begin(), perm.end(), 0u);
  size_t best = 0;
  *best_perm = perm;
  do {
    size_t hit = 0;
    for (size_t i = 0; i < cluster.size(); ++i) hit += perm[cluster[i]] == label[i] ? 1 : 0;
    if (hit > best) {
      best = hit;
      *best_perm = perm;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return static_cast<double>(best) / static_cast<double>(cluster.size());
}

struct Posterior {
  std::vector<double> pi;
  std::vector<std::vector<double>> shape_mean;
};
Posterior Summarize(const Model& m) {
  Posterior p;
  auto visit = [](void* ctx, const char* name, uint32_t k, const double* v, size_t n) {
    auto* post = static_cast<Posterior*>(ctx);
    const std::string nm = name;
    if (nm == "mixing_weights") post->pi.assign(v, v + n);
    if (nm == "alpha_mean") {
      if (post->shape_mean.size() <= k) post->shape_mean.resize(k + 1);
      post->shape_mean[k].assign(v, v + n);
    }
  };
  auto r = SepLearner::Summary(m, visit, &p);
  EXPECT_TRUE(r.ok() && r.value());
  return p;
}

struct RunResult {
  double accuracy = 0;
  double max_pi_error = 0;     // after matching components to labels
  double max_shape_error = 0;  // absolute, after matching
  double max_rel_error = 0;    // |estimate - truth| / truth, after matching
  double mean_rel_error = 0;
  double log_lik = 0;  // mean log p(x) of the learned model (posterior means)
  uint64_t skipped = 0;
  Posterior post;
};

RunResult Train(const Corpus& c, const Shapes& truth, uint64_t seed, uint32_t epochs, Options options = {}) {
  const uint32_t K = static_cast<uint32_t>(truth.size());
  const uint32_t V = static_cast<uint32_t>(truth[0].size());
  RunResult r;
  options.emplace_back("components", std::to_string(K));
  auto mr = Model::Create(BuiltinFamily("emsd-mixture"), nullptr, Schema(V, K), options, seed);
  EXPECT_TRUE(mr.ok()) << mr.status().ToString();
  auto m = std::move(mr).value();
  SepOptions so;
  so.engine = SepEngine::kSep;
  so.effective_size = static_cast<double>(c.docs.size());
  so.seed = seed;
  auto l = SepLearner::Create(m.get(), so);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  std::vector<size_t> order(c.docs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed * 7 + 3);
  for (uint32_t e = 0; e < epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      Status st = l.value()->Learn(c.docs[i].View());
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
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
  std::vector<uint32_t> perm;
  r.accuracy = MatchedAccuracy(cluster, c.labels, K, &perm);
  r.post = Summarize(*m);
  for (uint32_t k = 0; k < K; ++k) {
    r.max_pi_error = std::max(r.max_pi_error, std::fabs(r.post.pi[k] - 1.0 / K));
    for (uint32_t w = 0; w < V; ++w) {
      const double e = std::fabs(r.post.shape_mean[k][w] - truth[perm[k]][w]);
      r.max_shape_error = std::max(r.max_shape_error, e);
      r.max_rel_error = std::max(r.max_rel_error, e / truth[perm[k]][w]);
      r.mean_rel_error += e / truth[perm[k]][w] / (K * V);
    }
  }
  return r;
}

void Print(uint64_t seed, const RunResult& r, double bayes) {
  std::printf(
      "seed %llu: accuracy %.3f (Bayes-optimal EMSD %.3f), max |E[pi] - pi| %.4f, max |shape error| %.3f, "
      "log-lik/doc %.4f, skipped %llu, E[pi] = (%.3f %.3f %.3f)\n",
      static_cast<unsigned long long>(seed), r.accuracy, bayes, r.max_pi_error, r.max_shape_error, r.log_lik,
      static_cast<unsigned long long>(r.skipped), r.post.pi[0], r.post.pi[1], r.post.pi[2]);
}

// Table 3's exact setting: 210 count vectors of length 10, 70 per
// component, the thesis's shapes (0.13-0.89). At these shapes EMSD's
// approximation G(x + a) / G(a) ~ G(x) a (eq. 44, valid for a -> 0) is far
// off, and with three terms nearly every term is present in every document:
// the EMSD likelihood (eq. 45) prefers ONE component with shapes ~(0.14,
// 0.14, 0.18) (log-likelihood ~1 nat per document above the true 3-component
// mixture), so E[pi] of the true mixture cannot be recovered from EMSD and
// the Bayes-optimal EMSD accuracy at the true parameters is only ~0.57.
// What SEP must (and does) achieve: an EMSD fit at least as likely as the
// truth, which is the single-component maximum of eq. 45, and the issue's
// criterion E[pi] within 0.03 of (1/3, 1/3, 1/3) for every seed. Read the
// latter with the former: the three components SEP learns are nearly the
// same distribution (the single-component optimum), so the documents'
// responsibilities stay near E[pi] and E[pi] stays near uniform; the
// assignment accuracy is reported (0.33 for these seeds: argmax picks one
// component for nearly everything), not asserted. The thesis's Table 3
// (E[pi] 0.335 / 0.332 / 0.333) does not say how long its count vectors
// were; with length 10 and the shapes above nothing better is identifiable
// from EMSD. E[pi] gets there only with passes: after 5 passes it was still
// 0.05-0.13 from uniform for these seeds (20 are used, as the thesis's EP
// iterates "while not converged").
TEST(EmsdMixtureTest, Table3ThesisShapesFitEmsdBetterThanTheTruth) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    Corpus c = SampleDcm(kTable3, 70, 10, 100 + seed);
    const auto [bayes, true_ll] = TrueEmsd(c, kTable3);
    RunResult r = Train(c, kTable3, seed, 20);  // 20 passes under sanitizers too: E[pi] needs them
    Print(seed, r, bayes);
    std::printf("  EMSD log-lik/doc at the true parameters %.4f\n", true_ll);
    EXPECT_GT(r.log_lik, true_ll) << "seed " << seed;
    EXPECT_LT(r.max_pi_error, 0.03) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
    EXPECT_LT(bayes, 0.65);  // the data identify the components only weakly under EMSD
  }
}

// A larger synthetic set where presence patterns identify the components
// (V = 50, 3 x 600 documents of length 100, Table 3's uniform mixing
// weights, shapes log-uniform in [0.005, 0.5], the regime where EMSD's
// approximation eq. 44 is meant to hold): E[pi] within 0.03 of the truth,
// clustering accuracy within 0.02 of the Bayes-optimal one, and after
// matching the shapes recovered (mean relative error < 30%, every shape
// within 80%: EMSD's G(x + a) / G(a) ~ G(x) a biases the largest shapes
// down; measured mean 0.26 / 0.26 / 0.28, max 0.62 / 0.58 / 0.75 for seeds
// 1-3). Before the families' 1.1.0 prior and burn-in, seed 2 merged two
// components (accuracy 0.67); now all three seeds reach the Bayes-optimal
// accuracy.
TEST(EmsdMixtureTest, LargerSetRecoversMixingWeightsAndShapes) {
  constexpr uint32_t kV = 50;
  for (uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed + 4);
    Shapes truth(3, std::vector<double>(kV));
    for (auto& a : truth) {
      for (double& v : a) v = 0.005 * std::pow(100.0, std::uniform_real_distribution<double>(0, 1)(rng));
    }
    // Full size under sanitizers too: fewer documents do not recover the shapes to this precision.
    Corpus c = SampleDcm(truth, 600, 100, seed + 8);
    const double bayes = TrueEmsd(c, truth).first;
    RunResult r = Train(c, truth, seed, 6);
    Print(seed, r, bayes);
    std::printf("  shapes: mean relative error %.3f, max relative error %.3f (max absolute %.3f)\n", r.mean_rel_error,
                r.max_rel_error, r.max_shape_error);
    EXPECT_LT(r.max_pi_error, 0.03) << "seed " << seed;
    EXPECT_GT(r.accuracy, bayes - 0.02) << "seed " << seed;
    EXPECT_LT(r.mean_rel_error, 0.3) << "seed " << seed;
    EXPECT_LT(r.max_rel_error, 0.8) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
}

// integration=montecarlo (the issue's "Monte Carlo over the cavity with S
// samples, default 100, positive samples, seeded"): S = 100 draws of s per
// document from the learner's seeded generator. It must (1) agree with the
// default quadrature (accuracy within 0.02, E[pi] within 0.03 of the
// truth, log-likelihood within 1%), (2) be reproducible: the same learner
// seed gives the same statistics bit for bit, (3) actually sample: another
// seed gives different statistics, and so does the quadrature.
TEST(EmsdMixtureTest, MonteCarloIntegrationIsSeededAndAgreesWithQuadrature) {
  constexpr uint32_t kV = 50;
  std::mt19937_64 rng(5);
  Shapes truth(3, std::vector<double>(kV));
  for (auto& a : truth) {
    for (double& v : a) v = 0.005 * std::pow(100.0, std::uniform_real_distribution<double>(0, 1)(rng));
  }
  Corpus c = SampleDcm(truth, kSanitized ? 100 : 300, 100, 9);
  const RunResult rq = Train(c, truth, 1, 3);
  const RunResult rm = Train(c, truth, 1, 3, {{"integration", "montecarlo"}});
  Print(1, rq, TrueEmsd(c, truth).first);
  Print(1, rm, TrueEmsd(c, truth).first);
  EXPECT_NEAR(rm.accuracy, rq.accuracy, 0.02);
  EXPECT_LT(rm.max_pi_error, 0.03);
  EXPECT_NEAR(rm.log_lik, rq.log_lik, 0.01 * std::fabs(rq.log_lik));
  EXPECT_EQ(rm.skipped, 0u);

  auto learn = [&](Options opts, uint64_t learner_seed) {
    opts.emplace_back("components", "3");
    auto m = Model::Create(BuiltinFamily("emsd-mixture"), nullptr, Schema(kV, 3), opts, 1);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    SepOptions so;
    so.effective_size = static_cast<double>(c.docs.size());
    so.seed = learner_seed;
    auto l = SepLearner::Create(m.value().get(), so);
    EXPECT_TRUE(l.ok());
    for (size_t i = 0; i < 200; ++i) EXPECT_TRUE(l.value()->Learn(c.docs[i].View()).ok());
    return m.value()->stats().raw();
  };
  const Options mc = {{"integration", "montecarlo"}};
  EXPECT_EQ(learn(mc, 7), learn(mc, 7));
  EXPECT_NE(learn(mc, 7), learn(mc, 8));
  EXPECT_NE(learn(mc, 7), learn({}, 7));
  EXPECT_EQ(learn({}, 7), learn({}, 8));  // the quadrature uses no random numbers

  auto bad = Model::Create(BuiltinFamily("emsd-mixture"), nullptr, Schema(kV, 3), {{"integration", "mcmc"}}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("option integration='mcmc': expected quadrature or montecarlo"),
            std::string::npos)
      << bad.status().ToString();
}

// The collapse seen on real text (bench/SEP_RESULTS.md): with long
// documents, the component that absorbed the first documents used to
// explain every later one better than a component still at the prior, and
// every document ended up in one cluster. Two clusters over V = 200 terms
// with clearly different term sets (shape 0.5 on 90 own terms and on 20
// shared ones, 0.002 elsewhere), 300-token documents, shuffled: SEP (2
// passes) and damped EP (3 sweeps), emsd-mixture and edcm-mixture with the
// default options, must recover both clusters (accuracy > 0.9, both
// clusters non-empty) for every seed.
TEST(EmsdMixtureTest, LongDocumentsDoNotCollapseToOneCluster) {
  constexpr uint32_t kV = 200;
  Shapes truth(2, std::vector<double>(kV, 0.002));
  for (uint32_t w = 0; w < 20; ++w) truth[0][w] = truth[1][w] = 0.5;
  for (uint32_t w = 20; w < 110; ++w) truth[0][w] = 0.5;
  for (uint32_t w = 110; w < 200; ++w) truth[1][w] = 0.5;
  for (uint64_t seed : {1, 2, 3}) {
    Corpus c = SampleDcm(truth, kSanitized ? 60 : 150, 300, 300 + seed);
    for (const char* family : {"emsd-mixture", "edcm-mixture"}) {
      for (SepEngine engine : {SepEngine::kSep, SepEngine::kEp}) {
        auto mr = Model::Create(BuiltinFamily(family), nullptr, Schema(kV, 2), {{"components", "2"}}, seed);
        ASSERT_TRUE(mr.ok()) << mr.status().ToString();
        auto m = std::move(mr).value();
        SepOptions so;
        so.engine = engine;
        so.effective_size = static_cast<double>(c.docs.size());
        so.damping = engine == SepEngine::kEp ? 0.5 : 0.0;
        so.seed = seed;
        auto l = SepLearner::Create(m.get(), so);
        ASSERT_TRUE(l.ok()) << l.status().ToString();
        std::vector<size_t> order(c.docs.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::mt19937_64 rng(seed);
        for (uint32_t e = 0; e < (engine == SepEngine::kEp ? 3u : 2u); ++e) {
          std::shuffle(order.begin(), order.end(), rng);
          for (size_t i : order) ASSERT_TRUE(l.value()->Learn(c.docs[i].View()).ok());
        }
        auto st = m->NewScoringState();
        ASSERT_TRUE(st.ok());
        std::vector<uint32_t> cluster;
        std::array<size_t, 2> sizes = {0, 0};
        std::array<double, 2> s{};
        for (const auto& d : c.docs) {
          ASSERT_TRUE(m->Score(d.View(), st.value().get(), s.data()).ok());
          cluster.push_back(s[1] > s[0] ? 1u : 0u);
          ++sizes[cluster.back()];
        }
        std::vector<uint32_t> perm;
        const double acc = MatchedAccuracy(cluster, c.labels, 2, &perm);
        std::printf("seed %llu %s %s: accuracy %.3f, clusters %zu / %zu, skipped %llu\n",
                    static_cast<unsigned long long>(seed), family, SepEngineName(engine), acc, sizes[0], sizes[1],
                    static_cast<unsigned long long>(l.value()->counters().skipped_infeasible));
        EXPECT_GT(acc, 0.9) << family << " " << SepEngineName(engine) << " seed " << seed;
        EXPECT_GT(sizes[0], 0u);
        EXPECT_GT(sizes[1], 0u);
      }
    }
  }
}

// Trains `family` with `options` by SEP on a 2-cluster corpus (20 terms,
// 3 components, 40-token documents, one pass) and returns the model.
std::unique_ptr<Model> TrainSmall(const char* family, Options options, const Corpus& c) {
  options.emplace_back("components", "3");
  auto mr = Model::Create(BuiltinFamily(family), nullptr, Schema(20, 3), options, 3);
  EXPECT_TRUE(mr.ok()) << mr.status().ToString();
  if (!mr.ok()) return nullptr;
  auto m = std::move(mr).value();
  SepOptions so;
  so.effective_size = static_cast<double>(c.docs.size());
  auto l = SepLearner::Create(m.get(), so);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  for (const auto& d : c.docs) EXPECT_TRUE(l.value()->Learn(d.View()).ok());
  return m;
}

Corpus TwoClusters(uint32_t per_component, uint32_t length, uint64_t seed) {
  Shapes truth(2, std::vector<double>(20, 0.05));
  for (uint32_t w = 0; w < 10; ++w) truth[0][w] = truth[1][w + 10] = 0.8;
  return SampleDcm(truth, per_component, length, seed);
}

// Algorithm 1, line 13 (version 1.3.0, option prune): score() gives -inf to
// exactly the components with E[pi_k] < prune / K other than the heaviest
// one; prune=0 keeps every component; the statistics are not touched (the
// same training with and without pruning gives the same mixing weights).
TEST(EmsdMixtureTest, PruneEliminatesComponentsWithSmallWeights) {
  const Corpus c = TwoClusters(60, 40, 11);
  for (const char* family : {"emsd-mixture", "edcm-mixture"}) {
    for (const char* prune : {"0", "0.1", "1"}) {
      auto m = TrainSmall(family, {{"prune", prune}}, c);
      ASSERT_NE(m, nullptr);
      const Posterior post = Summarize(*m);
      ASSERT_EQ(post.pi.size(), 3u);
      const double heaviest = *std::max_element(post.pi.begin(), post.pi.end());
      const double threshold = std::stod(prune) / 3;
      std::printf("%s prune=%s: E[pi] = (%.4f %.4f %.4f)\n", family, prune, post.pi[0], post.pi[1], post.pi[2]);
      size_t pruned = 0;
      auto st = m->NewScoringState();
      ASSERT_TRUE(st.ok());
      std::array<double, 3> s{};
      for (const auto& d : c.docs) {
        ASSERT_TRUE(m->Score(d.View(), st.value().get(), s.data()).ok());
        for (uint32_t k = 0; k < 3; ++k) {
          const bool expect_pruned = post.pi[k] < threshold && post.pi[k] < heaviest;
          EXPECT_EQ(s[k] == -INFINITY, expect_pruned) << family << " prune=" << prune << " component " << k;
          EXPECT_FALSE(std::isnan(s[k]));
          pruned += expect_pruned ? 1 : 0;
        }
      }
      if (std::string(prune) == "1") {
        EXPECT_GT(pruned, 0u) << family;  // E[pi] is never exactly uniform
      }
      if (std::string(prune) == "0") {
        EXPECT_EQ(pruned, 0u) << family;
      }
    }
  }
  auto bad = Model::Create(BuiltinFamily("emsd-mixture"), nullptr, Schema(20, 3), {{"prune", "2"}}, 1);
  EXPECT_FALSE(bad.ok());
}

// likelihood=dcm (version 1.3.0): score() is log E[pi_k] + log DCM(x |
// E[alpha_k]) (eq. 13) with the cached total T_k = sum_w E[alpha_kw]; the
// default is eq. 14 / 45 (log alpha in place of log G(alpha + x) / G(alpha)).
// Both checked against the summary's posterior means after training; a
// count that is not an integer is refused by likelihood=dcm only.
TEST(EmsdMixtureTest, DcmLikelihoodScoresTheExactDcmAtThePosteriorMeans) {
  const Corpus c = TwoClusters(40, 40, 12);
  for (const char* family : {"emsd-mixture", "edcm-mixture"}) {
    for (const bool dcm : {false, true}) {
      Options opts = {{"prune", "0"}};
      if (dcm) opts.emplace_back("likelihood", "dcm");
      auto m = TrainSmall(family, opts, c);
      ASSERT_NE(m, nullptr);
      Posterior post = Summarize(*m);
      std::vector<std::vector<double>> shapes(3);
      auto visit = [](void* ctx, const char* name, uint32_t k, const double* v, size_t n) {
        auto* out = static_cast<std::vector<std::vector<double>>*>(ctx);
        const std::string nm = name;
        // edcm-mixture names its single parameter beta (ch. 2); emsd-mixture's beta is the scale.
        if (k < out->size() && (nm == "alpha_mean" || (nm == "beta_mean" && (*out)[k].empty()))) {
          (*out)[k].assign(v, v + n);
        }
      };
      ASSERT_TRUE(SepLearner::Summary(*m, visit, &shapes).ok());
      auto st = m->NewScoringState();
      ASSERT_TRUE(st.ok());
      std::array<double, 3> s{};
      double max_diff = 0;
      for (const auto& d : c.docs) {
        const trib_document v = d.View();
        ASSERT_TRUE(m->Score(v, st.value().get(), s.data()).ok());
        for (uint32_t k = 0; k < 3; ++k) {
          const double T = std::accumulate(shapes[k].begin(), shapes[k].end(), 0.0), n = v.total_count;
          double want = std::log(post.pi[k]) + std::lgamma(n + 1) + std::lgamma(T) - std::lgamma(T + n);
          for (uint32_t t = 0; t < v.num_terms; ++t) {
            const double a = shapes[k][v.term_ids[t]], x = v.term_counts[t];
            want += dcm ? std::lgamma(a + x) - std::lgamma(a) - std::lgamma(x + 1) : std::log(a) - std::log(x);
          }
          max_diff = std::max(max_diff, std::fabs(s[k] - want) / std::max(1.0, std::fabs(want)));
        }
      }
      EXPECT_LT(max_diff, 1e-6) << family << (dcm ? " likelihood=dcm" : "");
    }
    auto m = TrainSmall(family, {{"likelihood", "dcm"}}, c);
    ASSERT_NE(m, nullptr);
    auto st = m->NewScoringState();
    ASSERT_TRUE(st.ok());
    std::array<double, 3> s{};
    const DocumentBuffer half = MakeDoc(0, 0, {{1, 2.5}});
    const Status bad = m->Score(half.View(), st.value().get(), s.data());
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("needs integer counts"), std::string::npos) << bad.ToString();
  }
}

// likelihood=dcm on LargerSetRecoversMixingWeightsAndShapes's sets (V = 50,
// 3 x 600 documents of 100 tokens, shapes in [0.005, 0.5], 6 passes): the
// same accuracy and mixing weights, and the shapes about twice as close,
// since the exact DCM has no eq. 44 bias on the larger shapes. Measured
// (seeds 1-3): mean relative error 0.132 / 0.116 / 0.114 against eq. 45's
// 0.257 / 0.256 / 0.276, max absolute error 0.041-0.043 against 0.23-0.29.
// Under sanitizers one seed.
TEST(EmsdMixtureTest, DcmLikelihoodRecoversTheLargerSetsShapesCloser) {
  constexpr uint32_t kV = 50;
  for (uint64_t seed : {1, 2, 3}) {
    if (kSanitized && seed > 1) break;
    std::mt19937_64 rng(seed + 4);
    Shapes truth(3, std::vector<double>(kV));
    for (auto& a : truth) {
      for (double& v : a) v = 0.005 * std::pow(100.0, std::uniform_real_distribution<double>(0, 1)(rng));
    }
    Corpus c = SampleDcm(truth, 600, 100, seed + 8);
    const double bayes = TrueEmsd(c, truth).first;
    RunResult r = Train(c, truth, seed, 6, {{"likelihood", "dcm"}});
    Print(seed, r, bayes);
    std::printf("  shapes: mean relative error %.3f, max relative error %.3f (max absolute %.3f)\n", r.mean_rel_error,
                r.max_rel_error, r.max_shape_error);
    EXPECT_GT(r.accuracy, bayes - 0.02) << "seed " << seed;
    EXPECT_LT(r.max_pi_error, 0.03) << "seed " << seed;
    EXPECT_LT(r.mean_rel_error, 0.18) << "seed " << seed;
    EXPECT_LT(r.max_shape_error, 0.1) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
}

}  // namespace
}  // namespace tributary
