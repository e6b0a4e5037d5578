// `tributary serve`: a long-running service that learns and predicts at the
// same time, over the framed protobuf protocol of proto/tributary.proto
// (Request / Response).
//
// Concurrency. A small pool of I/O threads (Boost.Asio) reads requests. One
// committer thread appends learn requests to the write-ahead log and
// acknowledges them once the log is fsynced (group commit: every request, or
// every N ms). One learner thread applies acknowledged documents in log
// order and publishes a copy of the model every `publish_interval_ms` or
// `publish_every_updates` updates; predictions are answered on the I/O
// threads from the latest published copy and never wait for learning. Every
// prediction names the model version (documents learned) that answered it.
//
// Backpressure, not loss. Documents accepted but not yet learned occupy a
// bounded queue; a learn request that does not fit leaves its connection
// un-read until room frees up, so TCP pushes back on that client only.
//
// Durability. A learn request is answered OK only after its documents are in
// the fsynced log. Snapshots (atomic, every N documents or T seconds, at
// shutdown and on request) record the last log sequence they contain; older
// log segments are then deleted. On start the server loads the snapshot and
// replays the log tail, so the model equals one trained offline on the logged
// documents in log order.
#ifndef TRIBUTARY_SERVER_H_
#define TRIBUTARY_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tributary/model.h"
#include "tributary/status.h"
#include "tributary/wal.h"

namespace tributary {

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::string http;                    // host:port for /healthz and /metrics; empty: none
  std::string data_dir;                // snapshot and write-ahead log (required)
  unsigned io_threads = 2;
  uint64_t queue_capacity = 100000;  // documents accepted but not yet learned
  bool fsync_every_request = false;  // else group commit every fsync_interval_ms
  uint32_t fsync_interval_ms = 10;
  uint32_t publish_interval_ms = 10;
  uint64_t publish_every_updates = 1000;
  uint32_t max_frame_bytes = 16u << 20;
  uint32_t max_connections = 1024;
  uint32_t idle_timeout_s = 300;
  uint32_t max_inflight = 128;  // requests read but not yet answered, per connection
  std::string auth_token;       // empty: no authentication
  uint64_t snapshot_every_documents = 1000000;
  uint32_t snapshot_interval_s = 300;
  uint64_t wal_segment_bytes = 64u << 20;
  uint64_t seed = 1;  // the learner's seed (as `train --seed`)
  // "auto": SEP for families with SEP hooks (the count mixtures), else sdEM;
  // "sdem", "sep" or "adf" to insist (EP is not offered: its sites grow with
  // every document). Recovery replays the log with the same engine, so a
  // restarted server must use the same one (auto does).
  std::string engine = "auto";
  WalFileFactory* wal_files = nullptr;  // nullptr: POSIX files (tests inject faults here)
};

struct RecoveryInfo {
  bool from_snapshot = false;
  uint64_t snapshot_sequence = 0;
  uint64_t replayed = 0;
  uint64_t torn_bytes = 0;
};

class Server {
 public:
  // Recovers the model (snapshot in data_dir, else `initial`, which must have
  // a loss), replays the log, binds the ports and starts serving.
  // Errors: bad options, no model, unreadable snapshot or log, ports in use.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options, std::unique_ptr<Model> initial);
  ~Server();

  uint16_t port() const;
  uint16_t http_port() const;
  const RecoveryInfo& recovery() const;

  // Graceful stop: stop accepting, answer what was read, learn everything
  // acknowledged, write a final snapshot. Safe to call from any thread and
  // from a signal handler's asio callback; idempotent.
  void Shutdown();
  // Blocks until the server has stopped (after Shutdown(), or after SIGTERM /
  // SIGINT when `HandleSignals()` was called). Returns the first fatal error.
  Status Wait();
  // Installs SIGTERM/SIGINT handling that calls Shutdown().
  void HandleSignals();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_H_
