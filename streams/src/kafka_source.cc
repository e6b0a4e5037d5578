// KafkaSource: the consumer (Connect, librdkafka's callbacks, Read, Commit,
// Lag, Close) and its dead-letter producer. Elsewhere: librdkafka, loaded on
// first use (rdkafka_api.h); a message as an entry (kafka_message.cc);
// rebalances (kafka_rebalance.cc); the URL (kafka_url.cc).
#include "tributary/kafka_source.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kafka_message.h"
#include "rdkafka_api.h"

namespace tributary {
namespace {

using kafka_internal::DecodeMessage;
using kafka_internal::LoadRdKafka;
using kafka_internal::NewList;
using kafka_internal::PartitionList;
using kafka_internal::PartitionName;
using kafka_internal::Rdk;

// Properties KafkaSource sets itself; the caller may not override them.
constexpr const char* kReservedProperties[] = {
    "bootstrap.servers",
    "metadata.broker.list",
    "group.id",
    "client.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "enable.partition.eof",
    "group.protocol.type",
};

}  // namespace

std::vector<KafkaPosition> NextPositions(const std::vector<KafkaEntry>& entries) {
  std::map<KafkaPartition, int64_t> next;
  for (const KafkaEntry& e : entries) {
    int64_t& n = next[{e.topic, e.partition}];
    n = std::max(n, e.offset + 1);
  }
  std::vector<KafkaPosition> out;
  for (const auto& [p, offset] : next) out.push_back({p.topic, p.partition, offset});
  return out;
}

// ---- librdkafka callbacks ----

struct KafkaSource::Callbacks {
  static KafkaSource* Self(void* opaque) { return static_cast<KafkaSource*>(opaque); }

  // Served on the reader's thread, inside rd_kafka_consumer_poll or
  // rd_kafka_consumer_close.
  static void Rebalance(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* partitions,
                        void* opaque) {
    Self(opaque)->OnRebalance(static_cast<int>(err), partitions);
  }

  // Served on the reader's thread too: rd_kafka_poll_set_consumer forwards
  // the main queue to the consumer queue.
  static void Error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
    KafkaSource* self = Self(opaque);
    switch (err) {
      case RD_KAFKA_RESP_ERR__TRANSPORT:
      case RD_KAFKA_RESP_ERR__RESOLVE:
        self->last_transport_error_ = reason;  // "host:port/id: Connect to ... failed: ..."
        break;
      case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN: {
        std::string msg = "kafka " + self->Brokers() + ": all brokers are down (" + reason + ")";
        if (!self->last_transport_error_.empty()) msg += "; last error: " + self->last_transport_error_;
        msg += "; librdkafka keeps reconnecting: Read again";
        if (self->pending_error_.ok()) self->pending_error_ = Status::IOError(msg);
        break;
      }
      case RD_KAFKA_RESP_ERR__FATAL: {
        char fatal[512] = {};
        const rd_kafka_resp_err_t code = Rdk().rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
        self->pending_error_ =
            Status::Internal(self->Where() + ": fatal librdkafka error " + Rdk().rd_kafka_err2name(code) + ": " +
                             fatal + " (Close and Connect again)");
        break;
      }
      case RD_KAFKA_RESP_ERR__AUTHENTICATION:
      case RD_KAFKA_RESP_ERR__SSL:
        if (self->pending_error_.ok()) {
          self->pending_error_ = Status::InvalidArgument("kafka " + self->Brokers() + ": " + reason);
        }
        break;
      default:
        break;  // informational: librdkafka recovers by itself
    }
  }

  // Called from librdkafka's threads.
  static void Log(const rd_kafka_t* rk, int level, const char* facility, const char* buf) {
    const KafkaSource* self = Self(Rdk().rd_kafka_opaque(rk));
    if (self != nullptr && self->options_.log) {
      try {
        self->options_.log(level, std::string(facility) + ": " + buf);
      } catch (...) {  // nowhere to report it from this thread
      }
    }
  }

  // The dead-letter producer's delivery reports, served inside rd_kafka_flush.
  static void Delivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    KafkaSource* self = Self(opaque);
    const auto seq = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(m->_private));
    Status s;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      s = Status::IOError("kafka " + self->Brokers() + ": dead-letter topic '" + self->options_.dead_letter +
                          "': delivery failed: " + Rdk().rd_kafka_err2str(m->err));
    }
    self->deliveries_[seq] = std::move(s);
  }

  // rd_kafka_commit_queue's result: the per-partition errors.
  struct CommitResult {
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    std::vector<std::pair<KafkaPosition, rd_kafka_resp_err_t>> failed;
  };
  static void Committed(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* offsets, void* opaque) {
    auto* result = static_cast<CommitResult*>(opaque);
    result->err = err;
    if (offsets == nullptr) return;
    for (int i = 0; i < offsets->cnt; ++i) {
      const rd_kafka_topic_partition_t& tp = offsets->elems[i];
      if (tp.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        result->failed.push_back({{tp.topic, tp.partition, tp.offset}, tp.err});
      }
    }
  }
};

// ---- KafkaSource ----

void KafkaSource::HandleDeleter::operator()(rd_kafka_s* rk) const { Rdk().rd_kafka_destroy(rk); }

KafkaSource::KafkaSource(KafkaSourceOptions options) : options_(std::move(options)) {}

KafkaSource::~KafkaSource() { (void)Close(); }  // (leaving the group: nobody to tell if it fails)

std::string KafkaSource::Brokers() const {
  std::string out;
  for (const std::string& b : options_.brokers) out += (out.empty() ? "" : ",") + b;
  return out;
}

std::string KafkaSource::Where() const {
  return "kafka " + Brokers() + " topic '" + options_.topic + "' group '" + options_.group + "'";
}

std::vector<KafkaPartition> KafkaSource::Assignment() const {
  return std::vector<KafkaPartition>(assigned_.begin(), assigned_.end());
}

namespace {

// Sets one property; InvalidArgument naming it and librdkafka's reason.
Status SetProperty(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char err[512] = {};
  if (Rdk().rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
    return Status::InvalidArgument("kafka source: property '" + name + "' = '" + value + "': " + err);
  }
  return Status::OK();
}

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* c) const { Rdk().rd_kafka_conf_destroy(c); }
};
using Conf = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;

}  // namespace

Result<std::unique_ptr<KafkaSource>> KafkaSource::Connect(const KafkaSourceOptions& options) {
  if (options.brokers.empty()) return Status::InvalidArgument("kafka source: expected a broker, found none");
  if (options.topic.empty()) return Status::InvalidArgument("kafka source: expected a topic, found none");
  if (options.group.empty()) return Status::InvalidArgument("kafka source: expected a consumer group, found none");
  if (options.batch == 0) return Status::InvalidArgument("kafka source: expected batch >= 1, found 0");
  for (const auto& [name, value] : options.properties) {
    for (const char* reserved : kReservedProperties) {
      if (name == reserved) {
        return Status::InvalidArgument("kafka source: property '" + name +
                                       "': expected a property KafkaSource does not set itself, found one it "
                                       "sets (use KafkaSourceOptions' field instead, if any)");
      }
    }
  }
  if (Status s = LoadRdKafka(); !s.ok()) return s;  // once per process
  std::unique_ptr<KafkaSource> source(new KafkaSource(options));
  const uint32_t heartbeat = options.heartbeat_interval_ms != 0
                                 ? options.heartbeat_interval_ms
                                 : std::max<uint32_t>(1, std::min<uint32_t>(3000, options.session_timeout_ms / 3));
  Conf conf(Rdk().rd_kafka_conf_new());
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", source->Brokers()},
      {"group.id", options.group},
      {"client.id", options.client_id},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", "earliest"},
      {"enable.partition.eof", "false"},
      {"session.timeout.ms", std::to_string(options.session_timeout_ms)},
      {"heartbeat.interval.ms", std::to_string(heartbeat)},
      {"partition.assignment.strategy", options.assignor},
  };
  for (const auto& [name, value] : settings) TRIB_RETURN_IF_ERROR(SetProperty(conf.get(), name, value));
  for (const auto& [name, value] : options.properties) TRIB_RETURN_IF_ERROR(SetProperty(conf.get(), name, value));
  Rdk().rd_kafka_conf_set_opaque(conf.get(), source.get());
  Rdk().rd_kafka_conf_set_rebalance_cb(conf.get(), &Callbacks::Rebalance);
  Rdk().rd_kafka_conf_set_error_cb(conf.get(), &Callbacks::Error);
  Rdk().rd_kafka_conf_set_log_cb(conf.get(), &Callbacks::Log);

  char err[512] = {};
  rd_kafka_t* rk = Rdk().rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof(err));
  if (rk == nullptr) return Status::InvalidArgument("kafka source: cannot create the consumer: " + std::string(err));
  conf.release();  // rd_kafka_new owns it now
  source->consumer_.reset(rk);
  Rdk().rd_kafka_poll_set_consumer(rk);

  // A metadata request for the topic: a broker answers, and the topic exists.
  rd_kafka_topic_t* rkt = Rdk().rd_kafka_topic_new(rk, options.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t merr = Rdk().rd_kafka_metadata(
      rk, 0, rkt, &md, static_cast<int>(std::min<uint32_t>(options.connect_timeout_ms, INT32_MAX)));
  Rdk().rd_kafka_topic_destroy(rkt);
  if (merr != RD_KAFKA_RESP_ERR_NO_ERROR) {
    source->closed_ = true;  // nothing to leave yet
    return Status::IOError("kafka " + source->Brokers() + ": no broker answered a metadata request within " +
                           std::to_string(options.connect_timeout_ms) + " ms (" + Rdk().rd_kafka_err2str(merr) + ")");
  }
  rd_kafka_resp_err_t topic_err = RD_KAFKA_RESP_ERR_NO_ERROR;
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (options.topic == md->topics[i].topic) topic_err = md->topics[i].err;
  }
  Rdk().rd_kafka_metadata_destroy(md);
  if (topic_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    source->closed_ = true;
    const std::string msg = "kafka " + source->Brokers() + ": topic '" + options.topic +
                            "': " + Rdk().rd_kafka_err2name(topic_err) + ": " + Rdk().rd_kafka_err2str(topic_err);
    if (topic_err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) return Status::NotFound(msg);
    return Status::IOError(msg);
  }

  PartitionList topics = NewList(1);
  Rdk().rd_kafka_topic_partition_list_add(topics.get(), options.topic.c_str(), RD_KAFKA_PARTITION_UA);
  if (const rd_kafka_resp_err_t serr = Rdk().rd_kafka_subscribe(rk, topics.get()); serr != RD_KAFKA_RESP_ERR_NO_ERROR) {
    source->closed_ = true;
    return Status::InvalidArgument(source->Where() + ": subscribe: " + Rdk().rd_kafka_err2str(serr));
  }
  return source;
}

Status KafkaSource::ConsumerError(int err, const std::string& reason) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__PARTITION_EOF:
      return Status::OK();
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
      return Status::NotFound(Where() + ": " + reason);
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
      return Status::InvalidArgument(Where() + ": " + reason);
    case RD_KAFKA_RESP_ERR__FATAL: {
      char fatal[512] = {};
      const rd_kafka_resp_err_t code = Rdk().rd_kafka_fatal_error(consumer_.get(), fatal, sizeof(fatal));
      return Status::Internal(Where() + ": fatal librdkafka error " + Rdk().rd_kafka_err2name(code) + ": " + fatal +
                              " (Close and Connect again)");
    }
    default:
      return Status::OK();  // transient: librdkafka retries by itself
  }
}

Status KafkaSource::Read(std::vector<KafkaEntry>* out) {
  out->clear();
  if (closed_) return Status::InvalidArgument(Where() + ": Read after Close");
  if (!pending_error_.ok()) return std::exchange(pending_error_, Status::OK());
  reading_ = out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_ms);
  while (out->size() < options_.batch) {
    int timeout_ms = 0;
    if (out->empty()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left));
    }
    rd_kafka_message_t* m = Rdk().rd_kafka_consumer_poll(consumer_.get(), timeout_ms);
    if (m == nullptr) {
      if (timeout_ms == 0) break;
      if (!pending_error_.ok()) break;
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      Status s = ConsumerError(m->err, Rdk().rd_kafka_message_errstr(m));
      Rdk().rd_kafka_message_destroy(m);
      if (!s.ok() && pending_error_.ok()) pending_error_ = std::move(s);
      if (!pending_error_.ok() && out->empty()) break;
      continue;
    }
    // A message of a partition revoked meanwhile (librdkafka drops most of
    // them itself) is not returned.
    if (m->rkt != nullptr && assigned_.count({Rdk().rd_kafka_topic_name(m->rkt), m->partition}) != 0) {
      out->push_back(DecodeMessage(m));
    }
    Rdk().rd_kafka_message_destroy(m);
    if (!pending_error_.ok() && out->empty()) break;
  }
  reading_ = nullptr;
  // Messages read are never dropped for an error: it waits for the next Read.
  if (out->empty() && !pending_error_.ok()) return std::exchange(pending_error_, Status::OK());
  return Status::OK();
}

Status KafkaSource::Commit(const std::vector<KafkaPosition>& next_offsets) {
  if (closed_) return Status::InvalidArgument(Where() + ": Commit after Close");
  if (next_offsets.empty()) return Status::OK();
  PartitionList list = NewList(static_cast<int>(next_offsets.size()));
  std::string not_owned;
  for (const KafkaPosition& p : next_offsets) {
    if (p.offset < 0) {
      return Status::InvalidArgument(Where() + ": commit of " + PartitionName(p.topic, p.partition) +
                                     ": expected an offset >= 0, found " + std::to_string(p.offset));
    }
    if (assigned_.count({p.topic, p.partition}) == 0) {
      not_owned +=
          (not_owned.empty() ? "" : ", ") + PartitionName(p.topic, p.partition) + " offset " + std::to_string(p.offset);
      continue;
    }
    Rdk().rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition)->offset = p.offset;
  }
  if (list->cnt > 0) {
    Callbacks::CommitResult result;
    const rd_kafka_resp_err_t err =
        Rdk().rd_kafka_commit_queue(consumer_.get(), list.get(), nullptr, &Callbacks::Committed, &result);
    if (!result.failed.empty()) {
      std::string msg = Where() + ": commit refused:";
      for (const auto& [pos, perr] : result.failed) {
        msg += " " + PartitionName(pos.topic, pos.partition) + " offset " + std::to_string(pos.offset) + ": " +
               Rdk().rd_kafka_err2name(perr) + " (" + Rdk().rd_kafka_err2str(perr) + ");";
      }
      msg.pop_back();
      return Status::IOError(msg);
    }
    const rd_kafka_resp_err_t any = err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : result.err;
    if (any != RD_KAFKA_RESP_ERR_NO_ERROR && any != RD_KAFKA_RESP_ERR__NO_OFFSET) {
      return Status::IOError(Where() + ": commit failed: " + Rdk().rd_kafka_err2name(any) + " (" +
                             Rdk().rd_kafka_err2str(any) + ")");
    }
  }
  if (!not_owned.empty()) {
    return Status::NotFound(Where() + ": commit of " + not_owned +
                            ": expected a partition assigned to this consumer, found it is not (revoked: its new "
                            "owner reads again from the last committed offset)");
  }
  return Status::OK();
}

Status KafkaSource::EnsureProducer() {
  if (producer_ != nullptr) return Status::OK();
  Conf conf(Rdk().rd_kafka_conf_new());
  const std::vector<std::pair<std::string, std::string>> settings = {
      {"bootstrap.servers", Brokers()},
      {"client.id", options_.client_id},
      {"acks", "all"},
      {"message.timeout.ms", std::to_string(options_.connect_timeout_ms)},
  };
  for (const auto& [name, value] : settings) TRIB_RETURN_IF_ERROR(SetProperty(conf.get(), name, value));
  for (const auto& [name, value] : options_.properties) {
    // Consumer-only properties are not for the producer.
    const rd_kafka_conf_res_t r = Rdk().rd_kafka_conf_set(conf.get(), name.c_str(), value.c_str(), nullptr, 0);
    (void)r;
  }
  Rdk().rd_kafka_conf_set_opaque(conf.get(), this);
  Rdk().rd_kafka_conf_set_dr_msg_cb(conf.get(), &Callbacks::Delivered);
  Rdk().rd_kafka_conf_set_log_cb(conf.get(), &Callbacks::Log);
  char err[512] = {};
  rd_kafka_t* rk = Rdk().rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof(err));
  if (rk == nullptr) {
    return Status::InvalidArgument(Where() + ": cannot create the dead-letter producer: " + std::string(err));
  }
  conf.release();
  producer_.reset(rk);
  return Status::OK();
}

Status KafkaSource::DeadLetter(const KafkaEntry& e) {
  if (closed_) return Status::InvalidArgument(Where() + ": DeadLetter after Close");
  if (options_.dead_letter.empty()) return Status::OK();
  TRIB_RETURN_IF_ERROR(EnsureProducer());
  const std::string where = "kafka " + Brokers() + ": dead-letter topic '" + options_.dead_letter + "'";
  rd_kafka_headers_t* headers = Rdk().rd_kafka_headers_new(e.headers.size() + 2);
  for (const auto& [name, value] : e.headers) {
    Rdk().rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                              static_cast<ssize_t>(value.size()));
  }
  const std::string error = e.error.ToString();
  const std::string source = e.topic + "/" + std::to_string(e.partition) + "/" + std::to_string(e.offset);
  Rdk().rd_kafka_header_add(headers, "error", -1, error.data(), static_cast<ssize_t>(error.size()));
  Rdk().rd_kafka_header_add(headers, "source", -1, source.data(), static_cast<ssize_t>(source.size()));
  const uint64_t seq = next_delivery_++;
  // RD_KAFKA_V_VALUE/KEY with a null pointer produce a null value/key.
  void* value = e.value ? const_cast<char*>(e.value->data()) : nullptr;
  void* key = e.key ? const_cast<char*>(e.key->data()) : nullptr;
  const size_t value_size = e.value ? e.value->size() : 0;
  const size_t key_size = e.key ? e.key->size() : 0;
  // librdkafka's RD_KAFKA_V_* macros type-check through GNU statement
  // expressions, which clang's -Wpedantic reports.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wgnu-statement-expression"
#endif
  const rd_kafka_resp_err_t perr = Rdk().rd_kafka_producev(
      producer_.get(), RD_KAFKA_V_TOPIC(options_.dead_letter.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_VALUE(value, value_size), RD_KAFKA_V_KEY(key, key_size), RD_KAFKA_V_HEADERS(headers),
      RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(seq))), RD_KAFKA_V_END);
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
  if (perr != RD_KAFKA_RESP_ERR_NO_ERROR) {
    Rdk().rd_kafka_headers_destroy(headers);  // still ours when producev fails
    return Status::IOError(where + ": produce: " + Rdk().rd_kafka_err2str(perr));
  }
  const rd_kafka_resp_err_t ferr = Rdk().rd_kafka_flush(
      producer_.get(), static_cast<int>(std::min<uint32_t>(options_.connect_timeout_ms, INT32_MAX)));
  auto it = deliveries_.find(seq);
  if (it == deliveries_.end()) {
    return Status::IOError(where + ": no delivery report within " + std::to_string(options_.connect_timeout_ms) +
                           " ms (" + Rdk().rd_kafka_err2str(ferr) + ")");
  }
  Status s = std::move(it->second);
  deliveries_.erase(it);
  return s;
}

Result<KafkaLag> KafkaSource::Lag() {
  if (closed_) return Status::InvalidArgument(Where() + ": Lag after Close");
  const int timeout = static_cast<int>(std::min<uint32_t>(options_.connect_timeout_ms, INT32_MAX));
  KafkaLag lag;
  lag.joined = joined_;
  if (assigned_.empty()) return lag;
  PartitionList list = NewList(static_cast<int>(assigned_.size()));
  for (const KafkaPartition& p : assigned_)
    Rdk().rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition);
  if (const rd_kafka_resp_err_t err = Rdk().rd_kafka_committed(consumer_.get(), list.get(), timeout);
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError(Where() + ": fetching the committed offsets: " + Rdk().rd_kafka_err2str(err));
  }
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = list->elems[i];
    if (tp.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::IOError(Where() + ": committed offset of " + PartitionName(tp.topic, tp.partition) + ": " +
                             Rdk().rd_kafka_err2str(tp.err));
    }
    KafkaPartitionLag p;
    p.topic = tp.topic;
    p.partition = tp.partition;
    p.committed = tp.offset >= 0 ? tp.offset : -1;
    if (const rd_kafka_resp_err_t err =
            Rdk().rd_kafka_query_watermark_offsets(consumer_.get(), tp.topic, tp.partition, &p.low, &p.high, timeout);
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::IOError(Where() + ": watermarks of " + PartitionName(tp.topic, tp.partition) + ": " +
                             Rdk().rd_kafka_err2str(err));
    }
    p.lag = std::max<int64_t>(0, p.high - (p.committed >= 0 ? p.committed : p.low));
    lag.total += p.lag;
    lag.partitions.push_back(std::move(p));
  }
  return lag;
}

Status KafkaSource::Close() {
  if (closed_) {
    consumer_.reset();
    producer_.reset();
    return Status::OK();
  }
  Status s;
  if (consumer_ != nullptr) {
    // Runs the rebalance callback (on_revoke) for the assignment and leaves
    // the group.
    if (const rd_kafka_resp_err_t err = Rdk().rd_kafka_consumer_close(consumer_.get());
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      s = Status::IOError(Where() + ": leaving the group: " + Rdk().rd_kafka_err2str(err));
    }
  }
  closed_ = true;
  assigned_.clear();
  consumer_.reset();
  producer_.reset();
  return s;
}

}  // namespace tributary
