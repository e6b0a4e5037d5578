// Model::RefreshFrom and the statistics' write tracking (model.h): a copy
// brought up to date by copying only the pages written since it was made
// equals a fresh Clone, for sdEM and SEP, after growth and after failures;
// what changed is all that is copied.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tributary/learner.h"

namespace tributary {
namespace {

constexpr uint32_t kVocab = 20000, kClasses = 4;

DocumentBuffer RandomDoc(std::mt19937_64& rng, uint64_t index, uint32_t vocab_used) {
  std::vector<std::pair<uint32_t, double>> terms;
  for (uint32_t t : {static_cast<uint32_t>(rng() % vocab_used), static_cast<uint32_t>(rng() % vocab_used)}) {
    if (terms.empty() || terms[0].first != t) terms.push_back({t, 1.0});
  }
  std::sort(terms.begin(), terms.end());
  return testing::MakeDoc(index, static_cast<int64_t>(rng() % kClasses), terms);
}

std::unique_ptr<Model> NewModel(const std::string& family, const std::string& loss, Options options = {}) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily(family), testing::BuiltinLoss(loss), *schema, std::move(options), 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 1000;
  return std::move(m).value();
}

void Learn(Learner* l, std::mt19937_64& rng, int n, uint32_t vocab_used = kVocab) {
  for (int i = 0; i < n; ++i) ASSERT_TRUE(l->Learn(RandomDoc(rng, i, vocab_used).View()).ok());
}

// Publish, learn, refresh: the refreshed copy is bit-identical to the model,
// and only the pages the documents touched were copied.
TEST(RefreshTest, RefreshedCopyEqualsTheModelAndCopiesLittle) {
  for (const char* loss : {"ncll", "nll"}) {
    SCOPED_TRACE(loss);
    auto m = NewModel("multinomial", loss);
    auto l = Learner::Create(m.get(), LearnerOptions{Engine::kSdem, 1, 0, 0});
    ASSERT_TRUE(l.ok());
    std::mt19937_64 rng(3);
    Learn(l->get(), rng, 50);
    auto copy = m->Clone();
    ASSERT_TRUE(copy.ok());
    for (int round = 0; round < 5; ++round) {
      const uint64_t since = m->stats().epoch();
      m->stats().NextEpoch();
      Learn(l->get(), rng, 10, /*vocab_used=*/200);  // documents over the first 200 terms
      const uint64_t pages = m->stats().PagesWrittenSince(since);
      const uint64_t all = m->stats().size() >> SufficientStats::kPageShift;
      ASSERT_TRUE((*copy)->RefreshFrom(*m, since).ok());
      EXPECT_EQ((*copy)->StatsDigest(), m->StatsDigest()) << "round " << round;
      EXPECT_EQ((*copy)->learner_state().updates, m->learner_state().updates);
      // The copy scores as the model does (its family caches were refreshed).
      auto s1 = m->NewScoringState();
      auto s2 = (*copy)->NewScoringState();
      std::vector<double> a(kClasses), b(kClasses);
      DocumentBuffer probe = RandomDoc(rng, 0, 200);
      ASSERT_TRUE(m->Score(probe.View(), s1->get(), a.data()).ok());
      ASSERT_TRUE((*copy)->Score(probe.View(), s2->get(), b.data()).ok());
      EXPECT_EQ(a, b);
      if (std::string(loss) == "ncll") {
        // NCLL touches the rows of the documents' terms (and the per-class
        // entries): a small part of the 157 pages.
        EXPECT_LT(pages, all / 4) << pages << " of " << all;
      }
    }
  }
}

// Growth (a class added with room: same layout, entries written anywhere)
// makes the next refresh copy everything; a grown layout is refused and the
// copy left as it was.
TEST(RefreshTest, GrowthCopiesEverythingOrIsRefused) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(50, 2));
  ASSERT_TRUE(schema.ok());
  ModelSchema open = *schema;
  open.set_open_classes(true);
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), open, {}, 1);
  ASSERT_TRUE(m.ok());
  (*m)->learner_state().effective_size = 100;
  auto copy = (*m)->Clone();
  ASSERT_TRUE(copy.ok());
  const uint64_t since = (*m)->stats().epoch();
  (*m)->stats().NextEpoch();
  ASSERT_TRUE((*m)->AddClass("extra").ok());
  const uint64_t before_digest = std::stoul((*copy)->StatsDigest(), nullptr, 16);
  Status st = (*copy)->RefreshFrom(**m, since);
  if (st.ok()) {
    EXPECT_EQ((*copy)->StatsDigest(), (*m)->StatsDigest());
    EXPECT_EQ((*copy)->num_classes(), (*m)->num_classes());
  } else {
    EXPECT_EQ(std::stoul((*copy)->StatsDigest(), nullptr, 16), before_digest);  // unchanged
    EXPECT_NE(st.ToString().find("layout"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ((*m)->stats().PagesWrittenSince(since), ((*m)->stats().size() >> SufficientStats::kPageShift) + 1);
}

// SEP (count mixture): the support entries written by the engine are
// tracked as well.
TEST(RefreshTest, SepUpdatesAreTracked) {
  auto m = NewModel("emsd-mixture", "nll", {{"components", "3"}});
  LearnerOptions lo{Engine::kSep, 1, 1000, 0};
  auto l = Learner::Create(m.get(), lo);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::mt19937_64 rng(5);
  auto copy = m->Clone();
  ASSERT_TRUE(copy.ok());
  for (int round = 0; round < 3; ++round) {
    const uint64_t since = m->stats().epoch();
    m->stats().NextEpoch();
    for (int i = 0; i < 20; ++i) {
      DocumentBuffer d = RandomDoc(rng, i, 300);
      d.label = -1;
      ASSERT_TRUE((*l)->Learn(d.View()).ok());
    }
    ASSERT_TRUE((*copy)->RefreshFrom(*m, since).ok());
    EXPECT_EQ((*copy)->StatsDigest(), m->StatsDigest()) << "round " << round;
  }
}

}  // namespace
}  // namespace tributary
