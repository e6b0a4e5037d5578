// A source of documents read from a Kafka topic through a consumer group
// (librdkafka's C API; Kafka >= 0.11 for message headers).
//
// Message format (header names are case-sensitive; other headers are
// ignored, so producers may carry their own metadata):
//   value         one document, interpreted by the header `content-type`:
//                   absent, `text/plain` or `text/plain; charset=utf-8`:
//                     raw UTF-8 text -> Document.text (tokenized by the
//                     library); it must not be empty;
//                   `application/x-tributary-document` (kKafkaDocumentContentType):
//                     one serialized v1::Document (binary-safe);
//                   anything else is an error (not silently read as text);
//                 a message without a value (a tombstone) is an error;
//   key           optional: Document.id unless the document has one (a
//                 serialized Document's own id wins); default: the id inside
//                 the document if any, else "TOPIC:PARTITION:OFFSET";
//   header label  optional: Document.label (overrides a label inside the
//                 document).
// `content-type` and `label` may each appear at most once; the text, the
// key used as id and the label must be valid UTF-8 (protobuf strings). A message that
// does not fit comes back from Read with KafkaEntry::error set
// (InvalidDocument naming topic/partition/offset, expected vs found), in its
// place among the good ones; the caller decides: DeadLetter it and commit
// past it, or just commit past it.
//
// Delivery: messages of one partition come in offset order; partitions are
// interleaved. Read returns messages only of partitions assigned to this
// consumer. A newly assigned partition starts at the offset the caller's
// start_offset hook returns, else at the group's committed offset, else at
// the earliest offset kept by the broker (auto.offset.reset=earliest).
// Offsets are committed only by Commit (enable.auto.commit=false,
// enable.auto.offset.store=false), so delivery is at least once: everything
// after the last committed offset comes again after a crash, a Close or a
// rebalance. The caller makes it exactly once: it appends each document
// with its position (topic, partition, offset) to its fsynced write-ahead
// log, then commits; after a restart or an assignment its start_offset hook
// returns "last offset in my log + 1" when the log is ahead of the
// committed offset.
//
// Rebalances (eager protocol by default: "range,roundrobin"; with
// assignor "cooperative-sticky" only the partitions that move are revoked
// and assigned, incrementally) happen inside Read (and Close): on
// revocation, on_revoke runs BEFORE the partitions are given up, so the
// caller can finish and Commit what it has of them (Commit still works for
// them inside on_revoke); messages of those partitions fetched but not yet
// returned are dropped, and no later Read returns a message of a revoked
// partition (until it is assigned again, when it starts over at the
// committed offset or start_offset). When the assignment was lost (the
// session timed out: rd_kafka_assignment_lost), on_revoke still runs but
// the partitions may already belong to another consumer, and Commit of them
// fails.
//
// Errors: Read does not return librdkafka's transient errors (a lost
// connection to one broker, a leader change, partition EOF): librdkafka
// retries by itself. When all brokers are down Read returns IOError naming
// the brokers (and librdkafka's last connection error); the source stays
// usable: Read again, it reconnects by itself, and delivery resumes where
// it stopped. An unknown topic is NotFound naming it (Read again: a topic
// created later is picked up). A fatal librdkafka error is Internal naming
// it; then Close and Connect again. Broker refusals of a Commit are IOError
// naming the partition and the broker's error.
//
// Thread safety: none. One KafkaSource per reader thread; its hooks run on
// that thread, inside Read and Close (and the destructor). The optional
// `log` hook is the exception: librdkafka calls it from its own threads.
// The hooks must not throw (an exception is caught at the C boundary and
// returned by the next Read as Internal).
#ifndef TRIBUTARY_KAFKA_SOURCE_H_
#define TRIBUTARY_KAFKA_SOURCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

struct rd_kafka_s;  ///< librdkafka's rd_kafka_t
struct rd_kafka_topic_partition_list_s;

namespace tributary {

/// The `content-type` header value of a message whose value is a serialized
/// v1::Document.
inline constexpr std::string_view kKafkaDocumentContentType = "application/x-tributary-document";

/// One partition of a topic.
struct KafkaPartition {
  std::string topic;      ///< the topic's name
  int32_t partition = 0;  ///< the partition's number within the topic
  /// Orders by topic, then partition (for sets and maps).
  bool operator<(const KafkaPartition& o) const { return topic != o.topic ? topic < o.topic : partition < o.partition; }
  /// Same topic and partition.
  bool operator==(const KafkaPartition& o) const { return topic == o.topic && partition == o.partition; }
};

/// A position in a partition. For Commit: the offset of the NEXT message to
/// read (Kafka's convention: last processed offset + 1).
struct KafkaPosition {
  std::string topic;      ///< the topic's name
  int32_t partition = 0;  ///< the partition's number within the topic
  int64_t offset = 0;     ///< the offset in that partition; Commit refuses a negative one
};

/// Configuration of KafkaSource::Connect (ParseKafkaSourceUrl makes one from
/// a URL).
struct KafkaSourceOptions {
  /// REQUIRED: "host:port" of at least one broker (librdkafka's
  /// bootstrap.servers; the others are found from it).
  std::vector<std::string> brokers;
  std::string topic;  ///< REQUIRED
  /// Consumer group. Default: "tributary".
  std::string group = "tributary";
  /// Optional topic that DeadLetter produces bad messages to (empty: none).
  std::string dead_letter;
  /// librdkafka's client.id, shown in the brokers' logs. Default: "tributary".
  std::string client_id = "tributary";
  uint32_t batch = 256;  ///< at most this many messages per Read; >= 1
  /// How long Read waits for a first message; 0: it does not wait.
  uint32_t poll_ms = 500;
  /// The group drops this consumer when it sends no heartbeat for this long
  /// (its partitions go to the others). Brokers bound it
  /// (group.min/max.session.timeout.ms, by default 6000..1800000).
  uint32_t session_timeout_ms = 45000;
  /// Heartbeats; also how soon this consumer learns of a rebalance.
  /// 0: min(3000, session_timeout_ms / 3).
  uint32_t heartbeat_interval_ms = 0;
  /// Bounds Connect's check that a broker answers, and every synchronous
  /// request (Commit, Lag, DeadLetter's delivery).
  uint32_t connect_timeout_ms = 10000;
  /// partition.assignment.strategy: "range,roundrobin" (eager), or
  /// "cooperative-sticky" (incremental).
  std::string assignor = "range,roundrobin";
  /// Further librdkafka properties (security.protocol, sasl.*, ssl.*,
  /// fetch.*, max.poll.interval.ms ...), applied to the consumer and the
  /// dead-letter producer where they apply. Those this component depends on
  /// (enable.auto.commit, enable.auto.offset.store, group.id, ...) are
  /// refused by Connect.
  std::vector<std::pair<std::string, std::string>> properties;

  /// Called on assignment, once per newly assigned partition, before any of
  /// its messages is read, with the group's committed offset for it (nullopt:
  /// none committed): the offset to start from (the next message to read),
  /// or nullopt for the committed offset (or the earliest one when none was
  /// committed). An error (or a negative offset), or committed offsets that
  /// cannot be read, is returned by the Read during which the assignment
  /// happened as Internal naming the partition; that partition is then not
  /// read (Close and Connect again to retry). Unset: always nullopt (and the
  /// committed offsets are not fetched).
  std::function<Result<std::optional<int64_t>>(const std::string& topic, int32_t partition,
                                               std::optional<int64_t> committed)>
      start_offset;
  /// Called when partitions are revoked (a rebalance, or Close), before they
  /// are given up. Unset: nothing.
  std::function<void(const std::vector<KafkaPartition>&)> on_revoke;
  /// librdkafka's log lines (syslog levels, 0..7). Called from librdkafka's
  /// threads. Unset: nothing is logged.
  std::function<void(int level, const std::string& line)> log;
};

/// Parses
///   kafka://HOST[:PORT][,HOST[:PORT]...]/TOPIC[?PARAM=VALUE&...]
/// PARAM: group, batch, poll_ms, session_timeout_ms, heartbeat_interval_ms,
/// connect_timeout_ms, dead_letter, client_id, assignor. PORT defaults to
/// 9092; HOST may be an IPv6 address in brackets. TOPIC and values may be
/// percent-encoded. TOPIC and dead_letter must be legal Kafka topic names
/// (1..249 of [a-zA-Z0-9._-]). Unset parameters keep KafkaSourceOptions'
/// defaults.
/// Errors: InvalidArgument naming the part of the URL that is wrong, with
/// expected vs found.
Result<KafkaSourceOptions> ParseKafkaSourceUrl(std::string_view url);

/// One message as read.
struct KafkaEntry {
  std::string topic;      ///< the message's topic
  int32_t partition = 0;  ///< its partition
  int64_t offset = 0;     ///< its offset in that partition
  v1::Document doc;       ///< valid when error.ok()
  /// Set when the message is not a document (doc unusable): InvalidDocument
  /// naming topic/partition/offset, what was expected and found.
  Status error;
  /// The message as read, kept only for entries with an error (for
  /// DeadLetter); empty otherwise. A null key or value is nullopt; a header
  /// without a value has an empty one.
  std::optional<std::string> key;
  std::optional<std::string> value;                          ///< the message's value (see key)
  std::vector<std::pair<std::string, std::string>> headers;  ///< all its headers (name, value), in order (see key)
};

/// For each partition among `entries`, the position after its last entry:
/// what to Commit once all of them are processed.
std::vector<KafkaPosition> NextPositions(const std::vector<KafkaEntry>& entries);

/// The consumer group's progress in one assigned partition.
struct KafkaPartitionLag {
  std::string topic;       ///< the topic's name
  int32_t partition = 0;   ///< the partition's number within the topic
  int64_t committed = -1;  ///< the group's committed offset; -1: none
  int64_t low = 0;         ///< the earliest offset the broker keeps
  int64_t high = 0;        ///< high watermark: the offset of the next message produced
  /// Messages not yet committed by the group: high - committed (high - low
  /// when nothing was committed).
  int64_t lag = 0;
};

/// The consumer group's progress in the partitions assigned to this consumer
/// (KafkaSource::Lag).
struct KafkaLag {
  std::vector<KafkaPartitionLag> partitions;  ///< the assigned ones, in order
  int64_t total = 0;                          ///< sum of their lag
  /// False until the group has given this consumer its first assignment
  /// (possibly of no partition): until then the lag is not known, and the
  /// total of 0 says nothing.
  bool joined = false;
};

/// A consumer of one topic in a consumer group, delivering messages as
/// documents (the message format, delivery, rebalances and errors are at the
/// top of this file).
class KafkaSource {
 public:
  /// Creates the consumer, checks that a broker answers (a metadata request
  /// within connect_timeout_ms) and subscribes to the topic; the group is
  /// joined, and partitions assigned, during the following Reads.
  /// Errors: InvalidArgument (no broker or topic, an empty group, batch 0, a
  /// refused or unknown property), IOError naming the brokers when none
  /// answers.
  static Result<std::unique_ptr<KafkaSource>> Connect(const KafkaSourceOptions& options);
  /// Close()s if not closed yet: on_revoke may run. Destroy the source before
  /// what its hooks use.
  ~KafkaSource();
  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;

  /// Replaces *out with the next messages, at most `batch`, waiting up to
  /// poll_ms for the first one (then it takes only what has arrived). Returns
  /// OK with an empty *out when nothing arrived. Rebalances, and so the
  /// hooks, run inside Read. Bad messages come back with `error` set.
  /// Errors (*out then empty; the source stays usable unless said): IOError
  /// naming the brokers when all are down; NotFound when the topic does not
  /// exist; Internal for the start_offset hook's error or a fatal librdkafka
  /// error (Close and Connect again); InvalidArgument after Close.
  Status Read(std::vector<KafkaEntry>* out);

  /// Commits the offsets and waits for the broker's answer (bounded by
  /// librdkafka's socket.timeout.ms, 60 s by default). Each
  /// position is the offset of the next message to read. OK at once for an
  /// empty list. Also works inside on_revoke for the partitions being
  /// revoked.
  /// Errors: NotFound naming the partitions this consumer is not assigned
  /// (revoked: their new owner reads again from the last committed offset;
  /// the positions of assigned partitions are still committed); IOError
  /// naming the partition and librdkafka's error when the commit fails
  /// (e.g. the group rebalanced meanwhile); InvalidArgument for a negative
  /// offset or after Close.
  Status Commit(const std::vector<KafkaPosition>& next_offsets);

  /// Produces a bad entry to options.dead_letter: its original key, value and
  /// headers plus the headers `error` (e.error.ToString()) and `source`
  /// ("TOPIC/PARTITION/OFFSET"), and waits for the delivery report (within
  /// connect_timeout_ms). The producer is created on first use. Without a
  /// dead-letter topic it does nothing and returns OK. It does not commit:
  /// the caller commits past the entry.
  /// Errors: IOError naming the dead-letter topic and librdkafka's error.
  Status DeadLetter(const KafkaEntry& e);

  /// For each assigned partition: the group's committed offset, the
  /// watermarks and the lag (requests to the brokers, each within
  /// connect_timeout_ms).
  /// Errors: IOError naming the request and the partition.
  Result<KafkaLag> Lag();

  /// The partitions assigned to this consumer now.
  std::vector<KafkaPartition> Assignment() const;

  /// Leaves the group (rd_kafka_consumer_close: on_revoke runs for the
  /// assignment; commit there what is done), then frees the consumer and the
  /// dead-letter producer. Later calls, except options(), fail with
  /// InvalidArgument. Calling it again is a no-op returning OK.
  Status Close();

  const KafkaSourceOptions& options() const { return options_; }  ///< as given to Connect, hooks as set since
  /// "host:port,host:port", as named in error messages.
  std::string Brokers() const;

  /// Replaces the start_offset hook, for callers that create it after Connect.
  void set_start_offset(decltype(KafkaSourceOptions::start_offset) f) { options_.start_offset = std::move(f); }
  /// Replaces the on_revoke hook, for callers that create it after Connect.
  void set_on_revoke(decltype(KafkaSourceOptions::on_revoke) f) { options_.on_revoke = std::move(f); }

 private:
  struct HandleDeleter {
    void operator()(rd_kafka_s* rk) const;
  };
  using Handle = std::unique_ptr<rd_kafka_s, HandleDeleter>;
  struct Callbacks;  ///< librdkafka's callbacks (kafka_source.cc)

  explicit KafkaSource(KafkaSourceOptions options);
  // Rebalances (kafka_rebalance.cc).
  void OnRebalance(int err, rd_kafka_topic_partition_list_s* partitions);
  void Assign(rd_kafka_topic_partition_list_s* partitions, bool incremental);
  void Revoke(rd_kafka_topic_partition_list_s* partitions, bool incremental);
  Status ConsumerError(int err, const std::string& reason);
  Status EnsureProducer();
  std::string Where() const;  ///< "kafka BROKERS topic T group G"

  KafkaSourceOptions options_;
  Handle consumer_;
  Handle producer_;  ///< the dead-letter producer, made by EnsureProducer
  std::set<KafkaPartition> assigned_;
  bool joined_ = false;  ///< an assignment was received (KafkaLag::joined)
  /// While Read runs: its output, from which a revocation drops entries.
  std::vector<KafkaEntry>* reading_ = nullptr;
  /// Errors raised inside librdkafka callbacks, returned by the next Read.
  Status pending_error_;
  std::string last_transport_error_;  ///< names the broker
  /// Delivery reports of the dead-letter producer by message sequence number.
  uint64_t next_delivery_ = 1;
  std::map<uint64_t, Status> deliveries_;
  bool closed_ = false;
};

}  // namespace tributary

#endif  // TRIBUTARY_KAFKA_SOURCE_H_
