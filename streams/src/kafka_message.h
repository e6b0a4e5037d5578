// Private to the Kafka source (kafka_*.cc): one Kafka message as a
// KafkaEntry, by the message format at the top of tributary/kafka_source.h.
#ifndef TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_
#define TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <string>

#include "broker_format.h"
#include "tributary/kafka_source.h"

namespace tributary::kafka_internal {

using broker_format::PartitionName;  // as every Kafka error names a partition

// Converts one message to an entry (the message stays the caller's):
// broker_format::DecodeKafkaMessage of its topic, partition, offset, key,
// value and headers. A message that is not a document comes back with
// KafkaEntry::error set (InvalidDocument naming topic, partition and
// offset) and the message's key, value and headers kept for DeadLetter.
// REQUIRES: LoadRdKafka has succeeded (rdkafka_api.h).
KafkaEntry DecodeMessage(const rd_kafka_message_t* m);

}  // namespace tributary::kafka_internal

#endif  // TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_
