// `tributary serve`: a long-running service that learns and predicts at the
// same time, over the framed protobuf protocol of proto/tributary.proto
// (Request / Response), and over HTTP/JSON on the HTTP port (POST /v1/learn,
// POST /v1/predict; docs/http-api.md) next to /healthz and /metrics.
//
// The two protocols share one path and one set of limits: a learn request
// is checked whole (every document through DocumentDecoder::DecodeForLearning)
// before anything of it is logged, takes room in the same bounded queue, and
// is answered by the same committer once its documents are in the fsynced
// log; the same auth_token (HTTP: "Authorization: Bearer <token>", judged
// from the header before the body is read; a wrong one closes the
// connection), max_frame_bytes (HTTP: the body, 413), max_connections (each
// port its own count), max_buffered_bytes (bodies over 64 KiB reserve their
// length), idle_timeout_s, auth_timeout_s, min_frame_bytes_per_s.
//
// Concurrency. A small pool of I/O threads (Boost.Asio) reads requests. One
// committer thread appends learn requests to the write-ahead log and
// acknowledges them once the log is fsynced (group commit: every request, or
// every N ms). One learner thread applies acknowledged documents in log
// order and publishes a copy of the model every `publish_interval_ms` or
// `publish_every_updates` updates; predictions are answered on the I/O
// threads from the latest published copy and never wait for learning (the
// library's LiveModel, live_model.h: the learner is its writer, each I/O
// thread reads through a reader of its own, without a lock). Every
// prediction names the model version (documents learned) that answered it.
//
// Backpressure, not loss. Documents accepted but not yet learned occupy a
// bounded queue; a learn request that does not fit leaves its connection
// un-read until room frees up, so TCP pushes back on that client only.
//
// Durability. A learn request is answered OK only after its documents are in
// the fsynced log. Snapshots (atomic, every N documents or T seconds, at
// shutdown and on request) record the last log sequence they contain. The
// previous snapshot is kept (model.prev.trib), and log segments are deleted
// only once the previous snapshot covers them, so a damaged newest snapshot
// is recovered from the previous one plus the log. A new data directory gets
// a snapshot of the initial model at sequence 0 at once. On start the server
// loads the newest readable snapshot and replays the log tail, so the model
// equals one trained offline on the logged documents in log order.
//
// Damage (docs/design.md §6). A torn log tail (a crash during the last,
// unacknowledged write) is cut and its bytes kept in <data_dir>/damaged/.
// Corruption inside the log is refused at start by default, naming the
// segment, offset and records; with CorruptionPolicy::kSkip the damaged file
// is kept aside, the readable records are replayed, and a .report file in
// <data_dir>/damaged/ names what was lost. A damaged snapshot is moved
// there too. /healthz answers 503 while a .report file exists. All storage
// goes through ServerOptions::env.
#ifndef TRIBUTARY_SERVER_H_
#define TRIBUTARY_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tributary/data_dir.h"
#include "tributary/env.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/status.h"
#include "tributary/step_schedule.h"
#include "tributary/wal.h"

namespace tributary {

/// What a token lets its holder do (ServerOptions::scoped_tokens).
enum TokenScope : uint32_t {
  kScopePredict = 1u << 0,  ///< POST /v1/predict, the binary predict
  kScopeLearn = 1u << 1,    ///< POST /v1/learn, the binary learn
  kScopeAdmin = 1u << 2,    ///< the binary snapshot (and what changes the served model)
  kScopeAll = kScopePredict | kScopeLearn | kScopeAdmin,
};
/// A token and its scopes (any valid token may also read /v1/status, stats and ping).
struct ScopedToken {
  std::string token;            ///< the secret, compared in constant time
  uint32_t scopes = kScopeAll;  ///< TokenScope bits
};
/// "predict,learn" (the names of `scopes`' bits), or "none".
std::string ScopeNames(uint32_t scopes);
/// The scopes of "predict,learn,admin" (comma-separated names; "all" is
/// every scope). InvalidArgument naming the word that is no scope.
Result<uint32_t> ParseScopes(const std::string& names);

/// Configuration of Server::Start: ports, limits, durability and learning.
struct ServerOptions {
  std::string listen = "127.0.0.1:0";     ///< host:port of the protocol port; port 0 picks a free one (Server::port)
  std::string http;                       ///< host:port for /healthz, /metrics and /v1/*; empty: none
  std::string data_dir;                   ///< snapshot and write-ahead log (required)
  unsigned io_threads = 2;                ///< threads reading requests and answering predictions; 0 counts as 1
  uint64_t queue_capacity = 100000;       ///< documents accepted but not yet learned
  bool fsync_every_request = false;       ///< else group commit every fsync_interval_ms
  uint32_t fsync_interval_ms = 10;        ///< group commit: requests gathered until this long after the last fsync
  uint32_t publish_interval_ms = 10;      ///< publish a model copy this long after the last, if anything was learned
  uint64_t publish_every_updates = 1000;  ///< also publish after this many documents learned
  uint32_t max_frame_bytes = 16u << 20;   ///< also the largest HTTP request body
  /// The largest prediction answer, by its bound (the class names once; per
  /// document its id, the predicted class's name and K probabilities),
  /// checked before anything is scored: a request over it is refused whole
  /// (HTTP 413, binary INVALID_REQUEST) with the number of documents that fit.
  uint64_t max_answer_bytes = 64u << 20;
  /// Documents one request (learn or predict) may hold: a request of more
  /// is refused whole (binary INVALID_REQUEST, counted before its documents
  /// are parsed; HTTP 413), since each document costs a few hundred bytes
  /// once parsed however few bytes it takes on the wire. 0: no limit.
  uint64_t max_request_documents = 100000;
  /// How far the model may grow (Model::SetGrowthLimits; 0: no limit), so
  /// that the server's memory is a function of its flags: classes (a label
  /// past it is refused), terms of an open vocabulary (new terms past it are
  /// left out, the document learned from the others), the bytes of a new
  /// class's name, and the statistics' bytes (one copy; the learner's model
  /// and each publication hold one). Refusals are specific errors, counted
  /// in /metrics (tributary_limit_refusals_total); documents the log holds
  /// from before are skipped and counted when replayed, never an abort.
  uint64_t max_classes = 1000;                   ///< --max-classes
  uint64_t max_terms = 2000000;                  ///< --max-terms
  uint64_t max_label_bytes = 1024;               ///< --max-label-bytes
  uint64_t max_model_bytes = uint64_t{1} << 30;  ///< --max-model-bytes (one copy of the statistics)
  uint32_t max_connections = 1024;               ///< per port (protocol, HTTP)
  uint32_t idle_timeout_s = 300;  ///< close connections idle (or not taking responses) this long; 0: never
  uint32_t max_inflight = 128;    ///< requests read but not yet answered, per connection (HTTP: 1)
  std::string auth_token;         ///< a token with every scope; empty (and no scoped_tokens): no authentication
  /// More tokens, each allowed only its scopes (TokenScope): a predict-only
  /// token is refused learning (HTTP 403, PERMISSION_DENIED) but is no wrong
  /// guess (a binary connection stays open). Either kind of token authenticates a
  /// connection and passes the strangers' rules below.
  std::vector<ScopedToken> scoped_tokens;
  /// TLS on the HTTP port: a PEM file holding the server's certificate,
  /// then the intermediate certificates of its chain. With tls_key_file
  /// (both or neither; either alone is refused, and so is either without
  /// `http`), the HTTP port speaks only HTTPS, TLS 1.2 or later: a plain
  /// HTTP request gets 400 (in plain text, saying the port speaks HTTPS)
  /// and is closed. Read once by Start (through `env`), which refuses a file
  /// that cannot be read, holds no certificate or key, an encrypted key, or
  /// a key that does not match the certificate, naming the file. The binary
  /// protocol's port is never encrypted. Empty: plain HTTP.
  std::string tls_cert_file;
  /// The private key of tls_cert_file's certificate (PEM, not encrypted).
  std::string tls_key_file;
  /// Strangers (only when auth_token is set): until a connection has shown
  /// the token, a frame over pre_auth_max_frame_bytes must carry the token in
  /// its first bytes (the protocol's field order puts it there) or the
  /// connection is closed before the frame is buffered; a connection that has
  /// not shown the token after auth_timeout_s, or shows a wrong one, is
  /// closed. So strangers hold at most max_connections x (64 KiB read chunk +
  /// pre-auth frame) of memory.
  uint32_t pre_auth_max_frame_bytes = 64u << 10;
  uint32_t auth_timeout_s = 10;  ///< see above; 0: no deadline to show the token
  /// Strangers hold at most this many connections over both ports: when one
  /// more arrives, the stranger connected longest ago is closed (a client
  /// with the token shows it in its first request, so only an idle stranger
  /// stays a stranger long enough to be the oldest). Authenticated clients
  /// therefore always have max_connections minus this many slots, however
  /// many idle connections a peer without the token opens. 0: no limit.
  uint32_t max_unauthenticated_connections = 64;
  /// Slow peers: a frame being received must arrive at min_frame_bytes_per_s
  /// at least, measured once it has taken more than rate_grace_s; and only
  /// complete requests reset the idle timeout, not single bytes.
  uint32_t min_frame_bytes_per_s = 1024;
  uint32_t rate_grace_s = 10;  ///< see min_frame_bytes_per_s (0 there: no rate check)
  /// All connections' large frames in flight together: a frame over one read
  /// chunk (64 KiB) reserves its whole length from this budget once its
  /// header is read, and the connection stops reading until the reservation
  /// is granted (one frame alone may exceed it). Reservations are
  /// all-or-nothing per frame, so they cannot deadlock; small frames need none.
  uint64_t max_buffered_bytes = 256u << 20;
  uint64_t snapshot_every_documents = 1000000;  ///< snapshot once this many documents were learned since the last
  uint32_t snapshot_interval_s = 300;           ///< or once this long has passed with any document learned
  /// Model versions (docs/design.md §16): a snapshot is kept as a version
  /// once version_every_documents documents were learned since the last
  /// version, or version_interval_s passed with any learned; the newest
  /// keep_versions are kept (0: none), and the log keeps every record after
  /// the oldest (so a restore can learn them again or keep them aside).
  uint32_t keep_versions = 3;
  uint64_t version_every_documents = 1000000;  ///< see keep_versions
  uint32_t version_interval_s = 3600;          ///< see keep_versions
  /// Late labels (docs/http-api.md): a predict request with "keep" keeps
  /// each document with its prediction in DIR/feedback/ until its label
  /// comes (POST /v1/feedback); kept documents expire after
  /// feedback_max_age_s, or the oldest first once they take more than
  /// feedback_max_bytes.
  uint64_t feedback_max_bytes = 256u << 20;
  uint32_t feedback_max_age_s = 7 * 24 * 3600;  ///< see feedback_max_bytes
  uint64_t wal_segment_bytes = 64u << 20;       ///< the log starts a new segment once one holds more than this
  /// After a write-ahead log failure (full disk, I/O error) learning stops
  /// (learn requests: UNAVAILABLE; predictions go on; /healthz 503) and the
  /// log is tried again every wal_retry_interval_ms (a probe write + fsync in
  /// its directory); learning resumes by itself once that succeeds. 0: stay
  /// off until restarted.
  uint32_t wal_retry_interval_ms = 1000;
  /// The log's acknowledgement mark (wal.h) is rewritten at most this often,
  /// after the acknowledgements it covers (never on their path): damage to
  /// records acknowledged more than this long before it is found is reported
  /// as corruption, not taken for a torn write. 0: strict, the mark is written
  /// before every acknowledgement (no window; one more atomic file write,
  /// two fsyncs, per group commit). A clean shutdown always leaves it current.
  uint32_t ack_mark_interval_ms = 100;
  /// Shutdown drains: every acknowledged document is learned before the
  /// final snapshot, for at most this long; what is left then stays in the
  /// log and is replayed at the next start (nothing acknowledged is lost
  /// either way). Bounds how long SIGTERM takes when learning is slow.
  uint32_t drain_timeout_ms = 30000;
  uint64_t seed = 1;  ///< the learner's seed (as `train --seed`)
  /// kAuto: SEP for families with SEP hooks (the count mixtures), else sdEM;
  /// kSdem, kSep or kAdf to insist (EP is refused: its sites grow with every
  /// document). Recovery replays the log with the same engine, so a
  /// restarted server must use the same one (auto does).
  Engine engine = Engine::kAuto;
  /// What to do with corruption inside the write-ahead log (wal.h).
  CorruptionPolicy on_corruption = CorruptionPolicy::kRefuse;
  /// Broker sources learned from, each by its own reader thread, exactly
  /// once (docs/sources.md): redis://[:PASSWORD@]HOST[:PORT]/STREAM[?...]
  /// (tributary/redis_source.h) or kafka://HOST:PORT[,...]/TOPIC[?...]
  /// (tributary/kafka_source.h). An entry is acknowledged to its broker only
  /// once its document is in the fsynced log, which records its position; an
  /// entry delivered again that the log holds is acknowledged, not learned.
  /// Entries that are not learnable documents are dead-lettered and counted.
  /// A broker that cannot be reached is retried (with backoff) while the
  /// server serves; only a malformed URL stops Start.
  std::vector<std::string> sources;
  Env* env = nullptr;  ///< snapshots and the log; nullptr: Env::Default() (tests inject faults here)
  /// Where the plugins a snapshot names are found (recovery, a live
  /// learner's candidates): pass the registry user-named plugins (--plugin)
  /// were added to, so that a model learned with one comes back after a
  /// restart. Not owned; must outlive the server. nullptr: a registry of the
  /// server's own over PluginRegistry::DefaultSearchPath().
  const PluginRegistry* registry = nullptr;
  /// Learning events worth a line in a log (the server itself prints
  /// nothing): a live learner's drift alarm and a change of the candidate it
  /// serves, one sentence each with the labelled document's number. Called on
  /// the learner thread (the log's replay at start included); it must not
  /// block for long. Empty: none.
  std::function<void(const std::string&)> on_event;
  /// Called on Start's thread once the HTTP port is bound, before recovery
  /// (loading the snapshot, replaying the log) begins: from then on /healthz
  /// answers 503 "not ready: ..." until Start returns.
  std::function<void(uint16_t http_port)> on_http_listening;
};

/// How Server::Start recovered the model (Server::recovery).
/// What Start recovered: the data directory's recovery (data_dir.h: the
/// snapshot read, the log replayed, damage found) and the served model's
/// settings.
struct RecoveryInfo : DataDirRecovery {
  /// The served model's settings as recovered (a restart keeps them, whatever
  /// the flags say): family, loss, family options, step schedule, n.
  std::string family;
  std::string loss;                                                 ///< the recovered model's loss plugin name
  std::vector<std::pair<std::string, std::string>> family_options;  ///< the recovered model's family options
  StepSchedule schedule;                                            ///< the recovered model's step schedule
  double effective_size = 0;                                        ///< the recovered model's n
  /// A live learner was recovered (the settings above are its first
  /// candidate's: the base the defaults built it from); false: one model.
  bool live = false;
};

/// The `tributary serve` service described at the top of this file.
class Server {
 public:
  /// Recovers the model (the newest readable snapshot in data_dir, else
  /// `initial`, which must have a loss), replays the log, binds the ports and
  /// starts serving. Errors: bad options, no model, corruption the policy
  /// refuses (Corruption, naming file, offset and lost records), a damaged
  /// snapshot the log cannot make up for, ports in use.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options, std::unique_ptr<Model> initial);
  ~Server();

  uint16_t port() const;                 ///< the bound protocol port (the one picked for port 0)
  uint16_t http_port() const;            ///< the bound HTTP port; 0 without ServerOptions::http
  const RecoveryInfo& recovery() const;  ///< what Start recovered; fixed once Start returned

  /// Graceful stop: stop accepting, answer what was read, learn everything
  /// acknowledged (for at most ServerOptions::drain_timeout_ms; the rest stays
  /// in the log), write a final snapshot. Safe to call from any thread and
  /// from a signal handler's asio callback; idempotent.
  void Shutdown();
  /// Blocks until the server has stopped (after Shutdown(), or after SIGTERM /
  /// SIGINT when `HandleSignals()` was called). Returns the first fatal error.
  Status Wait();
  /// Installs SIGTERM/SIGINT handling that calls Shutdown().
  void HandleSignals();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_H_
