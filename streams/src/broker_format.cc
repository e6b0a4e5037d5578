// One broker entry's bytes as a Document: the Redis entry format
// (tributary/redis_source.h) and the Kafka message format
// (tributary/kafka_source.h).
#include "broker_format.h"

#include <cctype>
#include <utility>

#include "tributary/utf8.h"
#include "url_parse.h"

namespace tributary::broker_format {
namespace {

using url_parse::Quoted;

// An error lists at most this many Redis field names, each (and a Kafka
// content-type) cut after this many bytes: an error message is logged and
// dead-lettered, so bounded.
constexpr size_t kNamesListed = 8;
constexpr size_t kNameBytesListed = 64;

// `s` lower-cased, without blanks: a content-type as compared
// ("text/plain; charset=UTF-8" -> "text/plain;charset=utf-8").
std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '\t') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

std::string PartitionName(const std::string& topic, int32_t partition) {
  return "topic '" + topic + "' partition " + std::to_string(partition);
}

SourceEntry DecodeRedisEntry(const std::string& stream, const std::string& entry_id,
                             const std::vector<RedisField>& fields) {
  SourceEntry e;
  e.entry_id = entry_id;
  const std::string where = "redis stream '" + stream + "' entry " + e.entry_id;
  const std::string_view* text = nullptr;
  const std::string_view* doc = nullptr;
  const std::string_view* label = nullptr;
  const std::string_view* id = nullptr;
  std::string duplicate;
  for (const auto& [key, value] : fields) {
    const std::string_view** slot = nullptr;
    if (key == "text") slot = &text;
    if (key == "doc") slot = &doc;
    if (key == "label") slot = &label;
    if (key == "id") slot = &id;
    if (slot == nullptr) continue;  // unknown fields are the producer's metadata
    if (*slot != nullptr && duplicate.empty()) duplicate = std::string(key);
    *slot = &value;
  }
  auto fail = [&](const std::string& what) {
    e.error = Status::InvalidDocument(where + ": " + what);
    for (const auto& [key, value] : fields) e.fields.emplace_back(key, value);
    return e;
  };
  if (!duplicate.empty()) {
    return fail("expected the field " + Quoted(duplicate) + " once, found it more than once");
  }
  if (text == nullptr && doc == nullptr) {
    // The producer's field names are any bytes: quoted as printable text,
    // the first few (an entry may have thousands).
    std::string names;
    for (size_t i = 0; i < fields.size() && i < kNamesListed; ++i) {
      names += (i ? ", " : "") + Quoted(Printable(fields[i].first, kNameBytesListed));
    }
    if (fields.size() > kNamesListed) names += ", ... (" + std::to_string(fields.size()) + " fields)";
    return fail(
        "expected exactly one of the fields 'text' (raw text) or 'doc' (a serialized tributary.v1.Document), "
        "found neither (fields: " +
        (names.empty() ? std::string("none") : names) + ")");
  }
  if (text != nullptr && doc != nullptr) {
    return fail("expected exactly one of the fields 'text' or 'doc', found both");
  }
  if (text != nullptr) {
    if (text->empty()) return fail("expected a non-empty 'text', found an empty one");
    e.doc.set_text(std::string(*text));
  } else if (!e.doc.ParseFromArray(doc->data(), static_cast<int>(doc->size()))) {
    e.doc.Clear();
    return fail("expected 'doc' to hold a serialized tributary.v1.Document, found " + std::to_string(doc->size()) +
                " bytes that do not parse as one");
  }
  if (label != nullptr) e.doc.set_label(std::string(*label));
  // An empty `id` is no id (proto3's reading of an empty string): the
  // default applies, so that every document from a broker has an id.
  if (id != nullptr && !id->empty()) {
    e.doc.set_id(std::string(*id));
  } else if (e.doc.id().empty()) {
    e.doc.set_id(e.entry_id);
  }
  return e;
}

KafkaEntry DecodeKafkaMessage(KafkaMessage m) {
  KafkaEntry e;
  e.topic = std::move(m.topic);
  e.partition = m.partition;
  e.offset = m.offset;
  const std::string where = "kafka " + PartitionName(e.topic, e.partition) + " offset " + std::to_string(e.offset);

  const std::string* content_type = nullptr;
  const std::string* label = nullptr;
  int content_types = 0;
  int labels = 0;
  for (const auto& [name, value] : m.headers) {
    if (name == "content-type") content_type = &value, ++content_types;
    if (name == "label") label = &value, ++labels;
  }
  auto fail = [&](const std::string& what) {
    e.error = Status::InvalidDocument(where + ": " + what);
    e.doc.Clear();
    if (m.key) e.key = std::string(*m.key);
    if (m.value) e.value = std::string(*m.value);
    e.headers = std::move(m.headers);
    return std::move(e);
  };
  if (content_types > 1) {
    return fail("expected the header 'content-type' at most once, found it " + std::to_string(content_types) +
                " times");
  }
  if (labels > 1)
    return fail("expected the header 'label' at most once, found it " + std::to_string(labels) + " times");
  if (!m.value) return fail("expected a value, found none (a tombstone)");
  const std::string_view value = *m.value;

  const std::string type = content_type == nullptr ? std::string() : Lower(*content_type);
  if (type == kKafkaDocumentContentType) {
    if (!e.doc.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      return fail("expected a serialized tributary.v1.Document (content-type " +
                  std::string(kKafkaDocumentContentType) + "), found " + std::to_string(value.size()) +
                  " bytes that do not parse as one");
    }
  } else if (type.empty() || type == "text/plain" || type == "text/plain;charset=utf-8") {
    if (value.empty()) return fail("expected non-empty UTF-8 text, found an empty value");
    if (const size_t bad = InvalidUtf8At(value); bad != std::string_view::npos) {
      return fail("expected UTF-8 text, found an invalid byte at position " + std::to_string(bad));
    }
    e.doc.set_text(std::string(value));
  } else {
    return fail("expected the header 'content-type' to be absent, text/plain or " +
                std::string(kKafkaDocumentContentType) + ", found " +
                Quoted(Printable(*content_type, kNameBytesListed)));
  }
  if (label != nullptr) {
    if (const size_t bad = InvalidUtf8At(*label); bad != std::string_view::npos) {
      return fail("expected the header 'label' to be UTF-8, found an invalid byte at position " + std::to_string(bad));
    }
    e.doc.set_label(*label);
  }
  if (e.doc.id().empty()) {
    if (m.key && !m.key->empty()) {
      if (const size_t bad = InvalidUtf8At(*m.key); bad != std::string_view::npos) {
        return fail("expected the key (the document id) to be UTF-8, found an invalid byte at position " +
                    std::to_string(bad));
      }
      e.doc.set_id(std::string(*m.key));
    } else {
      e.doc.set_id(e.topic + ":" + std::to_string(e.partition) + ":" + std::to_string(e.offset));
    }
  }
  return e;
}

}  // namespace tributary::broker_format
