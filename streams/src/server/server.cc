// The server's life cycle: recovery and binding (Start), shutdown, signals.
// The parts it starts: connection.cc (I/O threads), committer.cc,
// learner_loop.cc, metrics.cc (HTTP).
#include "tributary/server.h"

#include "server/server_impl.h"  // before any other Asio include: it configures Asio for TSan builds

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "server/source_reader.h"
#include "tributary/plugin_registry.h"
#include "tributary/sep_engine.h"

namespace tributary {

std::string ScopeNames(uint32_t scopes) {
  std::string out;
  for (const auto& [bit, name] :
       {std::pair<uint32_t, const char*>{kScopePredict, "predict"}, {kScopeLearn, "learn"}, {kScopeAdmin, "admin"}}) {
    if (scopes & bit) out += (out.empty() ? "" : ",") + std::string(name);
  }
  return out.empty() ? "none" : out;
}

Result<uint32_t> ParseScopes(const std::string& names) {
  uint32_t scopes = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = names.find(',', start);
    const std::string word = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (word == "predict") {
      scopes |= kScopePredict;
    } else if (word == "learn") {
      scopes |= kScopeLearn;
    } else if (word == "admin") {
      scopes |= kScopeAdmin;
    } else if (word == "all") {
      scopes |= kScopeAll;
    } else {
      return Status::InvalidArgument("scope '" + word + "': expected predict, learn, admin or all (comma-separated)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return scopes;
}

namespace {

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

// ---- Stopping ---------------------------------------------------------------------

void Server::Impl::Fail(const Status& st) {
  {
    std::lock_guard<std::mutex> l(done_mu);
    if (fatal.ok()) fatal = st;
  }
  ShutdownNow();
}

void Server::Impl::ShutdownNow() {
  std::call_once(shutdown_once, [this] {
    drain_deadline = Clock::now() + std::chrono::milliseconds(opt.drain_timeout_ms);
    draining = true;
    asio::post(accept_strand, [this] {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      http_acceptor.close(ignored);
      std::lock_guard<std::mutex> l(signals_mu);
      if (signals) signals->cancel(ignored);
    });
    std::thread([this] {
      // Readers first: a batch they submitted is answered by the committer;
      // what they have not submitted stays unacknowledged in the broker.
      for (auto& r : readers) r->Stop();
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
      // Nothing writes to the data directory any more: another server (or a
      // restart in this process) may open it from now on.
      if (data_dir != nullptr) data_dir->Unlock();
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
  (void)Wait();  // (its Status was the caller's to ask for)
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
  s.env = s.opt.env ? s.opt.env : Env::Default();
  for (const auto& url : s.opt.sources) {
    auto a = MakeBrokerAdapter(url);
    if (!a.ok()) return a.status();
    for (const auto& r : s.readers) {
      if (r->adapter().key() == (*a)->key()) {
        return Status::InvalidArgument("--source '" + url + "': the same source is given twice (" + (*a)->key() + ")");
      }
    }
    s.readers.push_back(std::make_unique<SourceReader>(&s, std::move(a).value(), url));
  }
  if (s.opt.registry != nullptr) s.registry = s.opt.registry;
  // The certificate and key are checked before anything is locked or bound.
  if (Status st = s.LoadTls(); !st.ok()) return st;
  {
    // Locked first: a second server on the same directory is refused before
    // it binds anything, naming the process that holds it.
    DataDirOptions dopt;
    dopt.env = s.env;
    dopt.holder = "tributary serve";
    dopt.on_corruption = s.opt.on_corruption;
    dopt.initial_hint = "pass --model or --schema";
    auto dir = DataDir::Open(s.opt.data_dir, dopt);
    if (!dir.ok()) return dir.status().WithContext("serve");
    s.data_dir = std::move(dir).value();
    s.wal = s.data_dir->wal();
  }

  // 0. /healthz and /metrics first, so an operator (or an orchestrator's
  // readiness probe) sees "not ready: replaying" during a long recovery
  // instead of a refused connection. The protocol port opens when ready.
  boost::system::error_code ec;
  if (!s.opt.http.empty()) {
    auto hep = ParseEndpoint(s.opt.http);
    if (!hep.ok()) return hep.status();
    s.http_acceptor.open(hep->protocol(), ec);
    if (!ec) s.http_acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s.http_acceptor.bind(*hep, ec);
    if (!ec) s.http_acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::IOError("cannot listen (HTTP) on " + s.opt.http + ": " + ec.message());
    s.http_port = s.http_acceptor.local_endpoint(ec).port();
    if (s.opt.on_http_listening) s.opt.on_http_listening(s.http_port);
  }
  // 1. The model, before any thread of ours runs: loading a plugin the
  // snapshot names may fork a probe process (plugin_registry.h). /healthz
  // connections wait in the listen backlog meanwhile.
  auto loaded = s.data_dir->LoadModel(*s.registry, std::move(initial), &s.recovery);
  if (!loaded.ok()) return loaded.status().WithContext("serve");
  s.work.emplace(asio::make_work_guard(s.io));
  Impl* raw = impl.get();
  s.io_readers.resize(s.opt.io_threads);
  for (unsigned i = 0; i < s.opt.io_threads; ++i) s.io_threads.emplace_back([raw, i] { raw->RunIo(i); });
  if (!s.opt.http.empty()) s.StartHttpAccept();
  auto stop_io = [&](Status st) {
    asio::post(s.accept_strand, [raw] {
      boost::system::error_code ignored;
      raw->http_acceptor.close(ignored);
    });
    s.work.reset();
    s.io.stop();
    for (auto& t : s.io_threads)
      if (t.joinable()) t.join();
    return st;
  };
  Status recovered = s.Recover(std::move(loaded).value());
  if (!recovered.ok()) return stop_io(recovered);
  // 3. The protocol socket.
  auto ep = ParseEndpoint(s.opt.listen);
  if (!ep.ok()) return stop_io(ep.status());
  s.acceptor.open(ep->protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(*ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return stop_io(Status::IOError("cannot listen on " + s.opt.listen + ": " + ec.message()));
  s.port = s.acceptor.local_endpoint(ec).port();
  // 4. Threads.
  s.StartAccept();
  s.committer = std::thread([raw] { raw->CommitterLoop(); });
  s.learner_thread = std::thread([raw] { raw->LearnerLoop(); });
  s.recovery_phase = RecoveryPhase::kReady;
  for (auto& r : s.readers) r->Start();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

// Step 2 of Start: the model (from the newest readable snapshot, or the
// initial one: DataDir::LoadModel) served, the log replayed onto it, a
// snapshot of the result, the first published model. Runs on Start's thread
// while /healthz answers "not ready".
Status Server::Impl::Recover(std::unique_ptr<Model> model) {
  Impl& s = *this;
  const uint64_t after = s.recovery.snapshot_sequence;
  s.applied_sequence = after;
  s.snapshot_sequence = after;
  if (!model->loss_plugin()) return Status::InvalidArgument("serve: the model has no loss to learn with");
  const bool holds_live = LiveLearner::Holds(*model);
  if (holds_live && s.opt.engine != Engine::kAuto && s.opt.engine != Engine::kSdem) {
    return Status::InvalidArgument("serve: the model in '" + s.opt.data_dir +
                                   "' is a live learner, which learns with sdEM, not --engine " +
                                   EngineName(s.opt.engine));
  }
  auto resolved = ResolveEngine(s.opt.engine, model->family());  // learner.h: the one rule
  if (!resolved.ok()) return resolved.status().WithContext("serve");
  const Engine engine = *resolved;
  if (engine == Engine::kEp) {
    return Status::InvalidArgument(
        "serve: --engine ep keeps a site per document, which grows without bound on a stream: use --engine sep "
        "(one damped global site) or adf");
  }
  {
    // The server publishes by its own rule (ServerOptions::publish_every_updates
    // and publish_interval_ms: LearnerLoop), not the handle's count. Readers:
    // one per I/O thread and per source, and a few for other threads.
    LiveModelOptions lo;
    lo.learner.engine = engine;
    lo.learner.seed = s.opt.seed;  // N: the model's (effective_size 0 keeps it)
    lo.publish_every = 0;
    lo.max_readers = static_cast<uint32_t>(std::min<size_t>(4096, s.opt.io_threads + s.readers.size() + 16));
    model->SetGrowthLimits(GrowthLimits{s.opt.max_classes, s.opt.max_terms, s.opt.max_label_bytes},
                           s.opt.max_model_bytes);
    lo.registry = s.registry;  // a live learner's candidates
    auto made = LiveModel::Create(std::move(model), lo);
    if (!made.ok()) return made.status();
    s.live = std::move(made).value();
  }
  // The settings as recovered (serve's note on flags a restart ignores): a
  // live learner's first candidate is the base the defaults built it from.
  s.live_learner = holds_live;
  s.recovery.live = holds_live;
  auto note_settings = [&](const Model& m) {
    s.recovery.family = m.family().name;
    s.recovery.loss = m.loss_plugin()->name;
    s.recovery.family_options.assign(m.family_options().begin(), m.family_options().end());
    s.recovery.schedule = m.learner_state().schedule;
    s.recovery.effective_size = m.learner_state().effective_size;
  };
  if (holds_live) {
    TRIB_RETURN_IF_ERROR(s.live->WithLiveLearner([&](LiveLearner* l) {
      // The candidates share --max-model-bytes (LiveLearner::SetGrowthLimits):
      // a learner that holds more already cannot keep the bound.
      uint64_t stats = 0;
      for (size_t i = 0; i < l->num_candidates(); ++i) stats += l->candidate_model(i).statistics_bytes();
      if (s.opt.max_model_bytes != 0 && stats > s.opt.max_model_bytes) {
        return Status::InvalidArgument(
            "serve: the live learner's " + std::to_string(l->num_candidates()) + " candidates hold " +
            std::to_string(stats) + " bytes of statistics together, over --max-model-bytes " +
            std::to_string(s.opt.max_model_bytes) + "; raise --max-model-bytes (or start a new --data-dir with " +
            "--select off: one learner)");
      }
      note_settings(*l->schema_model());
      for (const LiveAlarm& a : l->alarms()) s.live_alarms.push_back(a.document);
      s.live_switches = l->switches();
      s.live_served = l->candidate_stats()[l->served_index()].label;
      return Status::OK();
    }));
  } else {
    TRIB_RETURN_IF_ERROR(s.live->WithModel([&](Model* m) {
      note_settings(*m);
      return Status::OK();
    }));
  }
  // 2. Replay the log tail (damage handled by the policy: wal.h).
  // Broker positions of every record the log holds (also those the
  // snapshot covers): entries a broker delivers again are recognised.
  // The kept predictions (late labels) before the log: a replayed label of
  // one finds it, and counts it unless its mark was read.
  TRIB_RETURN_IF_ERROR(s.OpenFeedback());
  s.recovery_phase = RecoveryPhase::kReplaying;
  auto note_source = [&](const v1::WalRecord& rec) {
    if (!rec.has_source()) return;
    for (auto& r : s.readers) {
      if (r->adapter().key() == rec.source().source()) r->adapter().Recovered(rec.source());
    }
  };
  TRIB_RETURN_IF_ERROR(s.data_dir->Replay(
      [&](const v1::WalRecord& rec) {
        s.replay_progress.fetch_add(1, std::memory_order_relaxed);
        note_source(rec);
        return s.Apply(rec);
      },
      s.readers.empty() ? nullptr : std::function<void(const v1::WalRecord&)>(note_source), &s.recovery,
      &s.next_sequence));
  TRIB_RETURN_IF_ERROR(s.feedback->Sync().WithContext("kept predictions"));
  // Versions beyond --keep-versions (lowered since they were kept) go now,
  // once the log's restores have pinned what they need.
  TRIB_RETURN_IF_ERROR(s.data_dir->PruneVersions(s.opt.keep_versions));
  // Whole records that do not parse are skipped like a refused document
  // (counted, the model's sequence past them).
  for (const uint64_t seq : s.recovery.unreadable_sequences) {
    s.counters.documents_skipped++;
    s.applied_sequence = std::max(s.applied_sequence, seq);
    TRIB_RETURN_IF_ERROR(s.live->WithModel([](Model* m) {
      m->learner_state().skipped_documents++;
      return Status::OK();
    }));
  }
  // Documents in the model, whether they came from the snapshot or the log.
  s.counters.documents_learned = s.live->learned();
  s.counters.documents_acknowledged = s.next_sequence - 1;
  // A new data directory gets its base snapshot at once (so a damaged later
  // snapshot always has one before it); after a replay, or after damage, a
  // snapshot makes the recovered state the starting point.
  if (s.recovery.replayed > 0 || !s.recovery.from_snapshot || s.recovery.damage.size() > 0) {
    TRIB_RETURN_IF_ERROR(s.SaveSnapshot());
  }
  s.recovery_phase = RecoveryPhase::kSnapshot;
  TRIB_RETURN_IF_ERROR(s.Publish());
  return Status::OK();
}

}  // namespace tributary
