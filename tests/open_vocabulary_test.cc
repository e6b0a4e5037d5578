// Open vocabularies (issue 14, item 1): a model whose schema has an open
// vocabulary adds the terms it has not seen as documents bring them (ABI 1.5
// add_terms in place while there is room, grow_terms past it), a new term
// starts where a term present from the start and never seen would be, the
// model predicts documents with terms it has never seen, snapshots keep the
// room and resume exactly, and what cannot grow is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/model_config.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

v1::Schema OpenSchema(const std::vector<std::string>& classes) {
  v1::Schema s;
  s.set_open_vocabulary(true);
  for (const auto& c : classes) s.add_class_names(c);
  return s;
}

// Document i: label i % 3, four words of its class's slice of a Zipf-like
// vocabulary of `words` words and two anywhere, as tokens; new words keep
// appearing for as long as the stream goes.
v1::Document Doc(uint64_t i, uint32_t words, std::mt19937_64& rng) {
  v1::Document d;
  d.set_id("d" + std::to_string(i));
  const uint32_t k = static_cast<uint32_t>(i % 3);
  d.set_label(std::string(1, static_cast<char>('a' + k)));
  for (int j = 0; j < 6; ++j) {
    const uint32_t w = j < 4 ? (k * 1000 + static_cast<uint32_t>(rng() % (words / 3 + 1))) % words
                             : static_cast<uint32_t>(rng() % words);
    d.add_tokens("w" + std::to_string(w));
    d.add_token_counts(1.0 + static_cast<double>(rng() % 2));
  }
  return d;
}

std::vector<v1::Document> Stream(size_t n, uint32_t words, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<v1::Document> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Doc(i, words, rng));
  return out;
}

std::unique_ptr<Model> NewModel(const v1::Schema& proto, const std::string& loss, Options options = {},
                                const std::string& family = "multinomial") {
  auto schema = ModelSchema::FromProto(proto);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily(family), testing::BuiltinLoss(loss), *schema, std::move(options), 3);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// Learns `docs` (their terms and classes added as they come) into `model`,
// counting how often the statistics moved to a new buffer.
struct Growth {
  int moves = 0;
  int layout_changes = 0;
};
Growth Learn(Model* model, const v1::Schema& stream, const std::vector<v1::Document>& docs, size_t from = 0,
             size_t to = SIZE_MAX) {
  Growth run;
  auto dec = DocumentDecoder::Create(model->schema(), stream);
  EXPECT_TRUE(dec.ok()) << dec.status().ToString();
  auto learner = Learner::Create(model, LearnerOptions());
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  DocumentBuffer buf;
  for (size_t i = from; i < std::min(to, docs.size()); ++i) {
    const double* before = model->stats().raw().data();
    const uint64_t layout = model->layout_version();
    Status st = DecodeGrowing(*dec, docs[i], i, model, kGrowClassesAndTerms, &buf, nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(buf.new_terms.empty());
    run.moves += model->stats().raw().data() != before;
    run.layout_changes += model->layout_version() != layout;
    st = (*learner)->Learn(buf.View(), nullptr);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return run;
}

// The terms of `docs` in order of first occurrence.
std::vector<std::string> FirstOccurrence(const std::vector<v1::Document>& docs) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& d : docs) {
    for (const auto& t : d.tokens()) {
      if (seen.insert(t).second) out.push_back(t);
    }
  }
  return out;
}

// 3,000 words over a stream that keeps bringing new ones: they come into use
// in place while the room lasts (no move, the layout unchanged) and the room
// grows by half each time it runs out, so the statistics move O(log terms)
// times, not once per term.
TEST(OpenVocabularyTest, TermsComeIntoUseInPlaceAndTheRoomGrowsGeometrically) {
  const v1::Schema proto = OpenSchema({"a", "b", "c"});
  auto model = NewModel(proto, "ncll");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->schema().vocab_size(), 0u);
  EXPECT_EQ(model->vocab_capacity(), 1024u) << "an empty open vocabulary starts with room for 1,024 terms";
  const auto docs = Stream(4000, 3000);
  const Growth run = Learn(model.get(), proto, docs);
  const auto terms = FirstOccurrence(docs);
  ASSERT_GT(terms.size(), 2500u);
  EXPECT_EQ(model->schema().vocabulary(), terms) << "terms get ids in order of first occurrence";
  EXPECT_GE(model->vocab_capacity(), model->schema().vocab_size());
  EXPECT_LE(model->vocab_capacity(), terms.size() + terms.size() / 2 + 1);
  // 1024 -> 1.5x per growth: 3 or 4 moves for ~3,000 terms.
  EXPECT_GE(run.moves, 2);
  EXPECT_LE(run.moves, 4) << "the statistics moved once per new term";
  EXPECT_EQ(run.layout_changes, run.moves) << "in place, the layout (and the learner's state) stands";
  // Room for the vocabulary and one never-seen term (the sentinel row).
  EXPECT_EQ(model->stats().blocks()[1].size, (model->vocab_capacity() + 1) * 3);
}

// Under NLL (class weights are the labels, whatever the scores), a term that
// joins the open vocabulary when it first appears ends with the statistics
// it has in a model that knew every term from the start: bit for bit, class
// block and every term's row, across the in-place and the copying growth.
TEST(OpenVocabularyTest, ANewTermHoldsWhatATermKnownFromTheStartWouldHold) {
  const auto docs = Stream(3000, 2500);
  const v1::Schema open = OpenSchema({"a", "b", "c"});
  auto grown = NewModel(open, "nll");
  ASSERT_TRUE(grown);
  Learn(grown.get(), open, docs);
  v1::Schema closed;
  for (const auto& t : FirstOccurrence(docs)) closed.add_vocabulary(t);
  for (const char* c : {"a", "b", "c"}) closed.add_class_names(c);
  auto fixed = NewModel(closed, "nll");
  ASSERT_TRUE(fixed);
  Learn(fixed.get(), closed, docs);
  // NLL's first step (rho = 1) restarts every block: terms never seen are
  // then no longer at raw zero, and a new term must start where they are.
  ASSERT_GE(grown->learner_state().materializations, 1u);
  ASSERT_EQ(grown->schema().vocabulary(), fixed->schema().vocabulary());
  const auto& a = grown->stats().raw();
  const auto& b = fixed->stats().raw();
  for (int blk = 0; blk < 2; ++blk) {
    EXPECT_EQ(grown->stats().blocks()[blk].scale, fixed->stats().blocks()[blk].scale);
    EXPECT_EQ(grown->stats().blocks()[blk].shift, fixed->stats().blocks()[blk].shift);
  }
  const uint64_t n = grown->stats().blocks()[1].offset + 3 * grown->schema().vocab_size();
  ASSERT_EQ(b.size(), n);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]) << "statistic " << i;
}

// A document with words the model has never seen is predicted from the words
// it knows: the model does not change (nothing is added when predicting), the
// unseen occurrences are counted, and the scores are those of the document
// without them.
TEST(OpenVocabularyTest, PredictsDocumentsWithTermsItHasNeverSeen) {
  const v1::Schema open = OpenSchema({"a", "b", "c"});
  auto model = NewModel(open, "ncll");
  ASSERT_TRUE(model);
  const auto docs = Stream(600, 400);
  Learn(model.get(), open, docs);
  const uint64_t vocab = model->schema().vocab_size();
  v1::Document with;
  with.set_text(docs[5].tokens(0) + " zebra " + docs[9].tokens(1) + " quokka zebra");
  v1::Document without;
  without.set_text(docs[5].tokens(0) + " " + docs[9].tokens(1));
  auto dec = DocumentDecoder::Create(model->schema(), open);
  ASSERT_TRUE(dec.ok());
  DocumentBuffer a, b;
  DecodeCounters counters;
  ASSERT_TRUE(dec->Decode(with, 0, model->schema(), kGrowNothing, &a, nullptr, &counters).ok());
  EXPECT_TRUE(a.new_terms.empty());
  EXPECT_EQ(counters.unseen_terms, 3u);
  ASSERT_TRUE(dec->Decode(without, 1, model->schema(), kGrowNothing, &b, nullptr, nullptr).ok());
  EXPECT_EQ(a.term_ids, b.term_ids);
  auto state = model->NewScoringState();
  ASSERT_TRUE(state.ok());
  std::vector<double> sa(3), sb(3);
  ASSERT_TRUE(model->Score(a.View(), state->get(), sa.data()).ok());
  ASSERT_TRUE(model->Score(b.View(), state->get(), sb.data()).ok());
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(model->schema().vocab_size(), vocab);
}

// A snapshot keeps the vocabulary, its order and the room: a model saved
// part-way, loaded and trained on the rest (through another growth of the
// room) equals the model trained without the interruption, bit for bit.
TEST(OpenVocabularyTest, SnapshotsKeepTheRoomAndResumeExactly) {
  const std::string dir = testing::TempDir("open_vocab_snapshot");
  const v1::Schema open = OpenSchema({"a", "b", "c"});
  const auto docs = Stream(3000, 3000);
  auto whole = NewModel(open, "ncll");
  ASSERT_TRUE(whole);
  Learn(whole.get(), open, docs);
  auto first = NewModel(open, "ncll");
  ASSERT_TRUE(first);
  Learn(first.get(), open, docs, 0, 700);
  const uint64_t room = first->vocab_capacity();
  ASSERT_GT(room, first->schema().vocab_size()) << "saved with room to spare";
  ASSERT_TRUE(first->Save(dir + "/m.trib").ok());
  auto loaded = Model::Load(dir + "/m.trib", testing::BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE((*loaded)->schema().open_vocabulary());
  EXPECT_EQ((*loaded)->vocab_capacity(), room);
  EXPECT_EQ((*loaded)->schema().vocabulary(), first->schema().vocabulary());
  const Growth rest = Learn(loaded->get(), open, docs, 700);
  EXPECT_GE(rest.moves, 1) << "the test should cross a growth of the room after loading";
  EXPECT_EQ((*loaded)->schema().vocabulary(), whole->schema().vocabulary());
  EXPECT_EQ((*loaded)->vocab_capacity(), whole->vocab_capacity());
  EXPECT_EQ((*loaded)->stats().raw(), whole->stats().raw());
}

// A snapshot declaring room it cannot have had is refused before the family
// allocates for it; so is room on a model without an open vocabulary.
TEST(OpenVocabularyTest, SnapshotWithImpossibleRoomIsRefused) {
  const std::string dir = testing::TempDir("open_vocab_room");
  const v1::Schema open = OpenSchema({"a", "b", "c"});
  auto model = NewModel(open, "ncll");
  ASSERT_TRUE(model);
  Learn(model.get(), open, Stream(50, 100));
  ASSERT_TRUE(model->Save(dir + "/m.trib").ok());
  const std::string file = testing::ReadFile(dir + "/m.trib");
  for (uint64_t room : {uint64_t{5}, uint64_t{1} << 40}) {
    testing::WriteFile(dir + "/bad.trib",
                       testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) { s->set_vocab_capacity(room); }));
    auto r = Model::Load(dir + "/bad.trib", testing::BuiltinRegistry());
    ASSERT_FALSE(r.ok()) << room;
    EXPECT_THAT(r.status().message(), HasSubstr("vocab_capacity " + std::to_string(room) + " is invalid"));
  }
  testing::WriteFile(dir + "/closed.trib", testing::ResealSnapshot(file, [&](v1::ModelSnapshot* s) {
                       s->mutable_schema()->set_open_vocabulary(false);
                     }));
  auto r = Model::Load(dir + "/closed.trib", testing::BuiltinRegistry());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not open"));
}

// What the decoder lists: each new term once, in order, from tokens, text and
// the term ids of a stream with its own vocabulary; an empty token or one
// longer than kMaxNewTermBytes is counted as unseen, never added.
TEST(OpenVocabularyTest, DecoderListsNewTermsOnceAndRefusesToGrowOnHostileTerms) {
  const v1::Schema open = OpenSchema({"a"});
  auto model = NewModel(open, "ncll");
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->AddTerms({"alpha", "beta"}).ok());
  auto dec = DocumentDecoder::Create(model->schema(), open);
  ASSERT_TRUE(dec.ok());
  v1::Document d;
  d.add_tokens("gamma");
  d.add_tokens("alpha");
  d.add_tokens("gamma");
  d.add_tokens("");
  d.add_tokens(std::string(kMaxNewTermBytes + 1, 'x'));
  d.set_text("Delta beta DELTA");
  DocumentBuffer buf;
  DecodeCounters counters;
  ASSERT_TRUE(dec->Decode(d, 0, model->schema(), kGrowClassesAndTerms, &buf, nullptr, &counters).ok());
  EXPECT_EQ(buf.new_terms, (std::vector<std::string>{"gamma", "delta"}));
  EXPECT_EQ(counters.unseen_terms, 2u) << "the empty and the over-long token";
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{0, 1}));
  // Classes only (evaluating a latent family): terms are not listed.
  ASSERT_TRUE(dec->Decode(d, 0, model->schema(), kGrowClasses, &buf, nullptr, nullptr).ok());
  EXPECT_TRUE(buf.new_terms.empty());
  // A stream with its own vocabulary: unknown ids are added by name, and
  // known afterwards through the same decoder.
  v1::Schema closed;
  for (const char* t : {"beta", "epsilon", "zeta"}) closed.add_vocabulary(t);
  closed.add_class_names("a");
  auto dec2 = DocumentDecoder::Create(model->schema(), closed);
  ASSERT_TRUE(dec2.ok());
  v1::Document ids;
  for (uint32_t t : {0u, 1u, 2u}) ids.add_term_ids(t);
  ASSERT_TRUE(DecodeGrowing(*dec2, ids, 0, model.get(), kGrowClassesAndTerms, &buf, nullptr).ok());
  EXPECT_EQ(model->schema().vocabulary(), (std::vector<std::string>{"alpha", "beta", "epsilon", "zeta"}));
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{1, 2, 3}));
  // Growing is for learning only: DecodeForLearning lists, Decode for
  // prediction drops.
  std::string new_class;
  v1::Document late;
  late.set_text("eta");
  ASSERT_TRUE(dec->DecodeForLearning(late, 3, model->schema(), "", &buf, &new_class).ok());
  EXPECT_EQ(buf.new_terms, (std::vector<std::string>{"eta"}));
}

// Streams and models that do not fit: named, with what to do instead.
TEST(OpenVocabularyTest, WhatCannotGrowIsRefusedByName) {
  // Families without add_terms.
  for (const char* family : {"lda", "lda-classifier", "mmnb"}) {
    auto schema = ModelSchema::FromProto(OpenSchema({"a", "b"}));
    ASSERT_TRUE(schema.ok());
    auto m = Model::Create(testing::BuiltinFamily(family), testing::BuiltinLoss("nll"), *schema, {}, 1);
    ASSERT_FALSE(m.ok()) << family;
    EXPECT_THAT(m.status().message(),
                HasSubstr("family '" + std::string(family) + "' cannot learn an open vocabulary"));
    EXPECT_THAT(m.status().message(), HasSubstr("--hashed-dim"));
  }
  // prior=log is ln |W|, which an open vocabulary does not have.
  {
    auto schema = ModelSchema::FromProto(OpenSchema({"a", "b"}));
    auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("nll"), *schema,
                           {{"prior", "log"}}, 1);
    ASSERT_FALSE(m.ok());
    EXPECT_THAT(m.status().message(), HasSubstr("prior=log"));
  }
  // A closed vocabulary does not grow.
  auto closed = NewModel(testing::TextSchema(10, 2), "nll");
  ASSERT_TRUE(closed);
  Status st = closed->AddTerms({"new"});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not open"));
  EXPECT_EQ(closed->schema().vocab_size(), 10u);
  // Both ways of reading unknown terms at once.
  v1::Schema both = OpenSchema({"a"});
  both.set_hashed_dim(64);
  auto s = ModelSchema::FromProto(both);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("both open_vocabulary and hashed_dim"));
}

// A hashed model reads an open-vocabulary stream by hashing its tokens; term
// ids in such a stream (it has no vocabulary) are refused by name.
TEST(OpenVocabularyTest, HashedModelsReadOpenStreams) {
  v1::Schema hashed;
  hashed.set_hashed_dim(64);
  hashed.add_class_names("a");
  auto model = NewModel(hashed, "nll");
  ASSERT_TRUE(model);
  auto dec = DocumentDecoder::Create(model->schema(), OpenSchema({"a"}));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  d.set_text("one two");
  DocumentBuffer buf;
  ASSERT_TRUE(dec->Decode(d, 0, model->schema(), kGrowClassesAndTerms, &buf, nullptr, nullptr).ok());
  std::vector<uint32_t> want = {static_cast<uint32_t>(HashToken("one", 64)),
                                static_cast<uint32_t>(HashToken("two", 64))};
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  EXPECT_EQ(buf.term_ids, want);
  d.Clear();
  d.add_term_ids(3);
  Status st = dec->Decode(d, 4, model->schema(), kGrowNothing, &buf, nullptr, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument());
  EXPECT_THAT(st.message(), HasSubstr("document #4"));
  EXPECT_THAT(st.message(), HasSubstr("without a vocabulary"));
}

// The server's decoder speaks the model's own ids: with an open vocabulary
// an id is checked against the vocabulary as it has grown since the decoder
// was made (a learn request checked against the published model and applied
// to the learner's must agree), and refused past it by name.
TEST(OpenVocabularyTest, ModelIdsFollowTheGrowingVocabulary) {
  auto model = NewModel(OpenSchema({"a"}), "ncll");
  ASSERT_TRUE(model);
  auto dec = DocumentDecoder::ForModel(model->schema());
  ASSERT_TRUE(dec.ok());
  ASSERT_TRUE(model->AddTerms({"x", "y", "z"}).ok());
  v1::Document d;
  d.add_term_ids(2);
  d.add_term_ids(0);
  DocumentBuffer buf;
  ASSERT_TRUE(dec->Decode(d, 0, model->schema(), kGrowNothing, &buf, nullptr, nullptr).ok());
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{0, 2}));
  d.add_term_ids(3);
  Status st = dec->Decode(d, 6, model->schema(), kGrowClassesAndTerms, &buf, nullptr, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument());
  EXPECT_THAT(st.message(), HasSubstr("document #6: term id 3 out of range: the model's vocabulary has 3 terms"));
}

// A published copy (Model::Clone, the server's Publish) shares the
// vocabulary instead of copying it, and keeps what it was published with
// when the learner's model adds terms afterwards (copy-on-write).
TEST(OpenVocabularyTest, ClonesShareTheVocabularyUntilTermsAreAdded) {
  auto model = NewModel(OpenSchema({"a"}), "ncll");
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->AddTerms({"x", "y"}).ok());
  auto copy = model->Clone();
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(&(*copy)->schema().vocabulary(), &model->schema().vocabulary());  // shared, not copied
  ASSERT_TRUE(model->AddTerms({"z"}).ok());
  EXPECT_NE(&(*copy)->schema().vocabulary(), &model->schema().vocabulary());
  EXPECT_EQ((*copy)->schema().vocab_size(), 2u);
  EXPECT_EQ((*copy)->schema().TermIndex("z"), -1);
  EXPECT_EQ(model->schema().vocab_size(), 3u);
  EXPECT_EQ(model->schema().TermIndex("z"), 2);
  EXPECT_EQ(model->schema().TermIndex("x"), 0);
  // Once the copy is gone, terms are added in place again.
  copy = Result<std::unique_ptr<Model>>(Status::Internal("released"));
  const auto* before = &model->schema().vocabulary();
  ASSERT_TRUE(model->AddTerms({"w"}).ok());
  EXPECT_EQ(&model->schema().vocabulary(), before);
  EXPECT_EQ(model->schema().TermIndex("w"), 3);
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// The schema's term index (open addressing over ids, schema.cc): every term
// found under its id through growth past many rehashes, absent terms -1,
// AddTerms skipping known and repeated names, copies independent, and a
// vocabulary with a repeated term refused naming both ids.
TEST(SchemaTermIndexTest, FindsEveryTermThroughGrowthAndRefusesDuplicates) {
  v1::Schema proto;
  for (int i = 0; i < 5000; ++i) proto.add_vocabulary("t" + std::to_string(i));
  proto.add_class_names("a");
  auto s = ModelSchema::FromProto(proto);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(s->TermIndex("t" + std::to_string(i)), i);
  EXPECT_EQ(s->TermIndex("t5000"), -1);
  EXPECT_EQ(s->TermIndex(""), -1);
  ModelSchema copy = *s;
  std::vector<std::string> more;
  for (int i = 4990; i < 25000; ++i) more.push_back("t" + std::to_string(i));  // 10 known
  more.push_back("t24999");                                                    // repeated in the batch
  s->AddTerms(more);
  EXPECT_EQ(s->vocabulary().size(), 25000u);
  for (int i = 0; i < 25000; ++i) ASSERT_EQ(s->TermIndex("t" + std::to_string(i)), i);
  EXPECT_EQ(copy.vocabulary().size(), 5000u);  // the copy kept its own index
  EXPECT_EQ(copy.TermIndex("t6000"), -1);
  EXPECT_EQ(copy.TermIndex("t4999"), 4999);

  proto.add_vocabulary("t17");
  auto dup = ModelSchema::FromProto(proto);
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().ToString(), ::testing::HasSubstr("term 't17' appears twice (ids 17 and 5000)"));
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// Growth limits (Model::SetGrowthLimits): new terms past max_terms are left
// out and the document is learned from the others; a label past max_classes
// or longer than max_label_bytes is refused by Decode and by AddClass; a
// statistics budget caps both; the room made when the model grows never
// passes them, and the limits follow the model into its published copies.
TEST(GrowthLimitsTest, TermsStopAtTheLimitClassesAreRefusedAndTheBudgetHolds) {
  auto model = NewModel(OpenSchema({"a"}), "ncll");
  ASSERT_TRUE(model);
  model->mutable_schema()->set_open_classes(true);
  model->SetGrowthLimits(GrowthLimits{3, 10, 16}, 0);
  auto dec = DocumentDecoder::ForModel(model->schema());
  ASSERT_TRUE(dec.ok());
  v1::Document d;
  d.set_label("a");
  for (int i = 0; i < 25; ++i) d.add_tokens("t" + std::to_string(i));
  DocumentBuffer buf;
  ASSERT_TRUE(DecodeGrowing(*dec, d, 0, model.get(), kGrowClassesAndTerms, &buf, nullptr).ok());
  EXPECT_EQ(model->schema().vocab_size(), 10u);
  EXPECT_EQ(buf.term_ids.size(), 10u);  // learned from the terms it has
  // The next document's new terms are all left out, counted.
  v1::Document e = d;
  e.clear_tokens();
  e.add_tokens("t0");
  e.add_tokens("fresh");
  ASSERT_TRUE(dec->Decode(e, 1, model->schema(), kGrowClassesAndTerms, &buf, nullptr, nullptr).ok());
  EXPECT_TRUE(buf.new_terms.empty());
  EXPECT_EQ(buf.terms_over_limit, 1u);
  // Classes: b and c fit (3), d does not; a long name never.
  for (const char* c : {"b", "c"}) {
    e.set_label(c);
    ASSERT_TRUE(DecodeGrowing(*dec, e, 2, model.get(), kGrowClassesAndTerms, &buf, nullptr).ok()) << c;
  }
  EXPECT_EQ(model->num_classes(), 3u);
  e.set_label("d");
  std::string nc;
  Status st = dec->Decode(e, 7, model->schema(), kGrowClassesAndTerms, &buf, &nc, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("would be class 4, over the model's limit of 3 classes"));
  EXPECT_EQ(buf.limit_refusal, DocumentBuffer::LimitRefusal::kClasses);
  st = model->AddClass("d");  // the model's own check, for callers that skip Decode
  ASSERT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_EQ(model->num_classes(), 3u);
  auto clone = model->Clone();  // a publication keeps the limits
  ASSERT_TRUE(clone.ok());
  EXPECT_EQ((*clone)->schema().limits().max_classes, 3u);

  v1::Schema open_proto = OpenSchema({});
  open_proto.set_open_classes(true);
  auto open = NewModel(open_proto, "ncll");
  ASSERT_TRUE(open);
  open->SetGrowthLimits(GrowthLimits{0, 0, 16}, 0);
  auto dec2 = DocumentDecoder::ForModel(open->schema());
  ASSERT_TRUE(dec2.ok());
  e.set_label(std::string(17, 'L'));
  st = dec2->Decode(e, 8, open->schema(), kGrowClassesAndTerms, &buf, &nc, nullptr);
  ASSERT_TRUE(st.IsInvalidDocument());
  EXPECT_THAT(st.message(), HasSubstr("label of 17 bytes, expected at most 16 bytes"));
  EXPECT_EQ(buf.limit_refusal, DocumentBuffer::LimitRefusal::kLabelBytes);

  // A 4 MiB budget: the vocabulary and the classes grow until the
  // statistics would pass it, and no further.
  const uint64_t budget = 4u << 20;
  open->SetGrowthLimits(GrowthLimits{}, budget);
  v1::Document big;
  big.set_label("x");
  for (int i = 0; i < 200000; ++i) big.add_tokens("w" + std::to_string(i));
  ASSERT_TRUE(DecodeGrowing(*dec2, big, 9, open.get(), kGrowClassesAndTerms, &buf, nullptr).ok());
  EXPECT_LE(open->statistics_bytes(), budget);
  EXPECT_LT(open->schema().vocab_size(), 200000u);
  EXPECT_GT(buf.terms_over_limit, 0u);
  uint32_t refused = 0;
  for (int k = 0; k < 100; ++k) {
    v1::Document c;
    c.add_tokens("w1");
    c.set_label("class" + std::to_string(k));
    Status s = DecodeGrowing(*dec2, c, 10, open.get(), kGrowClassesAndTerms, &buf, nullptr);
    if (!s.ok()) {
      ASSERT_TRUE(s.IsInvalidDocument()) << s.ToString();
      ++refused;
    }
    ASSERT_LE(open->statistics_bytes(), budget) << k;
  }
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(open->schema().limits().max_classes, open->num_classes());
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// The default schema of raw text (model_config.h DefaultTextSchema), one rule
// for serve without --schema, Python's text models and LiveClassifier: open
// vocabulary when the family can add terms, else hashed ids.
TEST(OpenVocabularyTest, TheDefaultTextSchemaFollowsTheFamily) {
  const v1::Schema open = DefaultTextSchema(testing::BuiltinFamily("multinomial").get(), 0, {"a"}, true);
  EXPECT_TRUE(open.open_vocabulary());
  EXPECT_EQ(open.hashed_dim(), 0u);
  EXPECT_TRUE(open.open_classes());
  ASSERT_EQ(open.class_names_size(), 1);
  EXPECT_EQ(open.class_names(0), "a");
  const v1::Schema given = DefaultTextSchema(testing::BuiltinFamily("multinomial").get(), 1024, {}, false);
  EXPECT_FALSE(given.open_vocabulary());
  EXPECT_EQ(given.hashed_dim(), 1024u);
  EXPECT_FALSE(given.open_classes());
  // A family that cannot add terms, and no family: hashed into 2^18 ids.
  ASSERT_EQ(testing::BuiltinFamily("emsd-mixture")->family().add_terms, nullptr);
  for (const Plugin* f : {testing::BuiltinFamily("emsd-mixture").get(), static_cast<const Plugin*>(nullptr)}) {
    const v1::Schema hashed = DefaultTextSchema(f);
    EXPECT_FALSE(hashed.open_vocabulary());
    EXPECT_EQ(hashed.hashed_dim(), kLiveHashedDim);
  }
  // Every one of them makes a model of its family.
  ModelConfig c;
  EXPECT_TRUE(NewModel(c, testing::BuiltinRegistry(), open, 0).ok());
}

}  // namespace
}  // namespace tributary
