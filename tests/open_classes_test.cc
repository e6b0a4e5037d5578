// Open-class streams (issue 13, item 4): adding a class costs O(one class's
// statistics) while the model has room (ABI 1.4 add_class), and the room
// grows geometrically, so a stream that brings a new class every few
// documents copies the model O(log classes) times, not once per class. The
// result is the model the copying path (grow_classes + rebuild) gives, up to
// rounding; snapshots keep the room and resume exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "test_util.h"
#include "tributary/learner.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

struct FamilyCase {
  std::string family;
  Options options;
  bool text;  // documents of terms (else three real features)
};

std::ostream& operator<<(std::ostream& os, const FamilyCase& c) { return os << c.family; }

constexpr uint32_t kVocab = 120;

v1::Schema OneClassSchema(const FamilyCase& c, uint32_t classes = 1) {
  return c.text ? testing::TextSchema(kVocab, classes) : testing::RealSchema(3, classes);
}

// Document i of class k: terms from class k's slice of the vocabulary (and a
// few anywhere), or reals around k.
DocumentBuffer MakeDocument(const FamilyCase& c, uint64_t i, uint32_t k, std::mt19937_64& rng) {
  DocumentBuffer d;
  d.index = i;
  d.id = "d" + std::to_string(i);
  d.label = k;
  if (c.text) {
    const uint32_t lo = (k * 7) % kVocab;
    for (int j = 0; j < 6; ++j) {
      const uint32_t t =
          j < 4 ? (lo + static_cast<uint32_t>(rng() % 7)) % kVocab : static_cast<uint32_t>(rng() % kVocab);
      d.term_ids.push_back(t);
      d.term_counts.push_back(1.0 + static_cast<double>(rng() % 2));
    }
    d.Canonicalize();
  } else {
    for (int j = 0; j < 3; ++j) {
      d.reals.push_back(0.3 * k + static_cast<double>(rng() % 1000) / 1000.0 - 0.5);
    }
  }
  return d;
}

// The family as it would be without add_class: every class goes through
// grow_classes (a new model, the statistics copied, rebuild).
std::shared_ptr<const Plugin> WithoutAddClass(const std::shared_ptr<const Plugin>& family) {
  auto copy = std::make_shared<Plugin>(*family);
  copy->vtable.family.add_class = nullptr;
  return copy;
}

// A model learning a stream whose labels keep bringing new classes, counting
// how often the statistics moved to a new buffer and how many values those
// moves copied.
struct Grower {
  std::unique_ptr<Model> model;
  std::unique_ptr<Learner> learner;
  int moves = 0;
  uint64_t copied = 0;

  Grower(const FamilyCase& c, std::shared_ptr<const Plugin> family, const std::string& loss, uint32_t classes = 1) {
    auto schema = ModelSchema::FromProto(OneClassSchema(c, classes));
    EXPECT_TRUE(schema.ok());
    schema->set_open_classes(true);
    auto m = Model::Create(std::move(family), testing::BuiltinLoss(loss), *schema, c.options, 3);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    model = std::move(m).value();
    model->learner_state().effective_size = 400;
    LearnerOptions lo;
    lo.seed = 9;
    auto l = Learner::Create(model.get(), lo);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    learner = std::move(l).value();
  }

  void AddClass(const std::string& name) {
    const double* before = model->stats().raw().data();
    const uint64_t size = model->stats().size();
    Status st = model->AddClass(name);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (model->stats().raw().data() != before) {
      ++moves;
      copied += size;
    }
  }

  void Learn(const DocumentBuffer& d) {
    Status st = learner->Learn(d.View());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::vector<double> Scores(const DocumentBuffer& d) const {
    auto state = model->NewScoringState(5);
    EXPECT_TRUE(state.ok());
    std::vector<double> out(model->num_outputs());
    Status st = model->Score(d.View(), state->get(), out.data());
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
};

// A class that joins the stream late starts where a class declared from the
// start and never seen would be (multinomial keeps its padding classes moving
// as untouched entries move, and the host keeps one spare for grow_classes
// to copy): open classes learn the model that declared classes learn, under
// NLL (whose first step, rho = 1, restarts every block: a new class used to
// start at raw zero, with the full initial prior pseudo-count a never-seen
// class had lost; 2.5 points of accuracy on fortunes). (NCLL's steps depend
// on p(k | x), which a model that does not know the future classes yet
// computes over fewer classes: there the two legitimately differ.)
TEST(OpenClassesTest, LateClassesLearnWhatDeclaredClassesLearn) {
  const FamilyCase c{"multinomial", {}, true};
  constexpr uint32_t kClasses = 12;
  {
    const std::string loss = "nll";
    auto declared_schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
    ASSERT_TRUE(declared_schema.ok());
    auto declared =
        Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss(loss), *declared_schema, {}, 3);
    ASSERT_TRUE(declared.ok());
    (*declared)->learner_state().effective_size = 400;
    (*declared)->learner_state().schedule.lambda = (*declared)->loss_plugin()->loss().default_lambda;
    auto ld = Learner::Create(declared->get(), LearnerOptions{Engine::kAuto, 9});
    ASSERT_TRUE(ld.ok());
    Grower open(c, testing::BuiltinFamily("multinomial"), loss);
    open.model->learner_state().schedule.lambda = open.model->loss_plugin()->loss().default_lambda;
    std::mt19937_64 rng(23);
    DocumentBuffer probe;
    for (uint64_t i = 0; i < 400; ++i) {
      // Class k first appears at document 20 k.
      const uint32_t newest = static_cast<uint32_t>(std::min<uint64_t>(i / 20, kClasses - 1));
      const uint32_t k = i % 20 == 0 ? newest : static_cast<uint32_t>(rng() % (newest + 1));
      const std::string name = "c" + std::to_string(k);
      if (open.model->schema().ClassIndex(name) < 0) {
        open.AddClass(name);
        if (HasFatalFailure()) return;
      }
      DocumentBuffer d = MakeDocument(c, i, k, rng);
      d.label = open.model->schema().ClassIndex(name);
      open.Learn(d);
      d.label = (*declared)->schema().ClassIndex(name);
      ASSERT_TRUE((*ld)->Learn(d.View()).ok());
      if (HasFatalFailure()) return;
      probe = d;
    }
    ASSERT_EQ(open.model->num_classes(), kClasses);
    auto state = (*declared)->NewScoringState(5);
    ASSERT_TRUE(state.ok());
    std::vector<double> want(kClasses);
    ASSERT_TRUE((*declared)->Score(probe.View(), state->get(), want.data()).ok());
    const auto got = open.Scores(probe);
    for (uint32_t k = 0; k < kClasses; ++k) {
      const std::string name = "c" + std::to_string(k);
      const double w = want[(*declared)->schema().ClassIndex(name)], g = got[open.model->schema().ClassIndex(name)];
      EXPECT_NEAR(g, w, 1e-9 * std::max(1.0, std::abs(w))) << name;
    }
  }
}

class OpenClassesTest : public ::testing::TestWithParam<FamilyCase> {};

// 60 classes, one more every 6 documents (then 100 documents over all of
// them), learned by the in-place path and by the copying path side by side.
TEST_P(OpenClassesTest, AddingClassesCopiesTheModelLogarithmicallyOftenAndLearnsTheSameModel) {
  const FamilyCase& c = GetParam();
  for (const std::string loss : {"ncll", "hinge"}) {
    SCOPED_TRACE(loss);
    auto family = testing::BuiltinFamily(c.family);
    ASSERT_NE(family->family().add_class, nullptr) << c.family << " should add classes in place";
    Grower fast(c, family, loss), copying(c, WithoutAddClass(family), loss);
    std::mt19937_64 rng(17);
    constexpr uint32_t kClasses = 60;
    DocumentBuffer probe;
    for (uint64_t i = 0; i < kClasses * 6 + 100; ++i) {
      const uint32_t newest = static_cast<uint32_t>(std::min<uint64_t>(i / 6, kClasses - 1));
      const uint32_t k = i % 6 == 0 && i / 6 < kClasses ? newest : static_cast<uint32_t>(rng() % (newest + 1));
      const std::string name = "c" + std::to_string(k);
      if (fast.model->schema().ClassIndex(name) < 0) {
        fast.AddClass(name);
        copying.AddClass(name);
        if (HasFatalFailure()) return;
      }
      DocumentBuffer d = MakeDocument(c, i, 0, rng);
      d.label = fast.model->schema().ClassIndex(name);
      ASSERT_EQ(d.label, copying.model->schema().ClassIndex(name));
      fast.Learn(d);
      copying.Learn(d);
      if (HasFatalFailure()) return;
      probe = d;
    }
    ASSERT_EQ(fast.model->num_classes(), kClasses);
    ASSERT_EQ(copying.model->num_classes(), kClasses);
    // The copying path moves the model for every class but the first; room
    // growing by half each time moves it ~log_1.5(60) times, copying a
    // geometric series: less than 3x the final model in all.
    EXPECT_EQ(copying.moves, static_cast<int>(kClasses - 1));
    EXPECT_LE(fast.moves, 9);
    EXPECT_LT(fast.copied, 3 * fast.model->stats().size());
    EXPECT_GE(fast.model->class_capacity(), kClasses);
    EXPECT_LT(fast.model->class_capacity(), kClasses * 3 / 2 + 2);
    // The same model up to rounding (the copying path's rebuild re-sums the
    // caches in another order).
    const auto a = fast.Scores(probe), b = copying.Scores(probe);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_NEAR(a[k], b[k], 1e-9 * std::max(1.0, std::abs(b[k]))) << "class " << k;
    }
  }
}

// A model saved with room for more classes keeps it: the loaded model adds
// the next class in place and learns on bit for bit as the uninterrupted one.
TEST_P(OpenClassesTest, SnapshotKeepsTheRoomAndResumesExactly) {
  const FamilyCase& c = GetParam();
  Grower a(c, testing::BuiltinFamily(c.family), "ncll");
  std::mt19937_64 rng(4);
  for (uint32_t k = 1; k < 4; ++k) a.AddClass("c" + std::to_string(k));  // room: 4, then 6
  ASSERT_EQ(a.model->num_classes(), 4u);
  ASSERT_EQ(a.model->class_capacity(), 6u);
  for (uint64_t i = 0; i < 60; ++i) a.Learn(MakeDocument(c, i, static_cast<uint32_t>(rng() % 4), rng));
  const std::string dir = testing::TempDir("open_classes_" + c.family);
  ASSERT_TRUE(a.model->Save(dir + "/m.trib").ok());
  auto loaded = Model::Load(dir + "/m.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Model& b = **loaded;
  EXPECT_EQ(b.class_capacity(), 6u);
  ASSERT_EQ(b.stats().raw(), a.model->stats().raw());
  auto lb = Learner::Create(&b, LearnerOptions{Engine::kAuto, 9});
  ASSERT_TRUE(lb.ok());
  // Both add the fifth class in place (no move: a sixth stays spare) and
  // learn the same documents.
  const double* before = b.stats().raw().data();
  a.AddClass("c4");
  ASSERT_TRUE(b.AddClass("c4").ok());
  EXPECT_EQ(b.stats().raw().data(), before);
  EXPECT_EQ(a.moves, 1);
  for (uint64_t i = 60; i < 120; ++i) {
    const DocumentBuffer d = MakeDocument(c, i, static_cast<uint32_t>(rng() % 5), rng);
    a.Learn(d);
    ASSERT_TRUE((*lb)->Learn(d.View()).ok());
  }
  EXPECT_EQ(b.stats().raw(), a.model->stats().raw());
}

// A live stream's schema names no class (its labels arrive with its
// documents): a model with open classes starts with none and room for a few,
// and learns what a model that knew the first class learns. Without open
// classes such a schema is refused, naming what is missing.
TEST_P(OpenClassesTest, AnOpenSchemaWithoutClassesStartsEmptyAndLearnsTheSameModel) {
  const FamilyCase& c = GetParam();
  Grower empty(c, testing::BuiltinFamily(c.family), "ncll", 0), first(c, testing::BuiltinFamily(c.family), "ncll", 1);
  ASSERT_EQ(empty.model->num_classes(), 0u);
  EXPECT_GE(empty.model->class_capacity(), 4u);
  empty.AddClass("c0");
  std::mt19937_64 rng(5), rng2(5);
  for (uint64_t i = 0; i < 40; ++i) {
    const uint32_t k = static_cast<uint32_t>(i % 3);
    if (i == 1 || i == 2) {
      empty.AddClass("c" + std::to_string(k));
      first.AddClass("c" + std::to_string(k));
    }
    empty.Learn(MakeDocument(c, i, k, rng));
    first.Learn(MakeDocument(c, i, k, rng2));
  }
  const DocumentBuffer probe = MakeDocument(c, 99, 2, rng);
  const std::vector<double> a = empty.Scores(probe), b = first.Scores(probe);
  ASSERT_EQ(a.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-9 * std::max(1.0, std::abs(b[k]))) << k;

  auto closed = ModelSchema::FromProto(OneClassSchema(c, 0));
  ASSERT_TRUE(closed.ok());
  auto m = Model::Create(testing::BuiltinFamily(c.family), testing::BuiltinLoss("ncll"), *closed, c.options, 3);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("needs >= 1 class, or room for classes (open classes)"));
}

INSTANTIATE_TEST_SUITE_P(Families, OpenClassesTest,
                         ::testing::Values(FamilyCase{"multinomial", {}, true}, FamilyCase{"gaussian", {}, false},
                                           FamilyCase{"lda-classifier", {{"topics", "2"}}, true}),
                         [](const ::testing::TestParamInfo<FamilyCase>& p) {
                           std::string n = p.param.family;
                           for (auto& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

using testing::ReadFile;
using testing::WriteFile;

class OpenClassesSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("open_classes_snapshot");
    grower_ =
        std::make_unique<Grower>(FamilyCase{"multinomial", {}, true}, testing::BuiltinFamily("multinomial"), "ncll");
    for (uint32_t k = 1; k < 5; ++k) grower_->AddClass("c" + std::to_string(k));
    ASSERT_EQ(grower_->model->class_capacity(), 6u);
    std::mt19937_64 rng(2);
    for (uint64_t i = 0; i < 40; ++i) {
      grower_->Learn(MakeDocument(FamilyCase{"multinomial", {}, true}, i, static_cast<uint32_t>(rng() % 5), rng));
    }
    path_ = dir_ + "/m.trib";
    ASSERT_TRUE(grower_->model->Save(path_).ok());
  }
  Status LoadStatus(const std::string& p) { return Model::Load(p, testing::BuiltinRegistry()).status(); }
  std::string dir_, path_;
  std::unique_ptr<Grower> grower_;
};

// The room is padding at raw zero; anything else there was not written by a
// learner (the family's rebuild sets it to zero, Load compares).
// Padding holds what a class never seen holds (rebuild checks it like any
// entry): a value the check-step would move is not something a learner wrote.
TEST_F(OpenClassesSnapshotTest, PaddingOutsideTheFeasibleSetIsRefused) {
  // multinomial: class counts at 0..5, the sixth (index 5) is padding; raw
  // >= -alpha_bar (= -1) is feasible.
  grower_->model->stats().raw()[5] = -5;
  const std::string p = dir_ + "/padding.trib";
  ASSERT_TRUE(grower_->model->Save(p).ok());
  Status st = LoadStatus(p);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("statistic #5 is -5.000000, outside what family 'multinomial' allows"));
}

TEST_F(OpenClassesSnapshotTest, ClassCapacityIsSavedOnlyWhenThereIsRoomAndCheckedOnLoad) {
  const std::string file = ReadFile(path_);
  uint32_t saved = 0;
  ASSERT_FALSE(testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) { saved = s->class_capacity(); }).empty());
  EXPECT_EQ(saved, 6u);
  // Fewer than the schema's classes.
  const std::string small = dir_ + "/small.trib";
  WriteFile(small, testing::ResealSnapshot(file, [](v1::ModelSnapshot* s) { s->set_class_capacity(2); }));
  Status st = LoadStatus(small);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("class_capacity 2 is invalid (the schema has 5 classes"));
  // More than growth can have given: refused before the family allocates
  // for it (the CI fuzzer's 2^32 - 1 made lda-classifier's create reserve
  // 64 GB).
  for (uint32_t huge : {8u, 4000000u, 0xffffffffu}) {
    const std::string big = dir_ + "/big.trib";
    WriteFile(big, testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) { s->set_class_capacity(huge); }));
    st = LoadStatus(big);
    ASSERT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("class_capacity " + std::to_string(huge) +
                                        " is invalid (a model with 5 classes has room for at most 7)"));
  }
  // Room growth can give but the statistics do not hold.
  const std::string seven = dir_ + "/seven.trib";
  WriteFile(seven, testing::ResealSnapshot(file, [](v1::ModelSnapshot* s) { s->set_class_capacity(7); }));
  st = LoadStatus(seven);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("statistics layout (" + std::to_string(6 + 6 * kVocab) + " values)"));
  // A family without room for classes.
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, 2));
  auto mix = Model::Create(testing::BuiltinFamily("multinomial-mixture"), testing::BuiltinLoss("nll"), *schema, {});
  ASSERT_TRUE(mix.ok());
  const std::string mp = dir_ + "/mixture.trib";
  ASSERT_TRUE((*mix)->Save(mp).ok());
  const std::string mixfile = ReadFile(mp);
  ASSERT_FALSE(testing::ResealSnapshot(mixfile, [&](v1::ModelSnapshot* s) { saved = s->class_capacity(); }).empty());
  EXPECT_EQ(saved, 0u);
  WriteFile(mp, testing::ResealSnapshot(mixfile, [](v1::ModelSnapshot* s) { s->set_class_capacity(7); }));
  st = LoadStatus(mp);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("family 'multinomial-mixture' has no class capacity"));
}

// A step that restarts a block (f <= 0: gaussian's S and V blocks decay with
// nu = 1, so rho = 1 and n = 1 give f = 1 - rho (c + nu/n) <= 0) rewrites
// every entry of the block, padding included; the rebuild that follows puts
// the padding back at zero, so the next class still starts at the prior.
TEST(OpenClassesRestartTest, BlockRestartLeavesThePaddingAtZero) {
  const FamilyCase c{"gaussian", {}, false};
  auto family = testing::BuiltinFamily("gaussian");
  Grower fast(c, family, "nll"), copying(c, WithoutAddClass(family), "nll");
  for (Grower* g : {&fast, &copying}) {
    g->model->learner_state().effective_size = 1;
    g->model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
    g->model->learner_state().schedule.rho = 1.0;
    g->AddClass("c1");  // room for 4 (one spare)
  }
  ASSERT_EQ(fast.model->class_capacity(), 4u);
  std::mt19937_64 rng(8);
  for (uint64_t i = 0; i < 5; ++i) {
    const DocumentBuffer d = MakeDocument(c, i, static_cast<uint32_t>(i % 2), rng);
    fast.Learn(d);
    copying.Learn(d);
  }
  EXPECT_GT(fast.model->learner_state().materializations, 0u);
  // Gaussian layout with capacity 4 and J = 3: N at 0..3, S at 4..15, V at
  // 16..27; classes 2 and 3 are padding (gaussian keeps it at zero).
  const auto& raw = fast.model->stats().raw();
  for (uint64_t k = 2; k < 4; ++k) {
    EXPECT_EQ(raw[k], 0.0) << "N of padding class " << k;
    for (uint64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(raw[4 + k * 3 + j], 0.0) << "S of padding class " << k << ", feature " << j;
      EXPECT_EQ(raw[16 + k * 3 + j], 0.0) << "V of padding class " << k << ", feature " << j;
    }
  }
  fast.AddClass("c2");
  copying.AddClass("c2");
  const DocumentBuffer probe = MakeDocument(c, 99, 2, rng);
  const auto a = fast.Scores(probe), b = copying.Scores(probe);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(a[k], b[k], 1e-9 * std::max(1.0, std::abs(b[k]))) << "class " << k;
}

}  // namespace
}  // namespace tributary
