// Private to the Kafka source (kafka_*.cc): librdkafka, loaded on first use.
//
// The program does not link librdkafka: with its dependencies (OpenSSL,
// SASL, zstd, lz4) loading it cost every process ~7 ms of start-up (relocations
// and constructors; bench/LDA_RESULTS.md, "Start-up"), paid by every `train`
// or `eval` that never reads from Kafka. The first KafkaSource::Connect opens
// it (dlopen; TRIBUTARY_RDKAFKA_LIBRARY names another file) and resolves the
// functions the Kafka source calls into one table. Their types come from
// rdkafka.h (decltype), so a table that does not match the header cannot
// compile.
#ifndef TRIBUTARY_STREAMS_SRC_RDKAFKA_API_H_
#define TRIBUTARY_STREAMS_SRC_RDKAFKA_API_H_

#include <librdkafka/rdkafka.h>

#include <memory>

#include "tributary/status.h"

namespace tributary::kafka_internal {

#define TRIB_RDKAFKA_FUNCTIONS(X) \
  X(assign)                       \
  X(commit_queue)                 \
  X(committed)                    \
  X(conf_destroy)                 \
  X(conf_new)                     \
  X(conf_set)                     \
  X(conf_set_dr_msg_cb)           \
  X(conf_set_error_cb)            \
  X(conf_set_log_cb)              \
  X(conf_set_opaque)              \
  X(conf_set_rebalance_cb)        \
  X(consumer_close)               \
  X(consumer_poll)                \
  X(destroy)                      \
  X(err2name)                     \
  X(err2str)                      \
  X(error_code)                   \
  X(error_destroy)                \
  X(fatal_error)                  \
  X(flush)                        \
  X(header_add)                   \
  X(header_get_all)               \
  X(headers_destroy)              \
  X(headers_new)                  \
  X(incremental_assign)           \
  X(incremental_unassign)         \
  X(message_destroy)              \
  X(message_errstr)               \
  X(message_headers)              \
  X(metadata)                     \
  X(metadata_destroy)             \
  X(new)                          \
  X(opaque)                       \
  X(poll_set_consumer)            \
  X(producev)                     \
  X(query_watermark_offsets)      \
  X(rebalance_protocol)           \
  X(subscribe)                    \
  X(topic_destroy)                \
  X(topic_name)                   \
  X(topic_new)                    \
  X(topic_partition_list_add)     \
  X(topic_partition_list_destroy) \
  X(topic_partition_list_new)

struct RdKafkaApi {
#define TRIB_RDKAFKA_FIELD(name) decltype(&::rd_kafka_##name) rd_kafka_##name = nullptr;
  TRIB_RDKAFKA_FUNCTIONS(TRIB_RDKAFKA_FIELD)
#undef TRIB_RDKAFKA_FIELD
};

// Opens librdkafka once per process; the same Status every later time.
// Errors: IOError naming the file when it cannot be loaded or lacks one of
// the functions.
Status LoadRdKafka();

// librdkafka's functions; valid once LoadRdKafka has succeeded (every caller
// runs on a connected source). Filled once, read-only afterwards.
const RdKafkaApi& Rdk();

// A partition list that frees itself; NewList(size) makes an empty one with
// room for `size` partitions.
using PartitionList = std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>;
inline PartitionList NewList(int size) {
  return PartitionList(Rdk().rd_kafka_topic_partition_list_new(size), Rdk().rd_kafka_topic_partition_list_destroy);
}

}  // namespace tributary::kafka_internal

#endif  // TRIBUTARY_STREAMS_SRC_RDKAFKA_API_H_
