#include "tributary/redis_source.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <limits>

#include "broker_format.h"
#include "tributary/utf8.h"
#include "url_parse.h"

namespace tributary {
namespace {

// ---- URL parsing ----

// The URL as shown in error messages: the password replaced by "***".
std::string RedactedUrl(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const size_t auth_begin = scheme_end + 3;
  const size_t auth_end = url.find_first_of("/?#", auth_begin);
  const std::string_view authority =
      url.substr(auth_begin, auth_end == std::string_view::npos ? std::string_view::npos : auth_end - auth_begin);
  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, auth_begin));
  out += ":***@";
  out += url.substr(auth_begin + at + 1);
  return out;
}

Status UrlError(std::string_view url, std::string_view part, std::string_view expected, std::string_view found) {
  std::string msg = "redis source URL '" + RedactedUrl(url) + "': " + std::string(part) + ": expected " +
                    std::string(expected) + ", found " + std::string(found);
  return Status::InvalidArgument(msg);
}

using url_parse::ParseUnsigned;
using url_parse::PercentDecode;
using url_parse::Quoted;

// ---- hiredis helpers ----

std::string_view ReplyString(const redisReply* r) {
  if (r == nullptr || r->str == nullptr) return {};
  return std::string_view(r->str, r->len);
}

bool IsString(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

// A Redis error reply as a Status naming the command. Transient server
// states (LOADING, BUSY, TRYAGAIN, MASTERDOWN) are IOError like a lost
// connection, so that a caller retries them the same way; NOGROUP is
// NotFound; everything else (WRONGPASS, NOAUTH, WRONGTYPE, ERR ...) is
// InvalidArgument: a configuration the caller must fix.
Status RedisErrorStatus(const std::string& where, std::string_view command, std::string_view message) {
  std::string msg = where + ": " + std::string(command) + " refused: " + std::string(message);
  auto starts = [&](std::string_view p) { return message.substr(0, p.size()) == p; };
  if (starts("LOADING") || starts("BUSY ") || starts("TRYAGAIN") || starts("MASTERDOWN")) {
    return Status::IOError(msg);
  }
  if (starts("NOGROUP")) return Status::NotFound(msg);
  return Status::InvalidArgument(msg);
}

// Converts one stream entry (fields as a flat key/value array) to a
// SourceEntry: the reply's shape is checked here, the entry format by
// broker_format::DecodeRedisEntry.
SourceEntry ParseEntry(const std::string& stream, const redisReply* entry) {
  SourceEntry e;
  if (entry->type != REDIS_REPLY_ARRAY || entry->elements < 2 || !IsString(entry->element[0])) {
    e.error = Status::InvalidDocument("redis stream '" + stream + "': malformed entry in the reply");
    return e;
  }
  e.entry_id = std::string(ReplyString(entry->element[0]));
  const std::string where = "redis stream '" + stream + "' entry " + e.entry_id;
  const redisReply* fields = entry->element[1];
  if (fields->type == REDIS_REPLY_NIL) {
    e.error = Status::InvalidDocument(where +
                                      ": expected an entry with fields, found none (the entry was deleted "
                                      "from the stream before it was acknowledged)");
    return e;
  }
  if (fields->type != REDIS_REPLY_ARRAY || fields->elements % 2 != 0) {
    e.error = Status::InvalidDocument(where + ": expected field/value pairs, found a malformed field list");
    return e;
  }
  std::vector<broker_format::RedisField> named;
  named.reserve(fields->elements / 2);
  for (size_t i = 0; i + 1 < fields->elements; i += 2) {
    named.emplace_back(ReplyString(fields->element[i]), ReplyString(fields->element[i + 1]));
  }
  return broker_format::DecodeRedisEntry(stream, e.entry_id, named);
}

// Appends the entries of an array of [id, fields] to *out.
void AppendEntries(const std::string& stream, const redisReply* entries, std::vector<SourceEntry>* out) {
  if (entries == nullptr || entries->type != REDIS_REPLY_ARRAY) return;
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* entry = entries->element[i];
    if (entry == nullptr || entry->type == REDIS_REPLY_NIL) continue;  // an entry deleted meanwhile
    out->push_back(ParseEntry(stream, entry));
  }
}

timeval ToTimeval(uint64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

}  // namespace

// ---- ParseRedisSourceUrl ----

Result<RedisSourceOptions> ParseRedisSourceUrl(std::string_view url) {
  RedisSourceOptions o;
  const url_parse::ErrorFn error = [url](std::string_view part, std::string_view expected, std::string_view found) {
    return UrlError(url, part, expected, found);
  };
  url_parse::UrlParts parts;
  TRIB_RETURN_IF_ERROR(url_parse::SplitUrl(url, "redis://", "stream", "'/STREAM' after HOST:PORT", error, &parts));
  std::string_view authority = parts.authority;

  // [:PASSWORD@]
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    if (userinfo.empty() || userinfo[0] != ':') {
      return UrlError(url, "password", "':PASSWORD@' (user names are not supported)", "a user name before '@'");
    }
    if (!PercentDecode(userinfo.substr(1), &o.password)) {
      return UrlError(url, "password", "valid %XX escapes", "a malformed escape");
    }
    if (o.password.empty()) return UrlError(url, "password", "a non-empty password after ':'", "an empty one");
    authority = authority.substr(at + 1);
  }

  // HOST[:PORT]
  std::string_view host;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return UrlError(url, "host", "an IPv6 address closed by ']'", Quoted(authority));
    }
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return UrlError(url, "port", "':PORT' after ']'", Quoted(after));
      port = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      has_port = true;
      if (port.find(':') != std::string_view::npos) {
        return UrlError(url, "host", "an IPv6 address in brackets ([::1]:6379)", Quoted(authority));
      }
    }
  }
  if (host.empty()) return UrlError(url, "host", "a host name or address", "none");
  o.host = std::string(host);
  if (has_port && !ParseUnsigned<uint16_t>(port, 1, 65535, &o.port)) {
    return UrlError(url, "port", "a number in 1..65535", Quoted(port));
  }

  // /STREAM: names go into every log record's source position (a proto3
  // string): one that is not UTF-8 would make the log unreadable.
  o.stream = std::move(parts.name);
  if (std::string why = Utf8Error(o.stream); !why.empty()) return UrlError(url, "stream", "a UTF-8 name", why);

  // ?PARAM=VALUE&...
  TRIB_RETURN_IF_ERROR(url_parse::ForEachParameter(
      parts.query, error, [&](const std::string& name, const std::string& value, const std::string& part) -> Status {
        if (name == "group" || name == "consumer" || name == "dead_letter") {
          TRIB_RETURN_IF_ERROR(url_parse::NameParameter(error, part, value,
                                                        name == "group"      ? &o.group
                                                        : name == "consumer" ? &o.consumer
                                                                             : &o.dead_letter));
        } else if (name == "batch") {
          TRIB_RETURN_IF_ERROR(url_parse::NumberParameter<uint32_t>(error, part, value, 1, 1000000, &o.batch));
        } else if (name == "block_ms") {
          TRIB_RETURN_IF_ERROR(
              url_parse::NumberParameter<uint32_t>(error, part, value, 0, 3600000, &o.block_ms, "milliseconds"));
        } else if (name == "claim_idle_ms") {
          if (!ParseUnsigned<uint64_t>(value, 0, std::numeric_limits<int64_t>::max(), &o.claim_idle_ms)) {
            return UrlError(url, part, "a number of milliseconds", Quoted(value));
          }
        } else if (name == "connect_timeout_ms") {
          TRIB_RETURN_IF_ERROR(url_parse::NumberParameter<uint32_t>(error, part, value, 1, 3600000,
                                                                    &o.connect_timeout_ms, "milliseconds"));
        } else {
          return UrlError(url, "parameter",
                          "one of group, consumer, dead_letter, batch, block_ms, claim_idle_ms, connect_timeout_ms",
                          Quoted(name));
        }
        return Status::OK();
      }));
  return o;
}

std::string DefaultRedisConsumer() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "tributary";
  return name;
}

// ---- RedisSource ----

void RedisSource::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }
void RedisSource::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

RedisSource::~RedisSource() = default;

std::string RedisSource::Address() const {
  if (options_.host.find(':') != std::string::npos) return "[" + options_.host + "]:" + std::to_string(options_.port);
  return options_.host + ":" + std::to_string(options_.port);
}

namespace {

std::string ConnectionError(const redisContext* c, uint64_t timeout_ms) {
  if (c == nullptr) return "cannot allocate a connection";
  std::string msg = c->errstr;
  if (c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)) {
    msg = "no reply within " + std::to_string(timeout_ms) + " ms (" + msg + ")";
  } else if (c->err == REDIS_ERR_EOF) {
    msg = "connection closed by the server (" + msg + ")";
  }
  return msg;
}

}  // namespace

Result<std::unique_ptr<RedisSource>> RedisSource::Connect(const RedisSourceOptions& options) {
  if (options.stream.empty()) return Status::InvalidArgument("redis source: expected a stream name, found none");
  if (options.group.empty()) return Status::InvalidArgument("redis source: expected a consumer group, found none");
  if (options.batch == 0) return Status::InvalidArgument("redis source: expected batch >= 1, found 0");
  std::unique_ptr<RedisSource> source(new RedisSource(options));
  if (source->options_.consumer.empty()) source->options_.consumer = DefaultRedisConsumer();
  TRIB_RETURN_IF_ERROR(source->ConnectNow());
  return source;
}

Status RedisSource::Reconnect() {
  context_.reset();
  return ConnectNow();
}

Status RedisSource::ConnectNow() {
  context_.reset();
  phase_ = Phase::kOwnPending;
  own_cursor_ = "0";
  claim_cursor_ = "-";
  const std::string where = "redis " + Address();
  redisContext* c =
      redisConnectWithTimeout(options_.host.c_str(), options_.port, ToTimeval(options_.connect_timeout_ms));
  if (c == nullptr || c->err != 0) {
    std::string msg = where + ": cannot connect: " + ConnectionError(c, options_.connect_timeout_ms);
    if (c != nullptr) redisFree(c);
    return Status::IOError(msg);
  }
  context_.reset(c);
  // Every reply, including a blocking XREADGROUP's, must come within this.
  if (redisSetTimeout(c, ToTimeval(uint64_t{options_.block_ms} + options_.connect_timeout_ms)) != REDIS_OK) {
    std::string msg = where + ": cannot set the socket timeout: " + ConnectionError(c, 0);
    context_.reset();
    return Status::IOError(msg);
  }
  ReplyPtr reply;
  if (!options_.password.empty()) {
    Status auth = Command({"AUTH", options_.password}, &reply);
    if (!auth.ok()) {
      context_.reset();  // an unauthenticated connection is of no use
      return auth;
    }
  }
  Status s = Command({"XGROUP", "CREATE", options_.stream, options_.group, "0", "MKSTREAM"}, &reply);
  if (!s.ok() && s.message().find("BUSYGROUP") == std::string::npos) {
    context_.reset();
    return s;
  }
  return Status::OK();
}

Status RedisSource::LostConnection(const std::string& command) {
  std::string msg = "redis " + Address() + ": " + command + ": ";
  msg += context_ == nullptr
             ? std::string("not connected (call Reconnect)")
             : ConnectionError(context_.get(), uint64_t{options_.block_ms} + options_.connect_timeout_ms);
  context_.reset();  // hiredis cannot use a context after an I/O error
  return Status::IOError(msg);
}

Status RedisSource::Command(const std::vector<std::string>& args, ReplyPtr* reply) {
  reply->reset();
  if (context_ == nullptr) return LostConnection(args[0]);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  reply->reset(static_cast<redisReply*>(
      redisCommandArgv(context_.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
  if (*reply == nullptr) return LostConnection(args[0]);
  if ((*reply)->type == REDIS_REPLY_ERROR) {
    return RedisErrorStatus("redis " + Address(), args[0], ReplyString(reply->get()));
  }
  return Status::OK();
}

Status RedisSource::Transaction(const std::vector<std::vector<std::string>>& commands, ReplyPtr* reply) {
  reply->reset();
  std::vector<std::vector<std::string>> all;
  all.push_back({"MULTI"});
  all.insert(all.end(), commands.begin(), commands.end());
  all.push_back({"EXEC"});
  if (context_ == nullptr) return LostConnection("MULTI");
  for (const auto& args : all) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(context_.get(), static_cast<int>(args.size()), argv.data(), lens.data()) != REDIS_OK) {
      return LostConnection(args[0]);
    }
  }
  // Replies: +OK, +QUEUED per command (or an error), then EXEC's.
  Status first_error;
  for (const auto& args : all) {
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK) return LostConnection(args[0]);
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR && first_error.ok()) {
      first_error = RedisErrorStatus("redis " + Address(), args[0], ReplyString(r.get()));
    }
    if (&args == &all.back()) *reply = std::move(r);
  }
  if (!first_error.ok()) return first_error;
  if (*reply == nullptr || (*reply)->type != REDIS_REPLY_ARRAY) {
    return Status::IOError("redis " + Address() + ": EXEC: expected the commands' replies, found none (aborted)");
  }
  // An error inside EXEC's reply (a command that failed when run).
  for (size_t i = 0; i < (*reply)->elements && i < commands.size(); ++i) {
    const redisReply* r = (*reply)->element[i];
    if (r->type == REDIS_REPLY_ERROR) return RedisErrorStatus("redis " + Address(), commands[i][0], ReplyString(r));
  }
  return Status::OK();
}

Status RedisSource::Read(std::vector<SourceEntry>* out) {
  out->clear();
  if (phase_ == Phase::kOwnPending) {
    TRIB_RETURN_IF_ERROR(ReadOwnPending(out));
    if (!out->empty()) return Status::OK();
    phase_ = Phase::kClaim;
    claim_cursor_ = "-";
  }
  if (phase_ == Phase::kNew &&
      std::chrono::steady_clock::now() - last_claim_scan_ >= std::chrono::milliseconds(options_.claim_idle_ms)) {
    phase_ = Phase::kClaim;  // look again for entries a crashed reader left behind
    claim_cursor_ = "-";
  }
  if (phase_ == Phase::kClaim) {
    TRIB_RETURN_IF_ERROR(ReadClaimed(out));
    if (!out->empty()) return Status::OK();
  }
  return ReadNew(out);
}

namespace {

// The entries of an XREADGROUP reply: [[stream, [[id, fields], ...]]] or nil.
void AppendReadGroupReply(const std::string& stream, const redisReply* reply, std::vector<SourceEntry>* out) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) return;  // nil: nothing within BLOCK
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* s = reply->element[i];
    if (s->type == REDIS_REPLY_ARRAY && s->elements == 2) AppendEntries(stream, s->element[1], out);
  }
}

}  // namespace

Status RedisSource::ReadOwnPending(std::vector<SourceEntry>* out) {
  ReplyPtr reply;
  TRIB_RETURN_IF_ERROR(Command({"XREADGROUP", "GROUP", options_.group, options_.consumer, "COUNT",
                                std::to_string(options_.batch), "STREAMS", options_.stream, own_cursor_},
                               &reply));
  AppendReadGroupReply(options_.stream, reply.get(), out);
  if (!out->empty()) own_cursor_ = out->back().entry_id;
  return Status::OK();
}

Status RedisSource::ReadClaimed(std::vector<SourceEntry>* out) {
  // XPENDING ... IDLE lists entries idle long enough, page by page; those of
  // other consumers are claimed with XCLAIM (which checks the idle time
  // again, so an entry another reader claims meanwhile is not taken twice).
  // Not XAUTOCLAIM: it would also take this reader's own entries that its
  // caller is still working on.
  const std::string idle = std::to_string(options_.claim_idle_ms);
  while (out->empty()) {
    ReplyPtr pending;
    TRIB_RETURN_IF_ERROR(Command(
        {"XPENDING", options_.stream, options_.group, "IDLE", idle, claim_cursor_, "+", std::to_string(options_.batch)},
        &pending));
    if (pending->type != REDIS_REPLY_ARRAY) {
      return Status::IOError("redis " + Address() + ": XPENDING: expected an array, found a reply of type " +
                             std::to_string(pending->type));
    }
    std::vector<std::string> claim = {"XCLAIM", options_.stream, options_.group, options_.consumer, idle};
    for (size_t i = 0; i < pending->elements; ++i) {
      const redisReply* p = pending->element[i];  // [id, consumer, idle ms, deliveries]
      if (p->type != REDIS_REPLY_ARRAY || p->elements < 2) continue;
      claim_cursor_ = "(" + std::string(ReplyString(p->element[0]));
      if (ReplyString(p->element[1]) != options_.consumer) claim.emplace_back(ReplyString(p->element[0]));
    }
    if (claim.size() > 5) {
      ReplyPtr claimed;
      TRIB_RETURN_IF_ERROR(Command(claim, &claimed));
      AppendEntries(options_.stream, claimed.get(), out);
    }
    if (pending->elements < options_.batch) {  // the scan reached the end
      phase_ = Phase::kNew;
      claim_cursor_ = "-";
      last_claim_scan_ = std::chrono::steady_clock::now();
      break;
    }
  }
  return Status::OK();
}

Status RedisSource::ReadNew(std::vector<SourceEntry>* out) {
  std::vector<std::string> args = {"XREADGROUP",      "GROUP", options_.group,
                                   options_.consumer, "COUNT", std::to_string(options_.batch)};
  if (options_.block_ms > 0) {
    args.push_back("BLOCK");
    args.push_back(std::to_string(options_.block_ms));
  }
  args.insert(args.end(), {"STREAMS", options_.stream, ">"});
  ReplyPtr reply;
  TRIB_RETURN_IF_ERROR(Command(args, &reply));
  AppendReadGroupReply(options_.stream, reply.get(), out);
  return Status::OK();
}

Status RedisSource::Ack(const std::vector<std::string>& entry_ids) {
  if (entry_ids.empty()) return Status::OK();
  std::vector<std::string> args = {"XACK", options_.stream, options_.group};
  args.insert(args.end(), entry_ids.begin(), entry_ids.end());
  ReplyPtr reply;
  return Command(args, &reply);
}

Status RedisSource::DeadLetter(const SourceEntry& e) {
  std::vector<std::string> ack = {"XACK", options_.stream, options_.group, e.entry_id};
  ReplyPtr reply;
  if (options_.dead_letter.empty()) return Command(ack, &reply);
  std::vector<std::string> add = {"XADD", options_.dead_letter, "*"};
  for (const auto& [key, value] : e.fields) {
    add.push_back(key);
    add.push_back(value);
  }
  add.insert(add.end(), {"error", e.error.ToString(), "source_id", e.entry_id});
  return Transaction({add, ack}, &reply);
}

Result<std::vector<std::string>> RedisSource::PendingIds(size_t max) {
  std::vector<std::string> ids;
  std::string cursor = "-";
  constexpr size_t kPage = 1000;
  while (ids.size() < max) {
    ReplyPtr page;
    const size_t want = std::min(kPage, max - ids.size());
    TRIB_RETURN_IF_ERROR(
        Command({"XPENDING", options_.stream, options_.group, cursor, "+", std::to_string(want)}, &page));
    if (page->type != REDIS_REPLY_ARRAY) {
      return Status::IOError("redis " + Address() + ": XPENDING: expected an array, found a reply of type " +
                             std::to_string(page->type));
    }
    for (size_t i = 0; i < page->elements; ++i) {
      const redisReply* p = page->element[i];  // [id, consumer, idle ms, deliveries]
      if (p->type != REDIS_REPLY_ARRAY || p->elements < 1) continue;
      ids.emplace_back(ReplyString(p->element[0]));
      cursor = "(" + ids.back();
    }
    if (page->elements < want) break;
  }
  return ids;
}

Result<SourceLag> RedisSource::Lag() {
  ReplyPtr reply;
  TRIB_RETURN_IF_ERROR(Command({"XINFO", "GROUPS", options_.stream}, &reply));
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* g = reply->element[i];
      if (g->type != REDIS_REPLY_ARRAY) continue;
      SourceLag lag;
      bool ours = false;
      for (size_t k = 0; k + 1 < g->elements; k += 2) {
        const std::string_view key = ReplyString(g->element[k]);
        const redisReply* v = g->element[k + 1];
        if (key == "name") ours = ReplyString(v) == options_.group;
        if (key == "pending" && v->type == REDIS_REPLY_INTEGER) lag.pending = static_cast<uint64_t>(v->integer);
        if (key == "lag" && v->type == REDIS_REPLY_INTEGER) lag.lag = v->integer;
        if (key == "last-delivered-id") lag.last_delivered_id = std::string(ReplyString(v));
      }
      if (ours) return lag;
    }
  }
  return Status::NotFound("redis " + Address() + ": XINFO GROUPS " + options_.stream + ": expected the group '" +
                          options_.group + "', found no such group");
}

}  // namespace tributary
