// Private to the broker sources (redis_source.cc, kafka_message.cc) and the
// broker_entry fuzz target (tests/fuzz/broker_entry_fuzz.cc): the bytes of one
// broker entry as a Document, or why they are not one, by the entry format at
// the top of tributary/redis_source.h and the message format at the top of
// tributary/kafka_source.h. Pure functions of their arguments: no
// connection, no hiredis, no librdkafka (the sources read the entry from
// their client library, then call these).
//
// This is the broker's own format only. Whether the document can be learned
// (UTF-8 of its id, label and text; its terms, counts and label against the
// model) is the learning rule every door applies afterwards
// (DocumentDecoder::DecodeForLearning, as the server's source reader does).
#ifndef TRIBUTARY_STREAMS_SRC_BROKER_FORMAT_H_
#define TRIBUTARY_STREAMS_SRC_BROKER_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tributary/kafka_source.h"
#include "tributary/redis_source.h"

namespace tributary::broker_format {

// One field of a Redis stream entry as read: name and value, binary-safe.
using RedisField = std::pair<std::string_view, std::string_view>;

// Converts one Redis stream entry (its id and its fields, in the order
// read) to a SourceEntry. On success `doc` holds the document (id: the `id`
// field unless empty, else the id inside `doc`, else `entry_id`). An entry
// that does not fit comes back with `error` set (InvalidDocument "redis
// stream 'STREAM' entry ID: expected ..., found ...", naming the field; the
// producer's field names are quoted as printable text, utf8.h Printable, a
// few of them) and `fields` holding every field as read (for
// RedisSource::DeadLetter).
SourceEntry DecodeRedisEntry(const std::string& stream, const std::string& entry_id,
                             const std::vector<RedisField>& fields);

// "topic 'T' partition P", as error messages name a Kafka partition.
std::string PartitionName(const std::string& topic, int32_t partition);

// One Kafka message as read (the bytes stay the caller's).
struct KafkaMessage {
  std::string topic;                    // Kafka's topic name
  int32_t partition = 0;                // its partition
  int64_t offset = 0;                   // the message's offset in it
  std::optional<std::string_view> key;  // nullopt: a null key
  // nullopt: a null value (a tombstone)
  std::optional<std::string_view> value;
  // Every header (name, value) in order; a header without a value has an
  // empty one.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Converts one Kafka message to a KafkaEntry. On success `doc` holds the
// document (id: the id inside a serialized document, else the key when it is
// not empty, else "TOPIC:PARTITION:OFFSET"). A message that does not fit
// comes back with `error` set (InvalidDocument "kafka topic 'T' partition P
// offset O: expected ..., found ...", naming the header, the key or the
// value; a header's value is quoted as printable text) and the message's
// key, value and headers kept for KafkaSource::DeadLetter.
KafkaEntry DecodeKafkaMessage(KafkaMessage m);

}  // namespace tributary::broker_format

#endif  // TRIBUTARY_STREAMS_SRC_BROKER_FORMAT_H_
