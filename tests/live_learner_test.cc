// The live learner (lib/include/tributary/live_learner.h): candidates
// test-then-train on one pass, the served one chosen with hysteresis and a
// per-class check, ADWIN restarting the long memories after a change.
#include "tributary/live_learner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "test_util.h"
#include "tributary/v1/tributary.pb.h"

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

namespace tributary {
namespace {

// Every candidate's bytes, the learner's report and its held documents: two
// learners with equal fingerprints are the same learner.
std::string Fingerprint(LiveLearner* l) {
  auto bytes = l->Serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes + l->ToJson() + std::to_string(l->held()) : std::string();
}

// Saved half-way through a drifting stream (after the alarm, with documents
// held in the sample) and resumed from the file, the learner continues bit
// for bit as the one that never stopped: every prediction, the choice of the
// served candidate, the alarms and every candidate's statistics.
TEST(LiveLearnerTest, SavedAndResumedContinuesBitForBit) {
  const auto docs = Stream(6000, 5, 2500);
  auto a = LiveLearner::Create(Factory(6000), Defaults());
  ASSERT_TRUE(a.ok());
  const std::string path = testing::TempDir("live_resume") + "/live.trib";
  std::vector<uint32_t> predicted_a, predicted_b;
  std::unique_ptr<LiveLearner> b;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (i == 3100) {
      ASSERT_FALSE((*a)->alarms().empty()) << "no alarm before the save: the test would not cover the detector";
      ASSERT_GT((*a)->held(), 0u);
      ASSERT_TRUE((*a)->Save(path).ok());
      auto loaded = Model::Load(path, testing::BuiltinRegistry());
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      EXPECT_TRUE(LiveLearner::Holds(**loaded));
      auto resumed = LiveLearner::FromModel(std::move(loaded).value(), testing::BuiltinRegistry());
      ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
      b = std::move(resumed).value();
      EXPECT_EQ(Fingerprint(a->get()), Fingerprint(b.get()));
    }
    LiveStep sa, sb;
    ASSERT_TRUE((*a)->Learn(docs[i], &sa).ok());
    if (b) {
      ASSERT_TRUE(b->Learn(docs[i], &sb).ok());
      ASSERT_EQ(sa.predicted, sb.predicted) << "document " << i;
      ASSERT_EQ(*sa.scores, *sb.scores) << "document " << i;
      ASSERT_EQ(sa.alarm, sb.alarm) << "document " << i;
    }
  }
  ASSERT_TRUE(b != nullptr);
  EXPECT_EQ(Fingerprint(a->get()), Fingerprint(b.get()));
  EXPECT_EQ((*a)->served().StatsDigest(), b->served().StatsDigest());
  // A single model holds no learner.
  auto single = Factory(10)(CandidateSpec{"ncll", "ncll", {}, {}, false});
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(LiveLearner::Holds(**single));
  auto refused = LiveLearner::FromModel(std::move(single).value(), testing::BuiltinRegistry());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
}

// A damaged state is refused with what is wrong, not resumed into a learner
// that reads past its arrays.
TEST(LiveLearnerTest, ADamagedStateIsRefusedByName) {
  const auto docs = Stream(800, 6);
  auto a = LiveLearner::Create(Factory(800), Defaults());
  ASSERT_TRUE(a.ok());
  for (const auto& d : docs) ASSERT_TRUE((*a)->Learn(d).ok());
  auto model = LiveLearner::ToModel(std::move(a).value());
  ASSERT_TRUE(model.ok());
  const std::string good = (*model)->live_state();
  v1::LiveLearnerState st;
  ASSERT_TRUE(st.ParseFromString(good));
  struct Case {
    std::string name;
    std::function<void(v1::LiveLearnerState*)> damage;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"garbage", nullptr, "does not parse"},
      {"format", [](v1::LiveLearnerState* s) { s->set_format(7); }, "format 7"},
      {"served", [](v1::LiveLearnerState* s) { s->set_served(9); }, "served 9"},
      {"label", [](v1::LiveLearnerState* s) { s->mutable_sample(0)->mutable_slots(0)->set_label(99); }, "label 99"},
      {"term", [](v1::LiveLearnerState* s) { s->mutable_sample(0)->mutable_slots(0)->set_term_ids(0, 100000); },
       "expected increasing ids below 100"},
      {"detector", [](v1::LiveLearnerState* s) { s->mutable_detector()->set_width(3); }, "ADWIN state"},
      {"recent", [](v1::LiveLearnerState* s) { s->set_recent(0, 50); }, "recent label is 50"},
      {"candidate model",
       [](v1::LiveLearnerState* s) {
         for (auto& c : *s->mutable_candidates()) {
           if (!c.model().empty()) c.set_model(c.model().substr(0, c.model().size() / 2));
         }
       },
       "live candidate"},
      {"settings", [](v1::LiveLearnerState* s) { s->mutable_settings()->set_half_life(0); }, "half_life"},
  };
  for (const Case& c : cases) {
    std::string bytes = "\xff\xff\xff";
    if (c.damage) {
      v1::LiveLearnerState d = st;
      c.damage(&d);
      bytes = d.SerializeAsString();
    }
    auto m = (*model)->Clone();
    ASSERT_TRUE(m.ok());
    (*m)->set_live_state(bytes);
    auto r = LiveLearner::FromModel(std::move(m).value(), testing::BuiltinRegistry());
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.name << ": " << r.status().ToString();
  }
  auto ok = LiveLearner::FromModel(std::move(model).value(), testing::BuiltinRegistry());
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace tributary
