#include "tributary/server.h"

// ThreadSanitizer does not model standalone memory fences (GCC refuses them
// under -fsanitize=thread with -Werror=tsan). Asio's fenced blocks around
// handler calls are redundant with the mutexes of its scheduler and reactor,
// which TSan does see, so use Asio's null fenced block in TSan builds.
#if defined(__SANITIZE_THREAD__) && !defined(BOOST_ASIO_DISABLE_FENCED_BLOCK)
#define BOOST_ASIO_DISABLE_FENCED_BLOCK 1
#endif

#include <google/protobuf/io/coded_stream.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/metrics.h"
#include "tributary/sep_engine.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// ---- Metrics (Prometheus text format) ---------------------------------------

class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,    0.025,  0.05,    0.1,    0.25,  1.0,    5.0};
  void Observe(double seconds) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    uint64_t ns = static_cast<uint64_t>(seconds * 1e9);
    sum_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  void Write(std::ostream& os, const std::string& name, const std::string& help) const {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    uint64_t cum = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
      cum += buckets_[i].load(std::memory_order_relaxed);
      os << name << "_bucket{le=\"" << kBounds[i] << "\"} " << cum << "\n";
    }
    cum += buckets_[kBounds.size()].load(std::memory_order_relaxed);
    os << name << "_bucket{le=\"+Inf\"} " << cum << "\n";
    os << name << "_sum " << static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9 << "\n";
    os << name << "_count " << count_.load(std::memory_order_relaxed) << "\n";
  }

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
  // Errors by kind (the Response codes, plus framing and log errors).
  std::atomic<uint64_t> err_invalid{0}, err_unauthenticated{0}, err_overloaded{0}, err_unavailable{0}, err_internal{0},
      err_frame{0}, err_wal{0};
  Histogram learn_latency, predict_latency;

  uint64_t errors() const {
    return err_invalid + err_unauthenticated + err_overloaded + err_unavailable + err_internal + err_frame + err_wal;
  }
};

void CountError(Counters& c, v1::Response::Code code) {
  switch (code) {
    case v1::Response::INVALID_REQUEST:
      c.err_invalid++;
      break;
    case v1::Response::UNAUTHENTICATED:
      c.err_unauthenticated++;
      break;
    case v1::Response::OVERLOADED:
      c.err_overloaded++;
      break;
    case v1::Response::UNAVAILABLE:
      c.err_unavailable++;
      break;
    case v1::Response::INTERNAL:
      c.err_internal++;
      break;
    default:
      break;
  }
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Time depends only on the lengths, never on where the strings differ.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string Frame(const google::protobuf::Message& msg) {
  std::string body;
  msg.SerializeToString(&body);
  uint8_t hdr[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(body.size()), hdr);
  std::string out(reinterpret_cast<const char*>(hdr), static_cast<size_t>(end - hdr));
  out += body;
  return out;
}

Result<tcp::endpoint> ParseEndpoint(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("address '" + s + "': expected HOST:PORT");
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
    return Status::InvalidArgument("address '" + s + "': port is not a number");
  }
  if (port < 0 || port > 65535) return Status::InvalidArgument("address '" + s + "': port out of range");
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return Status::InvalidArgument("address '" + s + "': '" + host + "' is not an IP address");
  return tcp::endpoint(addr, static_cast<uint16_t>(port));
}

}  // namespace

// ---- The published model ---------------------------------------------------------

struct Published {
  std::shared_ptr<const Model> model;
  uint64_t version = 0;
  std::optional<DocumentDecoder> decoder;
  v1::Schema schema;
};

class Connection;

// One acknowledged-or-not learn request on its way through the committer.
struct LearnJob {
  std::vector<v1::Document> docs;
  std::weak_ptr<Connection> conn;
  uint64_t slot = 0;
  uint64_t request_id = 0;
  Clock::time_point start;
};

struct Server::Impl {
  ServerOptions opt;
  Counters counters;
  RecoveryInfo recovery;
  uint16_t port = 0, http_port = 0;  // bound ports, set before the threads start
  // Declared before the io_context: connections destroyed with it use it.
  std::atomic<uint32_t> open_connections{0};

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // The acceptors and the signal set are used only on this strand: their
  // handlers re-arm them while ShutdownNow closes them, from other threads.
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(io)};
  tcp::acceptor acceptor{accept_strand};
  tcp::acceptor http_acceptor{accept_strand};
  std::mutex signals_mu;                    // HandleSignals (caller's thread) vs ShutdownNow (accept strand)
  std::optional<asio::signal_set> signals;  // GUARDED_BY(signals_mu)
  std::vector<std::thread> io_threads;

  // The learner's own model, touched only by the learner thread (and by
  // recovery before it starts).
  std::unique_ptr<Model> model;
  std::unique_ptr<Learner> learner;  // sdEM, SEP or ADF (learner.h)
  std::optional<DocumentDecoder> learner_decoder;

  mutable std::mutex pub_mu;
  std::shared_ptr<const Published> published;  // GUARDED_BY(pub_mu)

  // Capacity: documents accepted but not yet learned.
  std::mutex cap_mu;
  uint64_t in_queue = 0;                          // GUARDED_BY(cap_mu)
  std::deque<std::function<void()>> cap_waiters;  // GUARDED_BY(cap_mu)

  // Committer input.
  std::mutex commit_mu;
  std::condition_variable commit_cv;
  std::deque<LearnJob> commit_queue;  // GUARDED_BY(commit_mu)
  bool stopping_commit = false;       // GUARDED_BY(commit_mu)
  std::unique_ptr<WriteAheadLog> wal;
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

  std::thread committer, learner_thread;
  std::atomic<bool> draining{false};
  std::once_flag shutdown_once;
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;  // GUARDED_BY(done_mu)
  Status fatal;       // GUARDED_BY(done_mu)

  std::string SnapshotPath() const { return (std::filesystem::path(opt.data_dir) / "model.trib").string(); }

  std::shared_ptr<const Published> Current() const {
    std::lock_guard<std::mutex> l(pub_mu);
    return published;
  }

  Status Publish() {
    auto clone = model->Clone();
    if (!clone.ok()) return clone.status();
    auto p = std::make_shared<Published>();
    p->version = model->learner_state().updates;
    model->schema().ToProto(&p->schema);
    auto dec = DocumentDecoder::Create(model->schema(), p->schema);
    if (!dec.ok()) return dec.status();
    p->decoder.emplace(std::move(dec).value());
    p->model = std::shared_ptr<const Model>(std::move(clone).value().release());
    std::lock_guard<std::mutex> l(pub_mu);
    published = std::move(p);
    return Status::OK();
  }

  // Learns one logged record (learner thread, and recovery). A document that
  // the learner refuses is skipped and counted; the same happens on replay.
  Status Apply(const v1::WalRecord& rec) {
    DocumentBuffer buf;
    std::string new_class;
    Status st =
        learner_decoder->Decode(rec.document(), rec.sequence(), model->schema(), true, &buf, &new_class, nullptr);
    if (st.ok() && !new_class.empty()) {
      st = model->AddClass(new_class);
      if (st.ok()) {
        buf.label = model->schema().ClassIndex(new_class);
        v1::Schema s;
        model->schema().ToProto(&s);
        auto dec = DocumentDecoder::Create(model->schema(), s);
        if (!dec.ok()) return dec.status();
        learner_decoder.emplace(std::move(dec).value());
        // (A classifier's layout changed: the learner rebuilds itself.)
      }
    }
    if (st.ok()) {
      // An infeasible SEP / ADF update is skipped by the engine (the model
      // unchanged); it is counted like a refused document.
      LearnResult o;
      st = learner->Learn(buf.View(), &o);
      if (st.ok() && o.skipped) st = Status::Numeric("SEP update skipped: " + o.skip_reason);
    }
    if (!st.ok()) {
      if (st.IsInvalidDocument() || st.code() == Status::Code::kNumeric) {
        counters.documents_skipped++;
        model->learner_state().skipped_documents++;
      } else {
        return st;
      }
    } else {
      counters.documents_learned++;
    }
    model->learner_state().wal_sequence = rec.sequence();
    return Status::OK();
  }

  Status SaveSnapshot() {
    Status st = model->Save(SnapshotPath());
    if (st.ok()) {
      counters.snapshots++;
      covered_sequence.store(model->learner_state().wal_sequence);
      commit_cv.notify_one();
    }
    return st;
  }

  void ReleaseCapacity(uint64_t n) {
    std::deque<std::function<void()>> wake;
    {
      std::lock_guard<std::mutex> l(cap_mu);
      in_queue -= n;
      wake.swap(cap_waiters);
    }
    for (auto& f : wake) f();  // each retries its reservation on its own strand
  }

  // Reserves room for n documents or registers `retry` to be called later.
  bool TryReserve(uint64_t n, std::function<void()> retry) {
    std::lock_guard<std::mutex> l(cap_mu);
    // A request larger than the whole queue is admitted alone.
    if (in_queue == 0 || in_queue + n <= opt.queue_capacity) {
      in_queue += n;
      return true;
    }
    cap_waiters.push_back(std::move(retry));
    return false;
  }

  uint64_t QueueDepth() {
    std::lock_guard<std::mutex> l(cap_mu);
    return in_queue;
  }

  void CommitterLoop();
  void LearnerLoop();
  void Fail(const Status& st) {
    {
      std::lock_guard<std::mutex> l(done_mu);
      if (fatal.ok()) fatal = st;
    }
    ShutdownNow();
  }
  void ShutdownNow();
  void StartAccept();
  void StartHttpAccept();
  std::string MetricsText();
};

// ---- Connection --------------------------------------------------------------

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* srv, tcp::socket socket)
      : srv_(srv), socket_(std::move(socket)), strand_(asio::make_strand(srv->io)), idle_(strand_) {}

  ~Connection() { srv_->open_connections--; }

  void Start() {
    asio::dispatch(strand_, [self = shared_from_this()] {
      self->ArmIdle();
      self->ReadMore();
    });
  }

  // Called from any thread: fills `slot` with `response` and writes what is
  // ready, in request order.
  void Complete(uint64_t slot, v1::Response response) {
    asio::post(strand_,
               [self = shared_from_this(), slot, r = std::move(response)]() mutable { self->Fill(slot, Frame(r)); });
  }

 private:
  void ArmIdle() {
    if (srv_->opt.idle_timeout_s == 0) return;
    idle_.expires_after(std::chrono::seconds(srv_->opt.idle_timeout_s));
    idle_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec) return;
      const auto limit = std::chrono::seconds(self->srv_->opt.idle_timeout_s);
      // Idle: nothing owed. Stalled: a peer that has not taken a single
      // response for the whole idle time (it never reads) would otherwise
      // hold its connection, and its slot under max_connections, forever.
      const bool idle = self->slots_.empty() && !self->writing_;
      const bool stalled = self->writing_ && Clock::now() - self->write_started_ >= limit;
      if (idle || stalled) {
        if (stalled) self->peer_gone_ = true;
        boost::system::error_code ignored;
        self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
        self->socket_.close(ignored);
      } else {
        self->ArmIdle();
      }
    });
  }

  void ReadMore() {
    // Handling a request can come back here (Fill -> Flush -> ReadMore);
    // the outer call goes on parsing, so a nested one must not (it would
    // recurse once per buffered frame and start a second concurrent read).
    if (parsing_ || reading_ || closing_ || paused_ || !socket_.is_open()) return;
    // Parse what is buffered first, no more than max_inflight unanswered.
    parsing_ = true;
    while (!paused_ && !closing_ && slots_.size() < srv_->opt.max_inflight) {
      if (!ParseOne()) break;
    }
    parsing_ = false;
    if (reading_ || paused_ || closing_ || !socket_.is_open()) return;
    if (slots_.size() >= srv_->opt.max_inflight) return;  // resumes when a response is written
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(chunk_),
        asio::bind_executor(strand_, [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
          self->reading_ = false;
          if (ec) {
            // End of input (also mid-frame): drop what is half-read. A peer that
            // only closed its sending side still gets every answer it is owed;
            // after an error (reset, cancelled) nobody is there to read them.
            self->closing_ = true;
            if (ec != asio::error::eof) self->peer_gone_ = true;
            self->MaybeFinish();
            return;
          }
          self->buf_.append(self->chunk_.data(), n);
          self->ArmIdle();
          self->ReadMore();
        }));
  }

  // Parses one complete frame from buf_ and handles it. False when more
  // bytes are needed.
  bool ParseOne() {
    if (buf_.empty()) return false;
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(buf_.data()),
                                              static_cast<int>(std::min<size_t>(buf_.size(), 10)));
    uint32_t len = 0;
    if (!in.ReadVarint32(&len)) {
      if (buf_.size() >= 10) return BadFrame("invalid frame length");
      return false;
    }
    size_t hdr = static_cast<size_t>(in.CurrentPosition());
    if (len > srv_->opt.max_frame_bytes) {
      return BadFrame("frame of " + std::to_string(len) + " bytes is over the limit of " +
                      std::to_string(srv_->opt.max_frame_bytes) + " bytes");
    }
    if (buf_.size() < hdr + len) return false;
    v1::Request req;
    bool ok = req.ParseFromArray(buf_.data() + hdr, static_cast<int>(len));
    buf_.erase(0, hdr + len);
    if (!ok) return BadFrame("frame does not parse as tributary.v1.Request");
    srv_->counters.requests++;
    Handle(std::move(req));
    return true;
  }

  bool BadFrame(const std::string& why) {
    srv_->counters.err_frame++;
    v1::Response r;
    r.set_code(v1::Response::INVALID_REQUEST);
    r.set_message(why + "; closing the connection (framing lost)");
    // Stop reading before anything else: nothing after this point is parsed.
    buf_.clear();
    closing_ = true;
    uint64_t slot = NewSlot();
    Fill(slot, Frame(r));
    MaybeFinish();
    return false;
  }

  uint64_t NewSlot() {
    uint64_t s = next_slot_++;
    slots_.push_back({s, std::nullopt});
    return s;
  }

  void Fill(uint64_t slot, std::string frame) {
    for (auto& s : slots_) {
      if (s.first == slot) {
        s.second = std::move(frame);
        break;
      }
    }
    Flush();
  }

  void Flush() {
    if (writing_ || peer_gone_) {
      MaybeFinish();
      return;
    }
    std::string out;
    while (!slots_.empty() && slots_.front().second) {
      out += *slots_.front().second;
      slots_.pop_front();
    }
    if (out.empty()) {
      MaybeFinish();
      ReadMore();
      return;
    }
    writing_ = true;
    write_started_ = Clock::now();
    out_ = std::move(out);
    asio::async_write(
        socket_, asio::buffer(out_),
        asio::bind_executor(strand_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
          self->writing_ = false;
          if (ec) {
            self->peer_gone_ = true;
            self->closing_ = true;
            self->MaybeFinish();
            return;
          }
          self->Flush();
        }));
  }

  void MaybeFinish() {
    if (!closing_ || writing_) return;
    if (!peer_gone_ && !slots_.empty()) return;  // answers still owed
    if (reading_) {
      boost::system::error_code ignored;
      socket_.cancel(ignored);
    }
    idle_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  v1::Response ErrorResponse(uint64_t id, v1::Response::Code code, const std::string& msg) {
    CountError(srv_->counters, code);
    v1::Response r;
    r.set_request_id(id);
    r.set_code(code);
    r.set_message(msg);
    return r;
  }

  void Handle(v1::Request req) {
    const uint64_t slot = NewSlot();
    const uint64_t id = req.request_id();
    auto start = Clock::now();
    if (!srv_->opt.auth_token.empty() && !ConstantTimeEquals(req.auth_token(), srv_->opt.auth_token)) {
      Fill(slot, Frame(ErrorResponse(id, v1::Response::UNAUTHENTICATED, "missing or wrong auth_token")));
      return;
    }
    switch (req.kind_case()) {
      case v1::Request::kPing: {
        v1::Response r;
        r.set_request_id(id);
        r.mutable_pong();
        Fill(slot, Frame(r));
        return;
      }
      case v1::Request::kStats: {
        v1::Response r;
        r.set_request_id(id);
        auto* s = r.mutable_stats();
        auto pub = srv_->Current();
        s->set_documents_learned(srv_->counters.documents_learned);
        s->set_model_version(pub ? pub->version : 0);
        s->set_predictions(srv_->counters.predictions);
        s->set_queue_depth(srv_->QueueDepth());
        s->set_wal_sequence(srv_->counters.documents_acknowledged);
        s->set_errors(srv_->counters.errors());
        s->set_learning_enabled(srv_->learning_enabled);
        if (pub) {
          s->set_family(pub->model->family().name);
          s->set_loss(pub->model->loss_plugin() ? pub->model->loss_plugin()->name : "");
        }
        Fill(slot, Frame(r));
        return;
      }
      case v1::Request::kPredict: {
        Fill(slot, Frame(Predict(id, req.predict(), start)));
        return;
      }
      case v1::Request::kSnapshot: {
        std::weak_ptr<Connection> weak = shared_from_this();
        std::unique_lock<std::mutex> l(srv_->learn_mu);
        if (srv_->stopping_learn) {
          // The learner has been told to stop: it would never answer.
          l.unlock();
          Fill(slot, Frame(ErrorResponse(id, v1::Response::UNAVAILABLE, "server is shutting down")));
          return;
        }
        srv_->snapshot_waiters.push_back(
            [weak, slot, id, this_srv = srv_](const Status& st, const std::string& path, uint64_t seq) {
              auto c = weak.lock();
              if (!c) return;
              v1::Response r;
              r.set_request_id(id);
              if (st.ok()) {
                r.mutable_snapshot()->set_path(path);
                r.mutable_snapshot()->set_wal_sequence(seq);
              } else {
                CountError(this_srv->counters, v1::Response::INTERNAL);
                r.set_code(v1::Response::INTERNAL);
                r.set_message(st.ToString());
              }
              c->Complete(slot, std::move(r));
            });
        srv_->learn_cv.notify_one();
        return;
      }
      case v1::Request::kLearn: {
        Learn(slot, id, std::move(*req.mutable_learn()), start);
        return;
      }
      case v1::Request::KIND_NOT_SET:
        break;
    }
    Fill(slot, Frame(ErrorResponse(id, v1::Response::INVALID_REQUEST, "request has no kind (learn, predict, ...)")));
  }

  v1::Response Predict(uint64_t id, const v1::PredictRequest& pr, Clock::time_point start) {
    auto pub = srv_->Current();
    if (!pub) return ErrorResponse(id, v1::Response::UNAVAILABLE, "no model published yet");
    auto state = pub->model->NewScoringState();
    if (!state.ok()) return ErrorResponse(id, v1::Response::INTERNAL, state.status().ToString());
    const uint32_t K = pub->model->num_outputs();
    std::vector<double> scores(K), probs(K);
    v1::Response r;
    r.set_request_id(id);
    auto* out = r.mutable_predict();
    out->set_model_version(pub->version);
    for (uint32_t k = 0; k < K; ++k) out->add_class_names(pub->model->OutputName(k));
    DocumentBuffer buf;
    for (int i = 0; i < pr.documents_size(); ++i) {
      Status st = pub->decoder->Decode(pr.documents(i), static_cast<uint64_t>(i), pub->model->schema(), false, &buf,
                                       nullptr, nullptr);
      if (st.ok()) st = pub->model->Score(buf.View(), state->get(), scores.data());
      if (!st.ok()) return ErrorResponse(id, v1::Response::INVALID_REQUEST, "predict: " + st.message());
      Posterior(scores.data(), K, probs.data());
      auto* p = out->add_predictions();
      p->set_id(pr.documents(i).id());
      p->set_index(static_cast<uint64_t>(i));
      uint32_t best = static_cast<uint32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
      p->set_predicted(pub->model->OutputName(best));
      for (double x : probs) p->add_probabilities(x);
    }
    srv_->counters.predictions += static_cast<uint64_t>(pr.documents_size());
    srv_->counters.predict_latency.Observe(std::chrono::duration<double>(Clock::now() - start).count());
    return r;
  }

  void Learn(uint64_t slot, uint64_t id, v1::LearnRequest lr, Clock::time_point start) {
    if (srv_->draining) {
      Fill(slot, Frame(ErrorResponse(id, v1::Response::UNAVAILABLE, "server is shutting down")));
      return;
    }
    if (!srv_->learning_enabled) {
      Fill(slot,
           Frame(ErrorResponse(id, v1::Response::UNAVAILABLE,
                               "learning is disabled after a write-ahead log failure; predictions still served")));
      return;
    }
    if (lr.documents_size() == 0) {
      Fill(slot, Frame(ErrorResponse(id, v1::Response::INVALID_REQUEST, "learn request has no documents")));
      return;
    }
    // Validate every document before anything is logged: a request is
    // learned whole or refused whole.
    auto pub = srv_->Current();
    DocumentBuffer buf;
    for (int i = 0; i < lr.documents_size(); ++i) {
      std::string new_class;
      Status st = pub->decoder->Decode(lr.documents(i), static_cast<uint64_t>(i), pub->model->schema(), true, &buf,
                                       &new_class, nullptr);
      if (st.ok() && buf.label < 0 && new_class.empty() && pub->model->loss_plugin()->loss().requires_label) {
        st = Status::InvalidDocument(buf.Name() + ": loss '" + pub->model->loss_plugin()->name +
                                     "' needs a label, the document has none");
      }
      if (!st.ok()) {
        Fill(slot, Frame(ErrorResponse(id, v1::Response::INVALID_REQUEST,
                                       "learn (document index within the request): " + st.message())));
        return;
      }
    }
    const uint64_t n = static_cast<uint64_t>(lr.documents_size());
    auto job = std::make_shared<LearnJob>();
    job->docs.assign(std::make_move_iterator(lr.mutable_documents()->begin()),
                     std::make_move_iterator(lr.mutable_documents()->end()));
    job->conn = weak_from_this();
    job->slot = slot;
    job->request_id = id;
    job->start = start;
    Enqueue(job, n);
  }

  void Enqueue(std::shared_ptr<LearnJob> job, uint64_t n) {
    auto self = shared_from_this();
    auto retry = [self, job, n] { asio::post(self->strand_, [self, job, n] { self->Enqueue(job, n); }); };
    if (!srv_->TryReserve(n, retry)) {
      paused_ = true;  // backpressure: stop reading this connection
      return;
    }
    if (paused_) {
      paused_ = false;
      asio::post(strand_, [self] { self->ReadMore(); });
    }
    {
      std::lock_guard<std::mutex> l(srv_->commit_mu);
      if (!srv_->stopping_commit) {
        srv_->commit_queue.push_back(std::move(*job));
        srv_->commit_cv.notify_one();
        return;
      }
    }
    // The committer has drained and stopped (shutdown): this request, read
    // before the drain but admitted after it, would never be logged or
    // answered. Refuse it instead.
    srv_->ReleaseCapacity(n);
    Fill(job->slot, Frame(ErrorResponse(job->request_id, v1::Response::UNAVAILABLE, "server is shutting down")));
  }

  Server::Impl* srv_;
  tcp::socket socket_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer idle_;
  std::array<char, 64 * 1024> chunk_{};
  std::string buf_, out_;
  std::deque<std::pair<uint64_t, std::optional<std::string>>> slots_;
  uint64_t next_slot_ = 0;
  bool reading_ = false, parsing_ = false, writing_ = false, closing_ = false, paused_ = false, peer_gone_ = false;
  Clock::time_point write_started_{};
};

// ---- Committer: log, fsync, acknowledge ---------------------------------------

void Server::Impl::CommitterLoop() {
  auto last_sync = Clock::now();
  uint64_t dropped_through = 0;  // DropCovered already done for this sequence
  std::vector<LearnJob> group;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(commit_mu);
      commit_cv.wait(l, [&] { return stopping_commit || !commit_queue.empty(); });
      if (commit_queue.empty() && stopping_commit) break;
      if (!opt.fsync_every_request) {
        // Group commit: gather requests until the interval since the last
        // fsync has passed.
        auto deadline = last_sync + std::chrono::milliseconds(opt.fsync_interval_ms);
        commit_cv.wait_until(l, deadline, [&] { return stopping_commit; });
      }
      while (!commit_queue.empty()) {
        group.push_back(std::move(commit_queue.front()));
        commit_queue.pop_front();
        if (opt.fsync_every_request) break;
      }
    }
    if (group.empty()) continue;
    uint64_t covered = covered_sequence.load();
    Status st = learning_enabled ? Status::OK() : Status::IOError("write-ahead log disabled");
    const uint64_t first = next_sequence;
    std::vector<v1::WalRecord> records;
    if (st.ok()) st = wal->MaybeRoll(next_sequence, opt.wal_segment_bytes);
    if (st.ok() && covered > dropped_through) {
      st = wal->DropCovered(covered);
      dropped_through = covered;
    }
    uint64_t seq = first;
    for (auto& job : group) {
      for (auto& d : job.docs) {
        v1::WalRecord rec;
        rec.set_sequence(seq++);
        *rec.mutable_document() = std::move(d);
        if (st.ok()) st = wal->Append(rec);
        records.push_back(std::move(rec));
      }
    }
    if (st.ok()) st = wal->Sync();
    last_sync = Clock::now();
    if (!st.ok()) {
      // Nothing of this group is acknowledged or learned. Learning stays off:
      // the log can no longer promise durability. Predictions go on.
      counters.err_wal++;
      learning_enabled = false;
      {
        std::lock_guard<std::mutex> l(commit_mu);
        wal_error = st.ToString();
      }
      uint64_t n = 0;
      for (auto& job : group) {
        n += job.docs.size();
        if (auto c = job.conn.lock()) {
          v1::Response r;
          r.set_request_id(job.request_id);
          r.set_code(v1::Response::UNAVAILABLE);
          r.set_message("write-ahead log failure, not learned: " + st.ToString());
          counters.err_unavailable++;
          c->Complete(job.slot, std::move(r));
        }
      }
      ReleaseCapacity(n);
      group.clear();
      continue;
    }
    next_sequence = seq;
    {
      std::lock_guard<std::mutex> l(learn_mu);
      for (auto& r : records) learn_queue.push_back(std::move(r));
    }
    learn_cv.notify_one();
    uint64_t s = first;
    for (auto& job : group) {
      counters.documents_acknowledged += job.docs.size();
      counters.learn_latency.Observe(std::chrono::duration<double>(Clock::now() - job.start).count());
      if (auto c = job.conn.lock()) {
        v1::Response r;
        r.set_request_id(job.request_id);
        r.mutable_learn()->set_acknowledged(job.docs.size());
        r.mutable_learn()->set_first_sequence(s);
        c->Complete(job.slot, std::move(r));
      }
      s += job.docs.size();
    }
    group.clear();
  }
  // Every group was synced as it was logged; this only matters if a future
  // change buffers across groups. A failed log stays failed: not an error again.
  if (learning_enabled) {
    Status st = wal->Sync();
    if (!st.ok()) counters.err_wal++;
  }
}

// ---- Learner: apply in log order, publish, snapshot ------------------------------

void Server::Impl::LearnerLoop() {
  auto last_publish = Clock::now();
  auto last_snapshot = Clock::now();
  uint64_t since_publish = 0, since_snapshot = 0;
  Status last_snapshot_status;
  for (;;) {
    std::deque<v1::WalRecord> batch;
    std::vector<std::function<void(const Status&, const std::string&, uint64_t)>> snap_waiters;
    bool stop = false;
    {
      std::unique_lock<std::mutex> l(learn_mu);
      learn_cv.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(1, opt.publish_interval_ms)),
                        [&] { return stopping_learn || !learn_queue.empty() || !snapshot_waiters.empty(); });
      batch.swap(learn_queue);
      snap_waiters.swap(snapshot_waiters);
      stop = stopping_learn && batch.empty();
    }
    for (const auto& rec : batch) {
      Status st = Apply(rec);
      if (!st.ok()) {
        Fail(st.WithContext("learner"));
        return;
      }
      ++since_publish;
      ++since_snapshot;
      if (since_publish >= opt.publish_every_updates) {
        Status p = Publish();
        if (!p.ok()) {
          Fail(p);
          return;
        }
        since_publish = 0;
        last_publish = Clock::now();
      }
    }
    if (!batch.empty()) ReleaseCapacity(batch.size());
    auto now = Clock::now();
    if (since_publish > 0 && now - last_publish >= std::chrono::milliseconds(opt.publish_interval_ms)) {
      Status p = Publish();
      if (!p.ok()) {
        Fail(p);
        return;
      }
      since_publish = 0;
      last_publish = now;
    }
    bool snapshot_due = !snap_waiters.empty() ||
                        (since_snapshot > 0 && (since_snapshot >= opt.snapshot_every_documents ||
                                                now - last_snapshot >= std::chrono::seconds(opt.snapshot_interval_s)));
    if (snapshot_due || stop) {
      Status st = since_snapshot > 0 || !snap_waiters.empty() || stop ? SaveSnapshot() : Status::OK();
      last_snapshot_status = st;
      for (auto& w : snap_waiters) w(st, SnapshotPath(), model->learner_state().wal_sequence);
      if (st.ok()) {
        since_snapshot = 0;
        last_snapshot = now;
      }
    }
    if (stop) {
      // The final snapshot (Shutdown() promises one): its failure is the
      // server's exit status, not silence.
      if (!last_snapshot_status.ok()) Fail(last_snapshot_status.WithContext("final snapshot"));
      if (since_publish > 0) {
        Status p = Publish();
        if (!p.ok()) Fail(p);
      }
      return;
    }
  }
}

// ---- HTTP: /healthz and /metrics -------------------------------------------------------

std::string Server::Impl::MetricsText() {
  std::ostringstream os;
  auto pub = Current();
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " counter\n" << name << " " << v << "\n";
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << v << "\n";
  };
  counter("tributary_documents_learned_total", "Documents applied to the model.", counters.documents_learned);
  counter("tributary_documents_acknowledged_total", "Documents acknowledged (durable in the log).",
          counters.documents_acknowledged);
  counter("tributary_documents_skipped_total", "Acknowledged documents the learner refused.",
          counters.documents_skipped);
  counter("tributary_predictions_total", "Documents predicted.", counters.predictions);
  counter("tributary_requests_total", "Requests read.", counters.requests);
  counter("tributary_connections_total", "Connections accepted.", counters.connections);
  counter("tributary_snapshots_total", "Snapshots written.", counters.snapshots);
  os << "# HELP tributary_errors_total Errors by kind.\n# TYPE tributary_errors_total counter\n";
  os << "tributary_errors_total{kind=\"invalid_request\"} " << counters.err_invalid << "\n";
  os << "tributary_errors_total{kind=\"unauthenticated\"} " << counters.err_unauthenticated << "\n";
  os << "tributary_errors_total{kind=\"overloaded\"} " << counters.err_overloaded << "\n";
  os << "tributary_errors_total{kind=\"unavailable\"} " << counters.err_unavailable << "\n";
  os << "tributary_errors_total{kind=\"internal\"} " << counters.err_internal << "\n";
  os << "tributary_errors_total{kind=\"bad_frame\"} " << counters.err_frame << "\n";
  os << "tributary_errors_total{kind=\"wal\"} " << counters.err_wal << "\n";
  gauge("tributary_queue_depth", "Documents accepted but not yet learned.", static_cast<double>(QueueDepth()));
  gauge("tributary_model_version", "Version (documents learned) of the published model.",
        pub ? static_cast<double>(pub->version) : 0.0);
  gauge("tributary_open_connections", "Open client connections.", open_connections.load());
  gauge("tributary_learning_enabled", "1 while learn requests are accepted.", learning_enabled ? 1.0 : 0.0);
  counters.learn_latency.Write(os, "tributary_learn_latency_seconds", "Learn request latency (read to acknowledged).");
  counters.predict_latency.Write(os, "tributary_predict_latency_seconds", "Predict request latency.");
  return os.str();
}

namespace {
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(Server::Impl* srv, tcp::socket s) : srv_(srv), stream_(std::move(s)) {}
  void Start() {
    stream_.expires_after(std::chrono::seconds(10));
    beast::http::async_read(stream_, buf_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return;
      self->Respond();
    });
  }

 private:
  void Respond() {
    res_.version(req_.version());
    res_.keep_alive(false);
    std::string target(req_.target());
    if (target == "/healthz") {
      bool ok = srv_->learning_enabled;
      res_.result(ok ? beast::http::status::ok : beast::http::status::service_unavailable);
      res_.set(beast::http::field::content_type, "text/plain");
      res_.body() = ok ? "ok\n" : "degraded: learning disabled (write-ahead log failure)\n";
    } else if (target == "/metrics") {
      res_.result(beast::http::status::ok);
      res_.set(beast::http::field::content_type, "text/plain; version=0.0.4");
      res_.body() = srv_->MetricsText();
    } else {
      res_.result(beast::http::status::not_found);
      res_.set(beast::http::field::content_type, "text/plain");
      res_.body() = "not found: try /healthz or /metrics\n";
    }
    res_.prepare_payload();
    beast::http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }
  Server::Impl* srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  beast::http::request<beast::http::string_body> req_;
  beast::http::response<beast::http::string_body> res_;
};
}  // namespace

void Server::Impl::StartHttpAccept() {
  http_acceptor.async_accept(asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket s) {
    if (ec) return;  // closed
    std::make_shared<HttpSession>(this, std::move(s))->Start();
    StartHttpAccept();
  });
}

void Server::Impl::StartAccept() {
  acceptor.async_accept(asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket s) {
    if (ec) return;  // closed
    counters.connections++;
    if (open_connections.load() >= opt.max_connections) {
      // Refused, but answered and counted.
      counters.err_overloaded++;
      v1::Response r;
      r.set_code(v1::Response::OVERLOADED);
      r.set_message("too many connections (limit " + std::to_string(opt.max_connections) + ")");
      auto frame = std::make_shared<std::string>(Frame(r));
      auto sock = std::make_shared<tcp::socket>(std::move(s));
      asio::async_write(*sock, asio::buffer(*frame), [sock, frame](boost::system::error_code, size_t) {
        boost::system::error_code ignored;
        sock->shutdown(tcp::socket::shutdown_both, ignored);
      });
    } else {
      open_connections++;
      boost::system::error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Connection>(this, std::move(s))->Start();
    }
    StartAccept();
  });
}

void Server::Impl::ShutdownNow() {
  std::call_once(shutdown_once, [this] {
    draining = true;
    asio::post(accept_strand, [this] {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      http_acceptor.close(ignored);
      std::lock_guard<std::mutex> l(signals_mu);
      if (signals) signals->cancel(ignored);
    });
    std::thread([this] {
      {
        std::lock_guard<std::mutex> l(commit_mu);
        stopping_commit = true;
      }
      commit_cv.notify_all();
      if (committer.joinable()) committer.join();
      {
        std::lock_guard<std::mutex> l(learn_mu);
        stopping_learn = true;
      }
      learn_cv.notify_all();
      if (learner_thread.joinable()) learner_thread.join();
      // Let connections flush their last answers, then stop the I/O threads.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      work.reset();
      io.stop();
      std::lock_guard<std::mutex> l(done_mu);
      done = true;
      done_cv.notify_all();  // under the lock: Impl may be destroyed once it is released
    }).detach();
  });
}

// ---- Server ---------------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  Wait();
  for (auto& t : impl_->io_threads)
    if (t.joinable()) t.join();
}

// Cached at Start: the acceptors belong to the I/O threads (which close them
// on shutdown), so reading them from the caller's thread would race.
uint16_t Server::port() const { return impl_->port; }
uint16_t Server::http_port() const { return impl_->http_port; }
const RecoveryInfo& Server::recovery() const { return impl_->recovery; }

void Server::Shutdown() { impl_->ShutdownNow(); }

Status Server::Wait() {
  std::unique_lock<std::mutex> l(impl_->done_mu);
  impl_->done_cv.wait(l, [&] { return impl_->done; });
  l.unlock();
  for (auto& t : impl_->io_threads)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> g(impl_->done_mu);
  return impl_->fatal;
}

void Server::HandleSignals() {
  std::lock_guard<std::mutex> l(impl_->signals_mu);
  impl_->signals.emplace(impl_->accept_strand, SIGTERM, SIGINT);
  impl_->signals->async_wait([impl = impl_.get()](const boost::system::error_code& ec, int) {
    if (!ec) impl->ShutdownNow();
  });
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, std::unique_ptr<Model> initial) {
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  Impl& s = *impl;
  if (s.opt.data_dir.empty()) return Status::InvalidArgument("serve: --data-dir is required");
  if (s.opt.io_threads == 0) s.opt.io_threads = 1;
  if (s.opt.max_inflight == 0) s.opt.max_inflight = 1;
  std::error_code fec;
  std::filesystem::create_directories(s.opt.data_dir, fec);
  if (fec) return Status::IOError("cannot create data directory '" + s.opt.data_dir + "': " + fec.message());
  // 1. The model: the data directory's snapshot wins over `initial`.
  if (std::filesystem::exists(s.SnapshotPath())) {
    PluginRegistry reg;  // loads only the plugins the snapshot names
    auto m = Model::Load(s.SnapshotPath(), reg);
    if (!m.ok()) return m.status();
    s.model = std::move(m).value();
    s.recovery.from_snapshot = true;
    s.recovery.snapshot_sequence = s.model->learner_state().wal_sequence;
  } else if (initial) {
    s.model = std::move(initial);
  } else {
    return Status::InvalidArgument("serve: no snapshot in '" + s.opt.data_dir +
                                   "' and no initial model (pass --model or --schema)");
  }
  if (!s.model->loss_plugin()) return Status::InvalidArgument("serve: the model has no loss to learn with");
  v1::Schema schema;
  s.model->schema().ToProto(&schema);
  auto dec = DocumentDecoder::Create(s.model->schema(), schema);
  if (!dec.ok()) return dec.status();
  s.learner_decoder.emplace(std::move(dec).value());
  std::string engine = s.opt.engine;
  const bool has_sep = SepLearner::Supports(s.model->family());
  if (engine == "auto") engine = has_sep ? "sep" : "sdem";
  if (engine == "sep" || engine == "adf") {
    if (!has_sep) {
      return Status::InvalidArgument("serve: family '" + s.model->family().name + "' cannot be trained with --engine " +
                                     engine + ": it has no SEP hooks");
    }
  } else if (engine == "sdem") {
    if (has_sep) {  // the count mixtures have no sdEM update: every document would fail
      return Status::InvalidArgument("serve: family '" + s.model->family().name +
                                     "' is trained by SEP or ADF, not sdEM (use --engine auto, sep or adf)");
    }
  } else {
    return Status::InvalidArgument("serve: unknown engine '" + s.opt.engine + "' (expected auto, sdem, sep or adf)");
  }
  {
    LearnerOptions lo;
    lo.engine = engine;
    lo.seed = s.opt.seed;  // N: the model's (effective_size 0 keeps it)
    auto l = Learner::Create(s.model.get(), lo);
    if (!l.ok()) return l.status();
    s.learner = std::move(l).value();
  }
  // 2. Replay the log tail.
  auto wal = WriteAheadLog::Open((std::filesystem::path(s.opt.data_dir) / "wal").string(), s.opt.wal_files);
  if (!wal.ok()) return wal.status();
  s.wal = std::move(wal).value();
  WalReplayReport rep;
  const uint64_t after = s.model->learner_state().wal_sequence;
  TRIB_RETURN_IF_ERROR(s.wal->Replay(
      after, [&](const v1::WalRecord& rec) { return s.Apply(rec); }, &rep));
  s.recovery.replayed = rep.records;
  s.recovery.torn_bytes = rep.torn_bytes;
  // Documents in the model, whether they came from the snapshot or the log.
  s.counters.documents_learned = s.model->learner_state().updates;
  s.next_sequence = std::max(after, rep.last_sequence) + 1;
  s.counters.documents_acknowledged = s.next_sequence - 1;
  TRIB_RETURN_IF_ERROR(s.wal->StartSegment(s.next_sequence));
  if (rep.records > 0) TRIB_RETURN_IF_ERROR(s.SaveSnapshot());
  TRIB_RETURN_IF_ERROR(s.Publish());
  // 3. Sockets.
  auto ep = ParseEndpoint(s.opt.listen);
  if (!ep.ok()) return ep.status();
  boost::system::error_code ec;
  s.acceptor.open(ep->protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(*ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::IOError("cannot listen on " + s.opt.listen + ": " + ec.message());
  s.port = s.acceptor.local_endpoint(ec).port();
  if (!s.opt.http.empty()) {
    auto hep = ParseEndpoint(s.opt.http);
    if (!hep.ok()) return hep.status();
    s.http_acceptor.open(hep->protocol(), ec);
    if (!ec) s.http_acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s.http_acceptor.bind(*hep, ec);
    if (!ec) s.http_acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::IOError("cannot listen (HTTP) on " + s.opt.http + ": " + ec.message());
    s.http_port = s.http_acceptor.local_endpoint(ec).port();
  }
  // 4. Threads.
  s.work.emplace(asio::make_work_guard(s.io));
  s.StartAccept();
  if (!s.opt.http.empty()) s.StartHttpAccept();
  Impl* raw = impl.get();
  s.committer = std::thread([raw] { raw->CommitterLoop(); });
  s.learner_thread = std::thread([raw] { raw->LearnerLoop(); });
  for (unsigned i = 0; i < s.opt.io_threads; ++i) s.io_threads.emplace_back([raw] { raw->io.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

}  // namespace tributary
