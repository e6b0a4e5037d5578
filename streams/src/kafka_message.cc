// One Kafka message as a KafkaEntry: librdkafka's message read here, the
// message format (tributary/kafka_source.h) applied by
// broker_format::DecodeKafkaMessage.
#include "kafka_message.h"

#include <string_view>
#include <utility>
#include <vector>

#include "rdkafka_api.h"

namespace tributary::kafka_internal {

KafkaEntry DecodeMessage(const rd_kafka_message_t* m) {
  broker_format::KafkaMessage message;
  message.topic = Rdk().rd_kafka_topic_name(m->rkt);
  message.partition = m->partition;
  message.offset = m->offset;
  if (m->key != nullptr) message.key = std::string_view(static_cast<const char*>(m->key), m->key_len);
  if (m->payload != nullptr) message.value = std::string_view(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* hdrs = nullptr;  // still the message's
  if (Rdk().rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    for (size_t i = 0; Rdk().rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      message.headers.emplace_back(
          name, value == nullptr ? std::string() : std::string(static_cast<const char*>(value), size));
    }
  }
  return broker_format::DecodeKafkaMessage(std::move(message));
}

}  // namespace tributary::kafka_internal
