// The library's one-learner training job (training_job.h), without the
// command line: passes in arrival order and shuffled, threads, SEP restarts,
// bad documents (stopped with what was learned kept, or skipped), and
// options that contradict each other.
#include "tributary/training_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "test_util.h"
#include "tributary/model_config.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

class TrainingJobTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  // n documents over 40 terms in 4 classes (a class draws 3 of its 4 tokens
  // from its own 10 terms); document `bad` (if any) names a class outside the
  // schema.
  std::string Write(const std::string& name, int n, int bad = -1) {
    v1::StreamHeader h = NewStreamHeader();
    *h.mutable_schema() = testing::TextSchema(40, 4);
    h.set_document_count(static_cast<uint64_t>(n));
    const std::string p = dir_ + "/" + name;
    auto w = DocumentWriter::Create(p, h);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    std::mt19937_64 rng(3);
    for (int i = 0; i < n; ++i) {
      const uint32_t k = static_cast<uint32_t>(rng() % 4);
      v1::Document d;
      d.set_label(i == bad ? "no-such-class" : "c" + std::to_string(k));
      for (int t = 0; t < 4; ++t) {
        d.add_term_ids(t == 0 ? static_cast<uint32_t>(rng() % 40) : k * 10 + static_cast<uint32_t>(rng() % 10));
      }
      EXPECT_TRUE((*w)->Write(d).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
    return p;
  }
  std::unique_ptr<Model> Fresh(const std::string& family, const std::string& loss, uint64_t seed = 1) {
    ModelConfig c;
    c.family = family;
    c.loss = loss;
    c.seed = seed;
    if (family != "multinomial") c.family_options = {{"components", "3"}};
    auto m = NewModel(c, testing::BuiltinRegistry(), testing::TextSchema(40, 4), 0);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }
  Status Run(const TrainingJobOptions& o, const std::string& path, std::unique_ptr<Model>* model,
             TrainingJobResult* result) {
    std::unique_ptr<DocumentReader> first;
    auto r = DocumentReader::Open(path);
    if (!r.ok()) return r.status();
    first = std::move(r).value();
    return RunTrainingJob(o, path, &first, model, result);
  }
  std::string dir_;
};

TEST_F(TrainingJobTest, PassesInOrderShuffledAndOnThreads) {
  const std::string p = Write("s.pb", 600);
  TrainingJobOptions o;
  o.epochs = 3;
  for (bool shuffle : {false, true}) {
    o.shuffle = shuffle;
    auto m = Fresh("multinomial", "ncll");
    TrainingJobResult r;
    ASSERT_TRUE(Run(o, p, &m, &r).ok());
    EXPECT_EQ(r.documents, 1800u) << shuffle;
    EXPECT_EQ(m->learner_state().updates, 1800u);
    EXPECT_FALSE(r.sep);
  }
  // NLL on naive Bayes composes exactly: 2 threads give one thread's model.
  o.shuffle = false;
  o.sync_every = 50;
  auto one = Fresh("multinomial", "nll");
  TrainingJobResult r1;
  ASSERT_TRUE(Run(o, p, &one, &r1).ok());
  o.threads = 2;
  auto two = Fresh("multinomial", "nll");
  TrainingJobResult r2;
  ASSERT_TRUE(Run(o, p, &two, &r2).ok());
  EXPECT_EQ(r2.threads, 2u);
  EXPECT_EQ(r2.documents, 1800u);
  for (uint64_t i = 0; i < one->stats().size(); ++i) {
    ASSERT_NEAR(one->stats().Mu(i), two->stats().Mu(i), 1e-9 * std::max(1.0, std::fabs(one->stats().Mu(i)))) << i;
  }
}

TEST_F(TrainingJobTest, ABadDocumentStopsWithWhatWasLearnedKeptOrIsSkipped) {
  const std::string p = Write("bad.pb", 300, 120);
  TrainingJobOptions o;
  auto m = Fresh("multinomial", "ncll");
  TrainingJobResult r;
  Status st = Run(o, p, &m, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("document #120"));
  EXPECT_THAT(st.message(), HasSubstr("bad.pb"));
  ASSERT_TRUE(m);  // what was learned before it, for a partial save
  EXPECT_EQ(m->learner_state().updates, 120u);
  o.skip_bad = true;
  o.epochs = 2;
  m = Fresh("multinomial", "ncll");
  ASSERT_TRUE(Run(o, p, &m, &r).ok());
  EXPECT_EQ(r.documents, 598u);
  EXPECT_EQ(r.skipped.skipped, 1u);  // recorded once, in the first pass
  ASSERT_EQ(r.skipped.first_messages.size(), 1u);
  EXPECT_THAT(r.skipped.first_messages[0], HasSubstr("document #120"));
}

// SEP restarts: replicas learn side by side until the window closes, the one
// with the highest sum of log Z_i is kept and named in the report.
TEST_F(TrainingJobTest, SepRestartsKeepTheBestEvidence) {
  const std::string p = Write("s.pb", 400);
  TrainingJobOptions o;
  o.learner.engine = Engine::kSep;
  o.learner.seed = 5;
  o.restarts = 3;
  o.restart_window = 200;
  o.new_model = [&](uint64_t seed) -> Result<std::unique_ptr<Model>> {
    auto m = Fresh("emsd-mixture", "nll", seed);
    if (!m) return Status::Internal("no model");
    return m;
  };
  auto m = Fresh("emsd-mixture", "nll", 5);
  TrainingJobResult r;
  Status st = Run(o, p, &m, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(r.sep);
  EXPECT_GT(r.counters.updates, 0u);
  EXPECT_EQ(r.documents, 400u);
  EXPECT_THAT(r.restart_report, HasSubstr("restarts: kept seed "));
  EXPECT_THAT(r.restart_report, HasSubstr("of 3 after 200 documents"));
  for (const char* seed : {"seed 5 ", "seed 6 ", "seed 7 "}) EXPECT_THAT(r.restart_report, HasSubstr(seed));
  // The kept model learned every document (the window's and the rest).
  EXPECT_EQ(m->learner_state().updates, 400u);
}

TEST_F(TrainingJobTest, ContradictoryOptionsAreRefused) {
  const std::string p = Write("s.pb", 10);
  auto check = [&](TrainingJobOptions o, const std::string& path, const std::string& expected) {
    auto m = o.learner.engine == Engine::kSep ? Fresh("emsd-mixture", "nll") : Fresh("multinomial", "ncll");
    TrainingJobResult r;
    std::unique_ptr<DocumentReader> first;
    Status st = RunTrainingJob(o, path, &first, &m, &r);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(expected));
  };
  TrainingJobOptions o;
  o.epochs = 0;
  check(o, p, "epochs must be >= 1");
  o = TrainingJobOptions();
  o.restarts = 2;  // ("auto": sdEM for the multinomial)
  check(o, p, "restarts need the sep, ep or adf engine");
  o.learner.engine = Engine::kSep;
  check(o, p, "restarts need new_model");
  o.threads = 2;
  check(o, p, "restarts cannot learn on several threads");
  o = TrainingJobOptions();
  o.epochs = 2;
  check(o, "-", "several passes need a file");
  // An empty stream learns nothing: said so.
  const std::string empty = Write("empty.pb", 0);
  auto m = Fresh("multinomial", "ncll");
  TrainingJobResult r;
  Status st = Run(TrainingJobOptions(), empty, &m, &r);
  EXPECT_THAT(st.message(), HasSubstr("no document was learned"));
}

}  // namespace
}  // namespace tributary
