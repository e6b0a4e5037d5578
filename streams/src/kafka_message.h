// Private to the Kafka source (kafka_*.cc): one Kafka message as a
// KafkaEntry, by the message format at the top of tributary/kafka_source.h.
#ifndef TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_
#define TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <string>

#include "tributary/kafka_source.h"

namespace tributary::kafka_internal {

// "topic 'T' partition P", as error messages name a partition.
std::string PartitionName(const std::string& topic, int32_t partition);

// Converts one message to an entry (the message stays the caller's). A
// message that is not a document comes back with KafkaEntry::error set
// (InvalidDocument naming topic, partition and offset) and the message's
// key, value and headers kept for DeadLetter. REQUIRES: LoadRdKafka has
// succeeded (rdkafka_api.h).
KafkaEntry DecodeMessage(const rd_kafka_message_t* m);

}  // namespace tributary::kafka_internal

#endif  // TRIBUTARY_STREAMS_SRC_KAFKA_MESSAGE_H_
