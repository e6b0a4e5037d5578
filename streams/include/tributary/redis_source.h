// A source of documents read from a Redis stream through a consumer group
// (Redis >= 6.2 for XPENDING ... IDLE; Redis 7 also reports the group's lag).
//
// Entry format (field names are case-sensitive; other fields are ignored, so
// producers may carry their own metadata):
//   text   raw UTF-8 text -> Document.text (tokenized by the library), or
//   doc    one serialized v1::Document (binary-safe);
//          exactly one of the two, and `text` must not be empty;
//   label  optional: Document.label (overrides a label inside `doc`);
//   id     optional: Document.id (overrides an id inside `doc`); default
//          (also for an empty `id`): the id inside `doc` if any, else the
//          stream entry id.
// An entry that does not fit comes back from Read with SourceEntry::error set
// (InvalidDocument naming the stream, the entry id, expected vs found); the
// caller decides: DeadLetter it, or Ack and drop it.
//
// Delivery order of Read:
//  1. this consumer's own pending entries (read but never acknowledged, e.g.
//     before a crash of a process with the same consumer name), oldest
//     first, until none are left;
//  2. entries other consumers of the group left pending for longer than
//     claim_idle_ms, claimed (XPENDING ... IDLE, then XCLAIM; they then
//     belong to this consumer; this reader's own entries are never claimed
//     back); this scan is repeated every claim_idle_ms afterwards, so the
//     entries of a reader that crashes while this one runs are taken over;
//  3. new entries (XREADGROUP ... >), waiting up to block_ms for them.
// Delivery is at least once: an entry comes back until it is acknowledged
// (Ack or DeadLetter), also after Reconnect. The caller makes it exactly once
// by recording the entry ids it has durably applied (the server's WAL).
//
// Errors: a lost, refused or timed-out connection is IOError naming
// host:port and the command (then Reconnect). A Redis error reply is a
// Status naming the command and Redis's message: IOError for transient server
// states (LOADING, BUSY, TRYAGAIN, MASTERDOWN), NotFound for NOGROUP (the
// group was destroyed: Reconnect recreates it), InvalidArgument otherwise
// (WRONGPASS, NOAUTH, WRONGTYPE, ...: a configuration to fix).
//
// Thread safety: none. One RedisSource per reader thread; it owns its
// connection.
#ifndef TRIBUTARY_REDIS_SOURCE_H_
#define TRIBUTARY_REDIS_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

struct redisContext;  ///< hiredis
struct redisReply;

namespace tributary {

/// Configuration of RedisSource::Connect (ParseRedisSourceUrl makes one from
/// a URL).
struct RedisSourceOptions {
  std::string host = "127.0.0.1";  ///< the Redis server's host name or IP address (IPv6 without brackets)
  uint16_t port = 6379;            ///< its TCP port
  std::string stream;              ///< REQUIRED
  /// Consumer group; created (at the start of the stream, with the stream if
  /// missing) by Connect. Default: "tributary".
  std::string group = "tributary";
  /// Consumer name within the group. Empty: DefaultRedisConsumer(), the host
  /// name, which stays the same when the process restarts, so that a
  /// restarted reader gets its own unacknowledged entries back at once
  /// (instead of after claim_idle_ms). Several readers on one host must set
  /// distinct names.
  std::string consumer;
  /// Optional stream that DeadLetter copies bad entries to (empty: none).
  std::string dead_letter;
  uint32_t batch = 256;  ///< at most this many entries per Read; >= 1
  /// How long Read waits for new entries; 0: it does not wait.
  uint32_t block_ms = 500;
  /// Entries pending at another consumer for at least this long are claimed.
  uint64_t claim_idle_ms = 60000;
  /// Bounds connecting, and (added to block_ms) every reply.
  uint32_t connect_timeout_ms = 2000;
  std::string password;  ///< empty: no AUTH
};

/// Parses
///   redis://[:PASSWORD@]HOST[:PORT]/STREAM[?PARAM=VALUE&...]
/// PARAM: group, consumer, dead_letter, batch, block_ms, claim_idle_ms,
/// connect_timeout_ms. PORT defaults to 6379; HOST may be an IPv6 address in
/// brackets. PASSWORD, STREAM and values may be percent-encoded (%2F). Unset
/// parameters keep RedisSourceOptions' defaults; the consumer stays empty
/// (Connect then uses DefaultRedisConsumer()).
/// Errors: InvalidArgument naming the part of the URL that is wrong, with
/// expected vs found.
Result<RedisSourceOptions> ParseRedisSourceUrl(std::string_view url);

/// The consumer name used when none is given: the host name ("tributary" if
/// it cannot be read).
std::string DefaultRedisConsumer();

/// One stream entry as read.
struct SourceEntry {
  std::string entry_id;  ///< the Redis stream entry id, "1700000000000-0"
  v1::Document doc;      ///< valid when error.ok()
  /// Set when the entry is not a document (doc unusable): InvalidDocument
  /// naming the stream, the entry id, what was expected and found.
  Status error;
  /// The entry's fields as read, kept only for entries with an error (for
  /// DeadLetter); empty otherwise.
  std::vector<std::pair<std::string, std::string>> fields;
};

/// The consumer group's progress in the stream (RedisSource::Lag).
struct SourceLag {
  uint64_t pending = 0;  ///< entries delivered to the group and not acknowledged
  /// Entries of the stream not yet delivered to the group (XINFO GROUPS
  /// "lag", Redis >= 7); -1 when unknown (older Redis, or Redis cannot tell
  /// after entries were deleted).
  int64_t lag = -1;
  std::string last_delivered_id;  ///< the group's last delivered entry id
};

/// A consumer of one Redis stream in a consumer group, delivering entries as
/// documents (the entry format, delivery order and errors are at the top of
/// this file).
class RedisSource {
 public:
  /// Connects (within connect_timeout_ms), authenticates if a password is
  /// set, and creates the consumer group if it does not exist.
  /// Errors: InvalidArgument (an empty stream or group, batch 0), IOError
  /// naming host:port when the server cannot be reached, or a Status naming
  /// the command and Redis's message when Redis refuses (a wrong password,
  /// a key that is not a stream).
  static Result<std::unique_ptr<RedisSource>> Connect(const RedisSourceOptions& options);
  ~RedisSource();
  RedisSource(const RedisSource&) = delete;
  RedisSource& operator=(const RedisSource&) = delete;

  /// Replaces *out with the next entries, at most `batch`, in the delivery
  /// order described at the top of this file. Returns OK with an empty *out
  /// when nothing arrived within block_ms. Bad entries come back with
  /// `error` set, in their place among the good ones.
  /// Errors: IOError naming host:port and the command when the connection is
  /// lost or times out (then call Reconnect); a Status naming the command and
  /// Redis's message when Redis refuses (e.g. the group was destroyed).
  Status Read(std::vector<SourceEntry>* out);

  /// Acknowledges the entries (one XACK). Ids that are not pending are
  /// ignored by Redis. OK at once for an empty list.
  Status Ack(const std::vector<std::string>& entry_ids);

  /// Copies a bad entry to options.dead_letter (its original fields, plus
  /// `error` = e.error.ToString() and `source_id` = e.entry_id) and
  /// acknowledges it, both in one MULTI/EXEC transaction. Without a
  /// dead-letter stream it only acknowledges the entry.
  Status DeadLetter(const SourceEntry& e);

  /// The group's pending count, lag and last delivered id.
  Result<SourceLag> Lag();

  /// The ids of the group's pending entries (every consumer's), oldest
  /// first, at most `max` (XPENDING, page by page). The server keeps, of the
  /// entry ids its log holds, only those still pending: only they can be
  /// delivered again.
  Result<std::vector<std::string>> PendingIds(size_t max);

  /// Drops the connection and connects again (creating the group if it is
  /// gone, e.g. after the server lost its data). Read then starts over with
  /// this consumer's pending entries, so everything read and not acknowledged
  /// is delivered again.
  Status Reconnect();

  const RedisSourceOptions& options() const { return options_; }  ///< as given to Connect; consumer filled in
  /// "host:port", as named in error messages.
  std::string Address() const;

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;
  enum class Phase { kOwnPending, kClaim, kNew };

  explicit RedisSource(RedisSourceOptions options) : options_(std::move(options)) {}
  Status ConnectNow();
  /// Runs one command. No connection or a lost one (the connection is then
  /// dropped): IOError naming host:port and the command; an error reply: a
  /// Status naming the command and Redis's message.
  Status Command(const std::vector<std::string>& args, ReplyPtr* reply);
  /// Runs the commands in one MULTI/EXEC; *reply: EXEC's reply.
  Status Transaction(const std::vector<std::vector<std::string>>& commands, ReplyPtr* reply);
  Status LostConnection(const std::string& command);
  Status ReadOwnPending(std::vector<SourceEntry>* out);
  Status ReadClaimed(std::vector<SourceEntry>* out);
  Status ReadNew(std::vector<SourceEntry>* out);

  RedisSourceOptions options_;
  std::unique_ptr<redisContext, ContextDeleter> context_;
  Phase phase_ = Phase::kOwnPending;
  std::string own_cursor_ = "0";    // last own pending entry returned
  std::string claim_cursor_ = "-";  // XPENDING scan position
  std::chrono::steady_clock::time_point last_claim_scan_{};
};

}  // namespace tributary

#endif  // TRIBUTARY_REDIS_SOURCE_H_
