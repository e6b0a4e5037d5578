// Bad input end to end through the `tributary` program: each case gives a
// specific error naming the file and the document, the program exits
// non-zero without crashing, and with --skip-bad the document is skipped and
// counted while the model equals the one trained without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "test_util.h"
#include "tributary/model_config.h"
#include "tributary/stream_io.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }

  v1::StreamHeader Header(uint32_t vocab = 20) {
    v1::StreamHeader h = NewStreamHeader();
    *h.mutable_schema() = testing::TextSchema(vocab, 2);
    return h;
  }
  static v1::Document Doc(int i, const char* label, std::vector<uint32_t> ids) {
    v1::Document d;
    d.set_id("doc-" + std::to_string(i));
    if (label) d.set_label(label);
    for (auto t : ids) {
      d.add_term_ids(t);
      d.add_term_counts(1.0);
    }
    return d;
  }
  std::vector<v1::Document> GoodDocs(int n) {
    std::vector<v1::Document> docs;
    for (int i = 0; i < n; ++i) {
      const char* label = (i % 2) ? "c1" : "c0";
      docs.push_back(Doc(i, label, {static_cast<uint32_t>(i % 2 ? 1 : 2), static_cast<uint32_t>(3 + i % 5)}));
    }
    return docs;
  }
  std::string Write(const std::string& name, const v1::StreamHeader& h, const std::vector<v1::Document>& docs) {
    std::string p = dir_ + "/" + name;
    auto w = DocumentWriter::Create(p, h);
    EXPECT_TRUE(w.ok());
    for (const auto& d : docs) EXPECT_TRUE((*w)->Write(d).ok());
    EXPECT_TRUE((*w)->Close().ok());
    return p;
  }
  int Train(const std::string& in, const std::string& extra, std::string* out) {
    return testing::RunCommand(testing::ProgramPath() + " train --quiet --family multinomial --loss ncll --in '" + in +
                                   "' --out '" + dir_ + "/model.trib' " + extra,
                               out, true);
  }
  std::string dir_;
};

std::string ReadAll(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(BadInputTest, GoodStreamTrains) {
  std::string out;
  EXPECT_EQ(Train(Write("good.pb", Header(), GoodDocs(10)), "", &out), 0) << out;
}

TEST_F(BadInputTest, TruncatedFrame) {
  std::string p = Write("t.pb", Header(), GoodDocs(10));
  std::string data = ReadAll(p);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data.substr(0, data.size() - 3);
  std::string out;
  // Without --n the counting pass meets the damage before anything is learned.
  EXPECT_EQ(Train(p, "", &out), 1);
  EXPECT_THAT(out, HasSubstr("t.pb"));
  EXPECT_THAT(out, HasSubstr("truncated frame"));
  // With --n (a live stream) learning starts; what was learned before the
  // damage is kept.
  EXPECT_EQ(Train(p, "--n 10 --select off", &out), 1);
  EXPECT_THAT(out, HasSubstr("truncated frame"));
  EXPECT_THAT(out, HasSubstr("model.trib.partial"));
  auto partial = Model::Load(dir_ + "/model.trib.partial", testing::BuiltinRegistry());
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_EQ((*partial)->learner_state().updates, 9u);
  // The defaults (candidates chosen on the training stream, several passes)
  // learn the 9 documents read before the damage and keep that model too.
  std::filesystem::remove(dir_ + "/model.trib.partial");
  EXPECT_EQ(Train(p, "--n 10", &out), 1);
  EXPECT_THAT(out, HasSubstr("truncated frame"));
  EXPECT_THAT(out, HasSubstr("model.trib.partial"));
  auto chosen = Model::Load(dir_ + "/model.trib.partial", testing::BuiltinRegistry());
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  // Every one of the 9 documents is learned or held out to choose the model.
  auto report = nlohmann::json::parse((*chosen)->training_report());
  const uint64_t held = report["validation_learned"].get<bool>() ? 0 : report["validation_documents"].get<uint64_t>();
  EXPECT_GE((*chosen)->learner_state().updates + held, 9u) << (*chosen)->training_report();
  EXPECT_TRUE(report.contains("kept"));
}

TEST_F(BadInputTest, GarbageBytesAfterDocuments) {
  std::string p = Write("g.pb", Header(), GoodDocs(4));
  std::ofstream(p, std::ios::binary | std::ios::app) << std::string("\xff\xff\xff\xff\x0f garbage garbage", 21);
  std::string out;
  EXPECT_EQ(Train(p, "", &out), 1);
  EXPECT_THAT(out, HasSubstr("g.pb"));
  EXPECT_THAT(out, HasSubstr("over the limit"));
}

TEST_F(BadInputTest, FrameLengthOverLimit) {
  std::string p = Write("big.pb", Header(), GoodDocs(3));
  std::string out;
  // Every document frame is larger than 8 bytes.
  EXPECT_EQ(Train(p, "--max-frame-bytes 8", &out), 1);
  EXPECT_THAT(out, HasSubstr("over the limit of 8 bytes"));
}

TEST_F(BadInputTest, FrameThatDoesNotParseIsSkippable) {
  // A well-framed frame whose bytes are not a Document.
  std::string p = dir_ + "/unparsable.pb";
  {
    auto w = DocumentWriter::Create(p, Header());
    auto docs = GoodDocs(6);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*w)->Write(docs[i]).ok());
    ASSERT_TRUE((*w)->Close().ok());
    std::ofstream(p, std::ios::binary | std::ios::app) << std::string("\x04\xff\xff\xff\xff", 5);
    auto w2 = DocumentWriter::CreateRaw(dir_ + "/tail.pb");
    for (int i = 3; i < 6; ++i) ASSERT_TRUE((*w2)->Write(docs[i]).ok());
    ASSERT_TRUE((*w2)->Close().ok());
    std::ofstream(p, std::ios::binary | std::ios::app) << ReadAll(dir_ + "/tail.pb");
  }
  std::string out;
  EXPECT_EQ(Train(p, "", &out), 1);
  EXPECT_THAT(out, HasSubstr("document #3"));
  EXPECT_THAT(out, HasSubstr("does not parse as tributary.v1.Document"));
  EXPECT_EQ(Train(p, "--skip-bad", &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("skipped 1 bad document"));
}

struct DocCase {
  const char* name;
  v1::Document doc;
  const char* expect;
};

TEST_F(BadInputTest, BadDocumentsNamedAndSkippableWithoutLoss) {
  std::vector<DocCase> cases;
  {
    v1::Document d = Doc(99, "c0", {1});
    d.clear_term_counts();
    d.add_term_counts(std::numeric_limits<double>::quiet_NaN());
    cases.push_back({"nan_count", d, "term_counts[0] is nan"});
  }
  {
    v1::Document d = Doc(99, "c0", {1});
    d.set_term_counts(0, std::numeric_limits<double>::infinity());
    cases.push_back({"inf_count", d, "term_counts[0] is inf"});
  }
  cases.push_back(
      {"id_out_of_range", Doc(99, "c0", {1, 500}), "term id 500 out of range: the stream's vocabulary size is 20"});
  cases.push_back(
      {"unknown_label", Doc(99, "c7", {1}), "label 'c7' is not a class of the model (expected one of: c0, c1)"});
  cases.push_back({"empty", Doc(99, "c0", {}), "empty document"});
  {
    v1::Document d = Doc(99, "c0", {1});
    d.add_reals(std::numeric_limits<double>::quiet_NaN());
    cases.push_back({"nan_real", d, "has 1 real features, expected 0"});
  }
  {
    v1::Document d = Doc(99, "c0", {1});
    d.set_weight(-1);
    cases.push_back({"negative_weight", d, "weight is -1"});
  }
  {
    // Finite but past what a step can scale (issue 41 item 7: the model
    // written could not be read back, and the default train blamed another
    // document).
    v1::Document d = Doc(99, "c0", {1});
    d.set_weight(1e308);
    cases.push_back({"huge_weight", d, "weight is 1e+308, expected a finite number in [0, 1e6]"});
  }
  auto good = GoodDocs(12);
  std::string clean = Write("clean.pb", Header(), good);
  std::string out;
  ASSERT_EQ(Train(clean, "--n 12", &out), 0) << out;
  std::string clean_model = ReadAll(dir_ + "/model.trib");
  auto reference = Model::Load(dir_ + "/model.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(reference.ok());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto docs = good;
    docs.insert(docs.begin() + 5, c.doc);
    std::string p = Write(std::string(c.name) + ".pb", Header(), docs);
    EXPECT_EQ(Train(p, "--n 12", &out), 1) << out;
    EXPECT_THAT(out, HasSubstr("document #5 (id 'doc-99')"));
    EXPECT_THAT(out, HasSubstr(c.expect));
    EXPECT_THAT(out, HasSubstr(c.name));  // the file is named
    ASSERT_EQ(Train(p, "--n 12 --skip-bad", &out), 0) << out;
    EXPECT_THAT(out, HasSubstr("skipped 1 bad document"));
    auto skipped = Model::Load(dir_ + "/model.trib", testing::BuiltinRegistry());
    ASSERT_TRUE(skipped.ok());
    EXPECT_EQ((*skipped)->stats().raw(), (*reference)->stats().raw());
    EXPECT_EQ((*skipped)->learner_state().updates, (*reference)->learner_state().updates);
  }
}

TEST_F(BadInputTest, NanRealFeatureNamed) {
  v1::StreamHeader h = NewStreamHeader();
  *h.mutable_schema() = testing::RealSchema(2, 2);
  v1::Document ok;
  ok.set_label("c0");
  ok.add_reals(1.0);
  ok.add_reals(2.0);
  v1::Document bad = ok;
  bad.set_id("sensor-7");
  bad.set_reals(1, std::numeric_limits<double>::infinity());
  std::string p = Write("reals.pb", h, {ok, ok, bad, ok});
  std::string out;
  EXPECT_EQ(testing::RunCommand(testing::ProgramPath() + " train -q --family gaussian --loss nll --in " + p +
                                    " --out " + dir_ + "/g.trib",
                                &out, true),
            1);
  EXPECT_THAT(out, HasSubstr("document #2 (id 'sensor-7'): real feature 1 is inf"));
}

// ABI 1.2 features: a COUNT feature must be an integer >= 0; missing_features
// must name a feature; a family that needs every feature (gaussian) refuses a
// document with a missing one, naming it, and --skip-bad skips it.
TEST_F(BadInputTest, CountFeaturesAndMissingValues) {
  v1::StreamHeader h = NewStreamHeader();
  *h.mutable_schema() = testing::RealSchema(2, 2);
  h.mutable_schema()->mutable_features(1)->set_kind(v1::FeatureSpec::COUNT);
  v1::Document ok;
  ok.set_label("c0");
  ok.add_reals(1.5);
  ok.add_reals(3.0);
  v1::Document ok1 = ok;
  ok1.set_label("c1");
  ok1.set_reals(0, -2.0);
  v1::Document fractional = ok;
  fractional.set_id("f");
  fractional.set_reals(1, 2.5);
  v1::Document negative = ok;
  negative.set_reals(1, -1.0);
  v1::Document missing_out_of_range = ok;
  missing_out_of_range.add_missing_features(2);
  v1::Document missing = ok;
  missing.set_id("gap");
  missing.add_missing_features(0);
  missing.set_reals(0, std::nan(""));  // a placeholder is not validated
  std::string out;
  const std::string train =
      testing::ProgramPath() + " train -q --family gaussian --loss nll --out " + dir_ + "/g.trib --in ";
  struct Case {
    std::vector<v1::Document> docs;
    const char* expect;
  };
  for (const auto& c :
       {Case{{ok, ok1, fractional}, "document #2 (id 'f'): count feature 1 is 2.5, expected an integer >= 0"},
        Case{{ok, ok1, negative}, "document #2: count feature 1 is -1, expected an integer >= 0"},
        Case{{ok, ok1, missing_out_of_range}, "document #2: missing_features[0] is 2, expected < 2"},
        Case{{ok, ok1, missing}, "document #2 (id 'gap')"}}) {
    std::string p = Write("f.pb", h, c.docs);
    EXPECT_EQ(testing::RunCommand(train + p, &out, true), 1) << c.expect;
    EXPECT_THAT(out, HasSubstr(c.expect));
  }
  EXPECT_THAT(out, HasSubstr("real feature 0 is missing; gaussian needs every feature"));
  // Skipped with --skip-bad: the model equals the one trained without it.
  ASSERT_EQ(testing::RunCommand(train + Write("a.pb", h, {ok, ok1, missing, ok}) + " --skip-bad --n 3", &out, true), 0)
      << out;
  auto with_skip = Model::Load(dir_ + "/g.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(with_skip.ok());
  EXPECT_EQ((*with_skip)->learner_state().skipped_documents, 1u);
  ASSERT_EQ(testing::RunCommand(train + Write("b.pb", h, {ok, ok1, ok}) + " --n 3", &out, true), 0) << out;
  auto without = Model::Load(dir_ + "/g.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(without.ok());
  EXPECT_EQ((*with_skip)->stats().raw(), (*without)->stats().raw());
}

// Sizes from a header are checked before anything is allocated: a hashed
// vocabulary over the cap is refused naming the field, and a schema whose
// model cannot fit in this machine's memory is refused with the sizes that
// make it up (not std::bad_alloc, not the OOM killer).
TEST_F(BadInputTest, HeaderSizesAreCheckedBeforeAllocating) {
  v1::StreamHeader h = NewStreamHeader();
  h.mutable_schema()->set_hashed_dim(uint64_t{1} << 26);
  for (int k = 0; k < 2; ++k) h.mutable_schema()->add_class_names("c" + std::to_string(k));
  v1::Document d;
  d.set_label("c0");
  d.add_term_ids(5);
  std::string out;
  EXPECT_NE(Train(Write("wide.pb", h, {d}), "--select off --epochs 1", &out), 0);
  EXPECT_THAT(out, HasSubstr("hashed_dim 67108864 exceeds the maximum 16777216"));
  EXPECT_THAT(out, Not(HasSubstr("bad_alloc")));

  // 2^24 ids x 4,000 classes x 8 bytes: 512 GiB of statistics.
  h.mutable_schema()->set_hashed_dim(uint64_t{1} << 24);
  for (int k = 2; k < 4000; ++k) h.mutable_schema()->add_class_names("c" + std::to_string(k));
  EXPECT_NE(Train(Write("huge.pb", h, {d}), "--select off --epochs 1", &out), 0);
  EXPECT_THAT(out, HasSubstr("family 'multinomial' needs 67108868000 statistics (500.0 GiB)"));
  EXPECT_THAT(out, HasSubstr("hashed_dim 16777216, 4000 classes"));
  EXPECT_THAT(out, HasSubstr("more than this machine's memory"));
}

TEST_F(BadInputTest, EmptyStreamAndHeaderOnlyStream) {
  std::string empty = dir_ + "/empty.pb";
  std::ofstream(empty).close();
  std::string out;
  EXPECT_EQ(Train(empty, "", &out), 1);
  EXPECT_THAT(out, HasSubstr("empty stream"));
  std::string header_only = Write("header_only.pb", Header(), {});
  EXPECT_EQ(Train(header_only, "--n 10", &out), 1);
  EXPECT_THAT(out, HasSubstr("no document was learned"));
}

TEST_F(BadInputTest, NotAStream) {
  std::string p = dir_ + "/text.pb";
  std::ofstream(p) << "label\tsome text that is not protobuf\n";
  std::string out;
  EXPECT_EQ(Train(p, "", &out), 1);
  EXPECT_THAT(out, HasSubstr("text.pb"));
  EXPECT_EQ(Train(dir_ + "/missing.pb", "", &out), 1);
  EXPECT_THAT(out, HasSubstr("missing.pb"));
}

TEST_F(BadInputTest, EvalRefusesUnknownLabelAndCountsUnseenTerms) {
  std::string train = Write("train.pb", Header(), GoodDocs(10));
  std::string out;
  ASSERT_EQ(Train(train, "", &out), 0) << out;
  // A test stream with its own vocabulary: two terms unknown to the model.
  v1::StreamHeader h = NewStreamHeader();
  h.mutable_schema()->add_vocabulary("t1");
  h.mutable_schema()->add_vocabulary("zzz");
  h.mutable_schema()->add_vocabulary("yyy");
  h.mutable_schema()->add_class_names("c0");
  h.mutable_schema()->add_class_names("c1");
  std::string test = Write("test.pb", h, {Doc(0, "c1", {0, 1, 2}), Doc(1, "c0", {1})});
  ASSERT_EQ(testing::RunCommand(testing::ProgramPath() + " eval --json --model " + dir_ + "/model.trib --in " + test,
                                &out, false),
            0);
  EXPECT_THAT(out, HasSubstr("\"unseen_terms\":3"));
  EXPECT_THAT(out, HasSubstr("\"documents\":2"));
  h.mutable_schema()->add_class_names("c9");
  std::string bad = Write("bad_test.pb", h, {Doc(0, "c9", {0})});
  EXPECT_EQ(
      testing::RunCommand(testing::ProgramPath() + " eval --model " + dir_ + "/model.trib --in " + bad, &out, true), 1);
  EXPECT_THAT(out, HasSubstr("label 'c9' is not a class of the model"));
}

// The effective data-set size n is checked, never silently replaced (issue
// 41 item 8): NaN, 0, negative and infinite values given by the caller, and a
// stream header's document_count past kMaxEffectiveSize (an n of 1e18 made
// every prediction exactly 0).
TEST(EffectiveSizeTest, AnImpossibleNIsRefusedNamingIt) {
  const v1::Schema schema = testing::TextSchema(20, 2);
  for (double n :
       {std::numeric_limits<double>::quiet_NaN(), -1.0, 0.5, std::numeric_limits<double>::infinity(), 1e18}) {
    ModelConfig c;
    c.n = n;
    auto m = NewModel(c, testing::BuiltinRegistry(), schema, 100);
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_THAT(m.status().message(), HasSubstr("n (the effective data-set size) is")) << n;
    EXPECT_THAT(m.status().message(), HasSubstr("expected a finite number in [1, 1e12]")) << n;
  }
  ModelConfig c;
  auto m = NewModel(c, testing::BuiltinRegistry(), schema, uint64_t{1000000000000000000}, "s.pb");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("'s.pb'"));
  EXPECT_THAT(m.status().message(), HasSubstr("1000000000000000000 documents (document_count)"));
  c.n = 1e12;  // the largest n, and a stream's own length, are fine
  EXPECT_TRUE(NewModel(c, testing::BuiltinRegistry(), schema, 100).ok());
  c.n = 0;
  auto ok = NewModel(c, testing::BuiltinRegistry(), schema, 100);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->learner_state().effective_size, 100);
}

}  // namespace
}  // namespace tributary
