// Converters from text formats (tsv, svmlight) to document streams.
#include "tributary/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/schema.h"
#include "tributary/stream_io.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Tok(std::string_view text) {
  std::vector<std::string> t;
  Tokenize(text, &t);
  return t;
}

struct Stream {
  v1::StreamHeader header;
  std::vector<v1::Document> docs;
};

Stream ReadAll(const std::string& path) {
  Stream s;
  auto r = DocumentReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return s;
  s.header = (*r)->header();
  for (;;) {
    v1::Document d;
    bool eof = false;
    Status st = (*r)->Next(&d, &eof);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok() || eof) break;
    s.docs.push_back(d);
  }
  return s;
}

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& f) {
  return std::vector<std::string>(f.begin(), f.end());
}

// term name -> count of one document, resolved through the header vocabulary.
std::map<std::string, double> Bag(const Stream& s, const v1::Document& d) {
  std::map<std::string, double> bag;
  EXPECT_EQ(d.term_ids_size(), d.term_counts_size());
  for (int i = 0; i < d.term_ids_size(); ++i) {
    const uint32_t id = d.term_ids(i);
    EXPECT_LT(id, static_cast<uint32_t>(s.header.schema().vocabulary_size()));
    if (id >= static_cast<uint32_t>(s.header.schema().vocabulary_size())) continue;
    bag[s.header.schema().vocabulary(static_cast<int>(id))] += d.term_counts(i);
  }
  return bag;
}

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = testing::TempDir(std::string("convert_") + info->name());
  }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream f(path, std::ios::binary);
    f << content;
    return path;
  }
  ConvertOptions Tsv(const std::string& content) {
    ConvertOptions o;
    o.format = "tsv";
    o.in = Write("in.tsv", content);
    o.out = dir_ + "/out.pb";
    return o;
  }
  ConvertOptions Svm(const std::string& content, const std::string& features = "counts") {
    ConvertOptions o;
    o.format = "svmlight";
    o.features = features;
    o.in = Write("in.svm", content);
    o.out = dir_ + "/out.pb";
    return o;
  }
  std::string dir_;
};

// ---- Tokenizer and stop words ----------------------------------------------

TEST(TokenizeTest, PunctuationCaseAndDigits) {
  EXPECT_THAT(Tok("Hello, World! It's 2024..."), ElementsAre("hello", "world", "it", "s", "2024"));
  EXPECT_THAT(Tok("A-B_c d2e  F9"), ElementsAre("a", "b", "c", "d2e", "f9"));
  EXPECT_THAT(Tok("  ...  "), IsEmpty());
  EXPECT_THAT(Tok(""), IsEmpty());
  EXPECT_THAT(Tok("e-mail: x@y.org\ttab\nline"), ElementsAre("e", "mail", "x", "y", "org", "tab", "line"));
}

TEST(TokenizeTest, Utf8WordsStayWhole) {
  // Letters of any script are word characters, case folded (NFKC_Casefold;
  // tests/tokenizer_test.cc has the Unicode rules in detail).
  EXPECT_THAT(Tok("Café naïve Straße"), ElementsAre("café", "naïve", "strasse"));
  EXPECT_THAT(Tok("ÉCOLE"), ElementsAre("école"));
  // Han and Hiragana are one token per character, a Katakana run is a word.
  EXPECT_THAT(Tok("日本語のテキスト, ok"), ElementsAre("日", "本", "語", "の", "テキスト", "ok"));
}

TEST(TokenizeTest, AppendsToExistingTokens) {
  std::vector<std::string> t{"x"};
  Tokenize("y z", &t);
  EXPECT_THAT(t, ElementsAre("x", "y", "z"));
}

TEST(StopWordsTest, StandardEnglishList) {
  const auto& sw = EnglishStopWords();
  for (const char* w : {"the", "a", "and", "of", "is", "don", "t", "s", "i", "you"}) EXPECT_TRUE(sw.count(w)) << w;
  for (const char* w : {"cat", "linux", "fortune", "2024", "The"}) EXPECT_FALSE(sw.count(w)) << w;
  EXPECT_GT(sw.size(), 100u);
  EXPECT_LT(sw.size(), 400u);
  for (const auto& w : sw) EXPECT_EQ(Tok(w), std::vector<std::string>{w}) << "not a single token: " << w;
}

// ---- TSV ---------------------------------------------------------------------

TEST_F(ConvertTest, TsvRoundTrip) {
  ConvertOptions o =
      Tsv("spam\tBuy cheap pills, buy NOW!\n"
          "ham\tMeeting at 10, see you\r\n"
          "\tno label here: buy\n"
          "spam\tcheap cheap cheap");  // no final newline
  ConvertReport rep;
  Status st = ConvertFile(o, &rep);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.documents, 4u);
  EXPECT_EQ(rep.unlabelled, 1u);
  EXPECT_EQ(rep.skipped, 0u);
  EXPECT_EQ(rep.classes, 2u);

  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.magic(), kStreamMagic);
  EXPECT_EQ(s.header.document_count(), 4u);
  EXPECT_EQ(s.header.source(), o.in);
  EXPECT_EQ(s.header.schema().hashed_dim(), 0u);
  EXPECT_FALSE(s.header.schema().open_classes());
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("ham", "spam"));
  // Terms in order of first appearance.
  EXPECT_THAT(Strings(s.header.schema().vocabulary()),
              ElementsAre("buy", "cheap", "pills", "now", "meeting", "at", "10", "see", "you", "no", "label", "here"));
  EXPECT_EQ(rep.terms, 12u);
  ASSERT_EQ(s.docs.size(), 4u);

  EXPECT_EQ(s.docs[0].id(), "1");
  ASSERT_TRUE(s.docs[0].has_label());
  EXPECT_EQ(s.docs[0].label(), "spam");
  EXPECT_THAT(s.docs[0].term_ids(), ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_THAT(s.docs[0].term_counts(), ElementsAre(2.0, 1.0, 1.0, 1.0));

  EXPECT_EQ(s.docs[1].id(), "2");
  EXPECT_EQ(s.docs[1].label(), "ham");  // "\r\n" handled
  EXPECT_EQ(Bag(s, s.docs[1]),
            (std::map<std::string, double>{{"meeting", 1}, {"at", 1}, {"10", 1}, {"see", 1}, {"you", 1}}));

  EXPECT_EQ(s.docs[2].id(), "3");
  EXPECT_FALSE(s.docs[2].has_label());
  EXPECT_EQ(Bag(s, s.docs[2]), (std::map<std::string, double>{{"no", 1}, {"label", 1}, {"here", 1}, {"buy", 1}}));

  EXPECT_EQ(s.docs[3].id(), "4");
  EXPECT_THAT(s.docs[3].term_ids(), ElementsAre(1u));
  EXPECT_THAT(s.docs[3].term_counts(), ElementsAre(3.0));
}

TEST_F(ConvertTest, TsvIdsAreLineNumbersAndBlankLinesAreIgnored) {
  ConvertOptions o = Tsv("a\tone\n\n   \nb\ttwo\nc\t\nd\t?!...\ne\tthree\n");
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  // Lines without any token are dropped (the model refuses empty documents),
  // and so is their label.
  EXPECT_EQ(rep.documents, 3u);
  EXPECT_EQ(rep.empty, 2u);
  EXPECT_EQ(rep.skipped, 0u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.document_count(), 3u);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("a", "b", "e"));
  ASSERT_EQ(s.docs.size(), 3u);
  EXPECT_EQ(s.docs[0].id(), "1");
  EXPECT_EQ(s.docs[1].id(), "4");
  EXPECT_EQ(s.docs[2].id(), "7");
}

TEST_F(ConvertTest, TsvClassesSortedAndOpenClasses) {
  ConvertOptions o = Tsv("zeta\tx\nalpha\ty\nBeta\tz\nalpha\tw\n");
  o.open_classes = true;
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  Stream s = ReadAll(o.out);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("Beta", "alpha", "zeta"));
  EXPECT_TRUE(s.header.schema().open_classes());
  EXPECT_EQ(rep.classes, 3u);
}

TEST_F(ConvertTest, TsvUtf8TextAndLabels) {
  ConvertOptions o = Tsv("français\tLe café est très bon\n日本\t東京 tokyo\n");
  ASSERT_TRUE(ConvertFile(o, nullptr).ok());
  Stream s = ReadAll(o.out);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("français", "日本"));
  EXPECT_THAT(Strings(s.header.schema().vocabulary()),
              ElementsAre("le", "café", "est", "très", "bon", "東", "京", "tokyo"));  // Han: one token each
}

TEST_F(ConvertTest, TsvInvalidUtf8IsReplaced) {
  // Latin-1 bytes: protobuf strings must be UTF-8, so the label gets U+FFFD
  // and the stream stays readable; in the text the tokenizer drops the byte
  // (invalid UTF-8 and U+FFFD, a symbol, both separate words).
  ConvertOptions o = Tsv("lab\xe9l\tcaf\xe9 ok\n");
  ASSERT_TRUE(ConvertFile(o, nullptr).ok());
  Stream s = ReadAll(o.out);
  ASSERT_EQ(s.docs.size(), 1u);
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("caf", "ok"));
  EXPECT_EQ(s.docs[0].label(), "lab\xEF\xBF\xBDl");
}

TEST_F(ConvertTest, TsvStopWords) {
  ConvertOptions o = Tsv("x\tThe cat and THE dog don't sit\ny\tit is a cat\n");
  o.stop_words = true;
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  Stream s = ReadAll(o.out);
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("cat", "dog", "sit"));
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_EQ(Bag(s, s.docs[1]), (std::map<std::string, double>{{"cat", 1}}));

  // A line of stop words only is dropped.
  o = Tsv("x\tHave at you!\ny\tcat\n");
  o.stop_words = true;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(rep.documents, 1u);
  EXPECT_EQ(rep.empty, 1u);
  s = ReadAll(o.out);
  ASSERT_EQ(s.docs.size(), 1u);
  EXPECT_EQ(s.docs[0].id(), "2");
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("y"));

  // Without the option they stay.
  o = Tsv("x\tThe cat and THE dog don't sit\ny\tit is a cat\n");
  o.stop_words = false;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  s = ReadAll(o.out);
  EXPECT_EQ(s.header.schema().vocabulary(0), "the");
  EXPECT_EQ(rep.terms, 10u);  // the cat and dog don t sit it is a
}

TEST_F(ConvertTest, TsvHashed) {
  ConvertOptions o = Tsv("a\tfoo bar foo\nb\tbaz\n");
  o.hashed_dim = 1000;
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(rep.terms, 3u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.schema().hashed_dim(), 1000u);
  EXPECT_EQ(s.header.schema().vocabulary_size(), 0);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("a", "b"));
  ASSERT_EQ(s.docs.size(), 2u);
  std::map<uint32_t, double> bag0;
  for (int i = 0; i < s.docs[0].term_ids_size(); ++i) {
    EXPECT_LT(s.docs[0].term_ids(i), 1000u);
    bag0[s.docs[0].term_ids(i)] += s.docs[0].term_counts(i);
  }
  std::map<uint32_t, double> expected;
  expected[static_cast<uint32_t>(HashToken("foo", 1000))] += 2;
  expected[static_cast<uint32_t>(HashToken("bar", 1000))] += 1;
  EXPECT_EQ(bag0, expected);
  EXPECT_THAT(s.docs[1].term_ids(), ElementsAre(static_cast<uint32_t>(HashToken("baz", 1000))));
  EXPECT_THAT(s.docs[1].term_counts(), ElementsAre(1.0));
}

TEST_F(ConvertTest, TsvHashedCollisionsAreSummed) {
  ConvertOptions o = Tsv("a\tfoo bar baz qux\n");
  o.hashed_dim = 1;  // everything in bucket 0
  ASSERT_TRUE(ConvertFile(o, nullptr).ok());
  Stream s = ReadAll(o.out);
  ASSERT_EQ(s.docs.size(), 1u);
  EXPECT_THAT(s.docs[0].term_ids(), ElementsAre(0u));
  EXPECT_THAT(s.docs[0].term_counts(), ElementsAre(4.0));
}

TEST_F(ConvertTest, TsvLineWithoutTabIsAnError) {
  ConvertOptions o = Tsv("a\tfine\nthis line has no tab\nb\tfine too\n");
  Status st = ConvertFile(o, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(o.in));
  EXPECT_THAT(st.message(), HasSubstr("line 2"));
  EXPECT_THAT(st.message(), HasSubstr("expected label<TAB>text"));
  EXPECT_THAT(st.message(), HasSubstr("this line has no tab"));
  // Nothing is written for malformed input.
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

// Errors quote the input made printable: a terminal escape sequence or an
// invalid byte in a bad line reaches the user's terminal as \xNN, never raw
// (issue 41 item 13).
TEST_F(ConvertTest, ErrorsNeverEchoRawControlBytes) {
  ConvertOptions o = Tsv(std::string("a\tfine\n\x1b]0;pwned\x07 no tab \xff here\n", 32));
  Status st = ConvertFile(o, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("\\x1b]0;pwned\\x07 no tab \\xff here"));
  for (char c : st.message()) EXPECT_TRUE(c != '\x1b' && c != '\x07' && c != '\xff') << st.message();
}

// A text input with no newline in sight (/dev/zero here) is refused at the
// line limit instead of being read into memory until it fails (issue 41
// item 10: `convert --in /dev/zero` grew to several GB).
TEST_F(ConvertTest, AnEndlessLineIsRefusedAtTheLimit) {
  for (const char* format : {"tsv", "svmlight"}) {
    ConvertOptions o = Tsv("");
    o.format = format;
    o.in = "/dev/zero";
    Status st = ConvertFile(o, nullptr);
    ASSERT_TRUE(st.IsInvalidDocument()) << format << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("'/dev/zero' line 1: longer than 64 MiB without a newline"));
    EXPECT_FALSE(std::filesystem::exists(o.out));
  }
}

TEST_F(ConvertTest, TsvSkipBad) {
  ConvertOptions o = Tsv("a\tfine\nno tab\nb\tfine too\nnor here\n");
  o.skip_bad = true;
  ConvertReport rep;
  Status st = ConvertFile(o, &rep);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.documents, 2u);
  EXPECT_EQ(rep.skipped, 2u);
  EXPECT_EQ(rep.empty, 0u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.document_count(), 2u);
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_EQ(s.docs[0].id(), "1");
  EXPECT_EQ(s.docs[1].id(), "3");
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("fine", "too"));
}

TEST_F(ConvertTest, MissingInputIsNotFound) {
  ConvertOptions o;
  o.format = "tsv";
  o.in = dir_ + "/does_not_exist.tsv";
  o.out = dir_ + "/out.pb";
  Status st = ConvertFile(o, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("does_not_exist.tsv"));
  o.format = "svmlight";
  st = ConvertFile(o, nullptr);
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
}

TEST_F(ConvertTest, BadOptions) {
  ConvertOptions o = Tsv("a\tb\n");
  o.format = "csv";
  Status st = ConvertFile(o, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("csv"));

  o = Tsv("a\tb\n");
  o.out = o.in;  // would destroy the input
  st = ConvertFile(o, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();

  o = Svm("1 1:1\n");
  o.features = "dense";
  EXPECT_EQ(ConvertFile(o, nullptr).code(), Status::Code::kInvalidArgument);

  o = Svm("1 1:1\n");
  o.hashed_dim = 10;
  EXPECT_EQ(ConvertFile(o, nullptr).code(), Status::Code::kInvalidArgument);

  o = Tsv("a\tb\n");
  o.hashed_dim = kMaxHashedDim + 1;
  EXPECT_EQ(ConvertFile(o, nullptr).code(), Status::Code::kInvalidArgument);

  o = Svm("1 1:1\n");
  o.in = dir_;  // a directory
  EXPECT_FALSE(ConvertFile(o, nullptr).ok());
}

TEST_F(ConvertTest, UnwritableOutput) {
  ConvertOptions o = Tsv("a\tb\n");
  o.out = dir_ + "/no/such/dir/out.pb";
  Status st = ConvertFile(o, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("no/such/dir/out.pb"));
}

// ---- svmlight ------------------------------------------------------------------

TEST_F(ConvertTest, SvmlightCounts) {
  ConvertOptions o =
      Svm("# a comment line\n"
          "+1 1:2 3:1.5 # trailing comment\n"
          "-1 qid:7 2:1 3:0 10:4\n"
          "\n"
          "1.0 10:1\n"
          "1 1:1\n");
  ConvertReport rep;
  Status st = ConvertFile(o, &rep);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.documents, 4u);
  EXPECT_EQ(rep.classes, 2u);
  EXPECT_EQ(rep.terms, 4u);
  EXPECT_EQ(rep.unlabelled, 0u);
  Stream s = ReadAll(o.out);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("-1", "1"));  // +1, 1, 1.0 -> "1"
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("1", "2", "3", "10"));
  EXPECT_EQ(s.header.schema().features_size(), 0);
  EXPECT_EQ(s.header.document_count(), 4u);
  ASSERT_EQ(s.docs.size(), 4u);
  EXPECT_EQ(s.docs[0].id(), "2");
  EXPECT_EQ(s.docs[0].label(), "1");
  EXPECT_EQ(Bag(s, s.docs[0]), (std::map<std::string, double>{{"1", 2.0}, {"3", 1.5}}));
  EXPECT_EQ(s.docs[1].id(), "3");
  EXPECT_EQ(s.docs[1].label(), "-1");
  // The zero value is dropped; index 3 stays in the vocabulary (seen elsewhere).
  EXPECT_EQ(Bag(s, s.docs[1]), (std::map<std::string, double>{{"2", 1.0}, {"10", 4.0}}));
  EXPECT_EQ(s.docs[2].id(), "5");
  EXPECT_EQ(s.docs[2].label(), "1");
  EXPECT_EQ(s.docs[3].label(), "1");
  EXPECT_EQ(s.docs[3].reals_size(), 0);
}

TEST_F(ConvertTest, SvmlightLabelNormalisation) {
  ConvertOptions o = Svm("+1 1:1\n1.0 1:1\n-1.0 1:1\n-1 1:1\n2.50 1:1\n-0 1:1\nspam 1:1\n100000 1:1\n");
  ASSERT_TRUE(ConvertFile(o, nullptr).ok());
  Stream s = ReadAll(o.out);
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("-1", "0", "1", "100000", "2.5", "spam"));
  ASSERT_EQ(s.docs.size(), 8u);
  EXPECT_EQ(s.docs[0].label(), "1");
  EXPECT_EQ(s.docs[1].label(), "1");
  EXPECT_EQ(s.docs[2].label(), "-1");
  EXPECT_EQ(s.docs[3].label(), "-1");
  EXPECT_EQ(s.docs[4].label(), "2.5");
  EXPECT_EQ(s.docs[5].label(), "0");
  EXPECT_EQ(s.docs[6].label(), "spam");
  EXPECT_EQ(s.docs[7].label(), "100000");
}

TEST_F(ConvertTest, SvmlightEmptyBagsAreDropped) {
  ConvertOptions o = Svm("1\n-1 2:1\n0 1:0 3:0\n");
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(rep.documents, 1u);
  EXPECT_EQ(rep.empty, 2u);
  Stream s = ReadAll(o.out);
  ASSERT_EQ(s.docs.size(), 1u);
  EXPECT_EQ(s.docs[0].id(), "2");
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("2"));
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("-1"));

  // Dense documents are never empty: a label-only line is all zeros.
  o = Svm("1\n-1 2:1\n", "reals");
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(rep.documents, 2u);
  EXPECT_EQ(rep.empty, 0u);
  s = ReadAll(o.out);
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_THAT(s.docs[0].reals(), ElementsAre(0.0, 0.0));

  // ...unless no line has any feature and no dim is given.
  o = Svm("1\n-1\n", "reals");
  Status st = ConvertFile(o, &rep);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("dim"));
  o.dim = 3;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(ReadAll(o.out).docs.at(1).reals_size(), 3);
}

TEST_F(ConvertTest, SvmlightRealsDimFromData) {
  ConvertOptions o = Svm("+1 1:0.5 3:-2\n-1 2:1e-3\n", "reals");
  ConvertReport rep;
  Status st = ConvertFile(o, &rep);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.terms, 3u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.schema().vocabulary_size(), 0);
  ASSERT_EQ(s.header.schema().features_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.header.schema().features(i).name(), "x" + std::to_string(i + 1));
    EXPECT_EQ(s.header.schema().features(i).kind(), v1::FeatureSpec::REAL);
  }
  EXPECT_THAT(Strings(s.header.schema().class_names()), ElementsAre("-1", "1"));
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_THAT(s.docs[0].reals(), ElementsAre(0.5, 0.0, -2.0));
  EXPECT_THAT(s.docs[1].reals(), ElementsAre(0.0, 1e-3, 0.0));
  EXPECT_EQ(s.docs[0].term_ids_size(), 0);
}

TEST_F(ConvertTest, SvmlightRealsDeclaredDim) {
  ConvertOptions o = Svm("1 2:3\n0 5:1\n", "reals");
  o.dim = 6;
  ASSERT_TRUE(ConvertFile(o, nullptr).ok());
  Stream s = ReadAll(o.out);
  ASSERT_EQ(s.header.schema().features_size(), 6);
  EXPECT_EQ(s.header.schema().features(5).name(), "x6");
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_THAT(s.docs[0].reals(), ElementsAre(0.0, 3.0, 0.0, 0.0, 0.0, 0.0));
  EXPECT_THAT(s.docs[1].reals(), ElementsAre(0.0, 0.0, 0.0, 0.0, 1.0, 0.0));
}

TEST_F(ConvertTest, SvmlightRealsIndexBeyondDim) {
  ConvertOptions o = Svm("1 2:3\n0 5:1 7:2\n", "reals");
  o.dim = 6;
  Status st = ConvertFile(o, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(o.in));
  EXPECT_THAT(st.message(), HasSubstr("line 2"));
  EXPECT_THAT(st.message(), HasSubstr("index 7"));
  EXPECT_THAT(st.message(), HasSubstr("dim 6"));
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

TEST_F(ConvertTest, SvmlightRealsRejectNonFinite) {
  for (const char* bad : {"nan", "inf", "-inf", "1e999"}) {
    ConvertOptions o = Svm(std::string("1 1:1\n1 1:") + bad + "\n", "reals");
    Status st = ConvertFile(o, nullptr);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("line 2"));
    EXPECT_THAT(st.message(), HasSubstr(bad));
  }
}

TEST_F(ConvertTest, SvmlightCountsRejectNegativeAndNaN) {
  for (const char* bad : {"-1", "nan", "inf"}) {
    ConvertOptions o = Svm(std::string("1 1:1\n1 1:1 4:") + bad + "\n");
    Status st = ConvertFile(o, nullptr);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(o.in));
    EXPECT_THAT(st.message(), HasSubstr("line 2"));
    EXPECT_THAT(st.message(), HasSubstr("index 4"));
    EXPECT_THAT(st.message(), HasSubstr(std::string("'") + bad + "'"));
  }
}

TEST_F(ConvertTest, SvmlightBadTokens) {
  struct Case {
    const char* line;
    const char* found;     // text the message must quote
    const char* expected;  // what it must say was expected
  };
  for (const Case& c :
       {Case{"1 3:abc", "abc", "expected a number"}, Case{"1 x:1", "x:1", "positive integer index"},
        Case{"1 0:1", "0:1", "1-based"}, Case{"1 -2:1", "-2:1", "positive integer index"},
        Case{"1 5", "5", "expected idx:value"}, Case{"1 3:", "''", "expected a number"},
        Case{"1 2:1 2:1", "index 2 after index 2", "increasing"},
        Case{"1 5:1 3:1", "index 3 after index 5", "increasing"}, Case{"1:2 3:1", "1:2", "expected a label"},
        Case{"1 qid:x 1:1", "qid:x", "qid:N"}, Case{"1 99999999999:1", "99999999999", "too large"}}) {
    ConvertOptions o = Svm(std::string("1 1:1\n\n") + c.line + "\n");
    Status st = ConvertFile(o, nullptr);
    ASSERT_FALSE(st.ok()) << c.line;
    EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(o.in)) << c.line;
    EXPECT_THAT(st.message(), HasSubstr("line 3")) << c.line;
    EXPECT_THAT(st.message(), HasSubstr(c.found)) << c.line;
    EXPECT_THAT(st.message(), HasSubstr(c.expected)) << c.line;
  }
}

TEST_F(ConvertTest, SvmlightSkipBad) {
  ConvertOptions o = Svm("1 1:1\n1 3:abc\n-1 2:2\n1 0:1\n1 1:nan\n-1 1:1 2:1\n", "counts");
  o.skip_bad = true;
  ConvertReport rep;
  Status st = ConvertFile(o, &rep);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(rep.documents, 3u);
  EXPECT_EQ(rep.skipped, 3u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.document_count(), 3u);
  ASSERT_EQ(s.docs.size(), 3u);
  EXPECT_EQ(s.docs[0].id(), "1");
  EXPECT_EQ(s.docs[1].id(), "3");
  EXPECT_EQ(s.docs[2].id(), "6");
  EXPECT_THAT(Strings(s.header.schema().vocabulary()), ElementsAre("1", "2"));
}

TEST_F(ConvertTest, SvmlightSkipBadRealsIgnoresSkippedIndices) {
  // The skipped line's index 9 must not widen the inferred dim.
  ConvertOptions o = Svm("1 1:1\n1 9:nan\n-1 2:2\n", "reals");
  o.skip_bad = true;
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  EXPECT_EQ(rep.skipped, 1u);
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.schema().features_size(), 2);
  ASSERT_EQ(s.docs.size(), 2u);
  EXPECT_THAT(s.docs[1].reals(), ElementsAre(0.0, 2.0));
}

TEST_F(ConvertTest, EmptyInput) {
  ConvertOptions o = Tsv("");
  ConvertReport rep;
  ASSERT_TRUE(ConvertFile(o, &rep).ok());
  Stream s = ReadAll(o.out);
  EXPECT_EQ(s.header.document_count(), 0u);
  EXPECT_TRUE(s.docs.empty());
}

}  // namespace
}  // namespace tributary
