// Snapshots: exact round trip, and refusal of truncated, corrupted, foreign
// and version-mismatched files with a clear reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "test_util.h"
#include "tributary/checksum.h"
#include "tributary/huge_pages.h"
#include "tributary/sdem_learner.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

using testing::ReadFile;
using testing::WriteFile;

std::unique_ptr<Model> TrainedModel(const std::string& loss) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(50, 3));
  auto m =
      Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss(loss), *schema, {{"prior", "log"}});
  EXPECT_TRUE(m.ok());
  // The hinge model carries a loss option, which the snapshot must keep.
  if (loss == "hinge") {
    EXPECT_TRUE((*m)->SetLoss(testing::BuiltinLoss(loss), {{"margin", "3"}}).ok());
  }
  (*m)->learner_state().effective_size = 200;
  (*m)->learner_state().schedule.lambda = 0.1;
  auto l = SdemLearner::Create(m->get());
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    auto d = testing::MakeDoc(i, static_cast<int64_t>(rng() % 3),
                              {{static_cast<uint32_t>(rng() % 50), 1.0}, {static_cast<uint32_t>(rng() % 50), 2.0}});
    EXPECT_TRUE((*l)->Learn(d.View()).ok());
  }
  return std::move(m).value();
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("snapshot");
    model_ = TrainedModel("hinge");
    path_ = dir_ + "/model.trib";
    ASSERT_TRUE(model_->Save(path_).ok());
  }
  Status LoadStatus(const std::string& p) {
    auto r = Model::Load(p, testing::BuiltinRegistry());
    return r.status();
  }
  std::string dir_, path_;
  std::unique_ptr<Model> model_;
};

TEST_F(SnapshotTest, RoundTripIsExact) {
  auto r = Model::Load(path_, testing::BuiltinRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Model& m = **r;
  EXPECT_EQ(m.stats().raw(), model_->stats().raw());  // bit for bit
  ASSERT_EQ(m.stats().blocks().size(), model_->stats().blocks().size());
  for (size_t b = 0; b < m.stats().blocks().size(); ++b) {
    EXPECT_EQ(m.stats().blocks()[b].scale, model_->stats().blocks()[b].scale);
    EXPECT_EQ(m.stats().blocks()[b].shift, model_->stats().blocks()[b].shift);
  }
  EXPECT_EQ(m.learner_state().updates, model_->learner_state().updates);
  EXPECT_EQ(m.learner_state().schedule.lambda, 0.1);
  EXPECT_EQ(m.schema().classes(), model_->schema().classes());
  EXPECT_EQ(m.schema().vocabulary(), model_->schema().vocabulary());
  EXPECT_EQ(m.family_options(), model_->family_options());
  EXPECT_EQ(m.loss_plugin()->name, "hinge");
  EXPECT_EQ(m.loss_options(), (Options{{"margin", "3"}}));
  // Same predictions, and training resumes identically.
  auto d = testing::MakeDoc(0, 1, {{3, 1.0}, {7, 4.0}});
  auto s1 = m.NewScoringState();
  auto s2 = model_->NewScoringState();
  std::vector<double> a(3), b(3);
  ASSERT_TRUE(m.Score(d.View(), s1->get(), a.data()).ok());
  ASSERT_TRUE(model_->Score(d.View(), s2->get(), b.data()).ok());
  EXPECT_EQ(a, b);
  auto copy = std::move(r).value();
  auto l1 = SdemLearner::Create(copy.get());
  auto l2 = SdemLearner::Create(model_.get());
  ASSERT_TRUE((*l1)->Learn(d.View()).ok());
  ASSERT_TRUE((*l2)->Learn(d.View()).ok());
  EXPECT_EQ(copy->stats().raw(), model_->stats().raw());
}

// Serialize writes the vocabulary, the statistics and the family's cache
// after the rest of the message, straight from the model's strings and
// arrays: the payload must still parse, with protobuf's own parser, as the ModelSnapshot
// it stands for (every field, the arrays bit for bit), and protobuf's own
// encoding of that message must load as the same model.
// A snapshot is read no further than its header says (issue 41 item 10:
// `eval --model /dev/zero` grew to several GB): /dev/zero is refused after
// its first bytes, and an extended file is refused without reading the rest.
TEST_F(SnapshotTest, LoadReadsNoMoreThanTheHeaderSays) {
  auto z = Model::Load("/dev/zero", testing::BuiltinRegistry());
  ASSERT_TRUE(z.status().IsCorruption()) << z.status().ToString();
  EXPECT_THAT(z.status().message(), HasSubstr("not a Tributary snapshot"));
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"),
                         *ModelSchema::FromProto(testing::TextSchema(30, 2)), {}, 1);
  ASSERT_TRUE(m.ok());
  const std::string path = testing::TempDir("snapshot_bounded") + "/m.trib";
  ASSERT_TRUE((*m)->Save(path).ok());
  std::string bytes = ReadFile(path);
  WriteFile(path, bytes + std::string(1 << 20, 'x'));  // a megabyte past its end
  auto extended = Model::Load(path, testing::BuiltinRegistry());
  ASSERT_TRUE(extended.status().IsCorruption()) << extended.status().ToString();
  EXPECT_THAT(extended.status().message(), HasSubstr("truncated or extended"));
  WriteFile(path, bytes);
  EXPECT_TRUE(Model::Load(path, testing::BuiltinRegistry()).ok());
}

// A checksum-valid snapshot whose learner state no learner writes is refused
// by name (issue 41 item 9: a schedule kind of 99 loaded, and
// `train --resume` then used it; an infinite n predicted 0).
TEST_F(SnapshotTest, ALearnerStateNoLearnerWritesIsRefused) {
  const std::string path = testing::TempDir("snapshot_learner") + "/m.trib";
  struct Case {
    const char* what;
    void (*mutate)(LearnerState*);
  };
  const Case cases[] = {
      {"kind 99 is unknown", [](LearnerState* ls) { ls->schedule.kind = static_cast<StepSchedule::Kind>(99); }},
      {"rho is 7",
       [](LearnerState* ls) {
         ls->schedule.kind = StepSchedule::Kind::kConstant;
         ls->schedule.rho = 7;
       }},
      {"effective data-set size n is inf",
       [](LearnerState* ls) { ls->effective_size = std::numeric_limits<double>::infinity(); }},
      {"effective data-set size n is -1", [](LearnerState* ls) { ls->effective_size = -1; }},
  };
  for (const Case& c : cases) {
    auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"),
                           *ModelSchema::FromProto(testing::TextSchema(30, 2)), {}, 1);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE((*m)->Save(path).ok());
    ASSERT_TRUE(Model::Load(path, testing::BuiltinRegistry()).ok()) << c.what;
    c.mutate(&(*m)->learner_state());
    ASSERT_TRUE((*m)->Save(path).ok()) << c.what;
    auto bad = Model::Load(path, testing::BuiltinRegistry());
    ASSERT_TRUE(bad.status().IsCorruption()) << c.what << ": " << bad.status().ToString();
    EXPECT_THAT(bad.status().message(), HasSubstr(c.what));
    EXPECT_THAT(bad.status().message(), HasSubstr("learner state"));
  }
}

// Checksum-valid snapshots whose values no learner writes (issue 41 item 9:
// model fuzzing found 46 such mutants that loaded and predicted null or
// uniform): a block shift of 1e308, a family cache entry of -1e308 or NaN.
TEST_F(SnapshotTest, ValuesNoLearnerWritesAreRefusedByAProbeDocument) {
  const std::string file = ReadFile(path_);
  struct Case {
    const char* what;
    std::function<void(v1::ModelSnapshot*)> mutate;
  };
  const std::vector<Case> cases = {
      {"block shift 1e308", [](v1::ModelSnapshot* s) { s->mutable_blocks(0)->set_shift(1e308); }},
      {"cache -1e308", [](v1::ModelSnapshot* s) { s->set_family_cache(0, -1e308); }},
      {"cache NaN", [](v1::ModelSnapshot* s) { s->set_family_cache(0, std::numeric_limits<double>::quiet_NaN()); }},
  };
  for (const Case& c : cases) {
    const std::string p = dir_ + "/mutant.trib";
    WriteFile(p, testing::ResealSnapshot(file, c.mutate));
    auto r = Model::Load(p, testing::BuiltinRegistry());
    ASSERT_FALSE(r.ok()) << c.what << " loaded";
    EXPECT_THAT(r.status().message(), HasSubstr("mutant.trib")) << c.what;
    if (std::string(c.what) != "cache NaN") {  // (that one the family's import refuses)
      EXPECT_TRUE(r.status().IsCorruption()) << c.what << ": " << r.status().ToString();
      EXPECT_THAT(r.status().message(), HasSubstr("scores a probe document")) << c.what;
    }
  }
  // The file as written loads (the probe is no obstacle to a learner's model).
  WriteFile(dir_ + "/resealed.trib", testing::ResealSnapshot(file, [](v1::ModelSnapshot*) {}));
  EXPECT_TRUE(Model::Load(dir_ + "/resealed.trib", testing::BuiltinRegistry()).ok());
}

TEST_F(SnapshotTest, ThePayloadIsTheModelSnapshotProtobufWouldWrite) {
  const std::string file = ReadFile(path_);
  ASSERT_GT(file.size(), 24u);
  const std::string payload = file.substr(20, file.size() - 24);
  v1::ModelSnapshot snap;
  ASSERT_TRUE(snap.ParseFromString(payload));
  const auto& raw = model_->stats().raw();
  ASSERT_EQ(static_cast<size_t>(snap.raw_size()), raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint64_t>(snap.raw(static_cast<int>(i))), std::bit_cast<uint64_t>(raw[i])) << i;
  }
  EXPECT_GT(snap.family_cache_size(), 0);  // the multinomial exports its cache
  EXPECT_EQ(snap.family().name(), "multinomial");
  EXPECT_EQ(snap.loss().name(), "hinge");
  EXPECT_EQ(snap.blocks_size(), static_cast<int>(model_->stats().blocks().size()));
  EXPECT_EQ(snap.learner().updates(), model_->learner_state().updates);
  // The vocabulary, written as a second occurrence of `schema`, merges into
  // the first: every term in order, next to the classes.
  const std::vector<std::string>& vocab = model_->schema().vocabulary();
  ASSERT_GT(vocab.size(), 1u);
  ASSERT_EQ(static_cast<size_t>(snap.schema().vocabulary_size()), vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) EXPECT_EQ(snap.schema().vocabulary(static_cast<int>(i)), vocab[i]);
  EXPECT_EQ(static_cast<size_t>(snap.schema().class_names_size()), model_->schema().classes().size());
  // Protobuf's canonical encoding of the same message, resealed, loads as
  // the same model.
  std::string canonical;
  ASSERT_TRUE(snap.SerializeToString(&canonical));
  // The same fields in another order, plus the second schema field's tag
  // and length (a few bytes; the first schema field's length shrinks by
  // the terms' share).
  EXPECT_GE(payload.size(), canonical.size() + 1);
  EXPECT_LE(payload.size(), canonical.size() + 6);
  const std::string p = dir_ + "/canonical.trib";
  WriteFile(p, testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) { *s = snap; }));
  auto r = Model::Load(p, testing::BuiltinRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->stats().raw(), raw);
  auto again = (*r)->Serialize();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, file);  // and writes the file it came from
}

// Statistics of 1 MiB and more live in huge pages (SufficientStats::RawValues);
// such a model saves, loads, copies and shrinks like a small one.
TEST_F(SnapshotTest, LargeStatisticsRoundTripExactly) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(60000, 3));
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_GE((*m)->stats().raw().size() * sizeof(double), huge_pages::kLargeBytes);
  auto l = SdemLearner::Create(m->get());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    auto d = testing::MakeDoc(i, static_cast<int64_t>(rng() % 3), {{static_cast<uint32_t>(rng() % 60000), 1.0}});
    ASSERT_TRUE((*l)->Learn(d.View()).ok());
  }
  const std::string p = dir_ + "/large.trib";
  ASSERT_TRUE((*m)->Save(p).ok());
  auto r = Model::Load(p, testing::BuiltinRegistry());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->stats().raw(), (*m)->stats().raw());
  SufficientStats copy = (*m)->stats();  // a copy in huge pages of its own
  EXPECT_NE(copy.raw().data(), (*m)->stats().raw().data());
  EXPECT_EQ(copy.raw(), (*m)->stats().raw());
  copy.raw().resize(10);  // large -> small, then small -> large
  copy.raw().shrink_to_fit();
  copy.raw().resize((*m)->stats().raw().size(), 1.5);
  EXPECT_EQ(copy.raw()[9], (*m)->stats().raw()[9]);
  EXPECT_EQ(copy.raw().back(), 1.5);
}

// A model resumed from a snapshot continues bit for bit as the uninterrupted
// one (the family's incremental caches travel in the snapshot).
TEST_F(SnapshotTest, ResumedTrainingEqualsUninterruptedTraining) {
  for (const char* loss : {"ncll", "nll"}) {
    SCOPED_TRACE(loss);
    auto a = TrainedModel(loss);
    std::string p = dir_ + "/resume.trib";
    ASSERT_TRUE(a->Save(p).ok());
    auto b = Model::Load(p, testing::BuiltinRegistry());
    ASSERT_TRUE(b.ok());
    auto la = SdemLearner::Create(a.get());
    auto lb = SdemLearner::Create(b->get());
    std::mt19937_64 rng(77);
    for (int i = 0; i < 300; ++i) {
      auto d = testing::MakeDoc(i, static_cast<int64_t>(rng() % 3),
                                {{static_cast<uint32_t>(rng() % 50), 1.0}, {static_cast<uint32_t>(rng() % 50), 3.0}});
      ASSERT_TRUE((*la)->Learn(d.View()).ok());
      ASSERT_TRUE((*lb)->Learn(d.View()).ok());
    }
    EXPECT_EQ(a->stats().raw(), (*b)->stats().raw());
  }
}

// Regression: totals of a class whose counts were all clamped back to zero
// can end a few ulps below zero; such a snapshot must still load. Garbage
// (NaN, wrong size) is refused.
TEST_F(SnapshotTest, CacheImportAcceptsRoundingResidueAndRefusesGarbage) {
  const auto& fv = model_->family().family();
  ASSERT_NE(fv.import_cache, nullptr);
  size_t n = 0;
  trib_error err{};
  ASSERT_EQ(fv.export_cache(model_->family_model(), nullptr, &n, &err), TRIB_OK);
  std::vector<double> cache(n);
  ASSERT_EQ(fv.export_cache(model_->family_model(), cache.data(), &n, &err), TRIB_OK);
  cache[0] = -5e-16;
  EXPECT_EQ(fv.import_cache(model_->family_model(), cache.data(), n, &err), TRIB_OK) << err.message;
  cache[0] = std::nan("");
  EXPECT_NE(fv.import_cache(model_->family_model(), cache.data(), n, &err), TRIB_OK);
  EXPECT_NE(fv.import_cache(model_->family_model(), cache.data(), n - 1, &err), TRIB_OK);
}

// A snapshot whose CRC is valid but whose statistics are not finite (saved
// from a diverged model, or crafted) is refused, naming the value.
TEST_F(SnapshotTest, NonFiniteStatisticsAreRefusedDespiteAValidChecksum) {
  model_->stats().raw()[7] = std::nan("");
  const std::string p = dir_ + "/nan.trib";
  ASSERT_TRUE(model_->Save(p).ok());
  Status st = LoadStatus(p);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("statistic #7 is nan (expected a finite number)"));
  model_->stats().raw()[7] = INFINITY;
  ASSERT_TRUE(model_->Save(p).ok());
  EXPECT_THAT(LoadStatus(p).message(), HasSubstr("statistic #7 is inf"));
}

// A negative count (statistic 7 is a word count of the multinomial family)
// with a valid checksum is refused naming it, not clamped into another
// model.
TEST_F(SnapshotTest, StatisticsOutsideTheFamilysDomainAreRefused) {
  const std::string p = dir_ + "/negative.trib";
  const double saved = model_->stats().raw()[7];
  model_->stats().raw()[7] = -5;
  ASSERT_TRUE(model_->Save(p).ok());
  Status st = LoadStatus(p);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("statistic #7 is -5.000000, outside what family 'multinomial' allows"));
  model_->stats().raw()[7] = saved;
  ASSERT_TRUE(model_->Save(p).ok());
  EXPECT_TRUE(LoadStatus(p).ok());
}

// Regression (found by tests/fuzz snapshot target): a snapshot with a valid
// CRC whose schema declares a huge hashed vocabulary, but holds the few
// statistics of a small one, is refused before the model allocates the
// statistics it declares (2^24 terms, the schema's cap, x 3 classes: 400 MB;
// the cap itself refuses larger hashed_dim, see bad_input_test).
TEST_F(SnapshotTest, DeclaredLayoutLargerThanTheStoredStatisticsIsRefusedBeforeAllocating) {
  v1::ModelSnapshot snap;
  const std::string sealed = testing::ResealSnapshot(ReadFile(path_), [&](v1::ModelSnapshot* s) {
    s->mutable_schema()->clear_vocabulary();
    s->mutable_schema()->set_hashed_dim(uint64_t{1} << 24);
    snap = *s;
  });
  ASSERT_FALSE(sealed.empty());
  const std::string p = dir_ + "/huge.trib";
  WriteFile(p, sealed);
  Status st = LoadStatus(p);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("statistics layout (" + std::to_string(snap.raw_size()) + " values)"));
  // multinomial: K class totals and K x V counts.
  EXPECT_THAT(st.message(), HasSubstr("does not match family 'multinomial' (" +
                                      std::to_string(uint64_t{3} + (uint64_t{3} << 24)) + " values"));
}

TEST_F(SnapshotTest, SaveIsAtomicAndLeavesNoTemporaryFiles) {
  ASSERT_TRUE(model_->Save(path_).ok());  // overwrite
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(model_->Save("/nonexistent/dir/model.trib").ok());
}

TEST_F(SnapshotTest, TruncatedFileRefused) {
  std::string data = ReadFile(path_);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{15}, data.size() / 2, data.size() - 1}) {
    std::string p = dir_ + "/trunc.trib";
    WriteFile(p, data.substr(0, keep));
    Status st = LoadStatus(p);
    ASSERT_FALSE(st.ok()) << keep;
    EXPECT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("trunc.trib"));
  }
  std::string p = dir_ + "/trunc.trib";
  WriteFile(p, data.substr(0, data.size() / 2));
  EXPECT_THAT(LoadStatus(p).message(), HasSubstr("truncated"));
}

TEST_F(SnapshotTest, CorruptedByteRefusedByChecksum) {
  std::string data = ReadFile(path_);
  data[data.size() / 2] ^= 0x10;
  std::string p = dir_ + "/corrupt.trib";
  WriteFile(p, data);
  Status st = LoadStatus(p);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_THAT(st.message(), HasSubstr("checksum mismatch"));
}

TEST_F(SnapshotTest, ForeignFileRefused) {
  std::string p = dir_ + "/foreign.trib";
  WriteFile(p,
            "\x7f"
            "ELF this is some other file format entirely");
  Status st = LoadStatus(p);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("not a Tributary snapshot"));
  EXPECT_TRUE(LoadStatus(dir_ + "/missing.trib").IsNotFound());
}

TEST_F(SnapshotTest, DifferentPluginVersionRefusedNamingBoth) {
  // A registry where "multinomial" resolves to the 2.0.0 fixture build.
  std::string fixtures = dir_ + "/v2";
  std::filesystem::create_directories(fixtures);
  std::filesystem::copy_file(std::string(TRIBUTARY_FIXTURE_PLUGIN_DIR) + "/multinomial_v2.so",
                             fixtures + "/multinomial_v2.so");
  PluginRegistry reg({fixtures, PluginRegistry::BuiltinPluginDir()}, false);
  reg.Scan();
  auto r = Model::Load(path_, reg);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("version 1.2.0"));
  EXPECT_THAT(r.status().message(), HasSubstr("is version 2.0.0"));
}

// Semantic versions: the plugin (multinomial 1.2.0, loss hinge 1.1.0) reads
// snapshots of its major version written by the same or an older minor and
// patch version, and refuses the others naming the rule.
TEST_F(SnapshotTest, OlderMinorVersionsLoadNewerOrOtherMajorsAreRefused) {
  const std::string file = ReadFile(path_);
  ASSERT_EQ(testing::BuiltinFamily("multinomial")->version, "1.2.0");
  for (const auto& [version, loads] : std::vector<std::pair<std::string, bool>>{{"1.0.0", true},
                                                                                {"1.1.0", true},
                                                                                {"1.2.0", true},
                                                                                {"1.0.9", true},
                                                                                {"1.2.1", false},
                                                                                {"1.3.0", false},
                                                                                {"0.9.0", false},
                                                                                {"2.0.0", false},
                                                                                {"1.1", false},
                                                                                {"1.0.0-rc1", false}}) {
    SCOPED_TRACE(version);
    const std::string p = dir_ + "/v.trib";
    const std::string v = version;  // clang 14 cannot capture a structured binding
    WriteFile(p, testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) { s->mutable_family()->set_version(v); }));
    Status st = LoadStatus(p);
    if (loads) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_THAT(st.message(), HasSubstr("written by family 'multinomial' version " + version));
      EXPECT_THAT(st.message(), HasSubstr("a plugin reads snapshots written by its own major version"));
    }
  }
  // The loss's version follows the same rule.
  WriteFile(dir_ + "/l.trib",
            testing::ResealSnapshot(file, [](v1::ModelSnapshot* s) { s->mutable_loss()->set_version("1.0.0"); }));
  EXPECT_TRUE(LoadStatus(dir_ + "/l.trib").ok());
  WriteFile(dir_ + "/l.trib",
            testing::ResealSnapshot(file, [](v1::ModelSnapshot* s) { s->mutable_loss()->set_version("3.0.0"); }));
  EXPECT_THAT(LoadStatus(dir_ + "/l.trib").message(), HasSubstr("written by loss 'hinge' version 3.0.0"));
}

}  // namespace
}  // namespace tributary
