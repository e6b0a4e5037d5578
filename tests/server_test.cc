// The server (issue 5), in-process: several clients learning and predicting
// at once against an offline replay of the log; faults (garbage, oversized
// frames, clients that vanish mid-frame or never read, an injected
// write-ahead-log failure); limits (auth, connections, in-flight requests,
// bad requests); backpressure; durability (shutdown snapshot, crash image
// with log replay, torn tail). Clients are plain POSIX sockets speaking the
// framing of proto/tributary/v1/tributary.proto.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "fault_env.h"
#include "test_util.h"
#include "tributary/document.h"
#include "tributary/live_model.h"
#include "tributary/metrics.h"
#include "tributary/sdem_learner.h"
#include "tributary/sep_engine.h"
#include "tributary/server.h"
#include "tributary/stream_io.h"
#include "tributary/wal.h"

namespace tributary {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kVocab = 50;
constexpr uint32_t kClasses = 3;
constexpr double kEffectiveSize = 500;
constexpr uint64_t kSeed = 1;

// ---- Documents and models ------------------------------------------------------

// A learnable document: class k prefers terms [15k, 15k + 15).
v1::Document RandomDoc(std::mt19937_64& rng, bool labelled = true) {
  v1::Document d;
  const uint32_t k = static_cast<uint32_t>(rng() % kClasses);
  if (labelled) d.set_label("c" + std::to_string(k));
  const int n = 2 + static_cast<int>(rng() % 6);
  for (int j = 0; j < n; ++j) {
    uint32_t t = rng() % 4 == 0 ? static_cast<uint32_t>(rng() % kVocab) : static_cast<uint32_t>(15 * k + rng() % 15);
    d.add_term_ids(t);
    d.add_term_counts(static_cast<double>(1 + rng() % 3));
  }
  return d;
}

std::vector<v1::Document> RandomDocs(std::mt19937_64& rng, size_t n) {
  std::vector<v1::Document> out;
  for (size_t i = 0; i < n; ++i) out.push_back(RandomDoc(rng));
  return out;
}

std::vector<v1::Document> ProbeDocs() {
  std::mt19937_64 rng(99);
  std::vector<v1::Document> out;
  for (int i = 0; i < 6; ++i) {
    out.push_back(RandomDoc(rng, false));
    out.back().set_id("probe" + std::to_string(i));
  }
  return out;
}

std::unique_ptr<Model> NewModel() {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, kSeed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = kEffectiveSize;
  return std::move(m).value();
}

// The model trained offline, document by document, exactly as the server's
// learner does (same decoder, same seed, index = log sequence).
class OfflineModel {
 public:
  OfflineModel() : model_(NewModel()) {
    auto l = SdemLearner::Create(model_.get(), kSeed);
    EXPECT_TRUE(l.ok());
    learner_ = std::move(l).value();
    v1::Schema s;
    model_->schema().ToProto(&s);
    auto d = DocumentDecoder::Create(model_->schema(), s);
    EXPECT_TRUE(d.ok());
    decoder_.emplace(std::move(d).value());
    auto st = model_->NewScoringState();
    EXPECT_TRUE(st.ok());
    state_ = std::move(st).value();
  }
  void Learn(const v1::Document& doc, uint64_t sequence) {
    DocumentBuffer buf;
    std::string new_class;
    ASSERT_TRUE(decoder_->Decode(doc, sequence, model_->schema(), kGrowClasses, &buf, &new_class, nullptr).ok());
    Status st = learner_->Learn(buf.View());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::vector<double> Probabilities(const v1::Document& doc) {
    DocumentBuffer buf;
    EXPECT_TRUE(decoder_->Decode(doc, 0, model_->schema(), kGrowNothing, &buf, nullptr, nullptr).ok());
    std::vector<double> scores(kClasses), probs(kClasses);
    EXPECT_TRUE(model_->Score(buf.View(), state_.get(), scores.data()).ok());
    Posterior(scores.data(), kClasses, probs.data());
    return probs;
  }
  // Saves and reloads the model, as a server restarting from a snapshot
  // taken at this point does.
  void SaveAndReload(const std::string& path) {
    ASSERT_TRUE(model_->Save(path).ok());
    auto m = Model::Load(path, testing::BuiltinRegistry());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value();
    auto l = SdemLearner::Create(model_.get(), kSeed);
    ASSERT_TRUE(l.ok());
    learner_ = std::move(l).value();
    auto st = model_->NewScoringState();
    ASSERT_TRUE(st.ok());
    state_ = std::move(st).value();
  }
  const Model& model() const { return *model_; }
  uint64_t updates() const { return model_->learner_state().updates; }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<SdemLearner> learner_;
  std::optional<DocumentDecoder> decoder_;
  std::unique_ptr<ScoringState> state_;
};

// Bit-for-bit equality of two models' statistics and learner position.
void ExpectSameStatistics(const Model& a, const Model& b) {
  EXPECT_EQ(a.learner_state().updates, b.learner_state().updates);
  ASSERT_EQ(a.stats().raw().size(), b.stats().raw().size());
  EXPECT_TRUE(a.stats().raw() == b.stats().raw()) << "raw statistics differ";
  ASSERT_EQ(a.stats().blocks().size(), b.stats().blocks().size());
  for (size_t i = 0; i < a.stats().blocks().size(); ++i) {
    EXPECT_EQ(a.stats().blocks()[i].scale, b.stats().blocks()[i].scale) << "block " << i;
    EXPECT_EQ(a.stats().blocks()[i].shift, b.stats().blocks()[i].shift) << "block " << i;
  }
}

std::unique_ptr<Model> LoadSnapshot(const std::string& path) {
  auto m = Model::Load(path, testing::BuiltinRegistry());
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

// ---- A synchronous client over a POSIX socket ----------------------------------------

std::string FrameOf(const google::protobuf::MessageLite& m) {
  std::string body;
  m.SerializeToString(&body);
  uint8_t hdr[10];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<uint32_t>(body.size()), hdr);
  return std::string(reinterpret_cast<char*>(hdr), static_cast<size_t>(end - hdr)) + body;
}

int ConnectSocket(uint16_t port, int rcvbuf = 0, int sndbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  if (sndbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

class Client {
 public:
  explicit Client(uint16_t port, int rcvbuf = 0, int sndbuf = 0) : fd_(ConnectSocket(port, rcvbuf, sndbuf)) {}
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  bool SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Stamps a fresh request id (and the token, if set) and sends.
  uint64_t Send(v1::Request req) {
    req.set_request_id(next_id_++);
    if (!token_.empty() && req.auth_token().empty()) req.set_auth_token(token_);
    EXPECT_TRUE(SendRaw(FrameOf(req)));
    return req.request_id();
  }
  // One response, or false on end of stream / error / timeout.
  bool Receive(v1::Response* r, int timeout_ms = 20000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (!buf_.empty()) {
        google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(buf_.data()),
                                                  static_cast<int>(std::min<size_t>(buf_.size(), 10)));
        uint32_t len = 0;
        if (in.ReadVarint32(&len)) {
          size_t hdr = static_cast<size_t>(in.CurrentPosition());
          if (buf_.size() >= hdr + len) {
            bool ok = r->ParseFromArray(buf_.data() + hdr, static_cast<int>(len));
            buf_.erase(0, hdr + len);
            EXPECT_TRUE(ok) << "response does not parse";
            return ok;
          }
        }
      }
      if (!ReadSome(deadline)) return false;
    }
  }
  // Sends and waits for the answer, which must carry the same request id.
  v1::Response Call(v1::Request req, int timeout_ms = 20000) {
    uint64_t id = Send(std::move(req));
    v1::Response r;
    bool got = Receive(&r, timeout_ms);
    EXPECT_TRUE(got) << "no response to request " << id << (eof_ ? " (connection closed)" : " (timeout)");
    if (got) {
      EXPECT_EQ(r.request_id(), id);
    }
    return r;
  }
  // True once the server has closed the connection (end of stream or reset),
  // with no further response before that.
  bool WaitClosed(int timeout_ms = 10000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_) {
      if (!ReadSome(deadline)) return eof_ && buf_.empty();
    }
    return buf_.empty();
  }
  void set_token(std::string t) { token_ = std::move(t); }

 private:
  bool ReadSome(Clock::time_point deadline) {
    if (eof_ || fd_ < 0) return false;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int pr = ::poll(&p, 1, static_cast<int>(left));
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) return false;
      char chunk[65536];
      ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        eof_ = true;
        return false;
      }
      buf_.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }
  int fd_;
  std::string buf_;
  bool eof_ = false;
  uint64_t next_id_ = 1;
  std::string token_;
};

v1::Request LearnRequest(const std::vector<v1::Document>& docs) {
  v1::Request r;
  auto* l = r.mutable_learn();
  for (const auto& d : docs) *l->add_documents() = d;
  return r;
}
v1::Request PredictRequest(const std::vector<v1::Document>& docs) {
  v1::Request r;
  auto* p = r.mutable_predict();
  for (const auto& d : docs) *p->add_documents() = d;
  return r;
}
v1::Request StatsRequest() {
  v1::Request r;
  r.mutable_stats();
  return r;
}
v1::Request PingRequest() {
  v1::Request r;
  r.mutable_ping();
  return r;
}
v1::Request SnapshotRequest() {
  v1::Request r;
  r.mutable_snapshot();
  return r;
}

// A GET over plain HTTP/1.1; returns "status-line\n...body" or "" on failure.
std::string HttpGet(uint16_t port, const std::string& target) {
  int fd = ConnectSocket(port);
  if (fd < 0) return "";
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return "";
  }
  std::string out;
  char chunk[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// ---- Fault injection for the write-ahead log --------------------------------------------

// Faults come from testing::FaultEnv (fault_env.h) on the log's segment
// files: a failing Append writes half of its data first (a torn write); a
// failing Sync comes after data that did reach the file. Truncate works: it
// is how the log takes back what it never acknowledged.
enum class WalFault { kAppend, kSync };

// ---- The fixture -------------------------------------------------------------------------

class LogOrder;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name_) {
      if (c == '/') c = '_';
    }
    dir_ = testing::TempDir("server_" + name_);
  }

  ServerOptions Options(const std::string& data_dir) const {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = data_dir;
    o.io_threads = 2;
    o.fsync_interval_ms = 2;
    o.publish_interval_ms = 2;
    o.idle_timeout_s = 60;
    o.max_frame_bytes = 1 << 20;
    o.seed = kSeed;
    return o;
  }
  ServerOptions Options() const { return Options(dir_ + "/data"); }

  std::unique_ptr<Server> Start(const ServerOptions& o, std::unique_ptr<Model> initial = NewModel()) {
    auto s = Server::Start(o, std::move(initial));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Polls stats until documents_learned and model_version reach `n`.
  v1::StatsResponse WaitLearned(Client& c, uint64_t n, int timeout_ms = 20000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    v1::Response r;
    for (;;) {
      r = c.Call(StatsRequest());
      if (r.stats().documents_learned() >= n && r.stats().model_version() >= n) break;
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "documents_learned stayed at " << r.stats().documents_learned() << ", model_version at "
                      << r.stats().model_version() << ", waiting for " << n;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return r.stats();
  }

  // Starts a server with `o`, learns `docs` in requests of `per_request`
  // (recording the log order), waits until all are learned, copies its data
  // directory while it runs (a crash image: the base snapshot and the log),
  // shuts it down, and returns the copy's path.
  std::string LearnAndTakeCrashImage(const ServerOptions& o, const std::vector<v1::Document>& docs, size_t per_request,
                                     LogOrder* order);

  std::string name_, dir_;
};

// Learned documents by log sequence, filled from LearnResponses.
class LogOrder {
 public:
  void Add(uint64_t first, const std::vector<v1::Document>& docs) {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < docs.size(); ++i) {
      bool fresh = by_seq_.emplace(first + i, docs[i]).second;
      EXPECT_TRUE(fresh) << "sequence " << first + i << " acknowledged twice";
    }
  }
  // Every sequence in [1, n] exactly once.
  void ExpectContiguous(uint64_t n) const {
    ASSERT_EQ(by_seq_.size(), n);
    if (n > 0) {
      EXPECT_EQ(by_seq_.begin()->first, 1u);
      EXPECT_EQ(by_seq_.rbegin()->first, n);
    }
  }
  void TrainOffline(OfflineModel* m, uint64_t through) const {
    for (auto it = by_seq_.upper_bound(m->updates()); it != by_seq_.end() && it->first <= through; ++it) {
      m->Learn(it->second, it->first);
    }
  }
  size_t size() const { return by_seq_.size(); }
  // Calls f(sequence, document) for sequences 1..through in order.
  template <typename F>
  void ForEach(uint64_t through, F f) const {
    for (auto it = by_seq_.begin(); it != by_seq_.end() && it->first <= through; ++it) f(it->first, it->second);
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, v1::Document> by_seq_;
};

// Learn `docs` in requests of `per_request`, sequentially; records the log order.
uint64_t LearnAll(Client& c, const std::vector<v1::Document>& docs, size_t per_request, LogOrder* order) {
  uint64_t acked = 0;
  for (size_t i = 0; i < docs.size(); i += per_request) {
    std::vector<v1::Document> batch(docs.begin() + static_cast<std::ptrdiff_t>(i),
                                    docs.begin() + static_cast<std::ptrdiff_t>(std::min(docs.size(), i + per_request)));
    v1::Response r = c.Call(LearnRequest(batch));
    EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
    EXPECT_EQ(r.learn().acknowledged(), batch.size());
    if (r.code() == v1::Response::OK && order) order->Add(r.learn().first_sequence(), batch);
    acked += r.learn().acknowledged();
  }
  return acked;
}

// A snapshot of what the server behind `c` serves now equals the model
// trained offline, document by document, on the first `n` logged documents.
void ExpectServesOfflineModel(Client& c, const LogOrder& order, uint64_t n) {
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK) << snap.message();
  OfflineModel offline;
  order.TrainOffline(&offline, n);
  auto m = LoadSnapshot(snap.snapshot().path());
  ASSERT_TRUE(m);
  ExpectSameStatistics(*m, offline.model());
}

// ---- Concurrency -------------------------------------------------------------------------

struct Observed {
  uint64_t version;
  std::vector<v1::Document> docs;
  v1::PredictResponse response;
};

TEST_F(ServerTest, ConcurrentLearnersAndPredictorsSeeConsistentModelVersions) {
  ServerOptions o = Options();
  o.publish_every_updates = 1;  // every version V is the model after exactly V documents
  o.publish_interval_ms = 1000;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  const auto probes = ProbeDocs();
  LogOrder order;
  std::mutex obs_mu;
  std::vector<Observed> observed;
  std::atomic<int> learners_left{3};
  std::atomic<uint64_t> total_acked{0};

  auto record = [&](std::vector<Observed>& local, const std::vector<v1::Document>& docs, const v1::Response& r) {
    ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
    ASSERT_EQ(r.predict().predictions_size(), static_cast<int>(docs.size()));
    local.push_back({r.predict().model_version(), docs, r.predict()});
  };
  auto merge = [&](std::vector<Observed>& local) {
    // Versions answered on one connection never go backwards.
    for (size_t i = 1; i < local.size(); ++i) EXPECT_LE(local[i - 1].version, local[i].version);
    std::lock_guard<std::mutex> l(obs_mu);
    for (auto& x : local) observed.push_back(std::move(x));
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      Client c(srv->port());
      ASSERT_TRUE(c.connected());
      std::mt19937_64 rng(1000 + static_cast<uint64_t>(t));
      std::vector<Observed> local;
      for (int i = 0; i < 25; ++i) {
        auto docs = RandomDocs(rng, 1 + rng() % 4);
        v1::Response r = c.Call(LearnRequest(docs));
        ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
        ASSERT_EQ(r.learn().acknowledged(), docs.size());
        order.Add(r.learn().first_sequence(), docs);
        total_acked += docs.size();
        std::vector<v1::Document> ask = {probes[static_cast<size_t>(i) % probes.size()], docs[0]};
        ask[1].clear_label();
        record(local, ask, c.Call(PredictRequest(ask)));
      }
      merge(local);
      learners_left--;
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      Client c(srv->port());
      ASSERT_TRUE(c.connected());
      std::vector<Observed> local;
      for (int i = 0; i < 2000 && (learners_left > 0 || i < 10); ++i)
        record(local, probes, c.Call(PredictRequest(probes)));
      merge(local);
    });
  }
  for (auto& th : threads) th.join();
  const uint64_t n = total_acked;
  ASSERT_GT(n, 0u);
  order.ExpectContiguous(n);

  Client c(srv->port());
  auto stats = WaitLearned(c, n);
  EXPECT_EQ(stats.documents_learned(), n);
  EXPECT_EQ(stats.model_version(), n);
  EXPECT_EQ(stats.wal_sequence(), n);
  EXPECT_TRUE(stats.learning_enabled());
  EXPECT_EQ(stats.errors(), 0u);
  {
    v1::Response last = c.Call(PredictRequest(probes));
    std::vector<Observed> local;
    record(local, probes, last);
    EXPECT_EQ(last.predict().model_version(), n);
    observed.push_back(std::move(local[0]));
  }

  // Replay the log offline, checking every answer against the model of its version.
  std::sort(observed.begin(), observed.end(),
            [](const Observed& a, const Observed& b) { return a.version < b.version; });
  OfflineModel offline;
  std::set<uint64_t> versions;
  for (const auto& ob : observed) {
    ASSERT_LE(ob.version, n);
    versions.insert(ob.version);
    order.TrainOffline(&offline, ob.version);
    ASSERT_EQ(offline.updates(), ob.version);
    ASSERT_EQ(ob.response.class_names_size(), static_cast<int>(kClasses));
    for (size_t i = 0; i < ob.docs.size(); ++i) {
      const auto want = offline.Probabilities(ob.docs[i]);
      const auto& got = ob.response.predictions(static_cast<int>(i));
      ASSERT_EQ(got.probabilities_size(), static_cast<int>(kClasses));
      for (uint32_t k = 0; k < kClasses; ++k) {
        ASSERT_NEAR(got.probabilities(static_cast<int>(k)), want[k], 1e-12)
            << "version " << ob.version << ", document " << i << ", class " << k;
      }
    }
  }
  EXPECT_GE(versions.size(), 3u) << "the predictions should have seen the model at several versions";
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
}

// Many requests per write, with learns (answered late, after the log sync)
// between pings and a small max_inflight, so that parsing stops and resumes
// many times with frames still buffered: answers come back complete and in
// request order, also after the client has shut its sending side.
TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  ServerOptions o = Options();
  o.max_inflight = 8;
  o.fsync_interval_ms = 5;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  std::mt19937_64 rng(3);
  std::vector<std::pair<uint64_t, v1::Request::KindCase>> sent;
  uint64_t id = 1;
  uint64_t learned = 0;
  for (int chunk = 0; chunk < 3; ++chunk) {
    std::string bytes;
    auto add = [&](v1::Request r) {
      r.set_request_id(id);
      sent.emplace_back(id++, r.kind_case());
      bytes += FrameOf(r);
    };
    for (int i = 0; i < 4; ++i) {
      auto docs = RandomDocs(rng, 2);
      learned += docs.size();
      add(LearnRequest(docs));
      for (int j = 0; j < 60; ++j) add(PingRequest());
      add(PredictRequest(ProbeDocs()));
    }
    ASSERT_TRUE(c.SendRaw(bytes));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Last a learn, whose answer waits for the log sync, and at once a half
  // close: the server reads end-of-stream while that answer is still owed.
  v1::Request last = LearnRequest(RandomDocs(rng, 2));
  last.set_request_id(id);
  sent.emplace_back(id++, v1::Request::kLearn);
  learned += 2;
  ASSERT_TRUE(c.SendRaw(FrameOf(last)));
  c.ShutdownWrite();
  for (const auto& [want_id, kind] : sent) {
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r)) << "no answer to request " << want_id;
    ASSERT_EQ(r.request_id(), want_id);
    ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
    if (kind == v1::Request::kLearn) {
      EXPECT_EQ(r.learn().acknowledged(), 2u);
    } else if (kind == v1::Request::kPing) {
      EXPECT_TRUE(r.has_pong());
    } else {
      EXPECT_EQ(r.predict().predictions_size(), 6);
    }
  }
  EXPECT_TRUE(c.WaitClosed());
  Client s(srv->port());
  EXPECT_EQ(WaitLearned(s, learned).documents_learned(), learned);
}

// ---- Faults ----------------------------------------------------------------------------------

TEST_F(ServerTest, GarbageGetsAnErrorResponseThenTheConnectionCloses) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  {
    // Ten bytes that are not a varint.
    Client c(srv->port());
    ASSERT_TRUE(c.SendRaw(std::string(10, '\xff')));
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr("invalid frame length"));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // A well-framed body that is not a Request.
    Client c(srv->port());
    ASSERT_TRUE(c.SendRaw(std::string("\x05\xff\xff\xff\xff\xff", 6)));
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr("does not parse"));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // A good learn request, a ping and garbage in one write: the learn is
    // still being logged when the garbage is parsed. Both good requests are
    // answered, in order, then the error, then the connection closes.
    Client c(srv->port());
    std::mt19937_64 rng(5);
    v1::Request learn = LearnRequest(RandomDocs(rng, 3));
    learn.set_request_id(7);
    v1::Request ping = PingRequest();
    ping.set_request_id(8);
    ASSERT_TRUE(c.SendRaw(FrameOf(learn) + FrameOf(ping) + std::string(12, '\xff') + FrameOf(ping)));
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.request_id(), 7u);
    EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
    EXPECT_EQ(r.learn().acknowledged(), 3u);
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.request_id(), 8u);
    EXPECT_TRUE(r.has_pong());
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr("closing the connection"));
    EXPECT_TRUE(c.WaitClosed());
  }
  // The server goes on serving, and counted the bad frames.
  Client ok(srv->port());
  EXPECT_TRUE(ok.Call(PingRequest()).has_pong());
  auto stats = WaitLearned(ok, 3);
  EXPECT_GE(stats.errors(), 3u);
}

TEST_F(ServerTest, OversizedFrameIsRefusedNamingTheLimit) {
  ServerOptions o = Options();
  o.max_frame_bytes = 1024;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  {
    // A length of 2^32 + 4 must not wrap to 4 (and the 4 bytes after it,
    // a valid ping, must not be answered as one).
    Client c(srv->port());
    v1::Request ping = PingRequest();
    std::string body;
    ping.SerializeToString(&body);
    ASSERT_LT(body.size(), 128u);
    std::string varint("\x80\x80\x80\x80\x10", 5);
    varint[0] = static_cast<char>(0x80 | body.size());
    ASSERT_TRUE(c.SendRaw(varint + body));
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr(std::to_string((uint64_t{1} << 32) + body.size()) + " bytes is over the limit"));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // A real learn request over the limit.
    Client c(srv->port());
    std::mt19937_64 rng(7);
    v1::Request big = LearnRequest(RandomDocs(rng, 200));
    big.set_request_id(1);  // what Send stamps, so that ByteSizeLong is the frame's
    ASSERT_GT(big.ByteSizeLong(), 1024u);
    c.Send(big);
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr("limit of 1024 bytes"));
    EXPECT_THAT(r.message(), HasSubstr(std::to_string(big.ByteSizeLong())));
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // Only the header of a 1 GB frame: refused before any body arrives.
    Client c(srv->port());
    ASSERT_TRUE(c.SendRaw(std::string("\x80\x80\x80\x80\x04", 5)));
    v1::Response r;
    ASSERT_TRUE(c.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(r.message(), HasSubstr("1073741824 bytes is over the limit of 1024 bytes"));
    EXPECT_TRUE(c.WaitClosed());
  }
  Client ok(srv->port());
  EXPECT_TRUE(ok.Call(PingRequest()).has_pong());
  auto s = ok.Call(StatsRequest()).stats();
  EXPECT_EQ(s.documents_learned(), 0u);
  EXPECT_EQ(s.wal_sequence(), 0u);
}

// A request of more documents than --max-request-documents is refused
// whole, before its documents are parsed, with its request id; the
// connection goes on (issue 41 item 2: a 15 MB frame of tiny documents took
// 4.8 GB). The answer's bound (--max-answer-bytes) is refused the same way.
TEST_F(ServerTest, RequestsOverTheDocumentAndAnswerLimitsAreRefusedWhole) {
  ServerOptions o = Options();
  o.max_request_documents = 50;
  o.max_answer_bytes = 2048;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(9);
  Client c(srv->port());
  for (const bool learn : {true, false}) {
    v1::Request req = learn ? LearnRequest(RandomDocs(rng, 51)) : PredictRequest(RandomDocs(rng, 51));
    v1::Response r = c.Call(req);
    EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST) << r.ShortDebugString().substr(0, 300);
    EXPECT_THAT(r.message(), HasSubstr("request holds 51 documents, over the limit of 50 (--max-request-documents)"));
    EXPECT_NE(r.request_id(), 0u);
  }
  v1::Response big = c.Call(PredictRequest(RandomDocs(rng, 50)));  // within 50, but past 2 KiB of answer
  EXPECT_EQ(big.code(), v1::Response::INVALID_REQUEST);
  EXPECT_THAT(big.message(), HasSubstr("(--max-answer-bytes): send at most"));
  v1::Response ok = c.Call(PredictRequest(RandomDocs(rng, 5)));
  EXPECT_EQ(ok.code(), v1::Response::OK) << ok.message();
  EXPECT_EQ(ok.predict().predictions_size(), 5);
  v1::Response learned = c.Call(LearnRequest(RandomDocs(rng, 50)));
  EXPECT_EQ(learned.code(), v1::Response::OK) << learned.message();
}

TEST_F(ServerTest, ClientsThatDisconnectOrStallMidFrameDoNotDisturbOthers) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(11);
  const std::string frame = FrameOf(LearnRequest(RandomDocs(rng, 5)));
  Client stalled(srv->port());
  ASSERT_TRUE(stalled.SendRaw(frame.substr(0, frame.size() / 2)));  // and nothing more
  for (int i = 0; i < 5; ++i) {
    Client gone(srv->port());
    ASSERT_TRUE(gone.SendRaw(frame.substr(0, 1 + frame.size() * static_cast<size_t>(i) / 5)));
    gone.Close();
  }
  Client ok(srv->port());
  LogOrder order;
  const uint64_t acked = LearnAll(ok, RandomDocs(rng, 12), 4, &order);
  auto stats = WaitLearned(ok, acked);
  EXPECT_EQ(stats.documents_learned(), acked);  // nothing of the half-sent requests
  EXPECT_EQ(stats.wal_sequence(), acked);
  EXPECT_EQ(ok.Call(PredictRequest(ProbeDocs())).code(), v1::Response::OK);
  // The stalled client may still finish its frame and gets its answer.
  ASSERT_TRUE(stalled.SendRaw(frame.substr(frame.size() / 2)));
  v1::Response r;
  ASSERT_TRUE(stalled.Receive(&r));
  EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
  EXPECT_EQ(r.learn().acknowledged(), 5u);
  EXPECT_EQ(r.learn().first_sequence(), acked + 1);
}

// A client that sends requests and never reads the answers: its connection
// stops being read once max_inflight answers are owed (so its own sends
// block), other clients are answered promptly, and once its writes have made
// no progress for the idle timeout the server closes it.
TEST_F(ServerTest, ClientThatNeverReadsDoesNotStallOthers) {
  ServerOptions o = Options();
  o.max_inflight = 16;
  o.idle_timeout_s = 3;
  o.http = "127.0.0.1:0";
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client hog(srv->port(), /*rcvbuf=*/4096, /*sndbuf=*/4096);
  ASSERT_TRUE(hog.connected());
  ::fcntl(hog.fd(), F_SETFL, ::fcntl(hog.fd(), F_GETFL) | O_NONBLOCK);
  std::vector<v1::Document> many;
  for (int i = 0; i < 40; ++i) many.push_back(ProbeDocs()[static_cast<size_t>(i) % 6]);
  const std::string frame = FrameOf(PredictRequest(many));
  // Send until the server stops taking requests (the socket stays full).
  size_t sent_bytes = 0, off = 0;
  auto blocked_since = Clock::now();
  bool blocked = false;
  while (sent_bytes < (256u << 20)) {
    ssize_t n = ::send(hog.fd(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      sent_bytes += static_cast<size_t>(n);
      off = (off + static_cast<size_t>(n)) % frame.size();
      blocked = false;
      continue;
    }
    if (n < 0 && (errno == ECONNRESET || errno == EPIPE)) {
      // On a slow machine the idle timeout can already have closed the
      // stalled connection: it no longer holds anything either.
      blocked = true;
      break;
    }
    ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << std::strerror(errno);
    if (!blocked) {
      blocked = true;
      blocked_since = Clock::now();
    } else if (Clock::now() - blocked_since > std::chrono::milliseconds(300)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(blocked) << "the server kept reading a client that reads nothing (" << sent_bytes << " bytes)";
  // Others are answered promptly (generous bound, not a performance test).
  Client other(srv->port());
  std::mt19937_64 rng(13);
  const auto t0 = Clock::now();
  EXPECT_TRUE(other.Call(PingRequest(), 5000).has_pong());
  EXPECT_EQ(other.Call(LearnRequest(RandomDocs(rng, 3)), 5000).code(), v1::Response::OK);
  EXPECT_EQ(other.Call(PredictRequest(ProbeDocs()), 5000).code(), v1::Response::OK);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  // The hog's stalled connection is closed after the idle timeout.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::string metrics;
  while (Clock::now() < deadline) {
    // `other` stays active (it is not idle), so the one open connection left is its own.
    EXPECT_TRUE(other.Call(PingRequest(), 5000).has_pong());
    metrics = HttpGet(srv->http_port(), "/metrics");
    if (metrics.find("\ntributary_open_connections 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto at = metrics.find("\ntributary_open_connections ");
  EXPECT_EQ(at == std::string::npos ? metrics : metrics.substr(at + 1, metrics.find('\n', at + 1) - at - 1),
            "tributary_open_connections 1")
      << "the connection that never reads was not closed";
  EXPECT_TRUE(other.Call(PingRequest(), 5000).has_pong());
}

// The write-ahead log fails: the request gets UNAVAILABLE, learning is
// disabled (stats, /healthz), later learn requests are refused, predictions
// go on, and a restart with working files has learned exactly the
// documents acknowledged before the failure.
class ServerWalFaultTest : public ServerTest, public ::testing::WithParamInterface<WalFault> {};

TEST_P(ServerWalFaultTest, LogWriteErrorDisablesLearningButLosesNothingAcknowledged) {
  const bool append = GetParam() == WalFault::kAppend;
  testing::FaultEnv files;
  files.Add({append ? testing::FaultEnv::Op::kAppend : testing::FaultEnv::Op::kSync, "wal-", /*after=*/4,
             append ? ENOSPC : EIO, /*torn=*/append});
  ServerOptions o = Options();
  o.env = &files;
  o.fsync_every_request = true;  // one Append + one Sync per learn request
  o.http = "127.0.0.1:0";
  o.wal_retry_interval_ms = 0;  // stays off until restarted (resuming: LearningResumesWhenTheLogTakesDataAgain)
  std::mt19937_64 rng(17);
  LogOrder order;
  uint64_t acked = 0;
  {
    auto srv = Start(o);
    ASSERT_TRUE(srv);
    Client c(srv->port());
    Client p(srv->port());
    for (int i = 0; i < 4; ++i) acked += LearnAll(c, RandomDocs(rng, 3), 3, &order);
    ASSERT_EQ(acked, 12u);
    v1::Response failed = c.Call(LearnRequest(RandomDocs(rng, 3)));
    EXPECT_EQ(failed.code(), v1::Response::UNAVAILABLE);
    EXPECT_THAT(failed.message(), HasSubstr("injected"));
    EXPECT_EQ(files.fired(), 1);
    auto stats = WaitLearned(p, acked);
    EXPECT_FALSE(stats.learning_enabled());
    EXPECT_GT(stats.errors(), 0u);
    EXPECT_EQ(stats.documents_learned(), acked);
    EXPECT_EQ(stats.wal_sequence(), acked);
    for (int i = 0; i < 3; ++i) {
      v1::Response r = c.Call(LearnRequest(RandomDocs(rng, 2)));
      EXPECT_EQ(r.code(), v1::Response::UNAVAILABLE);
      EXPECT_THAT(r.message(), HasSubstr("learning is disabled"));
    }
    EXPECT_EQ(files.fired(), 1);  // refused before reaching the log
    v1::Response pred = p.Call(PredictRequest(ProbeDocs()));
    EXPECT_EQ(pred.code(), v1::Response::OK) << pred.message();
    EXPECT_EQ(pred.predict().model_version(), acked);
    EXPECT_EQ(pred.predict().predictions_size(), 6);
    std::string health = HttpGet(srv->http_port(), "/healthz");
    EXPECT_THAT(health, HasSubstr("503"));
    EXPECT_THAT(health, HasSubstr("learning disabled"));
    EXPECT_THAT(HttpGet(srv->http_port(), "/metrics"), HasSubstr("tributary_errors_total{kind=\"wal\"} 1\n"));
    srv->Shutdown();
    EXPECT_TRUE(srv->Wait().ok());
  }
  for (int restart = 0; restart < 2; ++restart) {
    ServerOptions normal = Options();
    auto srv = Start(normal, nullptr);
    ASSERT_TRUE(srv);
    Client c(srv->port());
    auto stats = c.Call(StatsRequest()).stats();
    EXPECT_EQ(stats.documents_learned(), acked) << "restart " << restart;
    EXPECT_EQ(stats.model_version(), acked);
    EXPECT_EQ(stats.wal_sequence(), acked);
    EXPECT_TRUE(stats.learning_enabled());
    ExpectServesOfflineModel(c, order, acked);
    srv->Shutdown();
    EXPECT_TRUE(srv->Wait().ok());
  }
  // Learning works again on a healthy log, numbering on from the last acknowledged document.
  auto srv = Start(Options(), nullptr);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  v1::Response r = c.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
  EXPECT_EQ(r.learn().first_sequence(), acked + 1);
}

INSTANTIATE_TEST_SUITE_P(Modes, ServerWalFaultTest, ::testing::Values(WalFault::kAppend, WalFault::kSync),
                         [](const ::testing::TestParamInfo<WalFault>& p) {
                           return p.param == WalFault::kAppend ? "AppendFails" : "SyncFails";
                         });

// Shutdown while clients are learning and predicting: it drains (every
// acknowledged document is learned and in the final snapshot), refuses what
// comes after, and a restart finds everything logged without replaying.
TEST_F(ServerTest, ShutdownUnderLoadKeepsEverythingAcknowledged) {
  const std::string data = dir_ + "/data";
  auto srv = Start(Options(data));
  ASSERT_TRUE(srv);
  std::atomic<uint64_t> acked{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      Client c(srv->port());
      std::mt19937_64 rng(700 + static_cast<uint64_t>(t));
      for (int i = 0; i < 100000; ++i) {
        auto docs = RandomDocs(rng, 3);
        uint64_t id = c.Send(LearnRequest(docs));
        v1::Response r;
        if (!c.Receive(&r, 20000)) break;  // closed at the end of the drain
        ASSERT_EQ(r.request_id(), id);
        if (r.code() != v1::Response::OK) {
          EXPECT_EQ(r.code(), v1::Response::UNAVAILABLE) << r.message();
          EXPECT_THAT(r.message(), HasSubstr("shutting down"));
          refused++;
          break;
        }
        acked += r.learn().acknowledged();
      }
    });
  }
  threads.emplace_back([&] {
    Client c(srv->port());
    for (int i = 0; i < 100000; ++i) {
      c.Send(i % 10 == 9 ? SnapshotRequest() : PredictRequest(ProbeDocs()));
      v1::Response r;
      if (!c.Receive(&r, 20000) || r.code() != v1::Response::OK) break;
    }
  });
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (acked < 60 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE(acked.load(), 60u);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  srv.reset();  // closes the connections still open
  for (auto& th : threads) th.join();
  const uint64_t a = acked;
  auto rs = Start(Options(data), nullptr);
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->recovery().from_snapshot);
  EXPECT_EQ(rs->recovery().replayed, 0u);  // the final snapshot has everything
  Client c(rs->port());
  auto stats = c.Call(StatsRequest()).stats();
  // Answers lost when the connections closed may leave logged documents
  // unacknowledged, never the other way round.
  EXPECT_GE(stats.documents_learned(), a);
  EXPECT_EQ(stats.documents_learned(), stats.wal_sequence());
  EXPECT_EQ(stats.documents_learned(), rs->recovery().snapshot_sequence);
}

TEST_F(ServerTest, IdleConnectionsAreClosed) {
  ServerOptions o = Options();
  o.idle_timeout_s = 1;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  EXPECT_TRUE(c.Call(PingRequest()).has_pong());
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.WaitClosed(10000));
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(500));
}

// ---- Limits and bad requests ---------------------------------------------------------------

TEST_F(ServerTest, AuthTokenIsRequiredWhenSet) {
  ServerOptions o = Options();
  o.auth_token = "s3cret-token";
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(19);
  for (const std::string tok : {"", "s3cret-tokem", "s3cret-toke", "s3cret-token-", "S3CRET-TOKEN"}) {
    // One guess per connection: the answer, then the server closes it.
    Client guess(srv->port());
    v1::Request ping = PingRequest();
    ping.set_auth_token(tok);
    v1::Response r = guess.Call(ping);
    EXPECT_EQ(r.code(), v1::Response::UNAUTHENTICATED) << "token '" << tok << "'";
    EXPECT_FALSE(r.has_pong());
    EXPECT_TRUE(guess.WaitClosed(5000)) << "the connection stayed open after a wrong token";
    Client guess2(srv->port());
    v1::Request learn = LearnRequest(RandomDocs(rng, 2));
    learn.set_auth_token(tok);
    EXPECT_EQ(guess2.Call(learn).code(), v1::Response::UNAUTHENTICATED);
  }
  Client c(srv->port());
  c.set_token("s3cret-token");
  EXPECT_TRUE(c.Call(PingRequest()).has_pong());
  auto s = c.Call(StatsRequest());
  EXPECT_EQ(s.code(), v1::Response::OK);
  EXPECT_EQ(s.stats().wal_sequence(), 0u);  // nothing unauthenticated was logged
  EXPECT_EQ(s.stats().errors(), 10u);
  v1::Response l = c.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(l.code(), v1::Response::OK) << l.message();
  EXPECT_EQ(l.learn().first_sequence(), 1u);
}

// Scoped tokens (issue 42): a predict-only token predicts and reads stats,
// and is refused learning and snapshots with PERMISSION_DENIED on a
// connection that stays open (no wrong guess); a learn-only token learns
// and cannot predict; the full token does everything.
TEST_F(ServerTest, ScopedTokensAllowOnlyTheirScopes) {
  ServerOptions o = Options();
  o.auth_token = "admin-token";
  o.scoped_tokens = {{"predict-token", kScopePredict}, {"learn-token", kScopeLearn}};
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(23);
  Client p(srv->port());
  p.set_token("predict-token");
  v1::Response r = p.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(r.code(), v1::Response::PERMISSION_DENIED) << r.message();
  EXPECT_THAT(r.message(), HasSubstr("this token may predict; this request needs learn"));
  EXPECT_EQ(p.Call(SnapshotRequest()).code(), v1::Response::PERMISSION_DENIED);
  EXPECT_EQ(p.Call(PredictRequest(ProbeDocs())).code(), v1::Response::OK) << "the connection stays open";
  EXPECT_EQ(p.Call(StatsRequest()).code(), v1::Response::OK);
  Client l(srv->port());
  l.set_token("learn-token");
  v1::Response learned = l.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(learned.code(), v1::Response::OK) << learned.message();
  EXPECT_EQ(l.Call(PredictRequest(ProbeDocs())).code(), v1::Response::PERMISSION_DENIED);
  Client a(srv->port());
  a.set_token("admin-token");
  EXPECT_EQ(a.Call(SnapshotRequest()).code(), v1::Response::OK);
  auto s = a.Call(StatsRequest()).stats();
  EXPECT_EQ(s.wal_sequence(), 2u);  // only the learn token's documents
  EXPECT_EQ(s.errors(), 3u);        // the three refusals, counted
  // A scoped token is no wrong guess, but another string still is.
  Client w(srv->port());
  w.set_token("predict-tokem");
  EXPECT_EQ(w.Call(PingRequest()).code(), v1::Response::UNAUTHENTICATED);
  EXPECT_TRUE(w.WaitClosed(5000));
}

TEST_F(ServerTest, ConnectionsOverTheLimitGetOverloaded) {
  ServerOptions o = Options();
  o.max_connections = 2;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  auto a = std::make_unique<Client>(srv->port());
  Client b(srv->port());
  EXPECT_TRUE(a->Call(PingRequest()).has_pong());
  EXPECT_TRUE(b.Call(PingRequest()).has_pong());
  {
    Client extra(srv->port());  // reads without sending
    v1::Response r;
    ASSERT_TRUE(extra.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::OVERLOADED);
    EXPECT_THAT(r.message(), HasSubstr("limit 2"));
    EXPECT_TRUE(extra.WaitClosed());
  }
  {
    Client extra(srv->port());  // sends first, then reads
    extra.Send(PingRequest());
    v1::Response r;
    ASSERT_TRUE(extra.Receive(&r));
    EXPECT_EQ(r.code(), v1::Response::OVERLOADED);
  }
  // A slot frees up when a connection closes.
  a.reset();
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    Client again(srv->port());
    again.Send(PingRequest());
    v1::Response r;
    served = again.Receive(&r) && r.code() == v1::Response::OK && r.has_pong();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
  EXPECT_TRUE(b.Call(PingRequest()).has_pong());
}

TEST_F(ServerTest, InvalidRequestsAreRefusedAndNothingIsLearned) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  Client c(srv->port());
  std::mt19937_64 rng(23);
  {
    v1::Request r;
    r.mutable_learn();
    v1::Response resp = c.Call(r);
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("no documents"));
  }
  {
    v1::Response resp = c.Call(v1::Request());
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("no kind"));
  }
  {
    auto docs = RandomDocs(rng, 3);
    docs[1].set_label("c9");
    v1::Response resp = c.Call(LearnRequest(docs));
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("label 'c9' is not a class"));
  }
  {
    auto docs = RandomDocs(rng, 3);
    docs[2].add_term_ids(kVocab);
    docs[2].add_term_counts(1);
    v1::Response resp = c.Call(LearnRequest(docs));
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("term id 50 out of range"));
  }
  {
    auto docs = RandomDocs(rng, 2);
    docs[0].clear_label();  // ncll needs labels
    v1::Response resp = c.Call(LearnRequest(docs));
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("needs a label"));
  }
  {
    auto docs = RandomDocs(rng, 2);
    docs[1].clear_term_ids();
    docs[1].clear_term_counts();
    v1::Response resp = c.Call(LearnRequest(docs));
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("empty document"));
  }
  {
    // A predict request whose documents are all bad is refused whole,
    // naming the first.
    auto docs = ProbeDocs();
    for (auto& d : docs) {
      d.add_term_ids(1000);
      d.add_term_counts(1);
    }
    v1::Response resp = c.Call(PredictRequest(docs));
    EXPECT_EQ(resp.code(), v1::Response::INVALID_REQUEST);
    EXPECT_THAT(resp.message(), HasSubstr("term id 1000 out of range"));
    EXPECT_THAT(resp.message(), HasSubstr("document #0"));
  }
  {
    // One bad document among good ones: it alone is refused, in its place,
    // saying why; the others are answered (issue 42).
    auto docs = ProbeDocs();
    ASSERT_GE(docs.size(), 4u);
    docs[3].add_term_ids(1000);
    docs[3].add_term_counts(1);
    docs[1].clear_term_ids();
    docs[1].clear_term_counts();
    v1::Response resp = c.Call(PredictRequest(docs));
    ASSERT_EQ(resp.code(), v1::Response::OK) << resp.message();
    const auto& p = resp.predict();
    ASSERT_EQ(p.predictions_size(), static_cast<int>(docs.size()));
    for (int i = 0; i < p.predictions_size(); ++i) {
      EXPECT_EQ(p.predictions(i).index(), static_cast<uint64_t>(i));  // in the request's order
      const bool bad = i == 1 || i == 3;
      EXPECT_EQ(p.predictions(i).error().empty(), !bad) << i << ": " << p.predictions(i).error();
      EXPECT_EQ(p.predictions(i).probabilities_size(), bad ? 0 : static_cast<int>(kClasses)) << i;
      EXPECT_EQ(p.predictions(i).predicted().empty(), bad) << i;
    }
    EXPECT_THAT(p.predictions(3).error(), HasSubstr("term id 1000 out of range"));
    EXPECT_THAT(p.predictions(1).error(), HasSubstr("empty document"));
  }
  // The connection survives refusals; nothing was logged or learned.
  auto stats = c.Call(StatsRequest()).stats();
  EXPECT_EQ(stats.wal_sequence(), 0u);
  EXPECT_EQ(stats.documents_learned(), 0u);
  EXPECT_EQ(stats.model_version(), 0u);
  EXPECT_EQ(stats.errors(), 7u);
  v1::Response ok = c.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(ok.code(), v1::Response::OK);
  EXPECT_EQ(ok.learn().first_sequence(), 1u);
}

// Raw text in the binary protocol (Document.text, issue 14): the server
// tokenizes it with the library tokenizer, so a document sent as text teaches
// exactly what the same document sent as term ids teaches; the log keeps the
// text and replay after a crash tokenizes it again to the same model; text
// without a word is refused naming the document, and nothing is logged.
TEST_F(ServerTest, RawTextDocumentsLearnLikeTheirTermIds) {
  std::mt19937_64 rng(41);
  const std::vector<v1::Document> ids = RandomDocs(rng, 60);
  std::vector<v1::Document> texts;
  for (const v1::Document& d : ids) {
    v1::Document t;
    t.set_label(d.label());
    std::string text;
    for (int j = 0; j < d.term_ids_size(); ++j) {
      for (int r = 0; r < static_cast<int>(d.term_counts(j)); ++r) {
        // Case, punctuation and spacing vary; the terms do not.
        text += (r % 2 ? "T" : "t") + std::to_string(d.term_ids(j)) + (j % 3 == 0 ? ", " : " -- ");
      }
    }
    t.set_text(text);
    texts.push_back(t);
  }
  LogOrder order;
  const std::string image = LearnAndTakeCrashImage(Options(), texts, 1, &order);
  order.ExpectContiguous(ids.size());
  OfflineModel offline;  // the term-id versions, in log order
  for (size_t i = 0; i < ids.size(); ++i) offline.Learn(ids[i], i + 1);

  auto srv = Start(Options(image), nullptr);  // replays the logged text
  ASSERT_TRUE(srv);
  EXPECT_EQ(srv->recovery().replayed, ids.size());
  Client c(srv->port());
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK) << snap.message();
  auto m = LoadSnapshot(snap.snapshot().path());
  ASSERT_TRUE(m);
  ExpectSameStatistics(*m, offline.model());

  v1::Document probe = ProbeDocs()[0], probe_text;
  for (int j = 0; j < probe.term_ids_size(); ++j) {
    for (int r = 0; r < static_cast<int>(probe.term_counts(j)); ++r) {
      probe_text.mutable_text()->append("t" + std::to_string(probe.term_ids(j)) + " ");
    }
  }
  v1::Response a = c.Call(PredictRequest({probe})), b = c.Call(PredictRequest({probe_text}));
  ASSERT_EQ(a.code(), v1::Response::OK) << a.message();
  ASSERT_EQ(b.code(), v1::Response::OK) << b.message();
  for (uint32_t k = 0; k < kClasses; ++k) {
    EXPECT_EQ(a.predict().predictions(0).probabilities(static_cast<int>(k)),
              b.predict().predictions(0).probabilities(static_cast<int>(k)));
  }

  std::vector<v1::Document> bad = {texts[0], texts[1]};
  bad[1].set_id("blank");
  bad[1].set_text("  ... !!! ");
  v1::Response r = c.Call(LearnRequest(bad));
  EXPECT_EQ(r.code(), v1::Response::INVALID_REQUEST);
  EXPECT_THAT(r.message(), HasSubstr("id 'blank'"));
  EXPECT_THAT(r.message(), HasSubstr("its text has no words"));
  EXPECT_EQ(c.Call(StatsRequest()).stats().wal_sequence(), ids.size());
}

// ---- Backpressure ---------------------------------------------------------------------------

TEST_F(ServerTest, BoundedQueueAppliesBackpressureWithoutLoss) {
  ServerOptions o = Options();
  o.queue_capacity = 5;
  o.fsync_interval_ms = 3;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  LogOrder order;
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Client c(srv->port());
      ASSERT_TRUE(c.connected());
      std::mt19937_64 rng(500 + static_cast<uint64_t>(t));
      // All requests at once (pipelined), then all answers.
      std::vector<std::vector<v1::Document>> reqs;
      std::string bytes;
      for (int i = 0; i < 30; ++i) {
        // Mostly 2-4 documents; now and then more than the whole queue.
        reqs.push_back(RandomDocs(rng, i % 10 == 9 ? 7 : 2 + rng() % 3));
        v1::Request r = LearnRequest(reqs.back());
        r.set_request_id(static_cast<uint64_t>(i + 1));
        bytes += FrameOf(r);
      }
      ASSERT_TRUE(c.SendRaw(bytes));
      for (int i = 0; i < 30; ++i) {
        v1::Response r;
        ASSERT_TRUE(c.Receive(&r)) << "client " << t << " request " << i + 1 << " unanswered";
        ASSERT_EQ(r.request_id(), static_cast<uint64_t>(i + 1));
        ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
        ASSERT_EQ(r.learn().acknowledged(), reqs[static_cast<size_t>(i)].size());
        order.Add(r.learn().first_sequence(), reqs[static_cast<size_t>(i)]);
        total += reqs[static_cast<size_t>(i)].size();
      }
    });
  }
  for (auto& th : threads) th.join();
  order.ExpectContiguous(total);
  Client c(srv->port());
  auto stats = WaitLearned(c, total);
  EXPECT_EQ(stats.documents_learned(), total);
  EXPECT_EQ(stats.wal_sequence(), total);
  EXPECT_EQ(stats.queue_depth(), 0u);
  EXPECT_EQ(stats.errors(), 0u);
  // And the model is the offline model of the log order.
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK);
  EXPECT_EQ(snap.snapshot().wal_sequence(), total);
  OfflineModel offline;
  order.TrainOffline(&offline, total);
  auto m = LoadSnapshot(snap.snapshot().path());
  ASSERT_TRUE(m);
  ExpectSameStatistics(*m, offline.model());
}

// ---- Durability -----------------------------------------------------------------------------

TEST_F(ServerTest, ShutdownSnapshotIsRecoveredBitForBit) {
  std::mt19937_64 rng(29);
  LogOrder order;
  uint64_t n = 0;
  const std::string data = dir_ + "/data";
  {
    auto srv = Start(Options(data));
    ASSERT_TRUE(srv);
    Client c(srv->port());
    n = LearnAll(c, RandomDocs(rng, 150), 7, &order);
    srv->Shutdown();  // no waiting for the learner: Shutdown drains
    EXPECT_TRUE(srv->Wait().ok());
    srv->Shutdown();  // idempotent
  }
  order.ExpectContiguous(n);
  OfflineModel offline;
  order.TrainOffline(&offline, n);
  auto saved = LoadSnapshot(data + "/model.trib");
  ASSERT_TRUE(saved);
  ExpectSameStatistics(*saved, offline.model());
  uint64_t saved_sequence = 0;
  ASSERT_TRUE(Model::Load(data + "/model.trib", testing::BuiltinRegistry(), nullptr, &saved_sequence).ok());
  EXPECT_EQ(saved_sequence, n);

  auto srv = Start(Options(data), nullptr);
  ASSERT_TRUE(srv);
  EXPECT_TRUE(srv->recovery().from_snapshot);
  EXPECT_EQ(srv->recovery().snapshot_sequence, n);
  EXPECT_EQ(srv->recovery().replayed, 0u);
  EXPECT_EQ(srv->recovery().torn_bytes, 0u);
  Client c(srv->port());
  auto stats = c.Call(StatsRequest()).stats();
  EXPECT_EQ(stats.documents_learned(), n);
  EXPECT_EQ(stats.model_version(), n);
  EXPECT_EQ(stats.wal_sequence(), n);
  v1::Response pred = c.Call(PredictRequest(ProbeDocs()));
  ASSERT_EQ(pred.code(), v1::Response::OK);
  EXPECT_EQ(pred.predict().model_version(), n);
  for (int i = 0; i < pred.predict().predictions_size(); ++i) {
    auto want = offline.Probabilities(ProbeDocs()[static_cast<size_t>(i)]);
    for (uint32_t k = 0; k < kClasses; ++k) {
      EXPECT_NEAR(pred.predict().predictions(i).probabilities(static_cast<int>(k)), want[k], 1e-12);
    }
  }
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK);
  auto again = LoadSnapshot(snap.snapshot().path());
  ASSERT_TRUE(again);
  ExpectSameStatistics(*again, offline.model());
  // Learning goes on where it stopped.
  v1::Response r = c.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(r.learn().first_sequence(), n + 1);
}

// Copies a live server's data directory (its state after a kill -9: the
// latest snapshot, the log with everything acknowledged) once it is quiet.
// The log's acknowledgement mark may still be rewritten (it lags the last
// acknowledgement by up to ack_mark_interval_ms): it is copied first, so the
// copy never holds a mark ahead of its log, and the mark's temporaries
// (which come and go) are left out.
void CopyDataDir(const std::string& from, const std::string& to) {
  fs::remove_all(to);
  fs::create_directories(to + "/wal");
  if (fs::exists(from + "/wal/wal.acked")) fs::copy_file(from + "/wal/wal.acked", to + "/wal/wal.acked");
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const std::string rel = fs::relative(e.path(), from).string();
    if (rel == "wal/wal.acked" || e.path().filename().string().find(".tmp.") != std::string::npos) continue;
    std::error_code ec;
    if (e.is_directory(ec)) {
      fs::create_directories(to + "/" + rel);
    } else {
      fs::copy_file(e.path(), to + "/" + rel, fs::copy_options::overwrite_existing, ec);
      if (ec && fs::exists(e.path())) ADD_FAILURE() << "copying " << e.path() << ": " << ec.message();
    }
  }
}

std::string ServerTest::LearnAndTakeCrashImage(const ServerOptions& o, const std::vector<v1::Document>& docs,
                                               size_t per_request, LogOrder* order) {
  auto srv = Start(o);
  EXPECT_TRUE(srv);
  if (!srv) return "";
  Client c(srv->port());
  const uint64_t n = LearnAll(c, docs, per_request, order);
  WaitLearned(c, n);
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  return image;
}

std::string NewestSegment(const std::string& data_dir) {
  std::vector<std::string> segs;
  for (const auto& e : fs::directory_iterator(data_dir + "/wal")) {
    if (e.path().extension() == ".log") segs.push_back(e.path().string());
  }
  std::sort(segs.begin(), segs.end());
  return segs.empty() ? "" : segs.back();
}

// Recovery from a crash image: periodic snapshots, rolled and deleted log
// segments, replay of the tail, and a torn write at the end of the newest
// segment, which is dropped (also on the restart after that one).
TEST_F(ServerTest, CrashImageRecoversSnapshotPlusLogAndDropsATornTail) {
  ServerOptions o = Options();
  o.snapshot_every_documents = 60;
  o.wal_segment_bytes = 1500;  // several segments
  std::mt19937_64 rng(31);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  // 100 documents (a periodic snapshot after 60 of them), a requested
  // snapshot at exactly 100, then a tail of 30 that only the log holds
  // (fewer than 60 since the last snapshot: no periodic one).
  uint64_t n = LearnAll(c, RandomDocs(rng, 100), 3, &order);
  WaitLearned(c, n);
  for (int i = 0; i < 500 && !fs::exists(o.data_dir + "/model.trib"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(fs::exists(o.data_dir + "/model.trib")) << "no periodic snapshot";
  v1::Response requested = c.Call(SnapshotRequest());
  ASSERT_EQ(requested.code(), v1::Response::OK) << requested.message();
  ASSERT_EQ(requested.snapshot().wal_sequence(), 100u);
  n += LearnAll(c, RandomDocs(rng, 30), 3, &order);
  order.ExpectContiguous(n);
  WaitLearned(c, n);
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);
  // The log rolled into several segments, and the first ones, covered by a
  // snapshot, were deleted.
  size_t segments = 0;
  for (const auto& e : fs::directory_iterator(image + "/wal")) segments += e.path().extension() == ".log";
  EXPECT_GE(segments, 1u);
  EXPECT_FALSE(fs::exists(image + "/wal/wal-00000000000000000001.log"));

  // A torn write: the start of a record that never finished.
  const std::string newest = NewestSegment(image);
  ASSERT_FALSE(newest.empty());
  const std::string torn("\x40\x08\x83\x01\x12\x10garbage", 12);
  std::ofstream(newest, std::ios::binary | std::ios::app) << torn;

  // The recovered model is the snapshot's plus the log tail: offline, the
  // model trained on the first snapshot_sequence documents, saved and
  // reloaded, then trained on the rest. (Against uninterrupted training see
  // RecoveryAcrossASnapshotEqualsUninterruptedTraining.)
  OfflineModel offline;
  for (int restart = 0; restart < 2; ++restart) {
    ServerOptions io = Options(image);
    auto rs = Start(io, nullptr);
    ASSERT_TRUE(rs) << "restart " << restart;
    if (restart == 0) {
      const uint64_t at = rs->recovery().snapshot_sequence;
      EXPECT_TRUE(rs->recovery().from_snapshot);
      EXPECT_EQ(at, 100u);
      EXPECT_EQ(rs->recovery().replayed, 30u);
      EXPECT_EQ(rs->recovery().torn_bytes, torn.size());
      order.TrainOffline(&offline, at);
      offline.SaveAndReload(dir_ + "/offline.trib");
      order.TrainOffline(&offline, n);
    } else {
      EXPECT_EQ(rs->recovery().torn_bytes, 0u);  // the tail was cut off the first time
    }
    Client rc(rs->port());
    auto stats = rc.Call(StatsRequest()).stats();
    EXPECT_EQ(stats.documents_learned(), n);
    EXPECT_EQ(stats.wal_sequence(), n);
    v1::Response snap = rc.Call(SnapshotRequest());
    ASSERT_EQ(snap.code(), v1::Response::OK);
    EXPECT_EQ(snap.snapshot().wal_sequence(), n);
    auto m = LoadSnapshot(snap.snapshot().path());
    ASSERT_TRUE(m);
    ExpectSameStatistics(*m, offline.model());
    rs->Shutdown();
    EXPECT_TRUE(rs->Wait().ok());
  }
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
}

// The issue's promise: after a crash the recovered model equals, bit for
// bit, the model trained offline without interruption on the acknowledged
// documents. Across a snapshot this does not hold today: the multinomial
// family keeps running totals (R[k], the class total) updated incrementally
// in its check-step, which Model::Save does not record and Load recomputes
// by summation, so they differ in the last bits and every later step
// diverges slightly (~1e-14). Needs a library fix (snapshot the family's
// totals, or keep them as exact functions of raw); enable then.
TEST_F(ServerTest, RecoveryAcrossASnapshotEqualsUninterruptedTraining) {
  ServerOptions o = Options();
  o.snapshot_every_documents = 40;
  std::mt19937_64 rng(41);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  const uint64_t n = LearnAll(c, RandomDocs(rng, 100), 3, &order);
  WaitLearned(c, n);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);
  auto rs = Start(Options(image), nullptr);
  ASSERT_TRUE(rs);
  ASSERT_GT(rs->recovery().replayed, 0u);
  Client rc(rs->port());
  ExpectServesOfflineModel(rc, order, n);
}

// A family with SEP hooks (emsd-mixture) is learned by SEP (engine auto):
// the served model equals the model SepLearner trains offline on the
// documents in log order, bit for bit; a crash image (snapshot + log tail)
// recovers the same model; --engine sdem is refused for it; EP is not a
// server engine.
std::unique_ptr<Model> NewSepModel() {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kVocab, kClasses));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("emsd-mixture"), testing::BuiltinLoss("nll"), *schema,
                         {{"components", "3"}}, kSeed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = kEffectiveSize;
  return std::move(m).value();
}

TEST_F(ServerTest, SepFamilyIsLearnedBySepLikeOfflineAndRecovered) {
  ServerOptions o = Options();
  std::mt19937_64 rng(43);
  LogOrder order;
  auto srv = Start(o, NewSepModel());
  ASSERT_TRUE(srv);
  Client c(srv->port());
  const auto docs = RandomDocs(rng, 150);
  uint64_t n = LearnAll(c, std::vector<v1::Document>(docs.begin(), docs.begin() + 100), 4, &order);
  WaitLearned(c, n);
  // A snapshot at 100, then a log tail of 50 (a periodic snapshot's timing
  // would depend on the machine's load).
  ASSERT_EQ(c.Call(SnapshotRequest()).code(), v1::Response::OK);
  n += LearnAll(c, std::vector<v1::Document>(docs.begin() + 100, docs.end()), 4, &order);
  WaitLearned(c, n);
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);  // the snapshot at 100 plus the log tail
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK) << snap.message();
  auto served = LoadSnapshot(snap.snapshot().path());
  ASSERT_TRUE(served);
  // Offline: SEP over the same documents in log order, same N and seed.
  auto offline = NewSepModel();
  SepOptions so;
  so.seed = kSeed;
  auto l = SepLearner::Create(offline.get(), so);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  v1::Schema schema;
  offline->schema().ToProto(&schema);
  auto dec = DocumentDecoder::Create(offline->schema(), schema);
  ASSERT_TRUE(dec.ok());
  order.ForEach(n, [&](uint64_t seq, const v1::Document& d) {
    DocumentBuffer buf;
    std::string new_class;
    ASSERT_TRUE(dec->Decode(d, seq, offline->schema(), kGrowClasses, &buf, &new_class, nullptr).ok());
    SepOutcome out;
    ASSERT_TRUE(l.value()->Learn(buf.View(), &out).ok());
    ASSERT_FALSE(out.skipped) << out.skip_reason;
  });
  {
    SCOPED_TRACE("served vs offline");
    ExpectSameStatistics(*served, *offline);
  }
  srv->Shutdown();
  auto rs = Start(Options(image), nullptr);
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->recovery().from_snapshot);
  EXPECT_EQ(rs->recovery().snapshot_sequence, 100u);
  EXPECT_EQ(rs->recovery().replayed, 50u);
  Client rc(rs->port());
  v1::Response rsnap = rc.Call(SnapshotRequest());
  ASSERT_EQ(rsnap.code(), v1::Response::OK);
  auto recovered = LoadSnapshot(rsnap.snapshot().path());
  ASSERT_TRUE(recovered);
  {
    // Not bit for bit: at load the family recomputes its cached totals
    // exactly instead of continuing the incremental series it had in memory
    // (count_mixture.h, "Totals"), so the replayed updates round
    // differently. The effect stays at rounding level.
    SCOPED_TRACE("recovered vs offline");
    EXPECT_EQ(recovered->learner_state().updates, offline->learner_state().updates);
    ASSERT_EQ(recovered->stats().size(), offline->stats().size());
    double worst = 0;
    for (uint64_t i = 0; i < offline->stats().size(); ++i) {
      const double a = recovered->stats().Mu(i), b = offline->stats().Mu(i);
      worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
    }
    std::printf("recovered vs offline: largest relative difference of a statistic %.3g\n", worst);
    EXPECT_LT(worst, 1e-9);
  }
  rs->Shutdown();
  // sdEM cannot train this family; SEP cannot train a family without hooks.
  ServerOptions bad = Options(dir_ + "/bad1");
  bad.engine = Engine::kSdem;
  auto s1 = Server::Start(bad, NewSepModel());
  ASSERT_FALSE(s1.ok());
  EXPECT_NE(s1.status().message().find("family 'emsd-mixture' is trained by SEP, EP or ADF, not sdEM"),
            std::string::npos)
      << s1.status().ToString();
  ServerOptions bad2 = Options(dir_ + "/bad2");
  bad2.engine = Engine::kSep;
  auto s2 = Server::Start(bad2, NewModel());
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.status().message().find("family 'multinomial' cannot be trained with --engine sep"), std::string::npos)
      << s2.status().ToString();
  bad2.engine = Engine::kEp;
  bad2.data_dir = dir_ + "/bad3";
  auto s3 = Server::Start(bad2, NewSepModel());
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.status().message().find("--engine ep keeps a site per document"), std::string::npos)
      << s3.status().ToString();
}

// A crash image with no snapshot at all: the whole model comes from the log.
TEST_F(ServerTest, CrashImageWithoutSnapshotReplaysTheWholeLog) {
  std::mt19937_64 rng(37);
  LogOrder order;
  const uint64_t n = 60;
  const std::string image = LearnAndTakeCrashImage(Options(), RandomDocs(rng, n), 6, &order);
  // A new data directory gets a base snapshot at sequence 0 at once; take it
  // away (and any other) so that nothing but the log is left.
  ASSERT_TRUE(fs::exists(image + "/model.trib"));
  fs::remove(image + "/model.trib");
  fs::remove(image + "/model.prev.trib");

  auto rs = Start(Options(image));  // the initial model is used: no snapshot yet
  ASSERT_TRUE(rs);
  EXPECT_FALSE(rs->recovery().from_snapshot);
  EXPECT_EQ(rs->recovery().replayed, n);
  Client rc(rs->port());
  EXPECT_EQ(rc.Call(StatsRequest()).stats().documents_learned(), n);
  ExpectServesOfflineModel(rc, order, n);
}

// ---- Damaged storage (issue 13, item 1) -----------------------------------------------

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void FlipByteAt(const std::string& path, size_t offset) {
  std::string data = ReadBytes(path);
  ASSERT_LT(offset, data.size());
  data[offset] = static_cast<char>(data[offset] ^ 0x10);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}
std::vector<std::string> DamagedFiles(const std::string& data_dir, const std::string& ext) {
  std::vector<std::string> out;
  if (!fs::exists(data_dir + "/damaged")) return out;
  for (const auto& e : fs::directory_iterator(data_dir + "/damaged")) {
    if (ext.empty() ? e.path().extension() != ".report" : e.path().extension() == ext) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A stream where every document brings a new class is slow to learn (each
// class regrows the model). Shutdown must not wait for all of it: at the
// drain deadline (0 here) the learner stops, the final snapshot holds what
// was applied, and the rest is replayed from the log at the next start:
// every acknowledged document is in the model then.
TEST_F(ServerTest, ShutdownStopsAtTheDrainDeadlineAndTheLogKeepsTheRest) {
  v1::Schema proto = testing::TextSchema(1000, kClasses);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto initial = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, kSeed);
  ASSERT_TRUE(initial.ok());
  (*initial)->learner_state().effective_size = kEffectiveSize;
  ServerOptions o = Options();
  o.drain_timeout_ms = 0;
  std::mt19937_64 rng(37);
  // Each document adds a class (the model grows with each): enough of them
  // that the learner cannot have learned them all between the
  // acknowledgement and Shutdown, even on a loaded machine (200 could).
  std::vector<v1::Document> docs = RandomDocs(rng, 600);
  for (size_t i = 0; i < docs.size(); ++i) docs[i].set_label("new" + std::to_string(i));
  {
    auto srv = Start(o, std::move(initial).value());
    ASSERT_TRUE(srv);
    Client c(srv->port());
    v1::Response r = c.Call(LearnRequest(docs));
    ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
    ASSERT_EQ(r.learn().acknowledged(), docs.size());
    srv->Shutdown();
    EXPECT_TRUE(srv->Wait().ok());
  }
  auto rs = Start(Options(), nullptr);
  ASSERT_TRUE(rs);
  EXPECT_GT(rs->recovery().replayed, 0u) << "shutdown learned everything: the deadline was not applied";
  EXPECT_EQ(rs->recovery().snapshot_sequence + rs->recovery().replayed, docs.size());
  Client rc(rs->port());
  EXPECT_EQ(rc.Call(StatsRequest()).stats().documents_learned(), docs.size());
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// A long recovery (here: a slow device under the log) is visible: /healthz
// answers 503 "not ready: replaying ..." from the moment the HTTP port is
// bound, the protocol port opens only when the model is ready, and then
// /healthz says 200.
TEST_F(ServerTest, HealthSaysNotReadyWhileTheLogIsReplayed) {
  std::mt19937_64 rng(29);
  LogOrder order;
  const uint64_t n = 60;
  const std::string image = LearnAndTakeCrashImage(Options(), RandomDocs(rng, n), 3, &order);
  testing::FaultEnv slow;
  slow.Add({testing::FaultEnv::Op::kRead, "wal-", 0, 0, false, false, /*delay_ms=*/300});
  ServerOptions o = Options(image);
  o.env = &slow;
  o.http = "127.0.0.1:0";
  std::atomic<uint16_t> http_port{0};
  o.on_http_listening = [&](uint16_t p) { http_port = p; };
  std::atomic<bool> started{false};
  std::vector<std::string> seen;
  std::thread poll([&] {
    while (!started) {
      if (http_port) seen.push_back(HttpGet(http_port, "/healthz"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto rs = Start(o, nullptr);
  started = true;
  poll.join();
  ASSERT_TRUE(rs);
  EXPECT_EQ(rs->recovery().replayed, n);
  bool replaying = false;
  for (const auto& h : seen)
    replaying = replaying || (h.find("503") != std::string::npos &&
                              h.find("not ready: replaying the write-ahead log") != std::string::npos);
  EXPECT_TRUE(replaying) << "no 'not ready' answer among " << seen.size() << " health checks during recovery";
  EXPECT_THAT(HttpGet(rs->http_port(), "/healthz"), HasSubstr("200"));
  EXPECT_THAT(HttpGet(rs->http_port(), "/metrics"), HasSubstr("tributary_ready 1\n"));
  Client rc(rs->port());
  EXPECT_EQ(rc.Call(StatsRequest()).stats().documents_learned(), n);
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// A snapshot that cannot be written (full disk) does not stop learning: the
// log keeps every document, a requested snapshot answers the error, the
// periodic ones are retried after a pause (not rewritten every batch), and
// the first one after space returns covers everything learned.
TEST_F(ServerTest, FailedSnapshotsAreRetriedWithoutStoppingLearning) {
  testing::FaultEnv files;
  // The base snapshot of the new data directory is written; later ones fail.
  files.Add({testing::FaultEnv::Op::kAppend, "model.next.trib.tmp", /*after=*/1, ENOSPC});
  ServerOptions o = Options();
  o.env = &files;
  o.http = "127.0.0.1:0";
  o.snapshot_every_documents = 5;
  o.wal_retry_interval_ms = 20;  // snapshots wait at least 1 s after a failure
  std::mt19937_64 rng(23);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  uint64_t n = 0;
  for (int i = 0; i < 20; ++i) {
    n += LearnAll(c, RandomDocs(rng, 3), 3, &order);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  WaitLearned(c, n);
  v1::Response requested = c.Call(SnapshotRequest());
  EXPECT_NE(requested.code(), v1::Response::OK);
  EXPECT_THAT(requested.message(), HasSubstr("injected"));
  EXPECT_TRUE(c.Call(StatsRequest()).stats().learning_enabled());
  // 20 batches over ~0.3 s, each past snapshot_every_documents: one periodic
  // attempt plus the requested one, not one per batch.
  EXPECT_LE(files.fired(), 3);
  files.Clear();
  bool saved = false;
  for (int i = 0; i < 300 && !saved; ++i) {
    n += LearnAll(c, RandomDocs(rng, 1), 1, &order);
    saved = fs::exists(o.data_dir + "/model.trib");
    if (!saved) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(saved) << "no snapshot after the disk had space again";
  EXPECT_THAT(HttpGet(srv->http_port(), "/metrics"), HasSubstr("tributary_snapshot_failures_total"));
  WaitLearned(c, n);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  auto rs = Start(Options(), nullptr);
  ASSERT_TRUE(rs);
  Client rc(rs->port());
  EXPECT_EQ(rc.Call(StatsRequest()).stats().documents_learned(), n);
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// A full disk (ENOSPC on append) or a failing fsync: learning stops, the
// log is probed every wal_retry_interval_ms and stays off while the probe
// fails; when the file system takes data again learning resumes by itself,
// numbering on from the last acknowledged document. A crash image taken
// after that recovers every acknowledged document, before and after the
// failure, and nothing else: the refused write left nothing in the log.
TEST_P(ServerWalFaultTest, LearningResumesWhenTheLogTakesDataAgain) {
  const bool append = GetParam() == WalFault::kAppend;
  testing::FaultEnv files;
  files.Add({append ? testing::FaultEnv::Op::kAppend : testing::FaultEnv::Op::kSync, "wal-", /*after=*/4,
             append ? ENOSPC : EIO, /*torn=*/append});
  ServerOptions o = Options();
  o.env = &files;
  o.fsync_every_request = true;
  o.http = "127.0.0.1:0";
  o.wal_retry_interval_ms = 20;
  std::mt19937_64 rng(19);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  uint64_t acked = 0;
  for (int i = 0; i < 4; ++i) acked += LearnAll(c, RandomDocs(rng, 3), 3, &order);
  v1::Response failed = c.Call(LearnRequest(RandomDocs(rng, 3)));
  EXPECT_EQ(failed.code(), v1::Response::UNAVAILABLE);
  // While the disk stays full every probe fails and learning stays off.
  for (int i = 0; i < 500 && files.fired() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(files.fired(), 4) << "the log was not probed again";
  EXPECT_FALSE(c.Call(StatsRequest()).stats().learning_enabled());
  v1::Response refused = c.Call(LearnRequest(RandomDocs(rng, 2)));
  EXPECT_EQ(refused.code(), v1::Response::UNAVAILABLE);
  std::string health = HttpGet(srv->http_port(), "/healthz");
  EXPECT_THAT(health, HasSubstr("503"));
  EXPECT_THAT(health, HasSubstr("injected"));
  EXPECT_THAT(health, HasSubstr("retrying every 20 ms"));
  EXPECT_THAT(HttpGet(srv->http_port(), "/metrics"), HasSubstr("tributary_wal_recoveries_total 0\n"));

  files.Clear();  // space is back
  bool resumed = false;
  for (int i = 0; i < 500 && !resumed; ++i) {
    resumed = c.Call(StatsRequest()).stats().learning_enabled();
    if (!resumed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(resumed) << "learning did not resume after the log worked again";
  EXPECT_THAT(HttpGet(srv->http_port(), "/healthz"), HasSubstr("200"));
  EXPECT_THAT(HttpGet(srv->http_port(), "/metrics"), HasSubstr("tributary_wal_recoveries_total 1\n"));
  for (int i = 0; i < 3; ++i) {
    auto docs = RandomDocs(rng, 3);
    v1::Response r = c.Call(LearnRequest(docs));
    ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
    EXPECT_EQ(r.learn().first_sequence(), acked + 1);
    order.Add(r.learn().first_sequence(), docs);
    acked += docs.size();
  }
  order.ExpectContiguous(acked);
  WaitLearned(c, acked);
  EXPECT_FALSE(fs::exists(o.data_dir + "/wal/wal-probe.tmp"));

  // A crash now: the log alone (no snapshot since the base one) must give
  // back exactly the acknowledged documents; the refused write must not
  // have left a torn record in the older segment (replay would call it
  // corruption and refuse to start).
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  auto rs = Start(Options(image), nullptr);
  ASSERT_TRUE(rs);
  EXPECT_TRUE(rs->recovery().damage.empty());
  EXPECT_EQ(rs->recovery().lost_records, 0u);
  Client rc(rs->port());
  auto stats = rc.Call(StatsRequest()).stats();
  EXPECT_EQ(stats.documents_learned(), acked);
  EXPECT_EQ(stats.wal_sequence(), acked);
  ExpectServesOfflineModel(rc, order, acked);
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// The probe of issue 13: one flipped bit at 30 % of the live segment. By
// default the server refuses to start, names the damage and changes nothing;
// with --on-corruption skip it keeps the segment aside byte for byte, learns
// every readable document (the model equals offline training on exactly
// those), names the lost sequences, and /healthz fails until the report is
// removed, across restarts.
// Byte offsets where the records of a log segment start (varint length,
// payload, 4-byte CRC each).
std::vector<size_t> RecordOffsets(const std::string& data) {
  std::vector<size_t> out;
  size_t off = 0;
  while (off < data.size()) {
    out.push_back(off);
    size_t len = 0, hdr = 0;
    int shift = 0;
    unsigned char b = 0;
    do {
      b = static_cast<unsigned char>(data[off + hdr++]);
      len |= static_cast<size_t>(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    off += hdr + len + 4;
  }
  return out;
}

// The log's acknowledgement mark (wal.h): with ack_mark_interval_ms = 0 it
// covers every record before it is acknowledged, so a crash image whose
// newest segment lost its last 50 records at a record boundary (a shorter
// log, nothing torn) is refused naming exactly those 50; a clean shutdown
// leaves the mark current with the default interval too.
TEST_F(ServerTest, AcknowledgedRecordsCutFromTheLogAreReportedByTheMark) {
  std::mt19937_64 rng(43);
  LogOrder order;
  const uint64_t n = 200;
  ServerOptions strict = Options();
  strict.ack_mark_interval_ms = 0;
  const std::string image = LearnAndTakeCrashImage(strict, RandomDocs(rng, n), 10, &order);
  const std::string seg = NewestSegment(image);
  const std::string data = ReadBytes(seg);
  const std::vector<size_t> offsets = RecordOffsets(data);
  ASSERT_EQ(offsets.size(), n);  // one segment: every record since the base snapshot
  fs::resize_file(seg, offsets[150]);
  auto refused = Server::Start(Options(image), nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsCorruption()) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("acknowledged records missing at the end of the log"));
  EXPECT_THAT(refused.status().message(), HasSubstr("records 151..200 (50 acknowledged documents) cannot be read"));
  EXPECT_EQ(ReadBytes(seg), data.substr(0, offsets[150])) << "the refusal changed the log";

  // The default interval, after a clean shutdown.
  const std::string dir = dir_ + "/clean";
  ServerOptions o = Options(dir);
  {
    auto srv = Start(o);
    ASSERT_TRUE(srv);
    Client c(srv->port());
    LogOrder order2;
    LearnAll(c, RandomDocs(rng, 30), 7, &order2);
    srv->Shutdown();
    ASSERT_TRUE(srv->Wait().ok());
  }
  auto wal = WriteAheadLog::Open(dir + "/wal");
  ASSERT_TRUE(wal.ok());
  auto mark = (*wal)->ReadAcknowledgedMark();
  ASSERT_TRUE(mark.ok()) << mark.status().ToString();
  EXPECT_EQ(*mark, 30u);
}

// Without its acknowledgement mark a cut log's end reads as a torn write:
// a data directory that lost its mark is reported, with a .report that
// fails /healthz, whether or not the log was also cut (issue 41 item 11:
// the probe deleted wal.acked and cut a segment in half, and /healthz said
// 200 with half the acknowledged documents gone; deleting the mark alone was
// not even logged).
TEST_F(ServerTest, AMissingAcknowledgementMarkIsReported) {
  std::mt19937_64 rng(44);
  LogOrder order;
  const uint64_t n = 200;
  const std::string image = LearnAndTakeCrashImage(Options(), RandomDocs(rng, n), 10, &order);
  for (const bool cut : {false, true}) {
    SCOPED_TRACE(cut ? "mark deleted and the log cut" : "mark deleted");
    const std::string copy = dir_ + (cut ? "/cut" : "/nomark");
    CopyDataDir(image, copy);
    ASSERT_TRUE(fs::remove(copy + "/wal/wal.acked"));
    if (cut) {
      const std::string seg = NewestSegment(copy);
      const std::vector<size_t> offsets = RecordOffsets(ReadBytes(seg));
      ASSERT_GT(offsets.size(), 100u);
      fs::resize_file(seg, offsets[offsets.size() / 2] + 5);  // in the middle of a record
    }
    auto srv = Server::Start(Options(copy), nullptr);
    ASSERT_TRUE(srv.ok()) << srv.status().ToString();
    const RecoveryInfo& rec = (*srv)->recovery();
    std::string damage;
    for (const auto& d : rec.damage) damage += d + "\n";
    EXPECT_THAT(damage, HasSubstr("acknowledgement mark"));
    EXPECT_THAT(damage, HasSubstr("is missing although the log holds records"));
    if (cut) {
      EXPECT_THAT(damage, HasSubstr("may have held acknowledged documents"));
    }
    ASSERT_FALSE(rec.reports.empty());
    EXPECT_TRUE(fs::exists(rec.reports.back()));
    (*srv)->Shutdown();
    EXPECT_TRUE((*srv)->Wait().ok());
  }
}

// Before its first periodic snapshot a data directory has one snapshot, the
// base one at sequence 0: one flipped bit in it left no readable snapshot,
// and a restart without --model refused to start although the log from
// sequence 1 was complete (issue 41 item 12). The directory keeps the model
// it started from (model.initial.trib), and recovery falls back on it plus
// the whole log, reporting the damaged snapshot.
TEST_F(ServerTest, ADamagedFirstSnapshotFallsBackOnTheInitialModelAndTheWholeLog) {
  std::mt19937_64 rng(45);
  LogOrder order;
  const uint64_t n = 120;
  const std::string image = LearnAndTakeCrashImage(Options(), RandomDocs(rng, n), 10, &order);
  ASSERT_TRUE(fs::exists(image + "/model.initial.trib"));
  ASSERT_FALSE(fs::exists(image + "/model.prev.trib"));  // only the base snapshot so far
  FlipByteAt(image + "/model.trib", ReadBytes(image + "/model.trib").size() / 2);
  auto srv = Server::Start(Options(image), nullptr);  // no initial model given
  ASSERT_TRUE(srv.ok()) << srv.status().ToString();
  const RecoveryInfo& rec = (*srv)->recovery();
  EXPECT_EQ(rec.snapshot_path, image + "/model.initial.trib");
  EXPECT_EQ(rec.replayed, n);
  ASSERT_FALSE(rec.damage.empty());
  EXPECT_THAT(rec.damage[0], HasSubstr("model.trib"));
  Client c(srv.value()->port());
  WaitLearned(c, n);
  (*srv)->Shutdown();
  EXPECT_TRUE((*srv)->Wait().ok());
}

TEST_F(ServerTest, CorruptLogIsRefusedByDefaultOrSkippedWithAReport) {
  std::mt19937_64 rng(41);
  LogOrder order;
  const uint64_t n = 300;
  const std::string image = LearnAndTakeCrashImage(Options(), RandomDocs(rng, n), 10, &order);

  const std::string seg = NewestSegment(image);
  FlipByteAt(seg, ReadBytes(seg).size() * 3 / 10);
  const std::string damaged = ReadBytes(seg);

  auto refused = Server::Start(Options(image), nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsCorruption()) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr(seg));
  EXPECT_THAT(refused.status().message(), HasSubstr("acknowledged documents) cannot be read"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--on-corruption=skip"));
  EXPECT_EQ(ReadBytes(seg), damaged) << "the refusal changed the log";
  EXPECT_TRUE(DamagedFiles(image, ".report").empty());

  ServerOptions skip = Options(image);
  skip.on_corruption = CorruptionPolicy::kSkip;
  skip.http = "127.0.0.1:0";
  std::set<uint64_t> lost;
  {
    auto rs = Start(skip, nullptr);
    ASSERT_TRUE(rs);
    const RecoveryInfo& rec = rs->recovery();
    ASSERT_EQ(rec.lost_ranges.size(), 1u);
    for (uint64_t q = rec.lost_ranges[0].first; q <= rec.lost_ranges[0].second; ++q) lost.insert(q);
    EXPECT_EQ(rec.lost_records, lost.size());
    EXPECT_GE(lost.size(), 1u);
    EXPECT_LE(lost.size(), 2u);  // one flipped byte spoils the record around it
    EXPECT_EQ(rec.replayed + lost.size(), n);
    ASSERT_EQ(rec.reports.size(), 1u);
    EXPECT_EQ(ReadBytes(seg), damaged) << "the damaged segment was modified";
    auto kept = DamagedFiles(image, "");
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(ReadBytes(kept[0]), damaged) << "the copy kept aside is not the damaged segment";
    const std::string health = HttpGet(rs->http_port(), "/healthz");
    EXPECT_THAT(health, HasSubstr("503"));
    EXPECT_THAT(health, HasSubstr("cannot be read"));
    EXPECT_THAT(HttpGet(rs->http_port(), "/metrics"),
                HasSubstr("tributary_recovery_lost_documents " + std::to_string(lost.size()) + "\n"));
    Client rc(rs->port());
    EXPECT_EQ(rc.Call(StatsRequest()).stats().documents_learned(), n - lost.size());
    v1::Response snap = rc.Call(SnapshotRequest());
    ASSERT_EQ(snap.code(), v1::Response::OK);
    OfflineModel offline;
    order.ForEach(n, [&](uint64_t seq, const v1::Document& d) {
      if (!lost.count(seq)) offline.Learn(d, seq);
    });
    auto m = LoadSnapshot(snap.snapshot().path());
    ASSERT_TRUE(m);
    ExpectSameStatistics(*m, offline.model());
    // Learning goes on, numbered after the last acknowledged document.
    v1::Response r = rc.Call(LearnRequest(RandomDocs(rng, 2)));
    ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
    EXPECT_EQ(r.learn().first_sequence(), n + 1);
    rs->Shutdown();
    EXPECT_TRUE(rs->Wait().ok());
  }
  // A restart with the default policy: the damage is behind the snapshot
  // now, so nothing more is lost, but the report still fails /healthz.
  ServerOptions again = Options(image);
  again.http = "127.0.0.1:0";
  auto rs = Start(again, nullptr);
  ASSERT_TRUE(rs);
  EXPECT_EQ(rs->recovery().lost_records, 0u);
  EXPECT_THAT(HttpGet(rs->http_port(), "/healthz"), HasSubstr("503"));
  for (const auto& r : DamagedFiles(image, ".report")) fs::remove(r);
  EXPECT_THAT(HttpGet(rs->http_port(), "/healthz"), HasSubstr("200"));
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// A flipped byte in model.trib used to stop the server although the whole
// log was there. The previous snapshot and the log make up for it: nothing is
// lost, the damaged file is kept aside, and /healthz says what happened.
TEST_F(ServerTest, DamagedSnapshotIsRecoveredFromThePreviousOneAndTheLog) {
  ServerOptions o = Options();
  std::mt19937_64 rng(43);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  uint64_t n = LearnAll(c, RandomDocs(rng, 80), 8, &order);
  WaitLearned(c, n);
  ASSERT_EQ(c.Call(SnapshotRequest()).code(), v1::Response::OK);  // model.trib at n, model.prev.trib at 0
  n += LearnAll(c, RandomDocs(rng, 40), 8, &order);
  WaitLearned(c, n);
  const std::string image = dir_ + "/image";
  CopyDataDir(o.data_dir, image);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  ASSERT_TRUE(fs::exists(image + "/model.prev.trib"));
  const std::string snapshot = image + "/model.trib";
  FlipByteAt(snapshot, ReadBytes(snapshot).size() / 2);
  const std::string damaged = ReadBytes(snapshot);

  ServerOptions ro = Options(image);
  ro.http = "127.0.0.1:0";
  auto rs = Start(ro, nullptr);
  ASSERT_TRUE(rs);
  EXPECT_EQ(rs->recovery().snapshot_path, image + "/model.prev.trib");
  EXPECT_EQ(rs->recovery().snapshot_sequence, 0u);
  EXPECT_EQ(rs->recovery().replayed, n);
  EXPECT_EQ(rs->recovery().lost_records, 0u);
  ASSERT_EQ(rs->recovery().reports.size(), 1u);
  auto kept = DamagedFiles(image, "");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(ReadBytes(kept[0]), damaged);
  const std::string health = HttpGet(rs->http_port(), "/healthz");
  EXPECT_THAT(health, HasSubstr("503"));
  EXPECT_THAT(health, HasSubstr("checksum mismatch"));
  EXPECT_THAT(health, HasSubstr("nothing lost"));
  Client rc(rs->port());
  ExpectServesOfflineModel(rc, order, n);
  rs->Shutdown();
  EXPECT_TRUE(rs->Wait().ok());
}

// A data directory has one owner (data_dir.h): a second server, or an
// embedded durable LiveModel, is refused while a server holds it, naming the
// server's process; once the server has stopped (destroyed or not) another
// may open it.
TEST_F(ServerTest, ADataDirectoryInUseIsRefusedNamingItsHolder) {
  ServerOptions o = Options();
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  auto second = Server::Start(o, NewModel());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("data directory '" + o.data_dir + "' is in use"));
  EXPECT_THAT(second.status().message(), HasSubstr("process " + std::to_string(::getpid()) + " (tributary serve"));
  LiveModelOptions lo;
  lo.data_dir = o.data_dir;
  lo.registry = &testing::BuiltinRegistry();
  auto embedded = LiveModel::Create(NewModel(), lo);
  ASSERT_FALSE(embedded.ok());
  EXPECT_THAT(embedded.status().message(), HasSubstr("(tributary serve"));
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  auto after = LiveModel::Create(NewModel(), lo);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
}

// When every snapshot is damaged and the log no longer starts at sequence 1
// (older segments were dropped once covered), nothing can make up for the
// documents before the log: the server refuses, names the range, and moves
// nothing.
TEST_F(ServerTest, AllSnapshotsDamagedAndTheLogTrimmedIsRefused) {
  ServerOptions o = Options();
  o.wal_segment_bytes = 1500;  // many small segments, so that covered ones are dropped
  std::mt19937_64 rng(47);
  LogOrder order;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  uint64_t n = 0;
  for (int round = 0; round < 3; ++round) {
    n += LearnAll(c, RandomDocs(rng, 60), 6, &order);
    WaitLearned(c, n);
    ASSERT_EQ(c.Call(SnapshotRequest()).code(), v1::Response::OK);
  }
  n += LearnAll(c, RandomDocs(rng, 30), 6, &order);  // a learn after the last snapshot lets the committer drop
  WaitLearned(c, n);
  srv->Shutdown();
  EXPECT_TRUE(srv->Wait().ok());
  auto wal = WriteAheadLog::Open(o.data_dir + "/wal");
  ASSERT_TRUE(wal.ok());
  const uint64_t first = (*wal)->FirstSequence();
  ASSERT_GT(first, 1u) << "no segment was dropped: the test proves nothing";
  for (const char* name : {"/model.trib", "/model.prev.trib"}) {
    FlipByteAt(o.data_dir + name, ReadBytes(o.data_dir + name).size() / 3);
  }
  auto rs = Server::Start(Options(), NewModel());
  ASSERT_FALSE(rs.ok());
  EXPECT_TRUE(rs.status().IsCorruption()) << rs.status().ToString();
  EXPECT_THAT(rs.status().message(),
              HasSubstr("documents 1.." + std::to_string(first - 1) + " are in no readable file"));
  EXPECT_TRUE(fs::exists(o.data_dir + "/model.trib"));
  EXPECT_TRUE(fs::exists(o.data_dir + "/model.prev.trib"));
  EXPECT_FALSE(fs::exists(o.data_dir + "/damaged"));
}

// ---- Strangers and slow peers (issue 13, item 3) -----------------------------------------

// A learn request of about `bytes` bytes, with `token` (none when empty).
std::string BigLearnFrame(std::mt19937_64& rng, size_t bytes, const std::string& token) {
  v1::Request req = LearnRequest({});
  if (!token.empty()) req.set_auth_token(token);
  while (req.ByteSizeLong() < bytes) *req.mutable_learn()->add_documents() = RandomDoc(rng);
  return FrameOf(req);
}

// A stranger's large frame is judged by the token in its first bytes: a
// wrong or missing token is answered and the connection closed before the
// frame is buffered (the issue: 40 connections holding 16 MiB each). The
// token holder's large frames still go through.
TEST_F(ServerTest, StrangersCannotMakeTheServerBufferLargeFrames) {
  ServerOptions o = Options();
  o.auth_token = "s3cret";
  o.http = "127.0.0.1:0";
  o.max_frame_bytes = 16u << 20;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(53);
  const std::string wrong = BigLearnFrame(rng, 300000, "guess");
  const std::string none = BigLearnFrame(rng, 300000, "");
  std::vector<std::unique_ptr<Client>> strangers;
  for (int i = 0; i < 40; ++i) {
    strangers.push_back(std::make_unique<Client>(srv->port()));
    // The header (300 KB declared) and 4 KB of the frame, never the rest.
    ASSERT_TRUE(strangers.back()->SendRaw((i % 2 ? wrong : none).substr(0, 4096)));
  }
  for (auto& c : strangers) {
    v1::Response r;
    ASSERT_TRUE(c->Receive(&r, 5000)) << "a stranger's partial frame got no answer";
    EXPECT_EQ(r.code(), v1::Response::UNAUTHENTICATED);
    EXPECT_TRUE(c->WaitClosed(5000));
  }
  const std::string metrics = HttpGet(srv->http_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("tributary_buffered_bytes 0\n"));
  EXPECT_THAT(metrics, HasSubstr("tributary_errors_total{kind=\"unauthenticated\"} 40\n"));
  Client ok(srv->port());
  ASSERT_TRUE(ok.SendRaw(BigLearnFrame(rng, 300000, "s3cret")));
  v1::Response r;
  ASSERT_TRUE(ok.Receive(&r));
  EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
  EXPECT_GT(r.learn().acknowledged(), 1000u);
}

TEST_F(ServerTest, AStrangerWhoNeverShowsTheTokenIsClosed) {
  ServerOptions o = Options();
  o.auth_token = "s3cret";
  o.auth_timeout_s = 1;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client silent(srv->port());
  Client partial(srv->port());
  ASSERT_TRUE(partial.SendRaw(std::string("\x20\x08\x01", 3)));  // a small frame, never finished
  const auto start = Clock::now();
  EXPECT_TRUE(silent.WaitClosed(5000));
  EXPECT_TRUE(partial.WaitClosed(5000));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
  Client member(srv->port());
  member.set_token("s3cret");
  EXPECT_TRUE(member.Call(PingRequest()).has_pong());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the deadline: shown in time, kept
  EXPECT_TRUE(member.Call(PingRequest()).has_pong());
}

// Every byte used to reset the idle timer, so a peer sending one byte now
// and then held its connection (and its slot) forever. Now only whole
// requests count as activity, and a frame must arrive at a minimum rate.
TEST_F(ServerTest, SlowPeersAreClosedWhileOthersAreServed) {
  ServerOptions o = Options();
  o.idle_timeout_s = 2;
  o.rate_grace_s = 1;
  o.min_frame_bytes_per_s = 1000;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(59);
  const std::string frame = FrameOf(LearnRequest(RandomDocs(rng, 50)));
  Client slow(srv->port());
  Client fine(srv->port());
  const auto start = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < frame.size() - 1 && Clock::now() - start < std::chrono::seconds(8); ++i) {
    if (!slow.SendRaw(frame.substr(i, 1)) || slow.WaitClosed(200)) {
      closed = true;
      break;
    }
    EXPECT_TRUE(fine.Call(PingRequest()).has_pong());
  }
  EXPECT_TRUE(closed || slow.WaitClosed(1000)) << "a peer trickling one byte every 200 ms kept its connection";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

// Large frames reserve their length from max_buffered_bytes: a second one
// waits while the first is in flight, and goes on once it is done.
TEST_F(ServerTest, LargeFramesWaitForTheBufferBudget) {
  ServerOptions o = Options();
  o.max_buffered_bytes = 400000;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(61);
  const std::string a = BigLearnFrame(rng, 300000, "");
  const std::string b = BigLearnFrame(rng, 300000, "");
  Client ca(srv->port());
  Client cb(srv->port());
  ASSERT_TRUE(ca.SendRaw(a.substr(0, a.size() / 2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a's reservation is made
  std::thread sender([&] { cb.SendRaw(b); });                   // b's whole frame
  v1::Response r;
  EXPECT_FALSE(cb.Receive(&r, 700)) << "the second large frame was buffered over the budget";
  ASSERT_TRUE(ca.SendRaw(a.substr(a.size() / 2)));
  ASSERT_TRUE(ca.Receive(&r));
  EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
  ASSERT_TRUE(cb.Receive(&r));
  EXPECT_EQ(r.code(), v1::Response::OK) << r.message();
  sender.join();
}

// ---- Model versions and rollback (issue 42; docs/design.md §16) ----------------------

// The versions GET /v1/models lists, oldest first.
std::vector<uint64_t> KeptVersions(uint16_t http_port) {
  const testing::HttpAnswer a = testing::HttpCall(http_port, "GET", "/v1/models");
  EXPECT_EQ(a.status, 200) << a.body;
  std::vector<uint64_t> out;
  auto j = nlohmann::json::parse(a.body, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& v : j["versions"]) out.push_back(v["version"].get<uint64_t>());
  return out;
}

// Every probe document's probabilities from the server (binary protocol:
// exact doubles) equal the offline model's.
void ExpectPredictsAsOffline(Client& c, OfflineModel& offline) {
  const auto probes = ProbeDocs();
  v1::Response r = c.Call(PredictRequest(probes));
  ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
  ASSERT_EQ(r.predict().predictions_size(), static_cast<int>(probes.size()));
  for (size_t i = 0; i < probes.size(); ++i) {
    const auto want = offline.Probabilities(probes[i]);
    const auto& got = r.predict().predictions(static_cast<int>(i)).probabilities();
    ASSERT_EQ(static_cast<size_t>(got.size()), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[static_cast<int>(k)], want[k]) << "probe " << i;
  }
}

// Learn, keep 3 versions, restore the oldest: the server serves (and
// snapshots) exactly the model trained offline on the documents up to that
// version; the documents after it are not learned but kept aside as a
// stream, in log order; learning goes on from the restored model, and a
// restart keeps all of it.
TEST_F(ServerTest, RestoreTheOldestOfThreeVersionsServesItsOfflineModel) {
  ServerOptions o = Options();
  o.http = "127.0.0.1:0";
  o.keep_versions = 3;
  o.version_every_documents = 30;
  o.snapshot_every_documents = 1000000;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  std::mt19937_64 rng(71);
  LogOrder order;
  const auto docs = RandomDocs(rng, 150);
  const uint64_t n = LearnAll(c, docs, 10, &order);
  WaitLearned(c, n);
  // Versions are cut at the learner's batches: wait for the last one due.
  std::vector<uint64_t> kept;
  for (int i = 0; i < 500; ++i) {
    kept = KeptVersions(srv->http_port());
    if (kept.size() == 3 && kept.back() + o.version_every_documents > n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kept.size(), 3u) << "versions kept";
  EXPECT_LT(kept[0], kept[1]);
  EXPECT_LT(kept[1], kept[2]);
  const uint64_t v = kept[0];
  ASSERT_GT(v, 0u);
  ASSERT_LT(v, n);
  // A version is the model at its sequence.
  {
    OfflineModel offline;
    order.TrainOffline(&offline, v);
    auto m = LoadSnapshot(o.data_dir + "/versions/" + std::string(20 - std::to_string(v).size(), '0') +
                          std::to_string(v) + ".trib");
    ASSERT_TRUE(m);
    ExpectSameStatistics(*m, offline.model());
  }
  // Wrong ones: a version not kept, not a number, a query not understood.
  EXPECT_EQ(testing::HttpCall(srv->http_port(), "POST", "/v1/models/999999/restore").status, 404);
  EXPECT_EQ(testing::HttpCall(srv->http_port(), "POST", "/v1/models/abc/restore").status, 404);
  EXPECT_EQ(testing::HttpCall(srv->http_port(), "POST", "/v1/models/" + std::to_string(v) + "/restore?x=1").status,
            400);
  EXPECT_EQ(testing::HttpCall(srv->http_port(), "GET", "/v1/models/" + std::to_string(v) + "/restore").status, 405);

  const testing::HttpAnswer a =
      testing::HttpCall(srv->http_port(), "POST", "/v1/models/" + std::to_string(v) + "/restore");
  ASSERT_EQ(a.status, 200) << a.body;
  auto j = nlohmann::json::parse(a.body);
  EXPECT_EQ(j["restored"].get<uint64_t>(), v);
  EXPECT_EQ(j["record"].get<uint64_t>(), n + 1);
  EXPECT_FALSE(j["replay"].get<bool>());
  EXPECT_EQ(j["documents_after"].get<uint64_t>(), n - v);
  EXPECT_EQ(j["after"][0].get<uint64_t>(), v + 1);
  EXPECT_EQ(j["after"][1].get<uint64_t>(), n);
  // Served at once (the answer comes once it is published).
  OfflineModel offline;
  order.TrainOffline(&offline, v);
  ExpectPredictsAsOffline(c, offline);
  // The documents not learned, kept aside in log order.
  {
    const std::string kept_as = j["kept_as"].get<std::string>();
    auto reader = DocumentReader::Open(kept_as);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    uint64_t seq = v;
    order.ForEach(n, [&](uint64_t s, const v1::Document& d) {
      if (s <= v) return;
      v1::Document got;
      bool eof = false;
      ASSERT_TRUE((*reader)->Next(&got, &eof).ok());
      ASSERT_FALSE(eof) << "the kept stream ends before document " << s;
      EXPECT_EQ(got.SerializeAsString(), d.SerializeAsString()) << "document " << s;
      seq = s;
    });
    EXPECT_EQ(seq, n);
    v1::Document extra;
    bool eof = false;
    ASSERT_TRUE((*reader)->Next(&extra, &eof).ok());
    EXPECT_TRUE(eof);
  }
  // Learning goes on from the restored model (the restore took sequence n+1).
  const auto more = RandomDocs(rng, 12);
  v1::Response r = c.Call(LearnRequest(more));
  ASSERT_EQ(r.code(), v1::Response::OK) << r.message();
  EXPECT_EQ(r.learn().first_sequence(), n + 2);
  for (size_t i = 0; i < more.size(); ++i) offline.Learn(more[i], n + 2 + i);
  for (int i = 0; i < 2000; ++i) {
    if (c.Call(StatsRequest()).stats().documents_learned() >= n + more.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  v1::Response snap = c.Call(SnapshotRequest());
  ASSERT_EQ(snap.code(), v1::Response::OK) << snap.message();
  {
    auto m = LoadSnapshot(snap.snapshot().path());
    ASSERT_TRUE(m);
    ExpectSameStatistics(*m, offline.model());
  }
  EXPECT_EQ(testing::HttpMetrics(srv->http_port())["tributary_restores_total"], 1);
  srv->Shutdown();
  ASSERT_TRUE(srv->Wait().ok());
  // A restart serves the same model.
  auto again = Start(o, nullptr);
  ASSERT_TRUE(again);
  Client c2(again->port());
  ExpectPredictsAsOffline(c2, offline);
}

// A restore with replay=true learns the documents after the version again,
// on the version's model: the model equals the one trained offline on every
// document in log order (the restore record has no document).
TEST_F(ServerTest, RestoreWithReplayLearnsTheDocumentsAfterTheVersionAgain) {
  ServerOptions o = Options();
  o.http = "127.0.0.1:0";
  o.keep_versions = 2;
  o.version_every_documents = 1000000;  // versions on request only
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  Client c(srv->port());
  std::mt19937_64 rng(73);
  LogOrder order;
  uint64_t n = LearnAll(c, RandomDocs(rng, 40), 8, &order);
  WaitLearned(c, n);
  const testing::HttpAnswer kept = testing::HttpCall(srv->http_port(), "POST", "/v1/models");
  ASSERT_EQ(kept.status, 200) << kept.body;
  const uint64_t v = nlohmann::json::parse(kept.body)["version"].get<uint64_t>();
  EXPECT_EQ(v, n);
  n += LearnAll(c, RandomDocs(rng, 24), 8, &order);
  WaitLearned(c, n);
  const testing::HttpAnswer a =
      testing::HttpCall(srv->http_port(), "POST", "/v1/models/" + std::to_string(v) + "/restore?replay=true");
  ASSERT_EQ(a.status, 200) << a.body;
  auto j = nlohmann::json::parse(a.body);
  EXPECT_TRUE(j["replay"].get<bool>());
  EXPECT_EQ(j["documents_after"].get<uint64_t>(), 24u);
  EXPECT_FALSE(j.contains("kept_as"));
  OfflineModel offline;
  order.TrainOffline(&offline, n);
  ExpectPredictsAsOffline(c, offline);
}

// kill -9 at any point of a restore loses nothing acknowledged: a `serve`
// child learns, keeps a version, learns on, is asked to restore and is
// killed after a growing delay (before the record is logged, between the
// log and the model switch, while the skipped documents are written, after
// the answer). Restarted, the model is either the one before the restore
// (the record never reached the log: no answer was given) or the restored
// version's — never anything else — and every acknowledged document is in
// the log or the kept-aside stream.
TEST_F(ServerTest, KillNineAtAnyPointOfARestoreLosesNothingAcknowledged) {
  const std::string model = dir_ + "/initial.trib";
  ASSERT_TRUE(NewModel()->Save(model).ok());
  std::mt19937_64 rng(79);
  const auto first = RandomDocs(rng, 60), second = RandomDocs(rng, 400);
  const int delays_us[] = {0, 300, 1000, 2000, 4000, 8000, 20000, 60000};
  int restored_runs = 0, unrestored_runs = 0;
  for (int delay : delays_us) {
    SCOPED_TRACE("kill " + std::to_string(delay) + " us after the restore request");
    const std::string data = dir_ + "/data" + std::to_string(delay), port_file = dir_ + "/port";
    uint16_t port = 0, http = 0;
    const pid_t pid = testing::SpawnServe(
        {"--data-dir", data, "--model", model, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--seed",
         std::to_string(kSeed), "--keep-versions", "3", "--version-every", "1000000", "--snapshot-every", "1000000"},
        port_file, &port, &http);
    ASSERT_GT(pid, 0);
    ASSERT_NE(http, 0u);
    LogOrder order;
    uint64_t v = 0, n = 0;
    {
      Client c(port);
      n = LearnAll(c, first, 20, &order);
      WaitLearned(c, n);
      const testing::HttpAnswer kept = testing::HttpCall(http, "POST", "/v1/models");
      ASSERT_EQ(kept.status, 200) << kept.body;
      v = nlohmann::json::parse(kept.body)["version"].get<uint64_t>();
      n += LearnAll(c, second, 50, &order);
      WaitLearned(c, n);
    }
    std::atomic<int> answer{0};
    std::thread restorer(
        [&] { answer = testing::HttpCall(http, "POST", "/v1/models/" + std::to_string(v) + "/restore").status; });
    std::this_thread::sleep_for(std::chrono::microseconds(delay));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    restorer.join();
    const bool answered = answer == 200;
    // Restarted in-process on what the kill left.
    ServerOptions o = Options(data);
    o.keep_versions = 3;
    o.version_every_documents = 1000000;
    auto srv = Start(o, nullptr);
    ASSERT_TRUE(srv);
    Client c(srv->port());
    OfflineModel before, restored;
    order.TrainOffline(&before, n);
    order.TrainOffline(&restored, v);
    v1::Response snap = c.Call(SnapshotRequest());
    ASSERT_EQ(snap.code(), v1::Response::OK) << snap.message();
    auto m = LoadSnapshot(snap.snapshot().path());
    ASSERT_TRUE(m);
    const bool is_restored = m->learner_state().updates == v;
    if (answered) {
      EXPECT_TRUE(is_restored) << "the restore was answered but is not in the recovered model";
    }
    ExpectSameStatistics(*m, is_restored ? restored.model() : before.model());
    (is_restored ? restored_runs : unrestored_runs)++;
    // Nothing acknowledged is lost: after a restore, the documents after the
    // version are in the kept-aside stream; the log holds them either way.
    const std::string skipped =
        data + "/versions/skipped-" + std::to_string(v + 1) + "-" + std::to_string(n) + ".tribs";
    if (is_restored) {
      auto count = DocumentReader::CountDocuments(skipped);
      ASSERT_TRUE(count.ok()) << count.status().ToString();
      EXPECT_EQ(*count, n - v);
    }
    uint64_t logged = 0;
    auto wal = WriteAheadLog::Open(data + "/wal");
    ASSERT_TRUE(wal.ok());
    ASSERT_TRUE((*wal)
                    ->ReadRange(v + 1, n,
                                [&](const v1::WalRecord& rec) {
                                  logged += rec.has_document() ? 1 : 0;
                                  return Status::OK();
                                })
                    .ok());
    EXPECT_EQ(logged, n - v);
    srv->Shutdown();
    ASSERT_TRUE(srv->Wait().ok());
  }
  // Both outcomes were met (else the delays missed the restore entirely).
  EXPECT_GT(restored_runs, 0);
  EXPECT_GT(unrestored_runs, 0);
}

// ---- Late labels (issue 42; docs/http-api.md "Late labels") ----------------------------

// A random labelled document as the HTTP API takes it ({"terms": {...}}).
nlohmann::json JsonDoc(std::mt19937_64& rng, const std::string& id) {
  const v1::Document d = RandomDoc(rng);
  std::map<std::string, double> terms;
  for (int j = 0; j < d.term_ids_size(); ++j) terms["t" + std::to_string(d.term_ids(j))] += d.term_counts(j);
  return {{"id", id}, {"label", d.label()}, {"terms", terms}};
}

// 1,000 predictions kept with ids, their labels fed back later in another
// order, half of them after a restart: the model equals the one a second
// server learns from the same labelled documents sent to /v1/learn in that
// order, bit for bit; the delayed figures count exactly those predictions,
// as they were made (not scored again).
TEST_F(ServerTest, LateLabelsLearnAsTheSameDocumentsInTheirOrderAndCountThePredictionsMade) {
  ServerOptions o = Options();
  o.http = "127.0.0.1:0";
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(83);
  // Some learning first, so that the predictions are not all alike.
  {
    Client c(srv->port());
    WaitLearned(c, LearnAll(c, RandomDocs(rng, 60), 20, nullptr));
  }
  constexpr int kDocs = 1000, kPerRequest = 100;
  std::vector<nlohmann::json> docs;
  std::vector<std::string> ids;
  uint64_t right = 0;
  for (int r = 0; r < kDocs / kPerRequest; ++r) {
    nlohmann::json body = {{"documents", nlohmann::json::array()}, {"keep", true}};
    for (int i = 0; i < kPerRequest; ++i) {
      docs.push_back(JsonDoc(rng, "d" + std::to_string(docs.size())));
      nlohmann::json unlabelled = docs.back();
      unlabelled.erase("label");
      body["documents"].push_back(unlabelled);
    }
    const testing::HttpAnswer a = testing::HttpCall(srv->http_port(), "POST", "/v1/predict", body.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const auto j = nlohmann::json::parse(a.body);
    for (const auto& p : j["predictions"]) {
      ids.push_back(p["prediction_id"].get<std::string>());
      right += p["predicted"] == docs[ids.size() - 1]["label"] ? 1 : 0;
    }
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kDocs));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "ids are unique";
  // The labels, in another order.
  std::vector<size_t> order(kDocs);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  auto send_labels = [&](Server& server, size_t from, size_t to) {
    for (size_t b = from; b < to; b += 50) {
      nlohmann::json fb = {{"feedback", nlohmann::json::array()}};
      for (size_t i = b; i < std::min(to, b + 50); ++i) {
        fb["feedback"].push_back({{"prediction_id", ids[order[i]]}, {"label", docs[order[i]]["label"]}});
      }
      const testing::HttpAnswer a = testing::HttpCall(server.http_port(), "POST", "/v1/feedback", fb.dump());
      ASSERT_EQ(a.status, 200) << a.body;
    }
  };
  send_labels(*srv, 0, kDocs / 2);
  // Wrong ids: each a specific error, nothing learned.
  const std::string first_id = ids[order[0]];
  auto one = [&](const std::string& id) {
    return testing::HttpCall(srv->http_port(), "POST", "/v1/feedback",
                             nlohmann::json{{"feedback", {{{"prediction_id", id}, {"label", "c0"}}}}}.dump());
  };
  EXPECT_EQ(one(first_id).status, 409) << "labelled already";
  EXPECT_EQ(one("k99999999").status, 404) << "never given";
  EXPECT_EQ(one("x12").status, 400) << "not an id";
  const testing::HttpAnswer twice =
      testing::HttpCall(srv->http_port(), "POST", "/v1/feedback",
                        nlohmann::json{{"feedback",
                                        {{{"prediction_id", ids[order[kDocs - 1]]}, {"label", "c0"}},
                                         {{"prediction_id", ids[order[kDocs - 1]]}, {"label", "c1"}}}}}
                            .dump());
  EXPECT_EQ(twice.status, 409) << twice.body;  // and the id waits again (released)
  srv->Shutdown();
  ASSERT_TRUE(srv->Wait().ok());
  srv = Start(o, nullptr);
  ASSERT_TRUE(srv);
  send_labels(*srv, kDocs / 2, kDocs);
  EXPECT_EQ(one(ids[order[kDocs - 1]]).status, 409) << "labelled already, after the restart";
  // The delayed figures: exactly the 1,000 predictions, as made.
  {
    Client c(srv->port());
    WaitLearned(c, 60 + kDocs);
  }
  const testing::HttpAnswer st = testing::HttpCall(srv->http_port(), "GET", "/v1/status");
  ASSERT_EQ(st.status, 200);
  const auto status = nlohmann::json::parse(st.body);
  EXPECT_EQ(status["delayed"]["documents"].get<uint64_t>(), static_cast<uint64_t>(kDocs));
  EXPECT_DOUBLE_EQ(status["delayed"]["accuracy"].get<double>(), static_cast<double>(right) / kDocs);
  EXPECT_EQ(status["kept_predictions"]["waiting"].get<uint64_t>(), 0u);
  // The same labelled documents, in the same order, through /v1/learn.
  ServerOptions o2 = Options(dir_ + "/reference");
  o2.http = "127.0.0.1:0";
  auto ref = Start(o2);
  ASSERT_TRUE(ref);
  {
    std::mt19937_64 again(83);
    Client c(ref->port());
    WaitLearned(c, LearnAll(c, RandomDocs(again, 60), 20, nullptr));
  }
  for (size_t b = 0; b < static_cast<size_t>(kDocs); b += 50) {
    nlohmann::json body = {{"documents", nlohmann::json::array()}};
    for (size_t i = b; i < b + 50; ++i) {
      nlohmann::json d = docs[order[i]];
      body["documents"].push_back(d);
    }
    ASSERT_EQ(testing::HttpCall(ref->http_port(), "POST", "/v1/learn", body.dump()).status, 200);
  }
  Client a(srv->port()), b(ref->port());
  WaitLearned(b, 60 + kDocs);
  v1::Response sa = a.Call(SnapshotRequest()), sb = b.Call(SnapshotRequest());
  ASSERT_EQ(sa.code(), v1::Response::OK);
  ASSERT_EQ(sb.code(), v1::Response::OK);
  auto ma = LoadSnapshot(sa.snapshot().path()), mb = LoadSnapshot(sb.snapshot().path());
  ASSERT_TRUE(ma && mb);
  ExpectSameStatistics(*ma, *mb);
}

// Kept predictions expire (by bytes here; by age the same way): a label
// for one is 410, not learned; a batch with one bad id learns nothing.
TEST_F(ServerTest, ExpiredKeptPredictionsAreRefusedAndNothingIsLearned) {
  ServerOptions o = Options();
  o.http = "127.0.0.1:0";
  o.feedback_max_bytes = 400;  // a few documents
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  std::mt19937_64 rng(89);
  nlohmann::json body = {{"documents", nlohmann::json::array()}, {"keep", true}};
  std::vector<nlohmann::json> docs;
  for (int i = 0; i < 40; ++i) {
    docs.push_back(JsonDoc(rng, "e" + std::to_string(i)));
    nlohmann::json d = docs.back();
    d.erase("label");
    body["documents"].push_back(d);
  }
  const testing::HttpAnswer a = testing::HttpCall(srv->http_port(), "POST", "/v1/predict", body.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  const auto j = nlohmann::json::parse(a.body);
  const std::string oldest = j["predictions"][0]["prediction_id"], newest = j["predictions"][39]["prediction_id"];
  const testing::HttpAnswer late =
      testing::HttpCall(srv->http_port(), "POST", "/v1/feedback",
                        nlohmann::json{{"feedback",
                                        {{{"prediction_id", newest}, {"label", docs[39]["label"]}},
                                         {{"prediction_id", oldest}, {"label", docs[0]["label"]}}}}}
                            .dump());
  EXPECT_EQ(late.status, 410) << late.body;
  EXPECT_THAT(late.body, HasSubstr(oldest));
  EXPECT_THAT(late.body, HasSubstr("expired"));
  const testing::HttpAnswer ok = testing::HttpCall(
      srv->http_port(), "POST", "/v1/feedback",
      nlohmann::json{{"feedback", {{{"prediction_id", newest}, {"label", docs[39]["label"]}}}}}.dump());
  EXPECT_EQ(ok.status, 200) << ok.body << " (the newest was released by the refused batch)";
  const auto m = testing::HttpMetrics(srv->http_port());
  EXPECT_GT(m.at("tributary_kept_predictions_expired_total"), 30);
  EXPECT_EQ(m.at("tributary_kept_predictions_total"), 40);
  EXPECT_EQ(m.at("tributary_http_errors_total{status=\"410\",code=\"EXPIRED\"}"), 1);
}

}  // namespace
}  // namespace tributary
