// Data-parallel learning (lib/include/tributary/parallel.h): shards learned
// from the same statistics and composed.
#include "tributary/parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace tributary {
namespace {

constexpr uint32_t kVocab = 60, kClasses = 4;

// Four classes over 60 terms: each class prefers its own 15 terms.
std::vector<DocumentBuffer> Corpus(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentBuffer> docs;
  for (size_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(rng() % kClasses);
    std::vector<std::pair<uint32_t, double>> terms;
    const uint32_t len = 3 + static_cast<uint32_t>(rng() % 6);
    for (uint32_t j = 0; j < len; ++j) {
      const uint32_t t =
          rng() % 3 == 0 ? static_cast<uint32_t>(rng() % kVocab) : static_cast<uint32_t>(y * 15 + rng() % 15);
      bool dup = false;
      for (auto& [tt, c] : terms) {
        if (tt == t) {
          c += 1;
          dup = true;
        }
      }
      if (!dup) terms.push_back({t, 1.0});
    }
    docs.push_back(testing::MakeDoc(i, y, terms));
  }
  return docs;
}

std::unique_ptr<Model> NewModel(const std::string& loss, double n) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), nullptr, *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE((*m)->SetLoss(testing::BuiltinLoss(loss)).ok());
  (*m)->learner_state().schedule.lambda = testing::BuiltinLoss(loss)->loss().default_lambda;
  (*m)->learner_state().effective_size = n;
  return std::move(m).value();
}

std::vector<trib_document> Views(const std::vector<DocumentBuffer>& docs) {
  std::vector<trib_document> v;
  for (const auto& d : docs) v.push_back(d.View());
  return v;
}

// Sequential sdEM (one Learner) over the documents in order.
void LearnSequential(Model* m, const std::vector<DocumentBuffer>& docs) {
  auto l = Learner::Create(m, LearnerOptions{Engine::kSdem, 1, 0, 0});
  ASSERT_TRUE(l.ok());
  for (const auto& d : docs) ASSERT_TRUE((*l)->Learn(d.View()).ok());
}

void LearnParallel(Model* m, const std::vector<DocumentBuffer>& docs, uint32_t threads, uint64_t sync_every) {
  ParallelOptions o;
  o.threads = threads;
  o.sync_every = sync_every;
  o.learner.engine = Engine::kSdem;
  auto p = ParallelLearner::Create(m, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto v = Views(docs);
  Status st = (*p)->Learn(v.data(), v.size());
  ASSERT_TRUE(st.ok()) << st.ToString();
}

double MaxRelativeDifference(const Model& a, const Model& b) {
  EXPECT_EQ(a.stats().size(), b.stats().size());
  double worst = 0;
  for (uint64_t i = 0; i < a.stats().size(); ++i) {
    const double x = a.stats().Mu(i), y = b.stats().Mu(i);
    worst = std::max(worst, std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), 1e-300}));
  }
  return worst;
}

using testing::Accuracy;

// NLL on naive Bayes: a step's change does not depend on the statistics, so
// the composition is the sequential pass (exact averaging = batch MAP),
// whatever the number of threads and the round size, the first document's
// re-materialising step (rho_0 = 1) included.
TEST(ParallelLearnerTest, NllEqualsTheSequentialPass) {
  const auto docs = Corpus(3000, 7);
  auto seq = NewModel("nll", 3000);
  LearnSequential(seq.get(), docs);
  for (uint32_t threads : {2u, 3u, 4u}) {
    for (uint64_t sync : {1u, 7u, 100u, 5000u}) {
      auto par = NewModel("nll", 3000);
      LearnParallel(par.get(), docs, threads, sync);
      EXPECT_EQ(par->learner_state().updates, 3000u);
      EXPECT_LT(MaxRelativeDifference(*seq, *par), 1e-9) << threads << " threads, sync every " << sync;
    }
  }
}

// The same seed and thread count give bit-identical statistics.
TEST(ParallelLearnerTest, ReproducibleForAFixedThreadCount) {
  const auto docs = Corpus(2000, 3);
  auto a = NewModel("ncll", 2000), b = NewModel("ncll", 2000);
  LearnParallel(a.get(), docs, 2, 300);
  LearnParallel(b.get(), docs, 2, 300);
  EXPECT_EQ(a->StatsDigest(), b->StatsDigest());
}

// NCLL and hinge: the shards' changes are computed from statistics that miss
// the other shard's documents of the round; held-out accuracy stays with the
// sequential learner's.
TEST(ParallelLearnerTest, DiscriminativeLossesKeepTheirAccuracy) {
  for (const char* loss : {"ncll", "hinge"}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      const auto train = Corpus(4000, seed), test = Corpus(2000, seed + 100);
      auto seq = NewModel(loss, 4000), par = NewModel(loss, 4000);
      LearnSequential(seq.get(), train);
      LearnParallel(par.get(), train, 2, 500);
      const double a = Accuracy(*seq, test), b = Accuracy(*par, test);
      EXPECT_GT(a, 0.6) << loss;  // the corpus is learnable
      EXPECT_NEAR(a, b, 0.02) << loss << " seed " << seed;
      // ... and not by sharing nothing: the shards' statistics were composed.
      EXPECT_EQ(par->learner_state().updates, 4000u);
    }
  }
}

// A refused document ends Learn with an error naming it, and the model is
// as it was after the last completed round; with on_bad it is left out.
TEST(ParallelLearnerTest, BadDocumentInAShard) {
  auto docs = Corpus(400, 5);
  docs[250].label = kClasses + 3;  // in the second round (documents 200..399)
  auto m = NewModel("ncll", 400);
  ParallelOptions o;
  o.threads = 2;
  o.sync_every = 100;  // rounds of 200 documents
  auto p = ParallelLearner::Create(m.get(), o);
  ASSERT_TRUE(p.ok());
  auto v = Views(docs);
  // The first round alone, for reference.
  auto ref = NewModel("ncll", 400);
  {
    auto pr = ParallelLearner::Create(ref.get(), o);
    ASSERT_TRUE(pr.ok());
    ASSERT_TRUE((*pr)->Learn(v.data(), 200).ok());
  }
  Status st = (*p)->Learn(v.data(), v.size());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("document #250"), std::string::npos) << st.ToString();
  EXPECT_EQ(m->StatsDigest(), ref->StatsDigest());
  EXPECT_EQ(m->learner_state().updates, 200u);

  // Skipping: reported once, the rest learned.
  auto m2 = NewModel("ncll", 400);
  std::vector<std::string> reported;
  o.on_bad = [&](const Status& s) { reported.push_back(s.ToString()); };
  auto p2 = ParallelLearner::Create(m2.get(), o);
  ASSERT_TRUE(p2.ok());
  ASSERT_TRUE((*p2)->Learn(v.data(), v.size()).ok());
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].find("document #250"), std::string::npos);
  EXPECT_EQ(m2->learner_state().updates, 399u);
}

TEST(ParallelLearnerTest, RefusesBadOptionsAndPerDocumentEngines) {
  auto m = NewModel("ncll", 100);
  ParallelOptions o;
  o.threads = 0;
  EXPECT_FALSE(ParallelLearner::Create(m.get(), o).ok());
  EXPECT_FALSE(ParallelLearner::Create(nullptr, ParallelOptions()).ok());
  // EP keeps a site per document: refused, by name.
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
  ASSERT_TRUE(schema.ok());
  auto mix = Model::Create(testing::BuiltinFamily("emsd-mixture"), testing::BuiltinLoss("nll"), *schema,
                           {{"components", "2"}}, 1);
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  o.threads = 2;
  o.learner.engine = Engine::kEp;
  o.learner.effective_size = 100;
  auto ep = ParallelLearner::Create(mix->get(), o);
  ASSERT_FALSE(ep.ok());
  EXPECT_NE(ep.status().ToString().find("EP keeps a site per document"), std::string::npos) << ep.status().ToString();
  o.learner.engine = Engine::kSep;
  EXPECT_TRUE(ParallelLearner::Create(mix->get(), o).ok());
}

// The default round: at least kMinSyncEvery documents per shard, more for
// big models (the composition's cost grows with the statistics).
TEST(ParallelLearnerTest, DefaultRoundGrowsWithTheModel) {
  EXPECT_EQ(DefaultSyncEvery(1000), kMinSyncEvery);
  EXPECT_EQ(DefaultSyncEvery(45'000'000), 45'000'000 / kStatisticsPerSyncDocument);
  EXPECT_GT(DefaultSyncEvery(45'000'000), DefaultSyncEvery(1'090'000));
}

// The composition rule itself on one block, against the maps applied one
// after the other: shard 0 then shard 1, each an affine map of the block
// plus changes on its own entries.
TEST(ShardCompositionTest, ComposesAffineMapsInShardOrder) {
  SufficientStats base;
  ASSERT_TRUE(base.Init({trib_block{0, 4, 1.0, 0.5, 1.0, 1.0}}).ok());
  base.mutable_blocks()[0].scale = 0.8;
  base.mutable_blocks()[0].shift = 1.1;
  base.raw() = {0.1, -0.2, 0.3, 0.0};
  auto mu = [](const SufficientStats& s, uint64_t i) { return s.Mu(i); };
  // Shard 0: mu <- 0.9 mu + 0.05 abar, entry 1 += 0.7. Shard 1: mu <- 0.5 mu
  // + 0.2 abar, entry 2 += -0.1.
  auto apply = [&](const SufficientStats& from, double f, double g, uint64_t e, double d, BlockTrace* t) {
    SufficientStats s = from;
    trib_block& b = s.mutable_blocks()[0];
    b.scale *= f;
    b.shift = f * b.shift + g;
    s.raw()[e] += d / b.scale;
    t->Reset(1);
    t->decay[0] = f;
    t->offset[0] = g;
    return s;
  };
  BlockTrace t0, t1;
  SufficientStats s0 = apply(base, 0.9, 0.05, 1, 0.7, &t0);
  SufficientStats s1 = apply(base, 0.5, 0.2, 2, -0.1, &t1);
  BlockTrace ignored;
  SufficientStats seq = apply(apply(base, 0.9, 0.05, 1, 0.7, &ignored), 0.5, 0.2, 2, -0.1, &ignored);
  ShardComposition c;
  c.Plan(base.blocks(), {&t0, &t1});
  std::vector<double> acc(4, 0.0), out(4);
  c.AddContribution(0, base, s0, 0, 4, acc.data());
  c.AddContribution(1, base, s1, 0, 4, acc.data());
  c.Finish(base, acc.data(), 0, 4, out.data());
  SufficientStats composed = base;
  composed.raw().assign(out.begin(), out.end());
  composed.mutable_blocks() = c.blocks();
  for (uint64_t i = 0; i < 4; ++i) EXPECT_NEAR(mu(composed, i), mu(seq, i), 1e-12) << i;
  // gamma = shift - scale composes like the statistics.
  EXPECT_NEAR(composed.blocks()[0].shift - composed.blocks()[0].scale, seq.blocks()[0].shift - seq.blocks()[0].scale,
              1e-12);
  EXPECT_FALSE(c.averaged());

  // Gradient steps: the shards' statistics averaged, weighted by their steps.
  t0.steps = 3;
  t1.steps = 1;
  t1.gradient = true;
  c.Plan(base.blocks(), {&t0, &t1});
  EXPECT_TRUE(c.averaged());
  std::fill(acc.begin(), acc.end(), 0.0);
  c.AddContribution(0, base, s0, 0, 4, acc.data());
  c.AddContribution(1, base, s1, 0, 4, acc.data());
  c.Finish(base, acc.data(), 0, 4, out.data());
  composed.raw().assign(out.begin(), out.end());
  composed.mutable_blocks() = c.blocks();
  for (uint64_t i = 0; i < 4; ++i) EXPECT_NEAR(mu(composed, i), 0.75 * mu(s0, i) + 0.25 * mu(s1, i), 1e-12) << i;
}

}  // namespace
}  // namespace tributary
