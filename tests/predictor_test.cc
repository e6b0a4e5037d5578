// Predictor (predictor.h) and frozen scoring (ABI 1.6): the multinomial
// family's frozen table scores every document as score() does, to rounding,
// for every kind of count and for statistics outside the product pass's
// range; the Predictor builds the table only once the scoring
// has cost about as much; families without frozen scoring are scored
// through Model::Score; a term the table does not hold is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/predictor.h"
#include "tributary/schema.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> NewModel(const v1::Schema& proto, const std::string& family, const std::string& loss,
                                Options options = {}) {
  auto schema = ModelSchema::FromProto(proto);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily(family), testing::BuiltinLoss(loss), *schema, std::move(options), 3);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Documents of 1..30 distinct terms over `vocab` terms, label = the class
// whose slice of the vocabulary most of its terms come from; counts of every
// kind Score treats apart: 1, small integers (2..8, the product pass's
// repeated factors), larger integers and fractions.
std::vector<DocumentBuffer> Docs(size_t n, uint32_t vocab, uint32_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<DocumentBuffer> out;
  const double counts[] = {1, 1, 1, 1, 2, 3, 5, 8, 9, 40, 0.5, 2.25};
  for (size_t i = 0; i < n; ++i) {
    const uint32_t k = static_cast<uint32_t>(rng() % classes);
    const uint32_t terms = 1 + static_cast<uint32_t>(rng() % 30);
    std::vector<std::pair<uint32_t, double>> t;
    for (uint32_t j = 0; j < terms; ++j) {
      const uint32_t w = rng() % 4 != 0 ? (k * (vocab / classes) + static_cast<uint32_t>(rng() % (vocab / classes)))
                                        : static_cast<uint32_t>(rng() % vocab);
      t.emplace_back(w, counts[rng() % std::size(counts)]);
    }
    out.push_back(testing::MakeDoc(i, k, t));
  }
  return out;
}

void Train(Model* m, const std::vector<DocumentBuffer>& docs, int passes = 1) {
  auto learner = Learner::Create(m, LearnerOptions());
  ASSERT_TRUE(learner.ok()) << learner.status().ToString();
  for (int p = 0; p < passes; ++p) {
    for (const auto& d : docs) ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  }
}

// Every document's scores through `p` against Model::Score: within `rel`
// of the document's largest magnitude, -inf where Score gives -inf.
void ExpectScoresLikeModel(const Model& m, Predictor* p, const std::vector<DocumentBuffer>& docs, double rel) {
  auto state = m.NewScoringState();
  ASSERT_TRUE(state.ok());
  const uint32_t K = m.num_outputs();
  std::vector<double> want(K), got(K);
  for (const auto& d : docs) {
    ASSERT_TRUE(m.Score(d.View(), state->get(), want.data()).ok());
    ASSERT_TRUE(p->Score(d.View(), got.data()).ok());
    double largest = 0;
    for (double w : want) {
      if (std::isfinite(w)) largest = std::max(largest, std::fabs(w));
    }
    for (uint32_t k = 0; k < K; ++k) {
      if (std::isinf(want[k])) {
        EXPECT_EQ(got[k], want[k]) << d.Name() << " class " << k;
      } else {
        EXPECT_NEAR(got[k], want[k], rel * largest) << d.Name() << " class " << k;
      }
    }
  }
}

TEST(PredictorTest, FrozenMultinomialScoresAsScoreDoes) {
  for (const char* loss : {"nll", "ncll", "hinge"}) {
    SCOPED_TRACE(loss);
    auto m = NewModel(testing::TextSchema(600, 7), "multinomial", loss);
    ASSERT_NE(m, nullptr);
    Train(m.get(), Docs(3000, 600, 7, 1), 2);
    auto p = Predictor::Create(m.get());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE((*p)->Freeze().ok());
    ASSERT_TRUE((*p)->frozen());
    // Each log rounded once per (term, class) against Score's products:
    // agreement to ~1e-15 of the largest score; 1e-13 leaves room.
    ExpectScoresLikeModel(*m, p->get(), Docs(500, 600, 7, 2), 1e-13);
  }
}

// The table's sums are held in registers a chunk of classes at a time (up to
// eight vectors, then the rest, then on AVX-512 a half vector): class counts
// whose padded width takes each of those paths at every vector width.
TEST(PredictorTest, FrozenMultinomialScoresAsScoreDoesForEveryWidthOfTheTable) {
  for (uint32_t classes : {1u, 3u, 11u, 39u, 70u}) {
    SCOPED_TRACE(classes);
    auto m = NewModel(testing::TextSchema(700, classes), "multinomial", "ncll");
    ASSERT_NE(m, nullptr);
    Train(m.get(), Docs(2000, 700, classes, 3), 1);
    auto p = Predictor::Create(m.get());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_TRUE((*p)->Freeze().ok());
    ASSERT_TRUE((*p)->frozen());
    ExpectScoresLikeModel(*m, p->get(), Docs(300, 700, classes, 4), 1e-13);
  }
}

// A 5-component mixture trained on `n` unlabelled documents, and a Predictor
// of it with its table built (null members on failure).
struct FrozenMixture {
  std::vector<DocumentBuffer> docs;
  std::unique_ptr<Model> model;
  std::unique_ptr<Predictor> predictor;
};
FrozenMixture MakeFrozenMixture(size_t n, uint64_t seed) {
  FrozenMixture f;
  f.model = NewModel(testing::TextSchema(300, 1), "multinomial-mixture", "nll", {{"components", "5"}});
  if (f.model == nullptr) return f;
  f.docs = Docs(n, 300, 5, seed);
  for (auto& d : f.docs) d.label = -1;
  Train(f.model.get(), f.docs);
  auto p = Predictor::Create(f.model.get());
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return f;
  EXPECT_TRUE((*p)->Freeze().ok());
  EXPECT_TRUE((*p)->frozen());
  f.predictor = std::move(p).value();
  return f;
}

TEST(PredictorTest, FrozenMixtureScoresAsScoreDoes) {
  FrozenMixture f = MakeFrozenMixture(1000, 3);
  ASSERT_NE(f.predictor, nullptr);
  ExpectScoresLikeModel(*f.model, f.predictor.get(), f.docs, 1e-13);
}

// What eval does for a latent family: frozen scoring, then Model::Score (the
// completion hook) on the Predictor's own state. score_frozen grows only part
// of the state's scratch; Score must size the rest (it read past an empty
// array before the fix: a segmentation fault in eval of a mixture whose
// table was built).
TEST(PredictorTest, ScoreAfterFrozenScoringOnTheSameState) {
  FrozenMixture f = MakeFrozenMixture(300, 5);
  ASSERT_NE(f.predictor, nullptr);
  auto fresh = f.model->NewScoringState();
  ASSERT_TRUE(fresh.ok());
  std::vector<double> frozen(5), after(5), want(5);
  for (const auto& d : f.docs) {
    ASSERT_TRUE(f.predictor->Score(d.View(), frozen.data()).ok());
    ASSERT_TRUE(f.model->Score(d.View(), f.predictor->state(), after.data()).ok());
    ASSERT_TRUE(f.model->Score(d.View(), fresh->get(), want.data()).ok());
    EXPECT_EQ(after, want) << d.Name();
  }
}

// Statistics outside the range of Score's product pass (which then takes its
// scalar path, one log per (term, class)): the table gives the same values.
TEST(PredictorTest, ExtremeStatisticsScoreAsScoreDoes) {
  auto m = NewModel(testing::TextSchema(50, 3), "multinomial", "ncll");
  ASSERT_NE(m, nullptr);
  Train(m.get(), Docs(200, 50, 3, 4));
  auto& raw = m->stats().raw();
  const auto& wb = m->stats().blocks()[1];
  const uint64_t S = wb.size / 50;  // row stride (>= classes)
  // mu = scale raw + shift abar of about 1e200 and 1e120 (> 2^100) for terms
  // 8 and 9 of class 2 (the family's caches are left as they were: Score and
  // the table read the same ones).
  raw[wb.offset + 8 * S + 2] = 1e200 / wb.scale;
  raw[wb.offset + 9 * S + 1] = 1e120 / wb.scale;
  auto p = Predictor::Create(m.get());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Freeze().ok());
  std::vector<DocumentBuffer> docs = {testing::MakeDoc(0, 0, {{8, 1}, {3, 2}}), testing::MakeDoc(1, 0, {{9, 1}}),
                                      testing::MakeDoc(2, 0, {{9, 3}, {1, 1}}),
                                      testing::MakeDoc(3, 0, {{7, 2}, {8, 1}, {9, 1.5}})};
  ExpectScoresLikeModel(*m, p->get(), docs, 1e-13);
}

TEST(PredictorTest, TableIsBuiltOnlyOnceTheScoringPaysForIt) {
  auto m = NewModel(testing::TextSchema(2000, 10), "multinomial", "ncll");
  ASSERT_NE(m, nullptr);
  auto docs = Docs(4000, 2000, 10, 5);
  Train(m.get(), docs);
  auto p = Predictor::Create(m.get());
  ASSERT_TRUE(p.ok());
  // The statistics hold about 20,000 values; a document costs (terms + 1) x
  // 10: the first few documents are scored without a table.
  std::vector<double> s(10);
  uint64_t work = 0;
  size_t i = 0;
  for (; i < docs.size() && !(*p)->frozen(); ++i) {
    ASSERT_TRUE((*p)->Score(docs[i].View(), s.data()).ok());
    if (!(*p)->frozen()) work += (docs[i].term_ids.size() + 1) * 10;
  }
  ASSERT_TRUE((*p)->frozen()) << "never built after " << i << " documents";
  EXPECT_GT(i, 10u);
  EXPECT_LT(work, m->stats().size());
  EXPECT_GE(work + (docs[i - 1].term_ids.size() + 1) * 10, m->stats().size());
  // From then on, through the table, still Score's values.
  ExpectScoresLikeModel(*m, p->get(), std::vector<DocumentBuffer>(docs.begin() + i, docs.begin() + i + 300), 1e-13);
}

TEST(PredictorTest, FamilyWithoutFrozenScoringIsScoredThroughModelScore) {
  auto m = NewModel(testing::RealSchema(2, 2), "gaussian", "nll");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->family().family().freeze, nullptr);
  std::vector<DocumentBuffer> docs;
  std::mt19937_64 rng(6);
  std::normal_distribution<double> noise;
  for (uint64_t i = 0; i < 500; ++i) {
    DocumentBuffer d;
    d.index = i;
    d.label = static_cast<int64_t>(i % 2);
    d.reals = {noise(rng) + (i % 2 ? 2.0 : -2.0), noise(rng)};
    docs.push_back(d);
  }
  Train(m.get(), docs);
  auto p = Predictor::Create(m.get());
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->Freeze().ok());
  EXPECT_FALSE((*p)->frozen());
  ExpectScoresLikeModel(*m, p->get(), docs, 0.0);  // the same call: bit for bit
}

// An open vocabulary's table holds the terms in use (not the room); open
// classes' padding is not scored. A term id past the vocabulary (the
// decoder never makes one) is refused by the table, naming it.
TEST(PredictorTest, OpenVocabularyAndClassesAndAnUnknownTerm) {
  v1::Schema proto;
  proto.set_open_vocabulary(true);
  for (const char* c : {"a", "b", "c"}) proto.add_class_names(c);
  auto m = NewModel(proto, "multinomial", "ncll");
  ASSERT_NE(m, nullptr);
  std::vector<std::string> names;
  for (int w = 0; w < 120; ++w) names.push_back("w" + std::to_string(w));
  ASSERT_TRUE(m->AddTerms(names).ok());
  ASSERT_TRUE(m->AddClass("d").ok());
  ASSERT_GT(m->vocab_capacity(), 120u);
  ASSERT_GT(m->class_capacity(), 4u);
  Train(m.get(), Docs(800, 120, 4, 7));
  auto p = Predictor::Create(m.get());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Freeze().ok());
  ASSERT_TRUE((*p)->frozen());
  ExpectScoresLikeModel(*m, p->get(), Docs(200, 120, 4, 8), 1e-13);
  std::vector<double> s(4);
  Status st = (*p)->Score(testing::MakeDoc(0, 0, {{120, 1}}).View(), s.data());
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("term id 120 >= vocabulary size 120"));
  EXPECT_THAT(st.message(), HasSubstr("score_frozen"));
}

}  // namespace
}  // namespace tributary
