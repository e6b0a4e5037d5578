// A stream header's vocabulary is read straight from the wire into the
// reader's terms (DocumentReader::vocabulary(), schema()), not through the
// message's string objects. What the reader answers must be what protobuf
// parses from the same bytes, for every encoding a parser accepts: the
// schema split over several occurrences (which a parser merges), fields in
// any order, unknown fields; invalid UTF-8 in a term is refused as protobuf
// refuses it. A model made from the reader's schema shares its vocabulary,
// and its decoder maps every term to itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/io/coded_stream.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model_config.h"
#include "tributary/stream_io.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

std::string Varint(uint64_t v) {
  uint8_t b[10];
  const uint8_t* e = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, b);
  return std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(e - b));
}
// A length-delimited field.
std::string Field(int number, const std::string& bytes) {
  return Varint((static_cast<uint64_t>(number) << 3) | 2u) + Varint(bytes.size()) + bytes;
}
// A varint field.
std::string VarintField(int number, uint64_t v) { return Varint(static_cast<uint64_t>(number) << 3) + Varint(v); }

// A plain (format_version 1) stream: the header's bytes as given, then `docs`.
std::string WriteStream(const std::string& path, const std::string& header, const std::vector<v1::Document>& docs) {
  std::string file = Varint(header.size()) + header;
  for (const auto& d : docs) {
    const std::string b = d.SerializeAsString();
    file += Varint(b.size()) + b;
  }
  std::ofstream(path, std::ios::binary) << file;
  return path;
}

class StreamHeaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TempDir("stream_header"); }
  // Opens a stream with `header`'s bytes and checks that the reader answers
  // what protobuf parses from them.
  std::unique_ptr<DocumentReader> OpenAndCompare(const std::string& name, const std::string& header) {
    v1::StreamHeader want;
    EXPECT_TRUE(want.ParseFromString(header)) << name;
    auto r = DocumentReader::Open(WriteStream(dir_ + "/" + name, header, {}));
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    if (!r.ok()) return nullptr;
    const DocumentReader& reader = **r;
    const std::vector<std::string> terms(want.schema().vocabulary().begin(), want.schema().vocabulary().end());
    EXPECT_EQ(reader.vocabulary(), terms) << name;
    v1::StreamHeader fields = want;
    if (fields.has_schema()) fields.mutable_schema()->clear_vocabulary();
    EXPECT_EQ(reader.fields().SerializeAsString(), fields.SerializeAsString()) << name;
    EXPECT_EQ(reader.header().SerializeAsString(), want.SerializeAsString()) << name;
    auto schema = reader.schema();
    EXPECT_TRUE(schema.ok()) << name << ": " << schema.status().ToString();
    if (schema.ok()) {
      EXPECT_EQ(schema->vocabulary(), terms) << name;
      EXPECT_EQ(reader.vocabulary(), terms) << name << " (after schema())";
      for (size_t i = 0; i < terms.size(); ++i) EXPECT_EQ(schema->TermIndex(terms[i]), static_cast<int64_t>(i));
      EXPECT_EQ(schema->classes().size(), static_cast<size_t>(want.schema().class_names_size())) << name;
    }
    return std::move(r).value();
  }
  std::string dir_;
};

TEST_F(StreamHeaderTest, TheReaderAnswersWhatProtobufParses) {
  const std::string magic = Field(1, kStreamMagic);
  const std::string version = VarintField(2, 1);
  // The usual encoding (what DocumentWriter writes).
  v1::StreamHeader h = NewStreamHeader(false);
  *h.mutable_schema() = testing::TextSchema(300, 3);
  h.mutable_schema()->add_vocabulary("caf\xc3\xa9");          // valid UTF-8, not ASCII
  h.mutable_schema()->add_vocabulary(std::string(200, 'x'));  // longer than a string's own room
  h.set_document_count(12);
  h.set_source("somewhere");
  OpenAndCompare("usual", h.SerializeAsString());
  // The schema in three occurrences (terms in two of them, a class in
  // between), after the other fields and between them.
  const std::string part1 = Field(1, "alpha") + Field(1, "beta") + Field(3, "c0");
  const std::string part2 = VarintField(2, 0) + Field(3, "c1");
  const std::string part3 = Field(1, "gamma") + VarintField(6, 1);  // + open_vocabulary
  OpenAndCompare("split", Field(3, part1) + magic + Field(3, part2) + version + Field(3, part3) + VarintField(4, 3));
  // Unknown fields (a newer writer), inside the schema and out, of every wire type.
  const std::string unknown = VarintField(90, 7) + Varint((91u << 3) | 1u) + std::string(8, '\x01') +
                              Field(92, "opaque") + Varint((93u << 3) | 5u) + std::string(4, '\x02');
  OpenAndCompare("unknown", magic + version + unknown + Field(3, Field(1, "one") + unknown + Field(1, "two")));
  // A group (no Tributary message has one; an unknown field to a parser,
  // skipped whole, inside the schema too).
  OpenAndCompare("group", magic + version + Varint((7u << 3) | 3u) + VarintField(1, 5) + Varint((7u << 3) | 4u) +
                              Field(3, Field(1, "one") + Varint((8u << 3) | 3u) + Varint((8u << 3) | 4u)));
  // A group and no schema (fuzz finding group-without-schema: no empty
  // schema may appear).
  OpenAndCompare("group-no-schema", magic + version + Varint((14u << 3) | 3u) + Varint((14u << 3) | 4u));
  // No schema at all, and a schema without terms.
  OpenAndCompare("no-schema", magic + version);
  OpenAndCompare("no-terms", magic + version + Field(3, Field(3, "c0")));
}

TEST_F(StreamHeaderTest, DamagedHeadersAreRefusedAsProtobufRefusesThem) {
  const std::string head = Field(1, kStreamMagic) + VarintField(2, 1);
  struct Case {
    const char* name;
    std::string bytes;
  };
  const Case cases[] = {
      {"invalid UTF-8 in a term", head + Field(3, Field(1, "ok") + Field(1, "bad\xff"))},
      {"a surrogate in a term", head + Field(3, Field(1, "\xed\xa0\x80"))},
      {"a term cut off", head + Field(3, Field(1, "ok") + Varint((1u << 3) | 2u) + Varint(10) + "ab")},
      {"a schema cut off", head + Varint((3u << 3) | 2u) + Varint(100) + Field(1, "ab")},
  };
  for (const Case& c : cases) {
    v1::StreamHeader h;
    ASSERT_FALSE(h.ParseFromString(c.bytes)) << c.name << ": protobuf parses it; the case is wrong";
    auto r = DocumentReader::Open(WriteStream(dir_ + "/bad", c.bytes, {}));
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_TRUE(r.status().IsCorruption()) << c.name << ": " << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr("not a Tributary document stream")) << c.name;
  }
}

// A schema the model refuses (a term twice) fails schema() with the
// schema's error, and the reader still has every term.
TEST_F(StreamHeaderTest, ARefusedSchemaKeepsTheTerms) {
  v1::StreamHeader h = NewStreamHeader(false);
  for (const char* t : {"a", "b", "a"}) h.mutable_schema()->add_vocabulary(t);
  auto r = DocumentReader::Open(WriteStream(dir_ + "/dup", h.SerializeAsString(), {}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int pass = 0; pass < 2; ++pass) {
    auto s = (*r)->schema();
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("vocabulary term 'a' appears twice (ids 0 and 2)"));
    EXPECT_EQ((*r)->vocabulary(), (std::vector<std::string>{"a", "b", "a"}));
  }
  EXPECT_EQ((*r)->header().schema().vocabulary_size(), 3);
  // FromProto with the terms apart: a message with terms of its own is refused.
  std::vector<std::string> terms{"x"};
  auto both = ModelSchema::FromProto(h.schema(), &terms);
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("expected none"));
  EXPECT_EQ(terms, std::vector<std::string>{"x"});
}

// The model train makes shares the reader's vocabulary; its decoder maps
// every term to itself, and a model with the terms elsewhere maps them by
// name, as the decoder of a whole v1::Schema does.
TEST_F(StreamHeaderTest, AModelFromTheReadersSchemaDecodesItsIdsAsThemselves) {
  v1::StreamHeader h = NewStreamHeader(false);
  *h.mutable_schema() = testing::TextSchema(50, 2);
  std::vector<v1::Document> docs(1);
  docs[0].set_label("c1");
  for (uint32_t id : {49u, 0u, 7u}) {
    docs[0].add_term_ids(id);
    docs[0].add_term_counts(1.0 + id);
  }
  auto r = DocumentReader::Open(WriteStream(dir_ + "/s", h.SerializeAsString(), docs));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ModelConfig c;
  c.family = "multinomial";
  c.loss = "nll";
  auto m = NewModel(c, testing::BuiltinRegistry(), (*r)->schema(), 1, "s");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(&(*m)->schema().vocabulary(), &(*r)->vocabulary()) << "the model copied the vocabulary";
  auto dec = DocumentDecoder::Create((*m)->schema(), (*r)->fields().schema(), (*r)->vocabulary());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  v1::Document d;
  bool eof = true;
  ASSERT_TRUE((*r)->Next(&d, &eof).ok());
  DocumentBuffer buf;
  ASSERT_TRUE(dec->Decode(d, 0, (*m)->schema(), kGrowNothing, &buf, nullptr, nullptr).ok());
  EXPECT_EQ(buf.term_ids, (std::vector<uint32_t>{0, 7, 49}));
  EXPECT_EQ(buf.term_counts, (std::vector<double>{1.0, 8.0, 50.0}));
  // A model whose vocabulary is the stream's reversed.
  v1::Schema reversed = testing::TextSchema(50, 2);
  reversed.clear_vocabulary();
  for (int i = 49; i >= 0; --i) reversed.add_vocabulary((*r)->vocabulary()[static_cast<size_t>(i)]);
  auto other = ModelSchema::FromProto(reversed);
  ASSERT_TRUE(other.ok());
  auto dec2 = DocumentDecoder::Create(*other, (*r)->fields().schema(), (*r)->vocabulary());
  auto dec3 = DocumentDecoder::Create(*other, (*r)->header().schema());
  ASSERT_TRUE(dec2.ok() && dec3.ok());
  DocumentBuffer b2, b3;
  ASSERT_TRUE(dec2->Decode(d, 0, *other, kGrowNothing, &b2, nullptr, nullptr).ok());
  ASSERT_TRUE(dec3->Decode(d, 0, *other, kGrowNothing, &b3, nullptr, nullptr).ok());
  EXPECT_EQ(b2.term_ids, (std::vector<uint32_t>{0, 42, 49}));
  EXPECT_EQ(b2.term_counts, (std::vector<double>{50.0, 8.0, 1.0}));
  EXPECT_EQ(b2.term_ids, b3.term_ids);
  EXPECT_EQ(b2.term_counts, b3.term_counts);
  // The apart form refuses a schema message that has terms of its own.
  EXPECT_FALSE(DocumentDecoder::Create(*other, reversed, (*r)->vocabulary()).ok());
}

}  // namespace
}  // namespace tributary
