// Private to the server: `serve --source URL` (ServerOptions::sources). One
// reader thread per source takes entries from a broker and learns them
// through the same path as the protocols (committer.cc: logged, fsynced,
// then handed to the learner), with exactly-once learning:
//
//  1. An entry's document is written to the log together with its position
//     in the broker (WalRecord.source); only after the fsync is the entry
//     acknowledged to the broker (Redis XACK; Kafka: the offset committed).
//  2. A crash between the two leaves an entry logged but not acknowledged;
//     the broker delivers it again. At start the server collects the
//     positions of every record the log still holds (BrokerAdapter::
//     Recovered); an entry found there is acknowledged, not learned again.
//     While running, entries logged but not yet acknowledged (the broker
//     was unreachable when they were) are kept the same way.
//  3. Entries that are not documents, or that the learning rule refuses
//     (DocumentDecoder::DecodeForLearning, as for a learn request), are
//     dead-lettered (copied to the source's dead-letter stream or topic when
//     it has one) and acknowledged, each counted; the stream goes on.
//  4. While learning cannot take documents (recovering, the log failed, the
//     queue full) the reader holds its batch and waits: nothing is
//     acknowledged that is not logged. At shutdown the reader stops before
//     the committer: a batch not logged by then stays unacknowledged in the
//     broker and is read again at the next start.
//
// Limit (docs/sources.md): an entry logged while the broker was unreachable
// is recognised after a restart only while the log still holds its record
// (the log is dropped up to the snapshot before the newest); a broker down
// for longer than two snapshots, then a crash of the server before it comes
// back, can make such an entry be learned twice.
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_SOURCE_READER_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_SOURCE_READER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "tributary/live_model.h"
#include "tributary/server.h"
#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct SourceMetrics;

// One entry read from a broker.
struct BrokerEntry {
  v1::SourcePosition position;  // position.source: the adapter's key()
  v1::Document doc;             // valid when error.ok()
  Status error;                 // the entry is not a document (InvalidDocument naming it)
  size_t native = 0;            // the adapter's own handle (index into its last batch)
};

// What a broker client must offer the reader (the adapters in source_reader.cc).
// Not thread-safe: only its reader thread calls it.
class BrokerAdapter {
 public:
  virtual ~BrokerAdapter() = default;
  // Recorded in the log with every document (v1::SourcePosition.source): the
  // URL without credentials or consumer name.
  virtual const std::string& key() const = 0;
  // (Re)connects; then Read starts over with everything not acknowledged.
  virtual Status Connect() = 0;
  virtual bool connected() const = 0;
  // The next entries (empty: none arrived within the adapter's wait).
  virtual Status Read(std::vector<BrokerEntry>* out) = 0;
  // Acknowledges entries whose documents are in the fsynced log.
  virtual Status Commit(const std::vector<v1::SourcePosition>& logged) = 0;
  // Dead-letters a bad entry of the last Read and acknowledges it.
  virtual Status Reject(const BrokerEntry& bad) = 0;
  // Recovery: a position the log holds (called before the reader starts).
  virtual void Recovered(const v1::SourcePosition& p) = 0;
  // True when the entry at `p` is in the log (recovered, or logged by this
  // process and not yet acknowledged).
  virtual bool Logged(const v1::SourcePosition& p) const = 0;
  // Remembers a logged position until Commit succeeds for it (Forget).
  virtual void Remember(const v1::SourcePosition& p) = 0;
  virtual void Forget(const std::vector<v1::SourcePosition>& committed) = 0;
  // Entries waiting in the broker: pending (delivered, not acknowledged)
  // and lag (not yet delivered; -1: unknown).
  virtual Status Lag(uint64_t* pending, int64_t* lag) = 0;
};

// Makes the adapter for a source URL (redis://..., kafka://...). Errors: InvalidArgument
// naming the URL's wrong part, or an unknown scheme (expected vs found).
Result<std::unique_ptr<BrokerAdapter>> MakeBrokerAdapter(const std::string& url);

// The reader thread of one source (ServerOptions::sources): reads, checks,
// submits to the committer, acknowledges once logged. Start after recovery
// (the adapter has its Recovered positions); Stop before the committer
// stops. Metrics are read from any thread.
class SourceReader {
 public:
  SourceReader(Server::Impl* server, std::unique_ptr<BrokerAdapter> adapter, std::string url);
  ~SourceReader();
  BrokerAdapter& adapter() { return *adapter_; }
  void Start();
  // Asks the thread to stop and joins it: a batch submitted is waited for
  // (the committer answers everything queued), one not yet submitted is
  // dropped unacknowledged (the broker delivers it again).
  void Stop();
  // The Prometheus text of every source's metrics (label
  // source="<url without password>"), each family's lines together.
  static void WriteMetrics(std::ostream& os, const std::vector<std::unique_ptr<SourceReader>>& readers);
  // The last error seen (a broker refusing or unreachable, a dead-lettered
  // entry's reason); empty if none.
  std::string LastError() const;
  const std::string& name() const { return name_; }

 private:
  void Run();
  // Sleeps up to `ms`; false when asked to stop.
  bool Pause(uint32_t ms);
  // Learns `docs` (positions parallel): waits for room and for learning to
  // be possible, submits, waits for the committer's answer. True when the
  // documents are in the fsynced log.
  bool Submit(std::vector<v1::Document> docs, const std::vector<v1::SourcePosition>& positions);
  void NoteError(const Status& st);

  Server::Impl* srv_;
  std::unique_ptr<BrokerAdapter> adapter_;
  std::string name_;  // the URL without its password (metrics, errors)
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                   // GUARDED_BY(mu_)
  bool room_ = false;                   // GUARDED_BY(mu_): capacity freed since the last try
  std::optional<v1::Response> answer_;  // GUARDED_BY(mu_): the committer's answer
  std::string last_error_;              // GUARDED_BY(mu_)
  std::atomic<uint64_t> read_{0}, logged_{0}, duplicates_{0}, dead_lettered_{0}, errors_{0}, reconnects_{0};
  std::atomic<uint64_t> pending_{0};
  std::atomic<int64_t> lag_{-1};
  std::atomic<bool> connected_{false};
  // The reader thread's reader of the server's model (made on first use;
  // destroyed with this object, before the model: Server::Impl declares its
  // sources after it).
  std::unique_ptr<LiveModel::Reader> reader_;
};

}  // namespace tributary

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_SOURCE_READER_H_
