// Tests of the "lda" family (online LDA under sdEM): recovery of known topics,
// held-out completion perplexity falling as documents stream in, the
// check-step under huge steps, determinism, snapshot resumption, options,
// and both local steps (mean-field VI and collapsed Gibbs).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/math/special_functions/digamma.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../plugins/lda/lda_math.h"
#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::BuiltinLoss;

// ---- A known LDA -------------------------------------------------------------

struct Corpus {
  uint32_t K = 0, V = 0;
  std::vector<std::vector<double>> topics;  // K x V, the true beta
  std::vector<DocumentBuffer> docs;
};

std::vector<double> Dirichlet(std::mt19937_64& rng, double a, uint32_t dim) {
  std::gamma_distribution<double> g(a, 1.0);
  std::vector<double> x(dim);
  double s = 0;
  for (auto& v : x) s += (v = g(rng));
  for (auto& v : x) v /= s;
  return x;
}

uint32_t Draw(std::mt19937_64& rng, const std::vector<double>& cdf) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * cdf.back();
  return static_cast<uint32_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

// Topics beta_k ~ Dir_V(eta), documents theta ~ Dir_K(alpha) with L tokens.
Corpus Generate(uint64_t seed, uint32_t K, uint32_t V, uint32_t L, size_t D, double alpha = 0.1, double eta = 0.1) {
  std::mt19937_64 rng(seed);
  Corpus c;
  c.K = K;
  c.V = V;
  std::vector<std::vector<double>> cdfs;
  for (uint32_t k = 0; k < K; ++k) {
    c.topics.push_back(Dirichlet(rng, eta, V));
    std::vector<double> cdf(V);
    double s = 0;
    for (uint32_t w = 0; w < V; ++w) cdf[w] = (s += c.topics[k][w]);
    cdfs.push_back(std::move(cdf));
  }
  std::vector<double> counts(V);
  for (size_t d = 0; d < D; ++d) {
    std::vector<double> theta = Dirichlet(rng, alpha, K), tcdf(K);
    double s = 0;
    for (uint32_t k = 0; k < K; ++k) tcdf[k] = (s += theta[k]);
    std::fill(counts.begin(), counts.end(), 0.0);
    for (uint32_t i = 0; i < L; ++i) counts[std::min(Draw(rng, cdfs[std::min(Draw(rng, tcdf), K - 1)]), V - 1)] += 1;
    DocumentBuffer doc;
    doc.index = d;
    doc.id = "d" + std::to_string(d);
    for (uint32_t w = 0; w < V; ++w) {
      if (counts[w] > 0) {
        doc.term_ids.push_back(w);
        doc.term_counts.push_back(counts[w]);
      }
    }
    c.docs.push_back(std::move(doc));
  }
  return c;
}

// ---- Model helpers ---------------------------------------------------------------

struct LdaSetup {
  Options options;
  double n = 0;  // 0: the number of training documents
  std::string schedule = "inverse";
  double lambda = 1, tau0 = 1, kappa = 0.7, rho = 0.9;
  uint64_t seed = 1;
};

std::unique_ptr<Model> NewLda(uint32_t V, const LdaSetup& s, double n) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(V, 1));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(BuiltinFamily("lda"), BuiltinLoss("nll"), *schema, s.options, s.seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  auto model = std::move(m).value();
  LearnerState& ls = model->learner_state();
  if (s.schedule == "poly") {
    ls.schedule.kind = StepSchedule::Kind::kPolynomial;
    ls.schedule.tau0 = s.tau0;
    ls.schedule.kappa = s.kappa;
  } else if (s.schedule == "constant") {
    ls.schedule.kind = StepSchedule::Kind::kConstant;
    ls.schedule.rho = s.rho;
  } else {
    ls.schedule.lambda = s.lambda;
  }
  ls.effective_size = n;
  // What the program does right after creating a model: rebuild with n.
  EXPECT_TRUE(model->Rebuild(trib_step{0.0, n, 0.0, 0}).ok());
  return model;
}

void Train(Model* model, const std::vector<DocumentBuffer>& docs, size_t begin, size_t end, uint64_t seed = 1) {
  auto l = SdemLearner::Create(model, seed);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (size_t i = begin; i < end; ++i) {
    Status st = (*l)->Learn(docs[i].View());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

std::vector<std::vector<double>> LearnedTopics(const Model& m) {
  std::vector<std::vector<double>> out(m.num_outputs());
  for (uint32_t k = 0; k < m.num_outputs(); ++k) {
    Status st = m.ComponentTerms(k, &out[k]);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return out;
}

// Minimum-cost perfect matching of a square cost matrix (Hungarian method,
// O(n^3)); returns the total cost.
double MinCostMatching(const std::vector<std::vector<double>>& cost) {
  const size_t n = cost.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0), v(n + 1, 0);
  std::vector<size_t> p(n + 1, 0), way(n + 1, 0);
  for (size_t i = 1; i <= n; ++i) {
    p[0] = i;
    size_t j0 = 0;
    std::vector<double> minv(n + 1, inf);
    std::vector<char> used(n + 1, 0);
    do {
      used[j0] = 1;
      const size_t i0 = p[j0];
      double delta = inf;
      size_t j1 = 0;
      for (size_t j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double cur = cost[i0 - 1][j - 1] - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (size_t j = 0; j <= n; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const size_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  double total = 0;
  for (size_t j = 1; j <= n; ++j) total += cost[p[j] - 1][j - 1];
  return total;
}

// Mean L1 distance between learned and true topics after optimal matching.
double MeanMatchedL1(const Model& m, const Corpus& c) {
  auto learned = LearnedTopics(m);
  std::vector<std::vector<double>> cost(c.K, std::vector<double>(c.K));
  for (uint32_t a = 0; a < c.K; ++a) {
    for (uint32_t b = 0; b < c.K; ++b) {
      double l1 = 0;
      for (uint32_t w = 0; w < c.V; ++w) l1 += std::fabs(learned[a][w] - c.topics[b][w]);
      cost[a][b] = l1;
    }
  }
  return MinCostMatching(cost) / c.K;
}

// Document-completion perplexity over `docs` (even tokens estimate theta, odd
// tokens are scored).
double CompletionPerplexity(const Model& m, const std::vector<DocumentBuffer>& docs, size_t begin, size_t end) {
  auto st = m.NewScoringState(7);
  EXPECT_TRUE(st.ok());
  double lp = 0, tokens = 0;
  DocumentBuffer obs, held;
  for (size_t i = begin; i < end; ++i) {
    trib_document v = docs[i].View();
    SplitForCompletion(v, &obs, &held);
    double l = 0;
    Status s = m.Completion(obs.View(), held.View(), st->get(), &l);
    EXPECT_TRUE(s.ok()) << s.ToString();
    lp += l;
    tokens += held.TotalCount();
  }
  return std::exp(-lp / tokens);
}

// Every statistic finite and > 0, and the cached totals consistent.
void ExpectFeasible(const Model& m, const std::string& where) {
  for (uint64_t i = 0; i < m.stats().size(); ++i) {
    const double mu = m.stats().Mu(i);
    ASSERT_TRUE(std::isfinite(mu) && mu > 0) << where << ": mu[" << i << "] = " << mu;
  }
  for (const auto& topic : LearnedTopics(m)) {
    double s = 0;
    for (double p : topic) {
      ASSERT_TRUE(std::isfinite(p) && p > 0) << where;
      s += p;
    }
    ASSERT_NEAR(s, 1.0, 1e-9) << where;
  }
}

// ---- Tests ---------------------------------------------------------------------

TEST(LdaMathTest, ExpDigammaMatchesBoost) {
  double worst = 0;
  for (double x = 1e-8; x < 1e12; x *= 1.0137) {
    const double want = std::exp(boost::math::digamma(x));
    const double got = lda::ExpDigamma(x);
    if (want > 1e-300) worst = std::max(worst, std::fabs(got - want) / want);
  }
  EXPECT_LT(worst, 1e-12);
  // Around the branch points of the recurrence.
  for (double x : {0.5, 0.999, 1.0, 1.5, 6.0, 6.999, 7.0, 7.5, 7.999, 8.0, 8.001, 9.0}) {
    const double want = std::exp(boost::math::digamma(x));
    EXPECT_NEAR(lda::ExpDigamma(x) / want, 1.0, 1e-12) << x;
  }
}

TEST(LdaFamilyTest, ExperimentRecovery) {
  const char* e = std::getenv("LDA_EXPERIMENT");
  if (!e) GTEST_SKIP();
  const uint32_t K = 10, V = 1000, L = 100;
  const size_t D = static_cast<size_t>(std::atol(e));
  Corpus c = Generate(11, K, V, L, D + 500);
  LdaSetup s;
  s.options = {{"topics", "10"}};
  if (const char* o = std::getenv("LDA_OPTS")) {
    std::string all = o;
    size_t p = 0;
    while (p < all.size()) {
      size_t q = all.find(',', p);
      if (q == std::string::npos) q = all.size();
      std::string kv = all.substr(p, q - p);
      auto eq = kv.find('=');
      s.options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      p = q + 1;
    }
  }
  if (const char* sch = std::getenv("LDA_SCHEDULE")) s.schedule = sch;
  if (const char* sd = std::getenv("LDA_SEED")) s.seed = std::strtoull(sd, nullptr, 10);
  if (const char* t = std::getenv("LDA_TAU0")) s.tau0 = std::atof(t);
  if (const char* k = std::getenv("LDA_KAPPA")) s.kappa = std::atof(k);
  auto m = NewLda(V, s, static_cast<double>(D));
  size_t done = 0;
  for (size_t stop : {D / 20, D / 10, D / 4, D / 2, D}) {
    auto t0 = std::chrono::steady_clock::now();
    Train(m.get(), c.docs, done, stop);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("docs %zu: L1 %.4f  perplexity %.2f  (%.0f docs/s)\n", stop, MeanMatchedL1(*m, c),
                CompletionPerplexity(*m, c.docs, D, D + 500), static_cast<double>(stop - done) / secs);
    done = stop;
  }
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// The check-step under deliberately large steps: constant rho = 0.9 (each
// step keeps 10% of the statistics; the block's scale underflows and is
// re-materialised every ~100 steps) and rho = 1 (f = 1 - rho = 0: the engine
// re-materialises every step and rebuild() runs the check-step on everything).
TEST(LdaFamilyTest, CheckStepKeepsStatisticsFeasibleUnderHugeSteps) {
  Corpus c = Generate(3, 5, 200, 40, 400);
  for (double rho : {0.9, 1.0}) {
    for (const char* inference : {"vi", "gibbs"}) {
      LdaSetup s;
      s.options = {{"topics", "5"}, {"inference", inference}};
      s.schedule = "constant";
      s.rho = rho;
      auto m = NewLda(c.V, s, 400);
      ASSERT_TRUE(m);
      for (size_t i = 0; i < c.docs.size(); i += 100) {
        Train(m.get(), c.docs, i, i + 100);
        ExpectFeasible(*m,
                       std::string(inference) + " rho " + std::to_string(rho) + " after " + std::to_string(i + 100));
      }
      EXPECT_GT(m->learner_state().materializations, 0u);
      // Completion and scores stay finite.
      EXPECT_TRUE(std::isfinite(CompletionPerplexity(*m, c.docs, 0, 50)));
    }
  }
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// The schedule that recovers topics with one document per step (see the
// plugin's header comment and bench/LDA_RESULTS.md): rho_t = (256 + t)^-1,
// i.e. the random start weighs like 256 documents and is averaged out.
LdaSetup Recommended(Options options) {
  LdaSetup s;
  s.options = std::move(options);
  s.schedule = "poly";
  s.tau0 = 256;
  s.kappa = 1;
  return s;
}

// Synthetic recovery (issue 3): K = 10 topics over 1,000 terms, 100 tokens per
// document. The size is 20,000 documents (mean L1 0.069 with this
// seed, printed by LDA_EXPERIMENT=20000); here the first 5,000 of them keep
// the test fast, with n = 20,000 the corpus size. Online VB with one document
// per step can stop in a local optimum that merges two topics: with model
// seeds 2 and 3 the same run ends at 0.36 / 0.33 (seeds 1 and 4: 0.069 / 0.070).
TEST(LdaFamilyTest, RecoversKnownTopics) {
  const size_t D = 5000;
  Corpus c = Generate(11, 10, 1000, 100, D);
  auto m = NewLda(c.V, Recommended({{"topics", "10"}}), 20000);
  ASSERT_TRUE(m);
  const double before = MeanMatchedL1(*m, c);
  Train(m.get(), c.docs, 0, D);
  const double after = MeanMatchedL1(*m, c);
  std::printf("mean matched L1: %.4f before, %.4f after %zu documents\n", before, after, D);
  EXPECT_GT(before, 1.0);
  EXPECT_LT(after, 0.2);
  ExpectFeasible(*m, "after training");
}

// Held-out completion perplexity falls as documents stream in.
TEST(LdaFamilyTest, HeldOutPerplexityFallsAsDocumentsStreamIn) {
  const size_t D = 4000, H = 300;
  Corpus c = Generate(5, 10, 1000, 100, D + H);
  auto m = NewLda(c.V, Recommended({{"topics", "10"}}), D);
  ASSERT_TRUE(m);
  std::vector<double> ppl = {CompletionPerplexity(*m, c.docs, D, D + H)};
  size_t done = 0;
  for (size_t stop : {250, 1000, 2000, 4000}) {
    Train(m.get(), c.docs, done, stop);
    done = stop;
    ppl.push_back(CompletionPerplexity(*m, c.docs, D, D + H));
  }
  for (size_t i = 0; i < ppl.size(); ++i) std::printf("perplexity at checkpoint %zu: %.2f\n", i, ppl[i]);
  for (size_t i = 1; i < ppl.size(); ++i) EXPECT_LT(ppl[i], ppl[i - 1]) << "checkpoint " << i;
  EXPECT_LT(ppl.back(), 0.8 * ppl.front());
}

std::vector<double> Mus(const Model& m) {
  std::vector<double> out(m.stats().size());
  for (uint64_t i = 0; i < out.size(); ++i) out[i] = m.stats().Mu(i);
  return out;
}

// The same seed gives the same model bit for bit; another seed another one.
TEST(LdaFamilyTest, SameSeedSameModelBitForBit) {
  Corpus c = Generate(9, 5, 300, 50, 600);
  for (const char* inference : {"vi", "gibbs"}) {
    auto run = [&](uint64_t seed) {
      LdaSetup s = Recommended({{"topics", "5"}, {"inference", inference}});
      s.seed = seed;
      auto m = NewLda(c.V, s, 600);
      Train(m.get(), c.docs, 0, c.docs.size(), seed);
      return m;
    };
    auto a = run(4), b = run(4), other = run(5);
    EXPECT_EQ(a->stats().raw(), b->stats().raw()) << inference;
    EXPECT_EQ(Mus(*a), Mus(*b)) << inference;
    EXPECT_NE(Mus(*a), Mus(*other)) << inference;
  }
}

// Save after 600 documents, load, continue with 400: the same statistics,
// block maps and cached totals as 1,000 documents without interruption.
TEST(LdaFamilyTest, SnapshotResumeContinuesBitForBit) {
  Corpus c = Generate(13, 6, 400, 60, 1000);
  auto whole = NewLda(c.V, Recommended({{"topics", "6"}}), 1000);
  Train(whole.get(), c.docs, 0, 1000);
  auto first = NewLda(c.V, Recommended({{"topics", "6"}}), 1000);
  Train(first.get(), c.docs, 0, 600);
  const std::string path = testing::TempDir("lda_snapshot") + "/m.trib";
  ASSERT_TRUE(first->Save(path).ok());
  auto loaded = Model::Load(path, testing::BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->stats().raw(), first->stats().raw());
  Train(loaded->get(), c.docs, 600, 1000);
  EXPECT_EQ((*loaded)->stats().raw(), whole->stats().raw());
  for (size_t b = 0; b < whole->stats().blocks().size(); ++b) {
    EXPECT_EQ((*loaded)->stats().blocks()[b].scale, whole->stats().blocks()[b].scale);
    EXPECT_EQ((*loaded)->stats().blocks()[b].shift, whole->stats().blocks()[b].shift);
  }
  // The scores (which read the cached totals) agree bit for bit too.
  auto s1 = whole->NewScoringState(), s2 = (*loaded)->NewScoringState();
  std::vector<double> a(6), b(6);
  ASSERT_TRUE(whole->Score(c.docs[5].View(), s1->get(), a.data()).ok());
  ASSERT_TRUE((*loaded)->Score(c.docs[5].View(), s2->get(), b.data()).ok());
  EXPECT_EQ(a, b);
}

TEST(LdaFamilyTest, RefusesBadOptions) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(50, 1));
  ASSERT_TRUE(schema.ok());
  const std::vector<std::pair<Options, std::string>> cases = {
      {{{"topcs", "5"}}, "topcs"},
      {{{"topics", "0"}}, "topics"},
      {{{"topics", "ten"}}, "topics"},
      {{{"alpha", "-1"}}, "alpha"},
      {{{"eta", "0"}}, "eta"},
      {{{"eta", "nan"}}, "eta"},
      {{{"inference", "em"}}, "inference"},
      {{{"vi_max_iter", "0"}}, "vi_max_iter"},
      {{{"vi_tol", "-1"}}, "vi_tol"},
      {{{"gibbs_samples", "0"}}, "gibbs_samples"},
      {{{"init_mass", "0"}}, "init_mass"},
  };
  for (const auto& [opts, key] : cases) {
    auto m = Model::Create(BuiltinFamily("lda"), BuiltinLoss("nll"), *schema, opts);
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_NE(m.status().ToString().find(key), std::string::npos) << m.status().ToString();
  }
  // Latent outputs: K topics whatever the schema's classes; labelled losses refused.
  auto m = Model::Create(BuiltinFamily("lda"), BuiltinLoss("ncll"), *schema, {{"topics", "7"}});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*m)->latent_outputs());
  EXPECT_EQ((*m)->num_outputs(), 7u);
  EXPECT_FALSE(SdemLearner::Create(m->get()).ok());
}

// Collapsed Gibbs as the local step also learns the topics (labels present
// but ignored in training).
TEST(LdaFamilyTest, GibbsLocalStepRecoversTopics) {
  const size_t D = 3000;
  Corpus c = Generate(11, 10, 1000, 100, D);
  for (auto& d : c.docs) d.label = 0;  // ignored in training
  auto m = NewLda(
      c.V, Recommended({{"topics", "10"}, {"inference", "gibbs"}, {"gibbs_burnin", "5"}, {"gibbs_samples", "5"}}),
      20000);
  ASSERT_TRUE(m);
  const double before = MeanMatchedL1(*m, c);
  Train(m.get(), c.docs, 0, D);
  const double l1 = MeanMatchedL1(*m, c);
  std::printf("gibbs: mean matched L1 %.4f before, %.4f after %zu documents\n", before, l1, D);
  EXPECT_LT(l1, 0.5 * before);
  ExpectFeasible(*m, "gibbs");
}

}  // namespace
}  // namespace tributary
