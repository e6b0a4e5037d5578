// Tests of the "lda-classifier" family: one LDA per class trained by sdEM
// with online collapsed Gibbs sampling (Masegosa et al. 2014, Appendix B,
// Algorithms 5-7). The real-corpus comparison of Figure 4 is in
// lda_classifier_real_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::BuiltinLoss;
using testing::BuiltinRegistry;
using testing::TextSchema;

// ---- Synthetic corpus ---------------------------------------------------------
// V = 60 terms in 6 blocks of 10. Class k has two topics: topic z puts 80% of
// its mass uniformly on block 2k + z and 20% uniformly on all 60 terms. A
// document of class k is mostly one of its topics (90% / 10%, either way with
// probability 1/2), 25 tokens. Classes are equally likely (chance = 1/3).
constexpr uint32_t kVocab = 60, kClasses = 3, kBlock = 10, kTokens = 25;

struct Corpus {
  std::vector<DocumentBuffer> docs;
};

Corpus MakeCorpus(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  Corpus c;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = static_cast<uint32_t>(rng() % kClasses);
    const uint32_t main_topic = static_cast<uint32_t>(rng() % 2);
    std::vector<std::pair<uint32_t, double>> terms;
    for (uint32_t t = 0; t < kTokens; ++t) {
      const uint32_t z = uniform() < 0.9 ? main_topic : 1 - main_topic;
      uint32_t term;
      if (uniform() < 0.8) {
        term = (2 * k + z) * kBlock + static_cast<uint32_t>(rng() % kBlock);
      } else {
        term = static_cast<uint32_t>(rng() % kVocab);
      }
      terms.push_back({term, 1.0});
    }
    DocumentBuffer d = testing::MakeDoc(i, k, terms);
    d.Canonicalize();
    c.docs.push_back(std::move(d));
  }
  return c;
}

const Corpus& Train() {
  static const Corpus* c = new Corpus(MakeCorpus(101, 1500));
  return *c;
}
const Corpus& Test() {
  static const Corpus* c = new Corpus(MakeCorpus(202, 600));
  return *c;
}

ModelSchema Schema(uint32_t vocab = kVocab, uint32_t classes = kClasses) {
  auto s = ModelSchema::FromProto(TextSchema(vocab, classes));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

std::unique_ptr<Model> NewModel(const std::string& loss, Options options = {}, uint64_t seed = 1) {
  auto m = Model::Create(BuiltinFamily("lda-classifier"), BuiltinLoss(loss), Schema(), std::move(options), seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

struct TrainSettings {
  std::string loss = "nll";
  Options options;
  int epochs = 2;
  double lambda = -1;  // < 0: the loss's default
  uint64_t seed = 1;   // model (init_stats) and learner (Gibbs) seed
};

// sdEM over the training corpus, n = |train|, shuffled epochs.
std::unique_ptr<Model> TrainModel(const TrainSettings& ts, const Corpus& train = Train()) {
  auto model = NewModel(ts.loss, ts.options, ts.seed);
  if (!model) return nullptr;
  model->learner_state().effective_size = static_cast<double>(train.docs.size());
  if (ts.lambda >= 0) model->learner_state().schedule.lambda = ts.lambda;
  auto learner = SdemLearner::Create(model.get(), ts.seed);
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  if (!learner.ok()) return nullptr;
  std::vector<size_t> order(train.docs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 shuffle_rng(ts.seed);
  for (int e = 0; e < ts.epochs; ++e) {
    if (e > 0) std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (size_t i : order) {
      Status st = (*learner)->Learn(train.docs[i].View());
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return nullptr;
    }
  }
  return model;
}

double Accuracy(const Model& model, const Corpus& data = Test()) {
  auto state = model.NewScoringState(5);
  EXPECT_TRUE(state.ok());
  std::vector<double> scores(model.num_classes());
  size_t correct = 0;
  for (const auto& d : data.docs) {
    Status st = model.Score(d.View(), state->get(), scores.data());
    EXPECT_TRUE(st.ok()) << st.ToString();
    const auto best = std::max_element(scores.begin(), scores.end()) - scores.begin();
    correct += best == d.label;
  }
  return static_cast<double>(correct) / static_cast<double>(data.docs.size());
}

// Layout (see lda_classifier.cc): C[k] at k, N[w][k][z] at K + (w K + k) Z + z.
uint64_t WordIndex(uint32_t w, uint32_t k, uint32_t z, uint32_t Z, uint32_t K = kClasses) {
  return K + (uint64_t{w} * K + k) * Z + z;
}

// beta_{k,z,w} from the statistics (O(V): tests only).
std::vector<double> Beta(const Model& m, uint32_t k, uint32_t z, uint32_t Z) {
  std::vector<double> b(m.schema().vocab_size());
  double total = 0;
  for (uint32_t w = 0; w < b.size(); ++w) total += b[w] = m.stats().Mu(WordIndex(w, k, z, Z, m.class_capacity()));
  for (double& x : b) x /= total;
  return b;
}

// Every statistic finite, raw >= -abar (the check-step: the data part
// N = scale (raw + abar) >= 0) and mu > 0.
void ExpectFeasible(const Model& m, const std::string& where) {
  for (uint64_t i = 0; i < m.stats().size(); ++i) {
    ASSERT_TRUE(std::isfinite(m.stats().raw()[i])) << where << ": raw[" << i << "]";
    const double abar = m.stats().blocks()[m.stats().BlockOf(i)].alpha_bar;
    ASSERT_GE(m.stats().raw()[i], -abar) << where << ": raw[" << i << "]";
    ASSERT_TRUE(std::isfinite(m.stats().Mu(i))) << where << ": mu[" << i << "]";
    ASSERT_GT(m.stats().Mu(i), 0.0) << where << ": mu[" << i << "]";
  }
}

bool SameStats(const Model& a, const Model& b) {
  const auto& ra = a.stats().raw();
  const auto& rb = b.stats().raw();
  if (ra.size() != rb.size()) return false;
  if (std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(double)) != 0) return false;
  for (size_t i = 0; i < a.stats().blocks().size(); ++i) {
    if (a.stats().blocks()[i].scale != b.stats().blocks()[i].scale) return false;
    if (a.stats().blocks()[i].shift != b.stats().blocks()[i].shift) return false;
  }
  return true;
}

// ---- Learning -------------------------------------------------------------------

// Every class's own LDA finds its two topics: for class k, one topic puts most
// of its mass on block 2k and the other on block 2k + 1. A family whose Gibbs
// step ignored the topic structure (e.g. uniform or identical topics) fails.
void ExpectTopicsRecovered(const Model& m, uint32_t Z, const std::string& where) {
  for (uint32_t k = 0; k < kClasses; ++k) {
    std::vector<int> block_of_topic(Z, -1);
    for (uint32_t z = 0; z < Z; ++z) {
      const std::vector<double> b = Beta(m, k, z, Z);
      double mass[2] = {0, 0};
      for (uint32_t h = 0; h < 2; ++h)
        for (uint32_t w = 0; w < kBlock; ++w) mass[h] += b[(2 * k + h) * kBlock + w];
      const int h = mass[0] > mass[1] ? 0 : 1;
      EXPECT_GT(mass[h], 0.6) << where << ": class " << k << " topic " << z << " mass on its block " << mass[h];
      block_of_topic[z] = h;
    }
    EXPECT_NE(block_of_topic[0], block_of_topic[1]) << where << ": class " << k << " has two copies of one topic";
  }
}

TEST(LdaClassifier, LearnsEachClassesTopicsAndClassifies) {
  for (const char* share : {"1", "0"}) {
    SCOPED_TRACE(std::string("share_word_topic=") + share);
    TrainSettings ts;
    ts.options = {{"share_word_topic", share}};
    auto model = TrainModel(ts);
    ASSERT_TRUE(model);
    ExpectFeasible(*model, "trained");
    const double acc = Accuracy(*model);
    std::printf("[synthetic] nll share_word_topic=%s accuracy=%.4f (chance 0.333)\n", share, acc);
    // Chance is 1/3; the classes' blocks are disjoint up to the 20% noise, so
    // a working classifier is near-perfect.
    EXPECT_GT(acc, 0.9);
    ExpectTopicsRecovered(*model, 2, std::string("share_word_topic=") + share);
  }
}

// The untrained model (statistics at the prior) is at chance: the accuracy
// above is learned, not an artefact of scoring.
TEST(LdaClassifier, UntrainedModelIsAtChance) {
  auto model = NewModel("nll");
  ASSERT_TRUE(model);
  const double acc = Accuracy(*model);
  EXPECT_LT(acc, 0.45);
}

TEST(LdaClassifier, DiscriminativeLossesLearn) {
  for (const char* loss : {"ncll", "hinge"}) {
    SCOPED_TRACE(loss);
    TrainSettings ts;
    ts.loss = loss;
    ts.lambda = 1e-3;
    auto model = TrainModel(ts);
    ASSERT_TRUE(model);
    ExpectFeasible(*model, loss);
    const double acc = Accuracy(*model);
    std::printf("[synthetic] %s accuracy=%.4f\n", loss, acc);
    EXPECT_GT(acc, 0.9);
  }
}

// More topics than the data has still learn (per class, extra topics share
// the blocks), and one topic per class is multinomial naive Bayes.
TEST(LdaClassifier, OtherTopicCounts) {
  for (const char* topics : {"1", "4"}) {
    TrainSettings ts;
    ts.options = {{"topics", topics}};
    auto model = TrainModel(ts);
    ASSERT_TRUE(model);
    const double acc = Accuracy(*model);
    std::printf("[synthetic] nll topics=%s accuracy=%.4f\n", topics, acc);
    EXPECT_GT(acc, 0.9) << "topics=" << topics;
  }
}

// ---- One step against Table 2 ------------------------------------------------------

// One NCLL step from the prior (c = 0, nu = 0: the map leaves mu alone, the
// step adds rho w_k E[s_k]): C[y] gains rho (1 - p(y|x)), every wrong class
// loses rho p(k|x) down to the check-step's floor N = 0 (raw = -abar: the
// whole initial pseudo-count may go, Algorithm 5 lines 16 and 23), and for
// each term of the document the topic counts of class y sum to
// rho (1 - p(y|x)) n_w (the expected topic assignments of its n_w occurrences
// sum to n_w). Terms not in the document are untouched.
TEST(LdaClassifier, NcllStepFollowsTable2) {
  for (const char* share : {"1", "0"}) {
    SCOPED_TRACE(share);
    auto model = NewModel("ncll", {{"topics", "3"}, {"share_word_topic", share}});
    ASSERT_TRUE(model);
    model->learner_state().effective_size = 100;
    auto learner = SdemLearner::Create(model.get(), 3);
    ASSERT_TRUE(learner.ok());
    DocumentBuffer d = testing::MakeDoc(0, 1, {{2, 3.0}, {17, 1.0}, {40, 2.0}});
    LearnOutcome out;
    ASSERT_TRUE((*learner)->Learn(d.View(), &out).ok());
    const std::vector<double>& s = (*learner)->last_scores();
    const double lse = std::log(std::exp(s[0]) + std::exp(s[1]) + std::exp(s[2]));
    const double py = std::exp(s[1] - lse);
    const double step = out.rho * (1 - py);
    ASSERT_GT(step, 0);
    const auto& raw = model->stats().raw();
    const double cabar = model->stats().blocks()[0].alpha_bar, wabar = model->stats().blocks()[1].alpha_bar;
    EXPECT_DOUBLE_EQ(raw[1], step);
    for (uint32_t k : {0u, 2u}) EXPECT_DOUBLE_EQ(raw[k], std::max(-out.rho * std::exp(s[k] - lse), -cabar)) << k;
    for (auto [w, n] : std::vector<std::pair<uint32_t, double>>{{2, 3.0}, {17, 1.0}, {40, 2.0}}) {
      double sum = 0, lost0 = 0, lost2 = 0;
      for (uint32_t z = 0; z < 3; ++z) {
        sum += raw[WordIndex(w, 1, z, 3)];
        for (uint32_t k : {0u, 2u}) {
          const double r = raw[WordIndex(w, k, z, 3)];
          EXPECT_GE(r, -wabar);
          EXPECT_LE(r, 0.0);
        }
        lost0 += raw[WordIndex(w, 0, z, 3)];
        lost2 += raw[WordIndex(w, 2, z, 3)];
      }
      EXPECT_NEAR(sum, step * n, 1e-12) << "term " << w;
      // Each wrong class loses rho p(k|x) n_w in all, less what the floor
      // (3 topics x eta / Z) stops.
      EXPECT_GE(lost0, std::max(-3 * wabar, -out.rho * std::exp(s[0] - lse) * n) - 1e-12) << "term " << w;
      EXPECT_GE(lost2, std::max(-3 * wabar, -out.rho * std::exp(s[2] - lse) * n) - 1e-12) << "term " << w;
    }
    // The floor fired: some entry lost its whole pseudo-count (raw = -abar).
    bool at_floor = false;
    for (uint32_t z = 0; z < 3; ++z) at_floor |= raw[WordIndex(2, 0, z, 3)] == -wabar;
    EXPECT_TRUE(at_floor);
    for (uint32_t w : {0u, 3u, 39u, 59u})
      for (uint32_t k = 0; k < kClasses; ++k)
        for (uint32_t z = 0; z < 3; ++z) EXPECT_EQ(raw[WordIndex(w, k, z, 3)], 0.0);
  }
}

// The score is log p(k) + sum_w n_w log sum_z phi_z beta_{k,z,w}: at the
// prior (every beta = 1/V, p(k) = 1/K) that is -log K - |d| log V exactly,
// whatever the sampled topics.
TEST(LdaClassifier, ScoreAtThePriorIsExact) {
  auto model = NewModel("nll", {{"topics", "2"}});
  ASSERT_TRUE(model);
  auto state = model->NewScoringState(9);
  ASSERT_TRUE(state.ok());
  DocumentBuffer d = testing::MakeDoc(0, -1, {{1, 2.0}, {5, 1.0}, {59, 4.0}});
  double s[kClasses];
  ASSERT_TRUE(model->Score(d.View(), state->get(), s).ok());
  for (double x : s) EXPECT_NEAR(x, -std::log(3.0) - 7 * std::log(60.0), 1e-9);
}

// ---- Determinism -------------------------------------------------------------------

TEST(LdaClassifier, SameSeedSameModelBitForBit) {
  for (const char* loss : {"nll", "ncll", "hinge"}) {
    SCOPED_TRACE(loss);
    Corpus small = MakeCorpus(7, 300);
    TrainSettings ts;
    ts.loss = loss;
    ts.lambda = 1e-3;
    ts.epochs = 1;
    ts.seed = 11;
    auto a = TrainModel(ts, small);
    auto b = TrainModel(ts, small);
    ts.seed = 12;
    auto c = TrainModel(ts, small);
    ASSERT_TRUE(a && b && c);
    EXPECT_TRUE(SameStats(*a, *b)) << "same seed, different statistics";
    EXPECT_FALSE(SameStats(*a, *c)) << "different seeds gave identical statistics: the sampler ignores its seed";
  }
}

TEST(LdaClassifier, ShareWordTopicChangesTheSampler) {
  Corpus small = MakeCorpus(7, 200);
  TrainSettings ts;
  ts.epochs = 1;
  ts.options = {{"share_word_topic", "1"}};
  auto a = TrainModel(ts, small);
  ts.options = {{"share_word_topic", "0"}};
  auto b = TrainModel(ts, small);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(SameStats(*a, *b));
  // Both learn (accuracy on the full test set after 200 documents).
  EXPECT_GT(Accuracy(*a), 0.8);
  EXPECT_GT(Accuracy(*b), 0.8);
}

// ---- Check-step ------------------------------------------------------------------------

// Constant, deliberately large steps (rho = 1 and 0.5; the schedule allows
// at most 1) with labels unrelated to the words, huge and tiny counts, and n
// from 1e-3 to 1e6: every statistic stays finite with raw >= 0 and mu > 0
// after every step, scores stay finite, the incremental totals agree with
// totals recomputed by rebuild(), and rebuild with rho = 0 leaves the
// statistics bit for bit.
TEST(LdaClassifier, CheckStepKeepsStatisticsFeasibleUnderHugeSteps) {
  Corpus noise = MakeCorpus(33, 120);
  for (const char* loss : {"nll", "ncll", "hinge"}) {
    for (double rho : {1.0, 0.5}) {
      for (double n : {1e-3, 1.0, 1e6}) {
        SCOPED_TRACE(std::string(loss) + " rho=" + std::to_string(rho) + " n=" + std::to_string(n));
        auto model = NewModel(loss, {{"samples", "2"}, {"burn_in", "1"}});
        ASSERT_TRUE(model);
        model->learner_state().effective_size = n;
        model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
        model->learner_state().schedule.rho = rho;
        auto learner = SdemLearner::Create(model.get(), 4);
        ASSERT_TRUE(learner.ok());
        for (size_t i = 0; i < noise.docs.size(); ++i) {
          DocumentBuffer d = noise.docs[i];
          d.label = static_cast<int64_t>((i * 7 / 5) % kClasses);  // unrelated to the words
          if (i % 10 == 3) d.term_counts[0] = 1e6;                 // a huge count
          if (i % 10 == 7) d.term_counts[0] = 1e-6;                // a tiny one
          Status st = (*learner)->Learn(d.View());
          ASSERT_TRUE(st.ok()) << "step " << i << ": " << st.ToString();
          if (i % 20 != 19) continue;
          ExpectFeasible(*model, "after step " + std::to_string(i));
          // Same scoring seed before and after a full rebuild (totals
          // recomputed from scratch): the same chains, the same scores up to
          // rounding of the totals.
          std::vector<double> before(kClasses), after(kClasses);
          {
            auto state = model->NewScoringState(77);
            ASSERT_TRUE(model->Score(noise.docs[0].View(), state->get(), before.data()).ok());
          }
          const auto raw = model->stats().raw();
          ASSERT_TRUE(model->Rebuild(trib_step{0.0, n, 0.0, model->learner_state().updates}).ok());
          ASSERT_EQ(0, std::memcmp(raw.data(), model->stats().raw().data(), raw.size() * sizeof(double)))
              << "rebuild with rho = 0 changed the statistics after step " << i;
          {
            auto state = model->NewScoringState(77);
            ASSERT_TRUE(model->Score(noise.docs[0].View(), state->get(), after.data()).ok());
          }
          for (uint32_t k = 0; k < kClasses; ++k) {
            ASSERT_TRUE(std::isfinite(before[k])) << "step " << i;
            EXPECT_NEAR(before[k], after[k], 1e-6 * std::fabs(after[k]) + 1e-9) << "step " << i << " class " << k;
          }
        }
      }
    }
  }
}

// ---- Snapshots, clones, classes -------------------------------------------------------

// Save after half the stream, load, and continue the original and the loaded
// model with learners of the same seed: bit-identical statistics at the end
// (the incremental totals travel in the snapshot through export_cache).
TEST(LdaClassifier, SnapshotResumeContinuesBitForBit) {
  for (const char* loss : {"nll", "ncll"}) {
    SCOPED_TRACE(loss);
    Corpus small = MakeCorpus(8, 400);
    auto model = NewModel(loss, {{"topics", "3"}});
    ASSERT_TRUE(model);
    model->learner_state().effective_size = 400;
    model->learner_state().schedule.lambda = 1e-3;
    {
      auto learner = SdemLearner::Create(model.get(), 21);
      ASSERT_TRUE(learner.ok());
      for (size_t i = 0; i < 200; ++i) ASSERT_TRUE((*learner)->Learn(small.docs[i].View()).ok());
    }
    const std::string path = testing::TempDir(std::string("ldac_snap_") + loss) + "/m.trib";
    ASSERT_TRUE(model->Save(path).ok());
    auto loaded = Model::Load(path, BuiltinRegistry());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    ASSERT_TRUE(SameStats(*model, **loaded));
    EXPECT_EQ((*loaded)->family_options(), model->family_options());
    auto la = SdemLearner::Create(model.get(), 22);
    auto lb = SdemLearner::Create(loaded->get(), 22);
    ASSERT_TRUE(la.ok() && lb.ok());
    for (size_t i = 200; i < 400; ++i) {
      ASSERT_TRUE((*la)->Learn(small.docs[i].View()).ok());
      ASSERT_TRUE((*lb)->Learn(small.docs[i].View()).ok());
    }
    EXPECT_TRUE(SameStats(*model, **loaded)) << "the resumed model diverged from the uninterrupted one";
    // A clone scores like the original.
    auto clone = model->Clone();
    ASSERT_TRUE(clone.ok());
    EXPECT_EQ(Accuracy(*model, small), Accuracy(**clone, small));
  }
}

TEST(LdaClassifier, GrowsClasses) {
  v1::Schema proto = TextSchema(kVocab, 2);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto m = Model::Create(BuiltinFamily("lda-classifier"), BuiltinLoss("nll"), *schema, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Model& model = **m;
  model.learner_state().effective_size = 100;
  {
    auto learner = SdemLearner::Create(&model);
    ASSERT_TRUE(learner.ok());
    for (size_t i = 0; i < 100; ++i) {
      if (Train().docs[i].label >= 2) continue;
      ASSERT_TRUE((*learner)->Learn(Train().docs[i].View()).ok());
    }
  }
  // beta of class 1 topic 0 before growth.
  const std::vector<double> before = Beta(model, 1, 0, 2);
  ASSERT_TRUE(model.AddClass("c2").ok());
  ASSERT_EQ(model.num_classes(), 3u);
  const std::vector<double> after = Beta(model, 1, 0, 2);
  for (size_t w = 0; w < before.size(); ++w) EXPECT_NEAR(before[w], after[w], 1e-12);
  auto learner = SdemLearner::Create(&model);
  ASSERT_TRUE(learner.ok());
  for (const auto& d : Train().docs) ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  EXPECT_GT(Accuracy(model), 0.9);
}

// ---- Options ---------------------------------------------------------------------------

TEST(LdaClassifier, RefusesBadOptions) {
  const std::vector<std::pair<Options, std::string>> cases = {
      {{{"topic", "2"}}, "topic"},
      {{{"topics", "0"}}, "topics"},
      {{{"topics", "two"}}, "topics"},
      {{{"topics", "-1"}}, "topics"},
      {{{"prior", "0"}}, "prior"},
      {{{"prior", "nan"}}, "prior"},
      {{{"class_prior", "-1"}}, "class_prior"},
      {{{"alpha", "0"}}, "alpha"},
      {{{"burn_in", "x"}}, "burn_in"},
      {{{"samples", "0"}}, "samples"},
      {{{"share_word_topic", "2"}}, "share_word_topic"},
      {{{"init", "random"}}, "init"},
  };
  for (const auto& [opts, key] : cases) {
    auto m = Model::Create(BuiltinFamily("lda-classifier"), BuiltinLoss("nll"), Schema(), opts);
    ASSERT_FALSE(m.ok()) << opts[0].first << "=" << opts[0].second << " was accepted";
    EXPECT_NE(m.status().ToString().find(key), std::string::npos) << m.status().ToString();
  }
  // The layout follows the options: K + V K Z statistics.
  auto m = NewModel("nll", {{"topics", "5"},
                            {"prior", "0.3"},
                            {"alpha", "0.2"},
                            {"burn_in", "0"},
                            {"samples", "1"},
                            {"init", "uniform"},
                            {"class_prior", "2"}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stats().size(), kClasses + uint64_t{kVocab} * kClasses * 5);
  EXPECT_DOUBLE_EQ(m->stats().blocks()[1].alpha_bar, 0.3 / 5);
  EXPECT_DOUBLE_EQ(m->stats().blocks()[0].alpha_bar, 2.0);
}

TEST(LdaClassifier, UniformInitAlsoLearns) {
  TrainSettings ts;
  ts.epochs = 1;
  ts.options = {{"init", "uniform"}, {"burn_in", "5"}};
  auto model = TrainModel(ts);
  ASSERT_TRUE(model);
  EXPECT_GT(Accuracy(*model), 0.9);
}

}  // namespace
}  // namespace tributary
