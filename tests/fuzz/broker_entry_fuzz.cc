// Fuzz target: what `serve --source` does with one broker entry before it is
// logged. First the broker's own format (streams/src/broker_format.h, the
// function the Redis and Kafka sources call once they have read an entry
// from hiredis or librdkafka): a Redis stream entry's fields, or a Kafka
// message's key, value and headers, to a v1::Document or a refusal; then the
// rule the server's source reader applies to every document
// (DocumentDecoder::DecodeForLearning against the published model) before
// the document goes into the write-ahead log with its broker position.
//
// Input: byte 0 the mode, the rest the entry's pieces, separated by "\xff|":
//   bit 0      0: Redis: field name, value, name, value, ... (an odd last
//              piece is dropped: Redis always sends pairs); entry id
//              "1700000000000-0" of stream "docs"
//              1: Kafka: key, value, then header name, value, ... (an odd
//              last piece is a header without a value); topic "docs",
//              partition 3, offset 42
//   bits 1..2  the model (ModelSchema, growth limits 8 classes, 64 terms,
//              32-byte labels): 0 serve's default (open vocabulary, open
//              classes, nothing yet); 1 a vocabulary of 8 terms, classes a
//              and b (closed); 2 hashed term ids (64), open classes; 3 terms,
//              a real, a count and a categorical feature, class a
//   bit 3      the loss needs labels (ncll)
//   bit 4      Kafka: the key is null (the first piece is ignored)
//   bit 5      Kafka: the value is null, a tombstone (the second piece is
//              ignored)
//
// Checks, beyond crashes and sanitizer reports:
//  - the entry is accepted exactly when the documented format
//    (tributary/redis_source.h, tributary/kafka_source.h) says so, and its
//    document is the one the format describes (text or parsed document,
//    label and id overrides, the default id), always with an id;
//  - a refused entry is InvalidDocument, named (the stream and entry id, or
//    the topic, partition and offset), names the field, header, key or value
//    at fault, is printable (UTF-8, no control byte: it is logged and
//    dead-lettered) and at most 4 KiB, and keeps every byte that was read
//    for the dead letter;
//  - the learning rule's verdict: a document it accepts has valid UTF-8 in
//    every string, and the document and its log record (WalRecord with the
//    broker position) serialize to bytes protobuf parses back to the same
//    (so it can be logged and replayed); its terms, counts, label and new
//    classes and terms are within the model and its limits; a refusal is
//    InvalidDocument, names the document, is printable and at most 4 KiB;
//  - both steps are deterministic (decoded twice, the same result).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker_format.h"
#include "fuzz_check.h"
#include "tributary/document.h"
#include "tributary/schema.h"
#include "tributary/utf8.h"
#include "tributary/v1/tributary.pb.h"

namespace {

namespace bf = tributary::broker_format;
using tributary::Status;
using tributary::v1::Document;
using tributary::v1::FeatureSpec;
using tributary::v1::Schema;

constexpr std::string_view kSeparator = "\xff|";
constexpr char kStream[] = "docs";
constexpr char kEntryId[] = "1700000000000-0";
constexpr char kTopic[] = "docs";
constexpr int32_t kPartition = 3;
constexpr int64_t kOffset = 42;
constexpr size_t kMaxErrorBytes = 4096;

struct Model {
  tributary::ModelSchema schema;
  tributary::DocumentDecoder decoder;  // ForModel: the server's decoder of wire documents
};

std::vector<Model> MakeModels() {
  std::vector<Schema> protos(4);
  protos[0].set_open_vocabulary(true);  // serve's default: nothing yet, everything open
  protos[0].set_open_classes(true);
  for (const char* t : {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}) protos[1].add_vocabulary(t);
  for (const char* c : {"a", "b"}) protos[1].add_class_names(c);
  protos[2].set_hashed_dim(64);
  protos[2].set_open_classes(true);
  protos[2].add_class_names("a");
  for (const char* t : {"t0", "t1", "t2", "t3"}) protos[3].add_vocabulary(t);
  protos[3].add_class_names("a");
  for (auto [name, kind] : {std::pair{"x", FeatureSpec::REAL}, std::pair{"n", FeatureSpec::COUNT},
                            std::pair{"c", FeatureSpec::CATEGORICAL}}) {
    auto* f = protos[3].add_features();
    f->set_name(name);
    f->set_kind(kind);
    if (kind == FeatureSpec::CATEGORICAL) {
      for (const char* v : {"red", "green", "blue"}) f->add_categories(v);
    }
  }
  std::vector<Model> models;
  for (const Schema& p : protos) {
    auto schema = tributary::ModelSchema::FromProto(p);
    FUZZ_CHECK(schema.ok(), schema.status().ToString());
    tributary::GrowthLimits limits;
    limits.max_classes = 8;
    limits.max_terms = 64;
    limits.max_label_bytes = 32;
    schema->set_limits(limits);
    auto decoder = tributary::DocumentDecoder::ForModel(*schema);
    FUZZ_CHECK(decoder.ok(), decoder.status().ToString());
    models.push_back(Model{std::move(schema).value(), std::move(decoder).value()});
  }
  return models;
}

bool IsUtf8(std::string_view s) { return tributary::InvalidUtf8At(s) == std::string_view::npos; }

// An error as the server shows it (logs, /v1/status, the dead letter): named,
// UTF-8 with no control character (C0, DEL, C1), bounded.
void CheckPrintable(const Status& st, std::string_view name) {
  const std::string& m = st.message();
  FUZZ_CHECK(st.IsInvalidDocument(), "a refusal that is not InvalidDocument: " + st.ToString());
  FUZZ_CHECK(m.find(name) != std::string::npos,
             "the refusal does not name the entry (" + std::string(name) + "): " + m);
  FUZZ_CHECK(m.size() <= kMaxErrorBytes, "a refusal of " + std::to_string(m.size()) + " bytes");
  FUZZ_CHECK(IsUtf8(m), "a refusal that is not UTF-8: " + tributary::Printable(m));
  for (size_t i = 0; i < m.size(); ++i) {
    const auto b = static_cast<unsigned char>(m[i]);
    const bool c1 = b == 0xc2 && i + 1 < m.size() && static_cast<unsigned char>(m[i + 1]) < 0xa0;
    FUZZ_CHECK(b >= 0x20 && b != 0x7f && !c1, "a control character in the refusal: " + tributary::Printable(m));
  }
}

// Same document: compared as protobuf writes them (deterministic for one
// message whatever it holds).
std::string Bytes(const Document& d) {
  std::string s;
  d.SerializeToString(&s);
  return s;
}

// ---- the documented formats, written out for comparison ----

// What the format promises for one entry: the document, or a refusal whose
// message holds `names` (the field, header, key or value at fault).
struct Expected {
  bool ok = false;
  Document doc;
  std::string names;
};

Expected RedisFormat(const std::vector<bf::RedisField>& fields) {
  Expected x;
  const std::string_view* text = nullptr;
  const std::string_view* doc = nullptr;
  const std::string_view* label = nullptr;
  const std::string_view* id = nullptr;
  for (const auto& [name, value] : fields) {
    for (auto [key, slot] :
         {std::pair{"text", &text}, std::pair{"doc", &doc}, std::pair{"label", &label}, std::pair{"id", &id}}) {
      if (name != key) continue;
      if (*slot != nullptr && x.names.empty()) x.names = "'" + std::string(key) + "' once";
      *slot = &value;
    }
  }
  if (!x.names.empty()) return x;
  if ((text == nullptr) == (doc == nullptr)) {
    x.names = "'text'";
    return x;
  }
  if (text != nullptr) {
    if (text->empty()) {
      x.names = "non-empty 'text'";
      return x;
    }
    x.doc.set_text(std::string(*text));
  } else if (!x.doc.ParseFromArray(doc->data(), static_cast<int>(doc->size()))) {
    x.names = "'doc'";
    return x;
  }
  if (label != nullptr) x.doc.set_label(std::string(*label));
  if (id != nullptr && !id->empty()) x.doc.set_id(std::string(*id));
  if (x.doc.id().empty()) x.doc.set_id(kEntryId);
  x.ok = true;
  return x;
}

Expected KafkaFormat(const bf::KafkaMessage& m) {
  Expected x;
  const std::string* type = nullptr;
  const std::string* label = nullptr;
  int types = 0, labels = 0;
  for (const auto& [name, value] : m.headers) {
    if (name == "content-type") type = &value, ++types;
    if (name == "label") label = &value, ++labels;
  }
  if (types > 1 || labels > 1) {
    x.names = types > 1 ? "'content-type' at most once" : "'label' at most once";
    return x;
  }
  if (!m.value) {
    x.names = "a value";
    return x;
  }
  std::string t;  // lower case, no blanks
  if (type != nullptr) {
    for (char c : *type) {
      if (c != ' ' && c != '\t') t += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
  }
  if (t == "application/x-tributary-document") {
    if (!x.doc.ParseFromArray(m.value->data(), static_cast<int>(m.value->size()))) {
      x.names = "tributary.v1.Document";
      return x;
    }
  } else if (t.empty() || t == "text/plain" || t == "text/plain;charset=utf-8") {
    if (m.value->empty() || !IsUtf8(*m.value)) {
      x.names = "UTF-8 text";
      return x;
    }
    x.doc.set_text(std::string(*m.value));
  } else {
    x.names = "'content-type'";
    return x;
  }
  if (label != nullptr) {
    if (!IsUtf8(*label)) {
      x.names = "'label'";
      return x;
    }
    x.doc.set_label(*label);
  }
  if (x.doc.id().empty()) {
    if (m.key && !m.key->empty()) {
      if (!IsUtf8(*m.key)) {
        x.names = "the key";
        return x;
      }
      x.doc.set_id(std::string(*m.key));
    } else {
      x.doc.set_id(std::string(kTopic) + ":" + std::to_string(kPartition) + ":" + std::to_string(kOffset));
    }
  }
  x.ok = true;
  return x;
}

// The broker step: the entry decoded twice, compared with the format; on
// success *doc and *position are what the reader hands to the learning rule.
bool BrokerStep(bool kafka, uint8_t mode, const std::vector<std::string_view>& pieces, Document* doc,
                tributary::v1::SourcePosition* position) {
  if (!kafka) {
    std::vector<bf::RedisField> fields;
    for (size_t i = 0; i + 1 < pieces.size(); i += 2) fields.emplace_back(pieces[i], pieces[i + 1]);
    const tributary::SourceEntry e = bf::DecodeRedisEntry(kStream, kEntryId, fields);
    const tributary::SourceEntry again = bf::DecodeRedisEntry(kStream, kEntryId, fields);
    FUZZ_CHECK(e.error.ToString() == again.error.ToString() && Bytes(e.doc) == Bytes(again.doc),
               "two decodings of one Redis entry differ");
    FUZZ_CHECK(e.entry_id == kEntryId, "the entry id changed: " + e.entry_id);
    const Expected x = RedisFormat(fields);
    FUZZ_NOTE("redis entry: " + (e.error.ok() ? "ok" : e.error.ToString()));
    FUZZ_CHECK(e.error.ok() == x.ok, "the format says " + std::string(x.ok ? "accept" : "refuse (" + x.names + ")") +
                                         ", the source: " + e.error.ToString());
    if (!x.ok) {
      CheckPrintable(e.error, std::string("redis stream '") + kStream + "' entry " + kEntryId + ": ");
      FUZZ_CHECK(e.error.message().find(x.names) != std::string::npos,
                 "the refusal does not name " + x.names + ": " + e.error.ToString());
      FUZZ_CHECK(e.fields.size() == fields.size(), "a refused entry's fields not kept for the dead letter");
      for (size_t i = 0; i < fields.size(); ++i) {
        FUZZ_CHECK(e.fields[i].first == fields[i].first && e.fields[i].second == fields[i].second,
                   "a refused entry's field " + std::to_string(i) + " not kept as read");
      }
      return false;
    }
    FUZZ_CHECK(e.fields.empty(), "an accepted entry keeps its fields");
    FUZZ_CHECK(Bytes(e.doc) == Bytes(x.doc), "the document is not the one the entry format describes");
    *doc = e.doc;
    position->set_entry_id(e.entry_id);
  } else {
    bf::KafkaMessage m;
    m.topic = kTopic;
    m.partition = kPartition;
    m.offset = kOffset;
    if (!(mode & 16)) m.key = pieces.size() > 0 ? pieces[0] : std::string_view();
    if (!(mode & 32)) m.value = pieces.size() > 1 ? pieces[1] : std::string_view();
    for (size_t i = 2; i < pieces.size(); i += 2) {
      m.headers.emplace_back(pieces[i], i + 1 < pieces.size() ? pieces[i + 1] : std::string_view());
    }
    const Expected x = KafkaFormat(m);
    const tributary::KafkaEntry e = bf::DecodeKafkaMessage(m);
    const tributary::KafkaEntry again = bf::DecodeKafkaMessage(m);
    FUZZ_CHECK(e.error.ToString() == again.error.ToString() && Bytes(e.doc) == Bytes(again.doc),
               "two decodings of one Kafka message differ");
    FUZZ_CHECK(e.topic == kTopic && e.partition == kPartition && e.offset == kOffset, "the position changed");
    FUZZ_NOTE("kafka message: " + (e.error.ok() ? "ok" : e.error.ToString()));
    FUZZ_CHECK(e.error.ok() == x.ok, "the format says " + std::string(x.ok ? "accept" : "refuse (" + x.names + ")") +
                                         ", the source: " + e.error.ToString());
    if (!x.ok) {
      CheckPrintable(e.error, "kafka topic 'docs' partition 3 offset 42: ");
      FUZZ_CHECK(e.error.message().find(x.names) != std::string::npos,
                 "the refusal does not name " + x.names + ": " + e.error.ToString());
      FUZZ_CHECK(e.key == m.key && e.value == m.value && e.headers == m.headers,
                 "a refused message's key, value or headers not kept for the dead letter");
      return false;
    }
    FUZZ_CHECK(!e.key && !e.value && e.headers.empty(), "an accepted message keeps its bytes");
    FUZZ_CHECK(Bytes(e.doc) == Bytes(x.doc), "the document is not the one the message format describes");
    *doc = e.doc;
    position->set_topic(e.topic);
    position->set_partition(e.partition);
    position->set_offset(e.offset);
  }
  FUZZ_CHECK(!doc->id().empty(), "a document from a broker without an id");
  return true;
}

// The learning rule's promises for a document it accepts.
void CheckAccepted(const Document& doc, const tributary::v1::SourcePosition& position,
                   const tributary::DocumentBuffer& out, const std::string& new_class, const Model& m,
                   bool label_required) {
  FUZZ_CHECK(IsUtf8(doc.id()) && IsUtf8(doc.label()) && IsUtf8(doc.text()), "an accepted string is not UTF-8");
  for (const std::string& t : doc.tokens()) FUZZ_CHECK(IsUtf8(t), "an accepted token is not UTF-8");
  // The log's record: written, then parsed again at the next start.
  tributary::v1::WalRecord record;
  record.set_sequence(9);
  *record.mutable_document() = doc;
  *record.mutable_source() = position;
  std::string bytes;
  FUZZ_CHECK(record.SerializeToString(&bytes), "an accepted document's record does not serialize");
  tributary::v1::WalRecord back;
  FUZZ_CHECK(back.ParseFromString(bytes), "an accepted document's record does not parse back");
  std::string again;
  FUZZ_CHECK(back.SerializeToString(&again) && again == bytes, "an accepted document's record changed in the log");
  FUZZ_CHECK(Bytes(back.document()) == Bytes(doc), "the logged document differs");

  const tributary::ModelSchema& s = m.schema;
  FUZZ_CHECK(out.id == doc.id(), "the decoded id differs");
  FUZZ_CHECK(out.term_ids.size() == out.term_counts.size(), "as many counts as term ids");
  for (size_t i = 0; i < out.term_ids.size(); ++i) {
    FUZZ_CHECK(i == 0 || out.term_ids[i - 1] < out.term_ids[i], "term ids not strictly increasing");
    FUZZ_CHECK(out.term_ids[i] < s.vocab_size(), "a term id out of the model's range");
    FUZZ_CHECK(std::isfinite(out.term_counts[i]) && out.term_counts[i] > 0, "a count not finite and > 0");
  }
  FUZZ_CHECK(std::isfinite(out.weight) && out.weight > 0 && out.weight <= tributary::kMaxDocumentWeight,
             "a weight out of (0, 1e6]");
  FUZZ_CHECK(out.reals.size() == s.num_reals(), "the number of reals");
  for (double r : out.reals) FUZZ_CHECK(std::isfinite(r), "a real not finite");
  FUZZ_CHECK(out.categoricals.size() == s.categorical_cardinalities().size(), "the number of categoricals");
  for (size_t i = 0; i < out.categoricals.size(); ++i) {
    FUZZ_CHECK(out.categoricals[i] < s.categorical_cardinalities()[i], "a category out of range");
  }
  FUZZ_CHECK(out.label >= -1 && out.label < static_cast<int64_t>(s.classes().size()), "a label out of range");
  if (!new_class.empty()) {
    FUZZ_CHECK(s.open_classes() && out.label == -1 && s.ClassIndex(new_class) < 0, "a new class where none may be");
    FUZZ_CHECK(new_class.size() <= s.limits().max_label_bytes, "a new class longer than max_label_bytes");
    FUZZ_CHECK(s.classes().size() < s.limits().max_classes, "a new class past max_classes");
  }
  if (label_required) FUZZ_CHECK(out.label >= 0 || !new_class.empty(), "no label, yet the loss needs one");
  FUZZ_CHECK(out.new_terms.empty() || s.open_vocabulary(), "new terms for a closed vocabulary");
  FUZZ_CHECK(s.vocab_size() + out.new_terms.size() <= s.limits().max_terms, "new terms past max_terms");
  for (const std::string& t : out.new_terms) {
    FUZZ_CHECK(!t.empty() && t.size() <= tributary::kMaxNewTermBytes && s.TermIndex(t) < 0, "a bad new term");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tributary::fuzz::QuietProtobuf();
  static const std::vector<Model>* models = new std::vector<Model>(MakeModels());
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const bool kafka = (mode & 1) != 0;
  const Model& model = (*models)[(mode >> 1) & 3];
  const bool label_required = (mode & 8) != 0;
  std::vector<std::string_view> pieces;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  for (size_t at = 0;;) {
    const size_t sep = rest.find(kSeparator, at);
    pieces.push_back(rest.substr(at, sep == std::string_view::npos ? std::string_view::npos : sep - at));
    if (sep == std::string_view::npos) break;
    at = sep + kSeparator.size();
  }

  Document doc;
  tributary::v1::SourcePosition position;
  position.set_source(kafka ? "kafka://127.0.0.1:9092/docs?group=tributary"
                            : "redis://127.0.0.1:6379/docs?group=tributary");
  if (!BrokerStep(kafka, mode, pieces, &doc, &position)) return 0;

  // The source reader's check (source_reader.cc), against the published model.
  const std::string label_required_by = label_required ? "ncll" : "";
  tributary::DocumentBuffer out, out2;
  std::string new_class, new_class2;
  const Status st = model.decoder.DecodeForLearning(doc, 5, model.schema, label_required_by, &out, &new_class);
  const Status st2 = model.decoder.DecodeForLearning(doc, 5, model.schema, label_required_by, &out2, &new_class2);
  FUZZ_NOTE("learning rule: " + (st.ok() ? "ok" : st.ToString()));
  FUZZ_CHECK(st.ToString() == st2.ToString() && new_class == new_class2 && out.term_ids == out2.term_ids &&
                 out.term_counts == out2.term_counts && out.label == out2.label && out.new_terms == out2.new_terms,
             "two checks of one document differ");
  if (!st.ok()) {
    // (A string that is not UTF-8 never gets past: CheckAccepted.)
    CheckPrintable(st, "document #5");
    return 0;
  }
  CheckAccepted(doc, position, out, new_class, model, label_required);
  return 0;
}
