// Learner (lib/include/tributary/learner.h): one interface over sdEM and
// SEP / EP / ADF.
#include "tributary/learner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::BuiltinLoss;
using testing::MakeDoc;
using testing::TextSchema;

std::unique_ptr<Model> Multinomial(uint32_t V, uint32_t K, bool open_classes, const std::string& loss = "ncll") {
  v1::Schema proto = TextSchema(V, K);
  proto.set_open_classes(open_classes);
  auto schema = ModelSchema::FromProto(proto);
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(BuiltinFamily("multinomial"), BuiltinLoss(loss), *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().schedule.lambda = BuiltinLoss(loss)->loss().default_lambda;
  (*m)->learner_state().effective_size = 200;
  return std::move(m).value();
}

DocumentBuffer Doc(uint64_t i, std::mt19937_64* rng, int64_t label, uint32_t V) {
  std::vector<std::pair<uint32_t, double>> terms;
  const uint32_t a = static_cast<uint32_t>((*rng)() % V), b = (a + 1 + static_cast<uint32_t>((*rng)() % 3)) % V;
  terms.push_back({std::min(a, b), 1.0});
  if (a != b) terms.push_back({std::max(a, b), 2.0});
  return MakeDoc(i, label, terms);
}

LearnerOptions Sdem(uint64_t seed = 1) {
  LearnerOptions o;
  o.engine = Engine::kSdem;
  o.seed = seed;
  return o;
}

// A class added in the middle of the stream: the Learner rebuilds itself,
// and the model equals one trained by a caller that rebuilds an SdemLearner
// by hand (the old convention), bit for bit.
TEST(LearnerTest, RebuildsItselfWhenTheModelGrowsAClass) {
  auto a = Multinomial(12, 2, true), b = Multinomial(12, 2, true);
  auto la = Learner::Create(a.get(), Sdem());
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  EXPECT_EQ((*la)->engine(), Engine::kSdem);
  ASSERT_NE((*la)->sdem(), nullptr);
  EXPECT_EQ((*la)->sep(), nullptr);
  auto lb = SdemLearner::Create(b.get(), 1);
  ASSERT_TRUE(lb.ok());
  std::mt19937_64 rng(3);
  for (uint64_t i = 0; i < 300; ++i) {
    if (i == 100) {
      const uint64_t before = a->layout_version();
      ASSERT_TRUE(a->AddClass("late").ok());
      ASSERT_TRUE(b->AddClass("late").ok());
      EXPECT_NE(a->layout_version(), before);
      lb = SdemLearner::Create(b.get(), 1);  // by hand
      ASSERT_TRUE(lb.ok());
    }
    const int64_t y = static_cast<int64_t>(i % (i < 100 ? 2 : 3));
    DocumentBuffer d = Doc(i, &rng, y, 12);
    LearnResult r;
    ASSERT_TRUE((*la)->Learn(d.View(), &r).ok()) << i;
    ASSERT_TRUE((*lb)->Learn(d.View()).ok()) << i;
    ASSERT_NE(r.scores, nullptr);
    ASSERT_EQ(r.scores->size(), a->num_outputs());
    EXPECT_LT(r.predicted, a->num_outputs());
    EXPECT_FALSE(r.skipped);
  }
  EXPECT_EQ(a->num_outputs(), 3u);
  EXPECT_EQ(a->stats().raw(), b->stats().raw());
  EXPECT_EQ(a->learner_state().updates, 300u);
}

// Refused documents leave the model as it was, whatever the engine.
TEST(LearnerTest, ARefusedDocumentChangesNothing) {
  auto m = Multinomial(12, 2, false);
  auto l = Learner::Create(m.get(), Sdem());
  ASSERT_TRUE(l.ok());
  std::mt19937_64 rng(5);
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE((*l)->Learn(Doc(i, &rng, static_cast<int64_t>(i % 2), 12).View()).ok());
  const auto raw = m->stats().raw();
  DocumentBuffer nan_count = MakeDoc(20, 1, {{3, std::nan("")}});
  Status st = (*l)->Learn(nan_count.View());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(m->stats().raw(), raw);
  EXPECT_EQ(m->learner_state().updates, 20u);
}

// Engine names and families: clear errors.
TEST(LearnerTest, EnginesAreCheckedAgainstTheFamily) {
  auto m = Multinomial(12, 2, false);
  LearnerOptions o;
  auto bad = ParseEngine("gibbs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("unknown engine 'gibbs' (expected auto, sdem, sep, ep or adf)"),
            std::string::npos)
      << bad.status().ToString();
  // Every engine's name parses back to it.
  for (Engine e : {Engine::kAuto, Engine::kSdem, Engine::kSep, Engine::kEp, Engine::kAdf}) {
    auto parsed = ParseEngine(EngineName(e));
    ASSERT_TRUE(parsed.ok()) << EngineName(e);
    EXPECT_EQ(*parsed, e) << EngineName(e);
  }
  o.engine = Engine::kSep;
  auto no_hooks = Learner::Create(m.get(), o);
  ASSERT_FALSE(no_hooks.ok());
  EXPECT_NE(no_hooks.status().ToString().find("it has no SEP hooks"), std::string::npos)
      << no_hooks.status().ToString();
  o.engine = Engine::kAuto;  // multinomial has no SEP hooks: sdEM
  auto automatic = Learner::Create(m.get(), o);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ((*automatic)->engine(), Engine::kSdem);
  EXPECT_FALSE(Learner::Create(nullptr, o).ok());
}

// The loss a model records: SEP / EP / ADF learn the likelihood (nll),
// sdEM the loss given; one answer for train, serve and Python.
TEST(LearnerTest, RecordedLossFollowsTheEngine) {
  const Plugin& multinomial = *testing::BuiltinFamily("multinomial");
  const Plugin& mixture = *testing::BuiltinFamily("emsd-mixture");
  EXPECT_EQ(RecordedLoss(Engine::kSdem, multinomial, "ncll"), "ncll");
  EXPECT_EQ(RecordedLoss(Engine::kAuto, multinomial, "hinge"), "hinge");
  EXPECT_EQ(RecordedLoss(Engine::kAuto, mixture, "ncll"), "nll");  // auto: SEP for a family with SEP hooks
  for (Engine e : {Engine::kSep, Engine::kEp, Engine::kAdf}) {
    EXPECT_EQ(RecordedLoss(e, mixture, "hinge"), "nll") << EngineName(e);
  }
  // An engine the family cannot take: left for the learner to refuse.
  EXPECT_EQ(RecordedLoss(Engine::kSep, multinomial, "ncll"), "ncll");
  EXPECT_EQ(RecordedLoss(Engine::kSdem, mixture, "ncll"), "ncll");
}

// SEP behind the same interface: the same model as SepLearner driven
// directly, and the outcome's log Z_i.
TEST(LearnerTest, SepThroughTheInterfaceEqualsTheEngine) {
  auto make = [] {
    auto schema = ModelSchema::FromProto(TextSchema(12, 3));
    EXPECT_TRUE(schema.ok());
    auto m = Model::Create(BuiltinFamily("emsd-mixture"), nullptr, *schema, {{"components", "3"}}, 7);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  };
  auto a = make(), b = make();
  LearnerOptions o;  // auto: the family has SEP hooks
  o.effective_size = 60;
  o.seed = 2;
  auto la = Learner::Create(a.get(), o);
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  EXPECT_EQ((*la)->engine(), Engine::kSep);
  ASSERT_NE((*la)->sep(), nullptr);
  SepOptions so;
  so.engine = SepEngine::kSep;
  so.effective_size = 60;
  so.seed = 2;
  auto lb = SepLearner::Create(b.get(), so);
  ASSERT_TRUE(lb.ok());
  std::mt19937_64 rng(9);
  int finite = 0;
  for (uint64_t i = 0; i < 60; ++i) {
    DocumentBuffer d = Doc(i, &rng, -1, 12);
    LearnResult r;
    SepOutcome o2;
    ASSERT_TRUE((*la)->Learn(d.View(), &r).ok());
    ASSERT_TRUE((*lb)->Learn(d.View(), &o2).ok());
    EXPECT_EQ(r.scores, nullptr);
    EXPECT_EQ(r.skipped, o2.skipped);
    if (std::isfinite(r.log_z)) {
      ++finite;
      EXPECT_EQ(r.log_z, o2.log_z);
    }
  }
  EXPECT_GT(finite, 0);
  EXPECT_EQ(a->stats().raw(), b->stats().raw());
  EXPECT_EQ((*la)->sep()->counters().documents, 60u);
}

}  // namespace
}  // namespace tributary
