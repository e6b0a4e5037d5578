// The Trainer (lib/include/tributary/trainer.h): train's defaults.
#include "tributary/trainer.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"

namespace tributary {
namespace {

// Three separable classes over 30 terms; `grouped` sorts them by class.
std::vector<DocumentBuffer> Corpus(size_t n, uint64_t seed, bool grouped) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentBuffer> docs;
  for (size_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(rng() % 3);
    std::vector<std::pair<uint32_t, double>> terms;
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t t = rng() % 3 == 0 ? static_cast<uint32_t>(rng() % 30) : static_cast<uint32_t>(y * 10 + j * 2);
      bool dup = false;
      for (auto& [tt, c] : terms) dup |= tt == t;
      if (!dup) terms.push_back({t, 1.0});
    }
    docs.push_back(testing::MakeDoc(i, y, terms));
  }
  if (grouped) {
    std::stable_sort(docs.begin(), docs.end(),
                     [](const DocumentBuffer& a, const DocumentBuffer& b) { return a.label < b.label; });
    for (size_t i = 0; i < docs.size(); ++i) docs[i].index = i;
  }
  return docs;
}

ModelFactory Factory(std::shared_ptr<const Plugin> family, uint32_t V, uint32_t K, double n) {
  return [=](const CandidateSpec& c) -> Result<std::unique_ptr<Model>> {
    auto schema = ModelSchema::FromProto(testing::TextSchema(V, K));
    if (!schema.ok()) return schema.status();
    auto m = Model::Create(family, nullptr, *schema, c.family_options, 1);
    if (!m.ok()) return m.status();
    TRIB_RETURN_IF_ERROR((*m)->SetLoss(testing::BuiltinLoss(c.loss), c.loss_options));
    (*m)->learner_state().schedule.lambda = testing::BuiltinLoss(c.loss)->loss().default_lambda;
    (*m)->learner_state().effective_size = n;
    return m;
  };
}

std::vector<CandidateSpec> NcllAndNll() {
  CandidateSpec a{"ncll prior=default", "ncll", {}, {}, false};
  CandidateSpec b{"ncll prior=3", "ncll", {{"prior", "3"}}, {}, false};
  CandidateSpec g{"nll (generative)", "nll", {}, {}, true};
  return {a, b, g};
}

// McNemar's rule: a discriminative candidate replaces NLL only when it wins
// beyond noise on the same documents.
TEST(TrainerTest, ChooseCandidateNeedsAWinBeyondNoise) {
  const std::vector<bool> gen = {false, true};
  // b = 3 documents right only for the first, c = 1 only for NLL:
  // b - c = 2 > sqrt(4) = 2 fails, NLL is kept.
  std::vector<std::vector<char>> right = {{1, 1, 1, 0, 1}, {0, 0, 0, 1, 1}};
  EXPECT_EQ(ChooseCandidate({0.8, 0.4}, {1, 1}, right, gen), 1u);
  right[1] = {0, 0, 0, 0, 1};
  EXPECT_EQ(ChooseCandidate({0.8, 0.2}, {1, 1}, right, gen), 0u);  // b = 3, c = 0: 3 > 1.73
  // Among discriminative candidates: accuracy, then the lower NCLL.
  const std::vector<char> all = {1, 1, 1, 1}, none = {0, 0, 0, 0};
  EXPECT_EQ(ChooseCandidate({0.5, 0.5, 0.1}, {2.0, 1.0, 1.0}, {all, all, none}, {false, false, true}), 1u);
  // Only generative candidates, or only discriminative ones.
  EXPECT_EQ(ChooseCandidate({0.5}, {1.0}, {{1}}, {true}), 0u);
  EXPECT_EQ(ChooseCandidate({0.5, 0.7}, {1.0, 1.0}, {{1}, {1}}, {false, false}), 1u);
}

// Offline: every candidate is tried, one is kept, and the report says which.
TEST(TrainerTest, OfflineKeepsTheBestOnHeldOutTrainingDocuments) {
  auto docs = Corpus(900, 1, false);
  TrainerConfig cfg;
  cfg.candidates = NcllAndNll();
  TrainReport rep;
  auto m = Trainer::TrainOffline(Factory(testing::BuiltinFamily("multinomial"), 30, 3, 900), cfg, docs, &rep);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(rep.mode, "offline");
  EXPECT_NEAR(static_cast<double>(rep.validation_documents), 90.0, 2.0);  // 10 % of each class, rounded
  ASSERT_EQ(rep.candidates.size(), 3u);
  int kept = 0;
  for (const auto& c : rep.candidates) {
    kept += c.kept;
    EXPECT_GT(c.validation_accuracy, 0.5) << c.label;
    if (c.kept) {
      EXPECT_EQ(c.label, rep.kept);
    }
  }
  EXPECT_EQ(kept, 1);
  EXPECT_EQ((*m)->loss_plugin()->name, rep.kept.substr(0, rep.kept.find(' ')));
  // The same seed gives the same model, bit for bit.
  TrainReport rep2;
  auto m2 = Trainer::TrainOffline(Factory(testing::BuiltinFamily("multinomial"), 30, 3, 900), cfg, docs, &rep2);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ((*m)->stats().raw(), (*m2)->stats().raw());
  EXPECT_EQ(rep.ToJson(), rep2.ToJson());
}

// Streaming over a class-grouped stream: every document is learned exactly
// once by the kept model, and the held-out reservoir covers every class.
TEST(TrainerTest, StreamingLearnsEveryDocumentOnceAndSeesEveryClass) {
  auto docs = Corpus(900, 2, true);
  TrainerConfig cfg;
  cfg.candidates = NcllAndNll();
  auto t = Trainer::Create(Factory(testing::BuiltinFamily("multinomial"), 30, 3, 900), cfg);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const auto& d : docs) ASSERT_TRUE((*t)->Learn(d).ok());
  TrainReport rep;
  auto m = (*t)->Finish(&rep);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(rep.mode, "streaming");
  EXPECT_EQ((*m)->learner_state().updates, 900u);
  EXPECT_EQ(rep.validation_documents, 90u);  // 1 in 10, under the per-class cap
  // The kept model predicts every class (a grouped stream's NCLL learner
  // alone would predict the last one).
  auto state = (*m)->NewScoringState();
  std::vector<int> predicted(3, 0);
  std::vector<double> s(3);
  for (const auto& d : Corpus(300, 9, false)) {
    ASSERT_TRUE((*m)->Score(d.View(), state->get(), s.data()).ok());
    predicted[std::max_element(s.begin(), s.end()) - s.begin()]++;
  }
  for (int k = 0; k < 3; ++k) EXPECT_GT(predicted[k], 50) << k;
}

// --skip-bad through the Trainer: documents a learner refuses are reported
// once and left out; an error that is not the document's fault still stops.
TEST(TrainerTest, OfflineSkipsRefusedDocumentsWhenAsked) {
  auto fam = LoadPluginFile(std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/sdem_commit_fails.so", TRIB_KIND_FAMILY);
  ASSERT_TRUE(fam.ok()) << fam.status().ToString();
  std::vector<DocumentBuffer> docs;
  std::mt19937_64 rng(4);
  for (size_t i = 0; i < 200; ++i) {
    const int64_t y = static_cast<int64_t>(rng() % 3);
    const uint32_t t = i % 25 == 3 ? 0 : static_cast<uint32_t>(2 + y);  // 8 documents with term 0
    docs.push_back(testing::MakeDoc(i, y, {{t, 1.0}, {static_cast<uint32_t>(5 + y), 1.0}}));
  }
  TrainerConfig cfg;
  CandidateSpec a{"ncll", "ncll", {}, {}, false};
  cfg.candidates = {a};
  cfg.epochs = 2;
  TrainReport rep;
  auto strict = Trainer::TrainOffline(Factory(*fam, 8, 3, 200), cfg, docs, &rep);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("refused term 0"), std::string::npos) << strict.status().ToString();
  std::vector<std::string> reported;
  cfg.on_bad = [&](const Status& st) { reported.push_back(st.ToString()); };
  auto lenient = Trainer::TrainOffline(Factory(*fam, 8, 3, 200), cfg, docs, &rep);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_EQ(reported.size(), 8u);  // once each, not once per pass
  EXPECT_EQ((*lenient)->learner_state().updates, 2u * (200 - 8));
  // Term 1 breaks commit (INTERNAL): not a bad document, training stops.
  docs[10] = testing::MakeDoc(10, 0, {{1, 1.0}});
  auto broken = Trainer::TrainOffline(Factory(*fam, 8, 3, 200), cfg, docs, &rep);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("broken on term 1"), std::string::npos) << broken.status().ToString();
}

}  // namespace
}  // namespace tributary
