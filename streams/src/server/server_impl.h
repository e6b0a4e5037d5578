// Private to the server (streams/src/server/): the state shared by its parts.
// The design is described in tributary/server.h. Which thread touches what:
//   I/O threads      Connection (connection.cc, connection_requests.cc), HttpSession (http.cc),
//                    accept loops
//   committer thread Impl::CommitterLoop (committer.cc)
//   learner thread   Impl::LearnerLoop, Apply, Publish, SaveSnapshot (learner_loop.cc)
//                    on the writer side of `live` (a LiveModel, live_model.h);
//                    the predictions and checks of the I/O threads and the
//                    sources read its publications through readers of their own
//   caller's thread  Server::Start, Shutdown, Wait, HandleSignals (server.cc)
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_SERVER_IMPL_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_SERVER_IMPL_H_

// ThreadSanitizer does not model standalone memory fences (GCC refuses them
// under -fsanitize=thread with -Werror=tsan). Asio's fenced blocks around
// handler calls are redundant with the mutexes of its scheduler and reactor,
// which TSan does see, so use Asio's null fenced block in TSan builds.
// Defined here, before any Asio include, so every file of the server sees the
// same Asio: include this header before Asio or Beast.
#if defined(__SANITIZE_THREAD__) && !defined(BOOST_ASIO_DISABLE_FENCED_BLOCK)
#define BOOST_ASIO_DISABLE_FENCED_BLOCK 1
#endif

// Before Asio: Boost 1.74's asio/awaitable.hpp uses std::exchange without
// including <utility>.
#include <utility>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "server/feedback.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/live_model.h"
#include "tributary/model.h"
#include "tributary/plugin_registry.h"
#include "tributary/quality_monitor.h"
#include "tributary/server.h"
#include "tributary/status.h"
#include "tributary/v1/tributary.pb.h"
#include "tributary/wal.h"

namespace boost::asio::ssl {
class context;  // <boost/asio/ssl.hpp>, included by http.cc only
}  // namespace boost::asio::ssl

namespace tributary {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
class SourceReader;  // source_reader.h
// (FeedbackStore: feedback.h, included below)

namespace server_internal {

// ---- Metrics (Prometheus text format; metrics.cc) ----------------------------------

class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,    0.025,  0.05,    0.1,    0.25,  1.0,    5.0};
  void Observe(double seconds);
  void Write(std::ostream& os, const std::string& name, const std::string& help) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

struct Counters {
  std::atomic<uint64_t> documents_learned{0};
  std::atomic<uint64_t> documents_acknowledged{0};
  std::atomic<uint64_t> documents_skipped{0};
  std::atomic<uint64_t> predictions{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> snapshots{0};
  // Log failures: attempts to use the log again, and the successful ones.
  std::atomic<uint64_t> wal_recovery_attempts{0}, wal_recoveries{0};
  std::atomic<uint64_t> snapshot_failures{0};
  // Model versions kept and failures to keep one; restores applied and
  // refused (the version unreadable: the model unchanged).
  std::atomic<uint64_t> versions_kept{0}, version_failures{0}, restores{0}, restore_failures{0};
  std::atomic<uint64_t> ack_mark_failures{0};
  // Requests and documents refused by a memory limit (ServerOptions
  // max_answer_bytes, max_classes, max_label_bytes), and new terms left out
  // of an open vocabulary at max_terms or over kMaxNewTermBytes.
  std::atomic<uint64_t> answer_refusals{0}, class_limit_refusals{0}, label_limit_refusals{0}, terms_dropped{0};
  // Connections without the token closed to make room for a newer one
  // (ServerOptions::max_unauthenticated_connections).
  std::atomic<uint64_t> strangers_evicted{0};
  // Requests of more documents than ServerOptions::max_request_documents.
  std::atomic<uint64_t> document_limit_refusals{0};
  // Errors by kind (the Response codes, plus framing and log errors).
  std::atomic<uint64_t> err_invalid{0}, err_unauthenticated{0}, err_overloaded{0}, err_unavailable{0}, err_internal{0},
      err_frame{0}, err_wal{0}, err_permission{0};
  Histogram learn_latency, predict_latency;
  // The HTTP port (http.cc): requests by endpoint, and error answers by
  // status (kHttpErrors). Documents acknowledged and predicted over HTTP
  // count in the totals above too; its errors are not in errors().
  std::atomic<uint64_t> http_learn_requests{0}, http_predict_requests{0}, http_other_requests{0};
  std::array<std::atomic<uint64_t>, 13> http_errors{};  // kHttpErrors.size()

  uint64_t errors() const {
    return err_invalid + err_unauthenticated + err_overloaded + err_unavailable + err_internal + err_frame + err_wal +
           err_permission;
  }
};

// Counts an error response under its kind (codes with no kind: nothing).
void CountError(Counters& c, v1::Response::Code code);
// `value` escaped for a Prometheus label value (backslash, quote, newline).
std::string PrometheusLabel(const std::string& value);

// The HTTP API's error answers: status, the JSON error code (the binary
// protocol's Response.Code name where one means the same), and the slot
// of Counters::http_errors that counts it.
struct HttpError {
  unsigned status;
  const char* code;
};
constexpr std::array<HttpError, 13> kHttpErrors = {{{400, "INVALID_REQUEST"},
                                                    {401, "UNAUTHENTICATED"},
                                                    {403, "PERMISSION_DENIED"},
                                                    {404, "NOT_FOUND"},
                                                    {405, "METHOD_NOT_ALLOWED"},
                                                    {408, "REQUEST_TIMEOUT"},
                                                    {409, "CONFLICT"},
                                                    {410, "EXPIRED"},
                                                    {413, "PAYLOAD_TOO_LARGE"},
                                                    {415, "UNSUPPORTED_MEDIA_TYPE"},
                                                    {429, "OVERLOADED"},
                                                    {500, "INTERNAL"},
                                                    {503, "UNAVAILABLE"}}};

static_assert(kHttpErrors.size() == 13, "Counters::http_errors has a slot per kHttpErrors entry");

}  // namespace server_internal

// What a restore did (versions.cc; docs/design.md §16).
struct RestoreOutcome {
  Status status;                 // not OK: nothing changed (the version is missing or unreadable)
  uint64_t version = 0;          // the version restored (the log sequence it holds)
  uint64_t record = 0;           // the restore's own log record
  bool replay = false;           // the documents after the version were learned again
  uint64_t first = 0, last = 0;  // their log sequences (first > last: none)
  uint64_t documents = 0;        // how many of those records are documents
  std::string kept_as;           // not replayed: the stream they were kept in
  std::string note;              // what went wrong keeping them aside (the restore itself happened)
  uint64_t published = 0;        // the publication serving the restored model
};

// One acknowledged-or-not learn request on its way through the committer.
struct LearnJob {
  std::vector<v1::Document> docs;
  // From a broker source: each document's position (parallel to docs),
  // logged with it (WalRecord.source). Empty for the protocols.
  std::vector<v1::SourcePosition> positions;
  // Called exactly once, on the committer thread, with the request's answer:
  // OK with a LearnResponse once the documents are in the fsynced log, or
  // UNAVAILABLE when the log failed. It must not block (it posts the answer
  // to its connection's strand) and must cope with a client gone meanwhile.
  std::function<void(v1::Response)> complete;
  uint64_t request_id = 0;
  Clock::time_point start;
  // A restore instead of documents (docs empty): logged as one record; once
  // logged, `restored` (not `complete`) answers, on the learner thread, when
  // the learner has applied it (or the server stops first: UNAVAILABLE).
  std::optional<v1::ModelRestore> restore;
  // POST /v1/feedback: the kept prediction each document is the label of
  // (parallel to docs; logged as WalRecord.prediction). Empty otherwise.
  std::vector<v1::KeptPrediction> predictions;
  std::function<void(const RestoreOutcome&)> restored;
};

// Where Start is: HTTP answers from the beginning, the protocol when ready.
enum class RecoveryPhase { kLoading, kReplaying, kSnapshot, kReady };

// Why a learn request is refused before anything of it is logged
// (Server::Impl::CheckLearn).
struct LearnRefusal {
  v1::Response::Code code = v1::Response::INVALID_REQUEST;
  std::string message;
  int64_t document_index = -1;  // the document at fault, or -1
};

struct Server::Impl {
  ServerOptions opt;
  server_internal::Counters counters;
  // Prequential quality of the served learner (every labelled document is
  // scored before it is learned: learner.h LearnResult), fed by Apply on the
  // learner thread and read by /metrics and /v1/status.
  std::mutex quality_mu;
  QualityMonitor quality;  // (quality_mu)
  // The predictions kept for late labels (feedback.h), opened by Recover,
  // and the delayed quality figures: each labelled kept prediction as it was
  // made (River's delayed progressive validation), fed by Apply (quality_mu).
  std::unique_ptr<FeedbackStore> feedback;
  QualityMonitor delayed;  // (quality_mu)
  // A live learner (live_learner.h): its alarms (the labelled documents it
  // had learned when each fired, since it was made), its switches and the
  // candidate served (quality_mu).
  bool live_learner = false;  // set at recovery
  std::vector<uint64_t> live_alarms;
  uint64_t live_switches = 0;
  std::string live_served;
  // The status endpoint's own observations (StatusJson, quality_mu): recent
  // (time, documents learned) samples for documents_per_second.
  const Clock::time_point created = Clock::now();
  // When the newest version was published (Clock ticks; Publish on the
  // learner thread, or recovery; read by StatusJson): the model's age.
  std::atomic<int64_t> published_at{0};
  uint64_t published_version = UINT64_MAX;  // learner thread: the version published_at is for
  std::deque<std::pair<Clock::time_point, uint64_t>> status_rate_samples;
  // Finds the plugins of the snapshots and of a live learner's candidates:
  // ServerOptions::registry, else own_registry.
  PluginRegistry own_registry;
  const PluginRegistry* registry = &own_registry;
  RecoveryInfo recovery;  // written by Recover, read by others only once ready
  std::atomic<RecoveryPhase> recovery_phase{RecoveryPhase::kLoading};
  std::atomic<uint64_t> replay_progress{0};  // log records replayed so far
  uint16_t port = 0, http_port = 0;          // bound ports, set before the threads start
  // Declared before the io_context: connections destroyed with it use it.
  std::atomic<uint32_t> open_connections{0};
  std::atomic<uint32_t> http_connections{0};  // open HTTP connections (also bounded by max_connections)
  // Connections of both ports that have not shown the token yet, by the
  // order they came (ids increase), each with its peer's address and the
  // call that closes it on its own strand (strangers.cc).
  struct Stranger {
    std::string peer;
    std::function<void()> close;
  };
  std::mutex strangers_mu;
  std::map<uint64_t, Stranger> strangers;  // GUARDED_BY(strangers_mu)
  uint64_t next_stranger = 1;              // GUARDED_BY(strangers_mu)
  // Registers a connection from `peer` (its address) that has not shown the
  // token (`close` closes it from any thread and must not block). Over
  // max_unauthenticated_connections, the oldest stranger of the address
  // holding the most stranger slots is closed: a flood from one address
  // evicts its own connections, not a client elsewhere that is about to
  // show its token. Returns its id for ForgetStranger (0: no token is
  // configured, nothing registered).
  uint64_t AdmitStranger(std::string peer, std::function<void()> close);
  // The connection `id` showed the token, or is gone: no longer a stranger.
  void ForgetStranger(uint64_t id);
  size_t StrangerCount();
  std::atomic<uint64_t> buffered_bytes{0};  // received, not yet parsed, over all connections
  // Bytes reserved by connections receiving a frame larger than one read
  // chunk (ServerOptions::max_buffered_bytes bounds it).
  std::atomic<uint64_t> frame_reservations{0};

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // The acceptors and the signal set are used only on this strand: their
  // handlers re-arm them while ShutdownNow closes them, from other threads.
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(io)};
  tcp::acceptor acceptor{accept_strand};
  tcp::acceptor http_acceptor{accept_strand};
  // The HTTP port's TLS context (LoadTls, from ServerOptions::tls_cert_file
  // and tls_key_file); null: plain HTTP. Read-only once Start has loaded it.
  std::shared_ptr<asio::ssl::context> tls;
  std::mutex signals_mu;                    // HandleSignals (caller's thread) vs ShutdownNow (accept strand)
  std::optional<asio::signal_set> signals;  // GUARDED_BY(signals_mu)
  std::vector<std::thread> io_threads;

  // The model, learned by the learner thread (and by recovery before it
  // starts) on the writer side, and published to the predictors (LiveModel:
  // readers take no lock and never wait for learning). Made by Recover;
  // read by others only once recovery_phase is kReady.
  std::unique_ptr<LiveModel> live;
  // I/O thread i's reader of `live`, made on its first Read and touched only
  // by that thread (declared after `live`: destroyed before it).
  std::vector<std::unique_ptr<LiveModel::Reader>> io_readers;
  uint64_t applied_sequence = 0;   // the last log record applied to the model (learner thread)
  uint64_t snapshot_sequence = 0;  // the log sequence model.trib holds (learner thread)

  // Capacity: documents accepted but not yet learned.
  std::mutex cap_mu;
  uint64_t in_queue = 0;                          // GUARDED_BY(cap_mu)
  std::deque<std::function<void()>> cap_waiters;  // GUARDED_BY(cap_mu)

  // Committer input.
  std::mutex commit_mu;
  std::condition_variable commit_cv;
  std::deque<LearnJob> commit_queue;  // GUARDED_BY(commit_mu)
  bool stopping_commit = false;       // GUARDED_BY(commit_mu)
  // The data directory (data_dir.h: locked, recovered, checkpointed) and
  // its log, which the committer thread owns once serving.
  std::unique_ptr<DataDir> data_dir;
  WriteAheadLog* wal = nullptr;
  uint64_t next_sequence = 1;  // committer thread only
  std::atomic<uint64_t> covered_sequence{0};
  std::atomic<bool> learning_enabled{true};
  std::string wal_error;  // GUARDED_BY(commit_mu)

  // Learner input.
  std::mutex learn_mu;
  std::condition_variable learn_cv;
  std::deque<v1::WalRecord> learn_queue;  // GUARDED_BY(learn_mu)
  bool stopping_learn = false;            // GUARDED_BY(learn_mu)
  std::vector<std::function<void(const Status&, const std::string&, uint64_t)>>
      snapshot_waiters;  // GUARDED_BY(learn_mu)
  // POST /v1/models: a snapshot kept as a version now (the version, or why not).
  std::vector<std::function<void(const Status&, uint64_t)>> version_waiters;  // GUARDED_BY(learn_mu)
  // Restore records logged, by sequence: their answers (LearnJob::restored).
  std::map<uint64_t, std::function<void(const RestoreOutcome&)>> restore_waiters;  // GUARDED_BY(learn_mu)
  // The newest restore applied (learner thread writes, /v1/models reads: quality_mu).
  std::optional<RestoreOutcome> last_restore;

  std::thread committer, learner_thread;
  std::atomic<bool> draining{false};
  // Set with `draining`: the learner stops applying logged documents at
  // this time (they stay in the log for the next start).
  std::atomic<Clock::time_point> drain_deadline{Clock::time_point::max()};
  std::once_flag shutdown_once;
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;  // GUARDED_BY(done_mu)
  Status fatal;       // GUARDED_BY(done_mu)

  // Broker sources (ServerOptions::sources): made before recovery (which
  // gives them the positions the log holds), started once ready, stopped
  // before the committer.
  std::vector<std::unique_ptr<SourceReader>> readers;

  Env* env = nullptr;  // opt.env or Env::Default()
  std::string SnapshotPath() const { return data_dir->SnapshotPath(); }
  // Damaged files kept aside, and the .report files that fail /healthz.
  std::string DamagedDir() const { return data_dir->DamagedDir(); }
  // The .report files in DamagedDir(), sorted (empty when healthy).
  std::vector<std::string> DamageReports() const { return data_dir->Reports(); }
  // The log's last error (empty while it works).
  std::string WalError() {
    std::lock_guard<std::mutex> l(commit_mu);
    return wal_error;
  }

  // learner_loop.cc: runs `fn` with the newest publication held (one
  // version throughout), on the calling thread's own reader: an I/O
  // thread's (io_readers) or a source's (BindReader); any other thread gets
  // a reader for the call. REQUIRES: recovery_phase is kReady (or the
  // caller is Start's thread after Recover).
  Status Read(const std::function<Status(const LiveView&)>& fn);
  // Makes *slot the calling thread's reader of `live` in Read (made there
  // on first use). The slot must outlive the thread's calls to Read and be
  // destroyed before `live`.
  void BindReader(std::unique_ptr<LiveModel::Reader>* slot);
  // I/O thread i's body: binds io_readers[i], runs the io_context.
  void RunIo(size_t i);
  // The one prediction path of both protocols: every document of `docs`
  // decoded and scored with the newest publication (one version for all,
  // passed to `begin` with the publication's outputs first), then
  // `each(i, probabilities, best output)` per document. A document the
  // request's fault keeps from being scored (DocumentRefused: empty, ids out
  // of range, bad UTF-8, ...) goes to `refused(i, why)` and the others are
  // answered (issue 42: one punctuation-only text does not fail a batch);
  // when every document is refused, nothing is answered: *bad_index gets the
  // first one's index and the Status names it. Other errors are the
  // server's and stop it.
  struct PredictedOutputs {
    uint64_t version;
    const Model* model;
  };
  // The most bytes an answer takes, by the protocol's encoding: the class
  // names once, then per document a fixed part, its id and the predicted
  // class's name (each string byte at most per_string_byte bytes: JSON's
  // \u00XX escapes take 6), and K probabilities.
  struct AnswerShape {
    uint64_t per_document;
    uint64_t per_probability;
    uint64_t per_string_byte;
  };
  // Before anything is scored, the answer's bound (AnswerShape) is checked
  // against opt.max_answer_bytes: over it, *bad_index is kAnswerTooLarge and
  // the Status (InvalidArgument) says the bound, the limit and how many
  // documents a request may hold; counted in counters.answer_refusals.
  static constexpr int kAnswerTooLarge = -2;
  Status PredictDocuments(const google::protobuf::RepeatedPtrField<v1::Document>& docs, const AnswerShape& shape,
                          const std::function<void(const PredictedOutputs&)>& begin,
                          const std::function<void(int, const std::vector<double>&, uint32_t)>& each,
                          const std::function<void(int, const Status&)>& refused, int* bad_index);

  // learner_loop.cc: the learner's model (learner thread, and recovery).
  Status Publish();
  // Learns one logged record (learner thread, and recovery). A document that
  // the learner refuses is skipped and counted; the same happens on replay.
  Status Apply(const v1::WalRecord& rec);
  // Apply's part for a document: `prequential` false when the document is
  // learned again by a restore with replay (it was scored once already).
  Status ApplyDocument(const v1::WalRecord& rec, bool prequential);
  // Writes model.trib at applied_sequence, keeping the one it replaces as
  // model.prev.trib; the log is then dropped up to the replaced one's
  // sequence (learner thread, and recovery).
  Status SaveSnapshot();

  // versions.cc (issue 42: model versions and rollback, docs/design.md §16).
  // Learner thread: after a snapshot at applied_sequence, keeps it as a
  // version (`trigger`: why) with its figures; the oldest beyond
  // opt.keep_versions go.
  Status KeepVersion(const char* trigger, uint64_t* version);
  // Learner thread (and recovery): applies a restore record (the model
  // becomes the version's; the documents logged since are learned again or
  // kept aside). A version that cannot be read leaves the model as it was
  // (outcome.status says why): the same on replay.
  Status ApplyRestore(const v1::WalRecord& rec, RestoreOutcome* outcome);
  // Any thread: GET /v1/models (the versions kept, the newest restore).
  std::string ModelsJson();
  // Any thread: queues a restore of `version`; `done` answers (once, on the
  // learner or committer thread). Refused at once (the Status) when not
  // ready, draining, learning is off, or the version is not kept.
  Status SubmitRestore(uint64_t version, bool replay, std::function<void(const RestoreOutcome&)> done);
  // feedback.cc's users (late labels). Recover opens the store (after the
  // model, before the log's replay). Counts a labelled kept prediction in
  // `delayed` (quality_mu taken here).
  Status OpenFeedback();
  void CountDelayed(const v1::KeptPrediction& p, const std::string& label);
  // Any thread: asks the learner for a version now (`done` on its thread).
  Status RequestVersion(std::function<void(const Status&, uint64_t)> done);

  // learner_loop.cc: capacity, taken by connections, given back by the
  // learner (or by whoever drops an admitted request).
  void ReleaseCapacity(uint64_t n);
  // Reserves room for n documents or registers `retry` to be called later.
  bool TryReserve(uint64_t n, std::function<void()> retry);
  uint64_t QueueDepth();

  // committer.cc: the one admission path of learn requests, shared by the
  // binary protocol (connection_requests.cc) and the HTTP API (http.cc). CheckLearn
  // refuses a request that must not be logged (not ready, draining, log
  // disabled, no documents, any document DecodeForLearning refuses: a
  // request is learned whole or refused whole); nullopt when it may be.
  // After TryReserve admitted its documents, SubmitLearn queues the job for
  // the committer, which completes it; false (and the job untouched, its
  // capacity still held) when the committer has stopped (shutdown).
  std::optional<LearnRefusal> CheckLearn(const v1::LearnRequest& lr);
  bool SubmitLearn(LearnJob& job);
  // Counts what a growth limit did to a decoded document (Counters).
  void CountLimits(const DocumentBuffer& buf);

  Status Recover(std::unique_ptr<Model> model);  // server.cc (step 2; step 1 is DataDir::LoadModel)
  void CommitterLoop();                          // committer.cc
  // Committer thread, while learning is disabled by a log failure: one
  // WriteAheadLog::Recover attempt; on success learning is enabled again.
  void TryRecoverLog();  // committer.cc
  void LearnerLoop();    // learner_loop.cc
  // server.cc: the first fatal error is kept for Wait(), then the server stops.
  void Fail(const Status& st);
  void ShutdownNow();         // server.cc
  void StartAccept();         // connection.cc
  void StartHttpAccept();     // http.cc
  std::string MetricsText();  // metrics.cc
  std::string StatusJson();   // metrics.cc: GET /v1/status
  // http.cc: loads `tls` when ServerOptions asks for TLS; errors name the
  // file (or the missing option) and what is wrong with it.
  Status LoadTls();
};

}  // namespace tributary

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_SERVER_IMPL_H_
