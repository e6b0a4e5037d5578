// One Kafka message as a KafkaEntry: the message format at the top of
// tributary/kafka_source.h (content-type, label, key, UTF-8).
#include "kafka_message.h"

#include <cctype>
#include <string_view>
#include <utility>
#include <vector>

#include "rdkafka_api.h"
#include "tributary/utf8.h"
#include "url_parse.h"

namespace tributary::kafka_internal {
namespace {

using url_parse::Quoted;

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

KafkaEntry DecodeMessage(const rd_kafka_message_t* m) {
  KafkaEntry e;
  e.topic = Rdk().rd_kafka_topic_name(m->rkt);
  e.partition = m->partition;
  e.offset = m->offset;
  const std::string where = "kafka " + PartitionName(e.topic, e.partition) + " offset " + std::to_string(e.offset);

  std::vector<std::pair<std::string, std::string>> headers;
  rd_kafka_headers_t* hdrs = nullptr;  // still the message's
  if (Rdk().rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    for (size_t i = 0; Rdk().rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      headers.emplace_back(name, value == nullptr ? std::string() : std::string(static_cast<const char*>(value), size));
    }
  }
  const std::string* content_type = nullptr;
  const std::string* label = nullptr;
  int content_types = 0;
  int labels = 0;
  for (const auto& [name, value] : headers) {
    if (name == "content-type") content_type = &value, ++content_types;
    if (name == "label") label = &value, ++labels;
  }
  auto fail = [&](const std::string& what) {
    e.error = Status::InvalidDocument(where + ": " + what);
    e.doc.Clear();
    if (m->key != nullptr) e.key = std::string(static_cast<const char*>(m->key), m->key_len);
    if (m->payload != nullptr) e.value = std::string(static_cast<const char*>(m->payload), m->len);
    e.headers = std::move(headers);
    return std::move(e);
  };
  if (content_types > 1) {
    return fail("expected the header 'content-type' at most once, found it " + std::to_string(content_types) +
                " times");
  }
  if (labels > 1)
    return fail("expected the header 'label' at most once, found it " + std::to_string(labels) + " times");
  if (m->payload == nullptr) return fail("expected a value, found none (a tombstone)");
  const std::string_view value(static_cast<const char*>(m->payload), m->len);

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
                std::string(kKafkaDocumentContentType) + ", found " + Quoted(*content_type));
  }
  if (label != nullptr) {
    if (const size_t bad = InvalidUtf8At(*label); bad != std::string_view::npos) {
      return fail("expected the header 'label' to be UTF-8, found an invalid byte at position " + std::to_string(bad));
    }
    e.doc.set_label(*label);
  }
  if (e.doc.id().empty()) {
    if (m->key != nullptr && m->key_len > 0) {
      const std::string_view key(static_cast<const char*>(m->key), m->key_len);
      if (const size_t bad = InvalidUtf8At(key); bad != std::string_view::npos) {
        return fail("expected the key (the document id) to be UTF-8, found an invalid byte at position " +
                    std::to_string(bad));
      }
      e.doc.set_id(std::string(key));
    } else {
      e.doc.set_id(e.topic + ":" + std::to_string(e.partition) + ":" + std::to_string(e.offset));
    }
  }
  return e;
}

}  // namespace tributary::kafka_internal
