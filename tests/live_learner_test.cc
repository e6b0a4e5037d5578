// The live learner (lib/include/tributary/live_learner.h): candidates
// test-then-train on one pass, the served one chosen with hysteresis and a
// per-class check, ADWIN restarting the long memories after a change.
#include "tributary/live_learner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_util.h"

namespace tributary {
namespace {

constexpr uint32_t kClasses = 10, kTerms = 100;

// Ten classes over 100 terms, each with ten terms of its own; half of the
// tokens are noise. `swap_at`: from this document on, classes 0 and 1 (and 2
// and 3) exchange their labels (a change of p(y | x)).
std::vector<DocumentBuffer> Stream(size_t n, uint64_t seed, size_t swap_at = SIZE_MAX) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentBuffer> docs;
  for (size_t i = 0; i < n; ++i) {
    const auto y = static_cast<int64_t>(rng() % kClasses);
    std::vector<std::pair<uint32_t, double>> terms;
    for (uint32_t j = 0; j < 6; ++j) {
      const auto t =
          rng() % 2 == 0 ? static_cast<uint32_t>(rng() % kTerms) : static_cast<uint32_t>(y * 10 + rng() % 10);
      bool dup = false;
      for (auto& [tt, c] : terms) dup |= tt == t;
      if (!dup) terms.push_back({t, 1.0});
    }
    int64_t label = y;
    if (i >= swap_at && y < 4) label = y ^ 1;
    docs.push_back(testing::MakeDoc(i, label, terms));
  }
  return docs;
}

ModelFactory Factory(double n) {
  return [=](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto schema = ModelSchema::FromProto(testing::TextSchema(kTerms, kClasses));
    if (!schema.ok()) return schema.status();
    auto m = Model::Create(testing::BuiltinFamily("multinomial"), nullptr, *schema, c.family_options, 1);
    if (!m.ok()) return m.status();
    TRIB_RETURN_IF_ERROR((*m)->SetLoss(testing::BuiltinLoss(c.loss), c.loss_options));
    (*m)->learner_state().schedule.lambda = testing::BuiltinLoss(c.loss)->loss().default_lambda;
    (*m)->learner_state().effective_size = n;
    return m;
  };
}

LiveLearnerOptions Defaults() {
  LiveLearnerOptions o;
  ModelConfig base;
  base.loss = "ncll";
  o.candidates = DefaultLiveCandidates(base);
  return o;
}

// Today's single learner: the first default candidate alone, no detector.
LiveLearnerOptions Single() {
  LiveLearnerOptions o = Defaults();
  o.candidates.resize(1);
  o.detect_drift = false;
  o.sample_per_class = 0;
  return o;
}

using testing::Accuracy;

// Windowed prequential accuracy of the served candidate, per block of `block`
// documents.
std::vector<double> Learn(LiveLearner* l, const std::vector<DocumentBuffer>& docs, size_t block) {
  std::vector<double> curve;
  size_t right = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    LiveStep step;
    EXPECT_TRUE(l->Learn(docs[i], &step).ok());
    EXPECT_TRUE(step.labelled);
    right += step.correct;
    if ((i + 1) % block == 0) {
      curve.push_back(static_cast<double>(right) / static_cast<double>(block));
      right = 0;
    }
  }
  return curve;
}

// A stream grouped by class (every document of class 0, then of class 1, ...):
// the discriminative learner alone predicts the last classes for everything;
// the live learner sees on its per-class sample that it forgot, and serves a
// candidate that predicts every class.
TEST(LiveLearnerTest, AClassGroupedStreamKeepsEveryClass) {
  auto docs = Stream(5000, 1);
  std::stable_sort(docs.begin(), docs.end(),
                   [](const DocumentBuffer& a, const DocumentBuffer& b) { return a.label < b.label; });
  const auto test = Stream(2000, 99);
  auto live = LiveLearner::Create(Factory(5000), Defaults());
  auto single = LiveLearner::Create(Factory(5000), Single());
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_TRUE(single.ok());
  Learn(live->get(), docs, 1000);
  Learn(single->get(), docs, 1000);
  const double acc_single = Accuracy((*single)->served(), test);
  const double acc_live = Accuracy((*live)->served(), test);
  EXPECT_LT(acc_single, 0.5) << "the single learner did not forget: the test shows nothing";
  EXPECT_GT(acc_live, 0.8) << (*live)->ToJson();
  // Every class is predicted for some test document.
  auto state = (*live)->served().NewScoringState();
  std::vector<double> s(kClasses);
  std::vector<int> predicted(kClasses, 0);
  for (const auto& d : test) {
    ASSERT_TRUE((*live)->served().Score(d.View(), state->get(), s.data()).ok());
    predicted[std::max_element(s.begin(), s.end()) - s.begin()] = 1;
  }
  for (uint32_t k = 0; k < kClasses; ++k) EXPECT_TRUE(predicted[k]) << "class " << k << " is never predicted";
  EXPECT_TRUE((*live)->alarms().empty()) << "a class-grouped stream is no drift: " << (*live)->ToJson();
}

// Four of ten classes swap labels half-way: the detector fires soon after the
// change, the served model recovers to 90 % of its level before the change
// within 2,000 documents, faster than the single learner, and ends near its
// level before the change.
TEST(LiveLearnerTest, ASwapIsDetectedAndRecoveredFrom) {
  const size_t n = 16000, at = 8000, block = 500;
  const auto docs = Stream(n, 2, at);
  auto live = LiveLearner::Create(Factory(n), Defaults());
  auto single = LiveLearner::Create(Factory(n), Single());
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE(single.ok());
  const auto curve = Learn(live->get(), docs, block);
  const auto curve_single = Learn(single->get(), docs, block);
  const double before = curve[at / block - 1];
  ASSERT_GT(before, 0.8) << "the stream is too hard to show a recovery";
  ASSERT_FALSE((*live)->alarms().empty()) << (*live)->ToJson();
  const uint64_t first = (*live)->alarms()[0].document;
  EXPECT_GT(first, at) << "an alarm before the change";
  EXPECT_LT(first, at + 1000) << "detection delay";
  // Recovery: the first block at >= 90 % of `before`.
  auto recovered = [&](const std::vector<double>& c) {
    for (size_t b = at / block; b < c.size(); ++b) {
      if (c[b] >= 0.9 * before) return (b + 1) * block - at;
    }
    return n;
  };
  EXPECT_LE(recovered(curve), 2000u) << (*live)->ToJson();
  EXPECT_LE(recovered(curve), recovered(curve_single));
  EXPECT_GE(curve.back(), before - 0.03);
}

// The same documents give the same choices, alarms and models.
TEST(LiveLearnerTest, Deterministic) {
  const auto docs = Stream(4000, 3, 2000);
  auto a = LiveLearner::Create(Factory(4000), Defaults());
  auto b = LiveLearner::Create(Factory(4000), Defaults());
  ASSERT_TRUE(a.ok() && b.ok());
  Learn(a->get(), docs, 1000);
  Learn(b->get(), docs, 1000);
  EXPECT_EQ((*a)->ToJson(), (*b)->ToJson());
  EXPECT_EQ((*a)->served().stats().raw(), (*b)->served().stats().raw());
}

TEST(LiveLearnerTest, OptionsOutOfRangeAndUnknownLossesAreNamed) {
  LiveLearnerOptions o = Defaults();
  o.candidates.clear();
  EXPECT_NE(LiveLearner::Create(Factory(10), o).status().message().find("no candidates"), std::string::npos);
  o = Defaults();
  o.switch_margin = 1.5;
  EXPECT_NE(LiveLearner::Create(Factory(10), o).status().message().find("switch_margin"), std::string::npos);
  o = Defaults();
  o.detector.delta = 0;
  EXPECT_NE(LiveLearner::Create(Factory(10), o).status().message().find("delta"), std::string::npos);
  // A candidate the factory cannot build is named.
  o = Defaults();
  const ModelFactory good = Factory(10);
  const ModelFactory refuses_nll = [&](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    if (c.loss == "nll") return Status::InvalidArgument("no nll here");
    return good(c);
  };
  auto r = LiveLearner::Create(refuses_nll, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("candidate 'nll (generative)'"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace tributary
