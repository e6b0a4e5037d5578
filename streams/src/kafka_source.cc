#include "tributary/kafka_source.h"

#include <dlfcn.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "tributary/utf8.h"
#include "url_parse.h"

namespace tributary {
namespace {

// ---- librdkafka, loaded on first use ----
//
// The program does not link librdkafka: with its dependencies (OpenSSL,
// SASL, zstd, lz4) loading it cost every process ~7 ms of start-up (relocations
// and constructors; bench/LDA_RESULTS.md, "Start-up"), paid by every `train`
// or `eval` that never reads from Kafka. The first KafkaSource::Connect opens
// it (dlopen; TRIBUTARY_RDKAFKA_LIBRARY names another file) and resolves the
// functions this file calls into one table. Their types come from rdkafka.h
// (decltype), so a table that does not match the header cannot compile.
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

RdKafkaApi g_rdkafka;  // filled once by LoadRdKafka, read-only afterwards

// librdkafka's functions; valid once LoadRdKafka has succeeded (every caller
// runs on a connected source).
const RdKafkaApi& Rdk() { return g_rdkafka; }

// Opens librdkafka once per process; the same Status every later time.
Status LoadRdKafka() {
  static const Status loaded = [] {
    const char* env = std::getenv("TRIBUTARY_RDKAFKA_LIBRARY");
    const std::string file = env && *env ? env : "librdkafka.so.1";
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      return Status::IOError("kafka source: cannot load " + file + " (" + (e ? e : "dlopen failed") +
                             "); expected librdkafka >= 1.6 (Debian: librdkafka1)");
    }
    RdKafkaApi api;
#define TRIB_RDKAFKA_RESOLVE(name)                                                                              \
  api.rd_kafka_##name = reinterpret_cast<decltype(api.rd_kafka_##name)>(dlsym(handle, "rd_kafka_" #name));      \
  if (api.rd_kafka_##name == nullptr) {                                                                         \
    return Status::IOError("kafka source: " + file + " has no rd_kafka_" #name "; expected librdkafka >= 1.6"); \
  }
    TRIB_RDKAFKA_FUNCTIONS(TRIB_RDKAFKA_RESOLVE)
#undef TRIB_RDKAFKA_RESOLVE
    g_rdkafka = api;  // the handle stays open for the life of the process
    return Status::OK();
  }();
  return loaded;
}

}  // namespace
namespace {

// ---- URL parsing ----

Status UrlError(std::string_view url, std::string_view part, std::string_view expected, std::string_view found) {
  return Status::InvalidArgument("kafka source URL '" + std::string(url) + "': " + std::string(part) + ": expected " +
                                 std::string(expected) + ", found " + std::string(found));
}

using url_parse::ParseUnsigned;
using url_parse::PercentDecode;
using url_parse::Quoted;

// Kafka's rule for topic names (kafka.common.Topic): 1..249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
bool IsLegalTopic(std::string_view t) {
  if (t.empty() || t.size() > 249 || t == "." || t == "..") return false;
  return std::all_of(t.begin(), t.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}
constexpr std::string_view kTopicRule = "a Kafka topic name (1..249 of [a-zA-Z0-9._-])";

bool IsKnownAssignor(std::string_view list) {
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (name != "range" && name != "roundrobin" && name != "cooperative-sticky") return false;
    if (comma == std::string_view::npos) return true;
    list = list.substr(comma + 1);
  }
}

// Parses one HOST[:PORT] of the broker list into "host:port" (IPv6 hosts
// stay in brackets, as librdkafka wants them).
Status ParseBroker(std::string_view url, std::string_view b, std::string* out) {
  std::string_view host;
  std::string_view port = "9092";
  if (!b.empty() && b[0] == '[') {
    const size_t close = b.find(']');
    if (close == std::string_view::npos) return UrlError(url, "broker", "an IPv6 address closed by ']'", Quoted(b));
    host = b.substr(0, close + 1);
    const std::string_view after = b.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return UrlError(url, "broker " + Quoted(b), "':PORT' after ']'", Quoted(after));
      port = after.substr(1);
    }
    if (host.size() == 2) return UrlError(url, "broker " + Quoted(b), "an IPv6 address in the brackets", "none");
  } else {
    const size_t colon = b.find(':');
    host = b.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = b.substr(colon + 1);
      if (port.find(':') != std::string_view::npos) {
        return UrlError(url, "broker", "an IPv6 address in brackets ([::1]:9092)", Quoted(b));
      }
    }
  }
  if (host.empty()) return UrlError(url, "broker", "HOST[:PORT]", b.empty() ? "an empty entry" : Quoted(b));
  uint16_t p = 0;
  if (!ParseUnsigned<uint16_t>(port, 1, 65535, &p)) {
    return UrlError(url, "port of broker " + Quoted(b), "a number in 1..65535", Quoted(port));
  }
  *out = std::string(host) + ":" + std::to_string(p);
  return Status::OK();
}

// ---- messages ----

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '\t') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string PartitionName(const std::string& topic, int32_t partition) {
  return "topic '" + topic + "' partition " + std::to_string(partition);
}

// Converts one message to an entry (the message stays the caller's).
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

using PartitionList = std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>;
PartitionList NewList(int size) {
  return PartitionList(Rdk().rd_kafka_topic_partition_list_new(size), Rdk().rd_kafka_topic_partition_list_destroy);
}

std::vector<KafkaPartition> ToPartitions(const rd_kafka_topic_partition_list_t* list) {
  std::vector<KafkaPartition> out;
  for (int i = 0; i < list->cnt; ++i) out.push_back({list->elems[i].topic, list->elems[i].partition});
  return out;
}

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

// ---- ParseKafkaSourceUrl ----

Result<KafkaSourceOptions> ParseKafkaSourceUrl(std::string_view url) {
  KafkaSourceOptions o;
  const url_parse::ErrorFn error = [url](std::string_view part, std::string_view expected, std::string_view found) {
    return UrlError(url, part, expected, found);
  };
  url_parse::UrlParts parts;
  TRIB_RETURN_IF_ERROR(url_parse::SplitUrl(url, "kafka://", "topic", "'/TOPIC' after the brokers", error, &parts));
  std::string_view authority = parts.authority;

  // HOST[:PORT][,HOST[:PORT]...]
  if (authority.empty()) return UrlError(url, "brokers", "HOST[:PORT][,HOST[:PORT]...]", "none");
  if (const size_t at = authority.find('@'); at != std::string_view::npos) {
    return UrlError(url, "brokers", "HOST[:PORT] without credentials (set sasl.* properties instead)",
                    Quoted(authority.substr(0, at + 1)));
  }
  while (true) {
    const size_t comma = authority.find(',');
    std::string broker;
    TRIB_RETURN_IF_ERROR(ParseBroker(url, authority.substr(0, comma), &broker));
    o.brokers.push_back(std::move(broker));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }

  // /TOPIC
  o.topic = std::move(parts.name);
  if (!IsLegalTopic(o.topic)) return UrlError(url, "topic", kTopicRule, Quoted(o.topic));

  // ?PARAM=VALUE&...
  TRIB_RETURN_IF_ERROR(url_parse::ForEachParameter(
      parts.query, error, [&](const std::string& name, const std::string& value, const std::string& part) -> Status {
        if (name == "group" || name == "client_id") {
          if (value.empty()) return UrlError(url, part, "a non-empty name", "an empty value");
          // The group goes into every log record's source position (a proto3
          // string): one that is not UTF-8 would make the log unreadable.
          if (std::string why = Utf8Error(value); !why.empty()) return UrlError(url, part, "a UTF-8 name", why);
          (name == "group" ? o.group : o.client_id) = value;
        } else if (name == "dead_letter") {
          if (!IsLegalTopic(value)) return UrlError(url, part, kTopicRule, Quoted(value));
          o.dead_letter = value;
        } else if (name == "assignor") {
          if (!IsKnownAssignor(value)) {
            return UrlError(url, part, "range, roundrobin, range,roundrobin or cooperative-sticky", Quoted(value));
          }
          o.assignor = value;
        } else if (name == "batch") {
          if (!ParseUnsigned<uint32_t>(value, 1, 1000000, &o.batch)) {
            return UrlError(url, part, "a number in 1..1000000", Quoted(value));
          }
        } else if (name == "poll_ms") {
          if (!ParseUnsigned<uint32_t>(value, 0, 3600000, &o.poll_ms)) {
            return UrlError(url, part, "a number of milliseconds in 0..3600000", Quoted(value));
          }
        } else if (name == "session_timeout_ms" || name == "heartbeat_interval_ms" || name == "connect_timeout_ms") {
          uint32_t* target = name == "session_timeout_ms"      ? &o.session_timeout_ms
                             : name == "heartbeat_interval_ms" ? &o.heartbeat_interval_ms
                                                               : &o.connect_timeout_ms;
          if (!ParseUnsigned<uint32_t>(value, 1, 3600000, target)) {
            return UrlError(url, part, "a number of milliseconds in 1..3600000", Quoted(value));
          }
        } else {
          return UrlError(url, "parameter",
                          "one of group, batch, poll_ms, session_timeout_ms, heartbeat_interval_ms, "
                          "connect_timeout_ms, dead_letter, client_id, assignor",
                          Quoted(name));
        }
        return Status::OK();
      }));
  return o;
}

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

void KafkaSource::OnRebalance(int err, rd_kafka_topic_partition_list_s* partitions) {
  const bool incremental = std::strcmp(Rdk().rd_kafka_rebalance_protocol(consumer_.get()), "COOPERATIVE") == 0;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    Assign(partitions, incremental);
  } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    Revoke(partitions, incremental);
  } else {  // librdkafka's advice: give everything up, the group rebalances again
    if (pending_error_.ok()) {
      pending_error_ = Status::IOError(
          Where() + ": rebalance failed: " + Rdk().rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)));
    }
    Revoke(partitions, incremental);
  }
}

void KafkaSource::Assign(rd_kafka_topic_partition_list_s* partitions, bool incremental) {
  joined_ = true;
  PartitionList accepted = NewList(partitions->cnt);
  // The group's committed offsets, for the hook (one request for all).
  PartitionList committed = NewList(partitions->cnt);
  Status committed_error;
  if (options_.start_offset) {
    for (int i = 0; i < partitions->cnt; ++i) {
      Rdk().rd_kafka_topic_partition_list_add(committed.get(), partitions->elems[i].topic,
                                              partitions->elems[i].partition);
    }
    const rd_kafka_resp_err_t cerr =
        Rdk().rd_kafka_committed(consumer_.get(), committed.get(), static_cast<int>(options_.connect_timeout_ms));
    if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      committed_error =
          Status::IOError(std::string("cannot read the group's committed offsets: ") + Rdk().rd_kafka_err2str(cerr));
    }
  }
  for (int i = 0; i < partitions->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[i];
    const std::string topic = tp.topic;
    int64_t offset = RD_KAFKA_OFFSET_INVALID;  // the committed offset, else auto.offset.reset
    if (options_.start_offset) {
      Status error = committed_error;
      std::optional<int64_t> group_offset;
      const rd_kafka_topic_partition_t& c = committed->elems[i];
      if (error.ok() && c.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        error =
            Status::IOError(std::string("cannot read the group's committed offset: ") + Rdk().rd_kafka_err2str(c.err));
      }
      if (c.offset >= 0) group_offset = c.offset;
      try {
        Result<std::optional<int64_t>> start = error.ok() ? options_.start_offset(topic, tp.partition, group_offset)
                                                          : Result<std::optional<int64_t>>(error);
        if (!start.ok()) {
          error = start.status();
        } else if (start->has_value()) {
          offset = **start;
          if (offset < 0) {
            error = Status::InvalidArgument("expected an offset >= 0, found " + std::to_string(offset));
          }
        }
      } catch (const std::exception& ex) {
        error = Status::Internal(std::string("the hook threw: ") + ex.what());
      } catch (...) {
        error = Status::Internal("the hook threw");
      }
      if (!error.ok()) {
        // Not assigned: starting anywhere else could skip or repeat messages.
        // Internal: the caller must Close and Connect again (Read's contract).
        if (pending_error_.ok()) {
          pending_error_ =
              Status::Internal(Where() + ": start_offset hook for " + PartitionName(topic, tp.partition) +
                               " (the partition is not read: Close and Connect again): " + error.ToString());
        }
        continue;
      }
    }
    Rdk().rd_kafka_topic_partition_list_add(accepted.get(), tp.topic, tp.partition)->offset = offset;
    assigned_.insert({topic, tp.partition});
  }
  rd_kafka_resp_err_t aerr = RD_KAFKA_RESP_ERR_NO_ERROR;
  if (incremental) {
    if (rd_kafka_error_t* e = Rdk().rd_kafka_incremental_assign(consumer_.get(), accepted.get()); e != nullptr) {
      aerr = Rdk().rd_kafka_error_code(e);
      Rdk().rd_kafka_error_destroy(e);
    }
  } else {
    aerr = Rdk().rd_kafka_assign(consumer_.get(), accepted.get());
  }
  if (aerr != RD_KAFKA_RESP_ERR_NO_ERROR && pending_error_.ok()) {
    pending_error_ = Status::IOError(Where() + ": assign: " + Rdk().rd_kafka_err2str(aerr));
  }
}

void KafkaSource::Revoke(rd_kafka_topic_partition_list_s* partitions, bool incremental) {
  std::vector<KafkaPartition> revoked;
  for (const KafkaPartition& p : ToPartitions(partitions)) {
    if (assigned_.count(p) != 0) revoked.push_back(p);
  }
  if (options_.on_revoke && !revoked.empty()) {
    try {
      options_.on_revoke(revoked);
    } catch (const std::exception& ex) {
      if (pending_error_.ok()) pending_error_ = Status::Internal(Where() + ": on_revoke threw: " + ex.what());
    } catch (...) {
      if (pending_error_.ok()) pending_error_ = Status::Internal(Where() + ": on_revoke threw");
    }
  }
  // Messages of these partitions fetched by the running Read are dropped:
  // the caller's on_revoke did not see them, so they were not committed,
  // and the partitions' next owner reads them again.
  for (const KafkaPartition& p : revoked) assigned_.erase(p);
  if (reading_ != nullptr) {
    reading_->erase(std::remove_if(reading_->begin(), reading_->end(),
                                   [&](const KafkaEntry& e) {
                                     return assigned_.count({e.topic, e.partition}) == 0;
                                   }),
                    reading_->end());
  }
  if (incremental) {
    PartitionList list = NewList(static_cast<int>(revoked.size()));
    for (const KafkaPartition& p : revoked)
      Rdk().rd_kafka_topic_partition_list_add(list.get(), p.topic.c_str(), p.partition);
    if (rd_kafka_error_t* e = Rdk().rd_kafka_incremental_unassign(consumer_.get(), list.get()); e != nullptr) {
      Rdk().rd_kafka_error_destroy(e);  // only refuses partitions not assigned
    }
  } else {
    assigned_.clear();
    Rdk().rd_kafka_assign(consumer_.get(), nullptr);
  }
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
