// ParseKafkaSourceUrl: kafka://HOST[:PORT][,HOST[:PORT]...]/TOPIC[?PARAM=VALUE&...]
// into KafkaSourceOptions (the pieces shared with the Redis source's URL are
// in url_parse.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "tributary/kafka_source.h"
#include "url_parse.h"

namespace tributary {
namespace {

Status UrlError(std::string_view url, std::string_view part, std::string_view expected, std::string_view found) {
  return Status::InvalidArgument("kafka source URL '" + std::string(url) + "': " + std::string(part) + ": expected " +
                                 std::string(expected) + ", found " + std::string(found));
}

using url_parse::ParseUnsigned;
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

}  // namespace

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
          TRIB_RETURN_IF_ERROR(url_parse::NameParameter(error, part, value, name == "group" ? &o.group : &o.client_id));
        } else if (name == "dead_letter") {
          if (!IsLegalTopic(value)) return UrlError(url, part, kTopicRule, Quoted(value));
          o.dead_letter = value;
        } else if (name == "assignor") {
          if (!IsKnownAssignor(value)) {
            return UrlError(url, part, "range, roundrobin, range,roundrobin or cooperative-sticky", Quoted(value));
          }
          o.assignor = value;
        } else if (name == "batch") {
          TRIB_RETURN_IF_ERROR(url_parse::NumberParameter<uint32_t>(error, part, value, 1, 1000000, &o.batch));
        } else if (name == "poll_ms") {
          TRIB_RETURN_IF_ERROR(
              url_parse::NumberParameter<uint32_t>(error, part, value, 0, 3600000, &o.poll_ms, "milliseconds"));
        } else if (name == "session_timeout_ms" || name == "heartbeat_interval_ms" || name == "connect_timeout_ms") {
          uint32_t* target = name == "session_timeout_ms"      ? &o.session_timeout_ms
                             : name == "heartbeat_interval_ms" ? &o.heartbeat_interval_ms
                                                               : &o.connect_timeout_ms;
          TRIB_RETURN_IF_ERROR(
              url_parse::NumberParameter<uint32_t>(error, part, value, 1, 3600000, target, "milliseconds"));
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

}  // namespace tributary
