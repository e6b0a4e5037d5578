// The document decoder's refusals that no single field shows: counts that are
// each finite but add up to infinity over repeated term ids (eval and predict
// used to pass them on; the server acknowledged them, then skipped them).
// Token counts (Document.token_counts, what `tributary client learn` sends for
// a stream's term ids): honoured, and refused by the rule of term_counts.
// DecodeForLearning: the rule the server and the client apply to a document
// to be learned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/tokenizer.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DecoderTest, RepeatedTermCountsThatAddUpToInfinityAreRefused) {
  v1::Schema proto = testing::TextSchema(10, 2);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto dec = DocumentDecoder::Create(*schema, proto);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  d.set_label("c0");
  for (int i = 0; i < 3; ++i) {
    d.add_term_ids(4);
    d.add_term_counts(1e308);
  }
  DocumentBuffer buf;
  Status st = dec->Decode(d, 17, *schema, kGrowNothing, &buf, nullptr, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("term id 4"));
  EXPECT_THAT(st.message(), HasSubstr("expected a finite total"));
  // Large but finite totals are fine.
  d.set_term_counts(0, 1.0);
  d.set_term_counts(1, 1.0);
  ASSERT_TRUE(dec->Decode(d, 17, *schema, kGrowNothing, &buf, nullptr, nullptr).ok());
  EXPECT_EQ(buf.term_counts.size(), 1u);
  EXPECT_EQ(buf.term_counts[0], 1e308 + 2.0);
}

// A stream's term ids become the model's: the same term at the same id (a
// model made from the stream) or elsewhere (a stream converted on its own),
// or unseen (dropped), whichever the order of the two vocabularies.
TEST(DecoderTest, StreamTermIdsMapToTheModelsWhateverTheOrder) {
  v1::Schema model_proto = testing::TextSchema(4, 2);  // w0 w1 w2 w3
  auto schema = ModelSchema::FromProto(model_proto);
  ASSERT_TRUE(schema.ok());
  ASSERT_EQ(schema->vocabulary().size(), 4u);
  const std::vector<std::string>& mv = schema->vocabulary();
  v1::Schema stream = model_proto;
  stream.clear_vocabulary();
  // ids 0, 1 as in the model, 2 unknown, 3 as in the model, 4 the model's 2.
  for (const std::string& t : {mv[0], mv[1], std::string("zz-unknown"), mv[3], mv[2]}) stream.add_vocabulary(t);
  auto dec = DocumentDecoder::Create(*schema, stream);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  d.set_label("c0");
  for (uint32_t id : {4u, 0u, 2u, 3u, 1u}) {
    d.add_term_ids(id);
    d.add_term_counts(1.0 + id);
  }
  DocumentBuffer buf;
  ASSERT_TRUE(dec->Decode(d, 3, *schema, kGrowNothing, &buf, nullptr, nullptr).ok());
  // (sorted by model id; the unknown term's count is gone)
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(buf.term_counts, (std::vector<double>{1.0, 2.0, 5.0, 4.0}));
}

// A stream whose vocabulary is the model's first terms (converted with the
// model's vocabulary, or before the model grew) keeps its ids; an id past
// the stream's vocabulary is still refused, naming the stream's size.
TEST(DecoderTest, AStreamWithTheModelsFirstTermsKeepsItsIds) {
  v1::Schema model_proto = testing::TextSchema(6, 2);
  auto schema = ModelSchema::FromProto(model_proto);
  ASSERT_TRUE(schema.ok());
  v1::Schema stream = model_proto;
  stream.clear_vocabulary();
  for (int i = 0; i < 4; ++i) stream.add_vocabulary(model_proto.vocabulary(i));
  auto dec = DocumentDecoder::Create(*schema, stream);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  for (uint32_t id : {3u, 0u, 2u, 0u}) {
    d.add_term_ids(id);
    d.add_term_counts(2.0);
  }
  DocumentBuffer buf;
  ASSERT_TRUE(dec->Decode(d, 0, *schema, kGrowNothing, &buf, nullptr, nullptr).ok());
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(buf.term_counts, (std::vector<double>{4.0, 2.0, 2.0}));
  d.add_term_ids(4);  // the model's term 4, but not the stream's
  d.add_term_counts(1.0);
  Status st = dec->Decode(d, 0, *schema, kGrowNothing, &buf, nullptr, nullptr);
  EXPECT_THAT(st.message(), HasSubstr("term id 4 out of range: the stream's vocabulary size is 4"));
}

class TokenCountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proto_ = testing::TextSchema(10, 2);
    auto schema = ModelSchema::FromProto(proto_);
    ASSERT_TRUE(schema.ok());
    schema_ = std::move(schema).value();
    auto dec = DocumentDecoder::Create(schema_, proto_);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    dec_.emplace(std::move(dec).value());
  }
  Status Decode(const v1::Document& d) { return dec_->Decode(d, 5, schema_, kGrowNothing, &buf_, nullptr, nullptr); }
  v1::Schema proto_;
  ModelSchema schema_;
  std::optional<DocumentDecoder> dec_;
  DocumentBuffer buf_;
};

TEST_F(TokenCountsTest, CountsAreTakenAsTheyAre) {
  v1::Document d;
  d.set_label("c1");
  d.add_tokens("t3");
  d.add_token_counts(3.0);
  d.add_tokens("t7");
  d.add_token_counts(0.5);
  d.add_tokens("t3");  // repeated: summed
  d.add_token_counts(0.25);
  d.add_tokens("t2");  // the same term as a term id: summed too
  d.add_token_counts(1e12);
  d.add_term_ids(2);
  d.add_term_counts(2.0);
  ASSERT_TRUE(Decode(d).ok());
  EXPECT_EQ(buf_.term_ids, (std::vector<uint32_t>{2, 3, 7}));
  EXPECT_EQ(buf_.term_counts, (std::vector<double>{1e12 + 2.0, 3.25, 0.5}));
}

TEST_F(TokenCountsTest, NoCountsMeansOnceEach) {
  v1::Document d;
  d.add_tokens("t1");
  d.add_tokens("t1");
  d.add_tokens("t4");
  ASSERT_TRUE(Decode(d).ok());
  EXPECT_EQ(buf_.term_ids, (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(buf_.term_counts, (std::vector<double>{2.0, 1.0}));
}

TEST_F(TokenCountsTest, UnknownTokensAreCountedByTheirCounts) {
  v1::Document d;
  d.add_tokens("t1");
  d.add_tokens("never-seen");
  d.add_token_counts(1.0);
  d.add_token_counts(4.0);
  DecodeCounters counters;
  ASSERT_TRUE(dec_->Decode(d, 0, schema_, kGrowNothing, &buf_, nullptr, &counters).ok());
  EXPECT_EQ(counters.unseen_terms, 4u);
  d.set_token_counts(1, 1e300);  // saturates, never wraps
  ASSERT_TRUE(dec_->Decode(d, 0, schema_, kGrowNothing, &buf_, nullptr, &counters).ok());
  EXPECT_GE(counters.unseen_terms, 4u + 1000000000000000000u);
}

// Document.text: split by the library tokenizer (case folded, punctuation
// separates), each occurrence once, summed with tokens and term ids naming
// the same term; words the model does not know are counted as unseen.
TEST_F(TokenCountsTest, TextIsTokenizedLikeConvertAndSummedWithTokens) {
  v1::Document d;
  d.set_text("T3, t7! T3 -- never-seen");
  d.add_tokens("t3");
  DecodeCounters counters;
  ASSERT_TRUE(dec_->Decode(d, 0, schema_, kGrowNothing, &buf_, nullptr, &counters).ok());
  EXPECT_EQ(buf_.term_ids, (std::vector<uint32_t>{3, 7}));
  EXPECT_EQ(buf_.term_counts, (std::vector<double>{3.0, 1.0}));
  EXPECT_EQ(counters.unseen_terms, 2u);  // "never", "seen"
  std::vector<std::string> words;
  Tokenize(d.text(), &words);
  EXPECT_EQ(words, (std::vector<std::string>{"t3", "t7", "t3", "never", "seen"}));
}

TEST_F(TokenCountsTest, TextWithoutWordsIsAnEmptyDocument) {
  v1::Document d;
  d.set_id("blank");
  d.set_text(" ,;  -- !");
  Status st = Decode(d);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("id 'blank'"));
  EXPECT_THAT(st.message(), HasSubstr("its text has no words (9 bytes"));
  d.add_reals(1.0);  // other content: then the text may be empty of words
  st = Decode(d);
  EXPECT_THAT(st.message(), Not(HasSubstr("text")));
}

TEST_F(TokenCountsTest, BadCountsAreRefusedByTheRuleOfTermCounts) {
  for (double bad : {-5.0, 0.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    v1::Document d;
    d.set_id("doc-x");
    d.add_tokens("t1");
    d.add_tokens("t2");
    d.add_token_counts(1.0);
    d.add_token_counts(bad);
    Status st = Decode(d);
    ASSERT_TRUE(st.IsInvalidDocument()) << bad << ": " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr("document #5 (id 'doc-x')"));
    EXPECT_THAT(st.message(), HasSubstr("token_counts[1] is "));
    EXPECT_THAT(st.message(), HasSubstr("expected a finite count > 0"));
    // The same count as a term count: the same words but the field's name.
    v1::Document t;
    t.set_id("doc-x");
    t.add_term_ids(1);
    t.add_term_ids(2);
    t.add_term_counts(1.0);
    t.add_term_counts(bad);
    Status ts = Decode(t);
    ASSERT_TRUE(ts.IsInvalidDocument()) << ts.ToString();
    std::string expected = st.message();
    expected.replace(expected.find("token_counts"), 12, "term_counts");
    EXPECT_EQ(ts.message(), expected);
  }
}

TEST_F(TokenCountsTest, CountsMustBeOnePerTokenOrNone) {
  v1::Document d;
  d.set_id("short");
  d.add_tokens("t1");
  d.add_tokens("t2");
  d.add_tokens("t3");
  d.add_token_counts(1.0);
  d.add_token_counts(2.0);
  Status st = Decode(d);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("document #5 (id 'short')"));
  EXPECT_THAT(st.message(), HasSubstr("token_counts has 2 entries, expected 3 (one per token) or 0"));
  d.clear_tokens();  // counts without tokens (in a document with a term)
  d.add_term_ids(1);
  st = Decode(d);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("token_counts has 2 entries, expected 0 (one per token) or 0"));
}

TEST_F(TokenCountsTest, TokenCountsThatAddUpToInfinityAreRefused) {
  v1::Document d;
  for (int i = 0; i < 3; ++i) {
    d.add_tokens("t6");
    d.add_token_counts(1e308);
  }
  Status st = Decode(d);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("term id 6"));
  EXPECT_THAT(st.message(), HasSubstr("expected a finite total"));
}

TEST_F(TokenCountsTest, HashedTokensKeepTheirCounts) {
  v1::Schema proto;
  proto.set_hashed_dim(64);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto dec = DocumentDecoder::Create(*schema, proto);
  ASSERT_TRUE(dec.ok());
  v1::Document d;
  d.add_tokens("hello");
  d.add_token_counts(2.5);
  ASSERT_TRUE(dec->Decode(d, 0, *schema, kGrowNothing, &buf_, nullptr, nullptr).ok());
  EXPECT_EQ(buf_.term_ids, (std::vector<uint32_t>{static_cast<uint32_t>(HashToken("hello", 64))}));
  EXPECT_EQ(buf_.term_counts, (std::vector<double>{2.5}));
}

TEST_F(TokenCountsTest, DecodeForLearningNeedsALabelOnlyWhenTheLossDoes) {
  v1::Document d;
  d.set_id("u");
  d.add_tokens("t1");
  std::string new_class;
  ASSERT_TRUE(dec_->DecodeForLearning(d, 3, schema_, "", &buf_, &new_class).ok());
  Status st = dec_->DecodeForLearning(d, 3, schema_, "ncll", &buf_, &new_class);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_EQ(st.message(), "document #3 (id 'u'): loss 'ncll' needs a label, the document has none");
  d.set_label("c0");
  ASSERT_TRUE(dec_->DecodeForLearning(d, 3, schema_, "ncll", &buf_, &new_class).ok());
  EXPECT_EQ(buf_.label, 0);
  // A new label: refused by a closed schema, returned by an open one (and
  // then the document is labelled).
  d.set_label("brand-new");
  st = dec_->DecodeForLearning(d, 3, schema_, "ncll", &buf_, &new_class);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("label 'brand-new' is not a class of the model"));
  schema_.set_open_classes(true);
  ASSERT_TRUE(dec_->DecodeForLearning(d, 3, schema_, "ncll", &buf_, &new_class).ok());
  EXPECT_EQ(new_class, "brand-new");
  // Its counts are checked as Decode checks them.
  d.add_token_counts(-5);
  st = dec_->DecodeForLearning(d, 3, schema_, "ncll", &buf_, &new_class);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("token_counts[0] is -5, expected a finite count > 0"));
}

// DocumentBuffer::Canonicalize against the reference it replaced (a stable
// sort of positions, then repeats summed in order of occurrence): the same
// ids and bit-identical counts, for short documents (insertion sort) and
// long ones, with many repeats and counts whose sum depends on the order.
TEST(DocumentBufferTest, CanonicalizeMatchesStableSortAndOrderedSums) {
  auto reference = [](const std::vector<uint32_t>& ids, const std::vector<double>& counts) {
    std::vector<size_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
    std::pair<std::vector<uint32_t>, std::vector<double>> out;
    for (size_t o : order) {
      if (!out.first.empty() && out.first.back() == ids[o]) {
        out.second.back() += counts[o];
      } else {
        out.first.push_back(ids[o]);
        out.second.push_back(counts[o]);
      }
    }
    return out;
  };
  std::mt19937_64 rng(11);
  const double kCounts[] = {1.0, 1.0, 2.0, 0.1, 1e16, -1e16, 3.7, 1e-3, 0.3};
  for (int trial = 0; trial < 20000; ++trial) {
    const size_t n = rng() % (trial % 4 == 0 ? 300 : 80);  // past the rank sort's 128 too
    const uint32_t range = 1 + static_cast<uint32_t>(rng() % (trial % 3 == 0 ? 8 : 100000));
    DocumentBuffer d;
    for (size_t i = 0; i < n; ++i) {
      d.term_ids.push_back(trial % 7 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % range));
      d.term_counts.push_back(kCounts[rng() % std::size(kCounts)]);
    }
    if (trial % 5 == 0) std::sort(d.term_ids.begin(), d.term_ids.end());  // sorted, maybe with repeats
    const auto want = reference(d.term_ids, d.term_counts);
    d.Canonicalize();
    ASSERT_EQ(d.term_ids, want.first) << "trial " << trial;
    ASSERT_EQ(d.term_counts.size(), want.second.size());
    if (!want.second.empty()) {  // (memcmp of empty vectors may be handed null pointers)
      EXPECT_EQ(std::memcmp(d.term_counts.data(), want.second.data(), want.second.size() * sizeof(double)), 0)
          << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tributary
