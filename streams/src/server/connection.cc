// The client connection (framed protobuf protocol) and the accept loop that
// creates connections.
#include "server/connection.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "server/frame.h"
#include "tributary/metrics.h"

namespace tributary {

using server_internal::CountError;
using server_internal::FrameParse;

namespace {

std::string Frame(const google::protobuf::MessageLite& msg) { return server_internal::FrameMessage(msg); }

}  // namespace

// ---- Connection --------------------------------------------------------------

Connection::Connection(Server::Impl* srv, tcp::socket socket)
    : srv_(srv),
      socket_(std::move(socket)),
      strand_(asio::make_strand(srv->io)),
      idle_(strand_),
      auth_deadline_(strand_),
      budget_wait_(strand_),
      authenticated_(srv->opt.auth_token.empty()) {}

Connection::~Connection() {
  srv_->ForgetStranger(stranger_id_);
  srv_->buffered_bytes -= accounted_;
  srv_->frame_reservations -= reserved_;
  srv_->open_connections--;
}

void Connection::Start() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->ArmIdle();
    self->ArmAuthDeadline();
    self->ReadMore();
  });
}

void Connection::MarkAuthenticated() {
  if (authenticated_) return;
  authenticated_ = true;
  auth_deadline_.cancel();
  srv_->ForgetStranger(stranger_id_);
  stranger_id_ = 0;
}

void Connection::ArmAuthDeadline() {
  if (authenticated_) return;
  // A stranger's slot is among the few kept for strangers: the oldest is
  // closed when a newer one needs it (ServerOptions::max_unauthenticated_connections).
  boost::system::error_code peer_ec;
  const auto remote = socket_.remote_endpoint(peer_ec);
  stranger_id_ = srv_->AdmitStranger(peer_ec ? std::string() : remote.address().to_string(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      asio::post(self->strand_, [self] {
        if (self->authenticated_ || self->closing_) return;
        self->peer_gone_ = true;  // nothing is owed to a stranger
        self->closing_ = true;
        self->buf_.clear();
        self->Account();
        boost::system::error_code ignored;
        self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
        self->MaybeFinish();
      });
    }
  });
  if (srv_->opt.auth_timeout_s == 0) return;
  auth_deadline_.expires_after(std::chrono::seconds(srv_->opt.auth_timeout_s));
  auth_deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->authenticated_) return;
    self->srv_->counters.err_unauthenticated++;
    self->peer_gone_ = true;  // nothing is owed to a stranger
    self->closing_ = true;
    self->buf_.clear();
    self->Account();
    self->MaybeFinish();
  });
}

void Connection::RefuseUnauthenticated(uint64_t slot, uint64_t id) {
  // One guess per connection: the answer is written, then the connection
  // is closed, so guessing costs a TCP handshake each time.
  buf_.clear();
  Account();
  closing_ = true;
  Fill(slot,
       Frame(ErrorResponse(id, v1::Response::UNAUTHENTICATED, "missing or wrong auth_token; closing the connection")));
  MaybeFinish();
}

void Connection::Account() {
  const uint64_t now = buf_.size();
  if (now >= accounted_) {
    srv_->buffered_bytes += now - accounted_;
  } else {
    srv_->buffered_bytes -= accounted_ - now;
  }
  accounted_ = now;
}

bool Connection::TryReserve() {
  uint64_t cur = srv_->frame_reservations.load();
  for (;;) {
    // One frame alone is admitted even over the budget (max_frame_bytes
    // bounds it), so a budget below the largest frame cannot stall forever.
    if (cur != 0 && cur + needs_reservation_ > srv_->opt.max_buffered_bytes) return false;
    if (srv_->frame_reservations.compare_exchange_weak(cur, cur + needs_reservation_)) break;
  }
  reserved_ = needs_reservation_;
  needs_reservation_ = 0;
  return true;
}

void Connection::ReleaseReservation() {
  srv_->frame_reservations -= reserved_;
  reserved_ = 0;
  needs_reservation_ = 0;
}

bool Connection::TooSlow() {
  if (buf_.empty() || srv_->opt.min_frame_bytes_per_s == 0) return false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - partial_since_).count();
  if (elapsed <= srv_->opt.rate_grace_s) return false;
  if (static_cast<double>(partial_bytes_) >= elapsed * srv_->opt.min_frame_bytes_per_s) return false;
  srv_->counters.err_frame++;
  peer_gone_ = true;  // a peer this slow would not read the answer either
  closing_ = true;
  buf_.clear();
  Account();
  MaybeFinish();
  return true;
}

void Connection::Complete(uint64_t slot, v1::Response response) {
  asio::post(strand_,
             [self = shared_from_this(), slot, r = std::move(response)]() mutable { self->Fill(slot, Frame(r)); });
}

void Connection::ArmIdle() {
  if (srv_->opt.idle_timeout_s == 0) return;
  idle_.expires_after(std::chrono::seconds(srv_->opt.idle_timeout_s));
  idle_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    const auto limit = std::chrono::seconds(self->srv_->opt.idle_timeout_s);
    // Idle: nothing owed. Stalled: a peer that has not taken a single
    // response for the whole idle time (it never reads) would otherwise
    // hold its connection, and its slot under max_connections, forever.
    // A frame still arriving at the minimum rate is not idleness.
    bool receiving = false;
    if (!self->buf_.empty()) {
      if (self->TooSlow()) return;  // closed
      receiving = true;
    }
    const bool idle = self->slots_.empty() && !self->writing_ && !receiving;
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

void Connection::ReadMore() {
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
  if (needs_reservation_ > 0 && !TryReserve()) {
    // The budget for large frames is spent: wait until other connections
    // finish theirs (this one's rate is still checked by the idle timer).
    budget_wait_.expires_after(std::chrono::milliseconds(5));
    budget_wait_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->ReadMore();
    });
    return;
  }
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
        if (self->buf_.empty()) {
          self->partial_since_ = Clock::now();
          self->partial_bytes_ = 0;
        }
        self->buf_.append(self->chunk_.data(), n);
        self->partial_bytes_ += n;
        self->Account();
        if (self->TooSlow()) return;
        self->ReadMore();
      }));
}

bool Connection::ParseOne() {
  server_internal::FrameLimits limits;
  limits.max_frame_bytes = srv_->opt.max_frame_bytes;
  limits.check_token = !authenticated_;
  limits.pre_auth_max_frame_bytes = srv_->opt.pre_auth_max_frame_bytes;
  limits.auth_token = srv_->opt.auth_token;
  FrameParse f = server_internal::ParseFrame(buf_, limits);
  if (f.token_shown) MarkAuthenticated();
  switch (f.kind) {
    case FrameParse::kBad:
      return BadFrame(f.error);
    case FrameParse::kUnauthenticated:
      RefuseUnauthenticated(NewSlot(), 0);
      return false;
    case FrameParse::kNeedMore:
      if (f.header_bytes > 0 && reserved_ == 0 && f.header_bytes + f.body_bytes > chunk_.size()) {
        needs_reservation_ = f.header_bytes + f.body_bytes;
      }
      return false;
    case FrameParse::kFrame:
      break;
  }
  const size_t hdr = f.header_bytes;
  const uint32_t len = f.body_bytes;
  ReleaseReservation();
  // A request of more documents than a request may hold is refused before
  // they are parsed (each parsed document costs ~200 bytes however small
  // its bytes: a 15 MB frame of empty documents became 0.8 GB).
  uint64_t frame_id = 0;
  const size_t docs = authenticated_ && srv_->opt.max_request_documents != 0
                          ? server_internal::CountRequestDocuments(std::string_view(buf_).substr(hdr, len), &frame_id)
                          : 0;
  if (docs > srv_->opt.max_request_documents) {
    buf_.erase(0, hdr + len);
    Account();
    partial_since_ = Clock::now();
    partial_bytes_ = buf_.size();
    ArmIdle();
    srv_->counters.requests++;
    srv_->counters.document_limit_refusals++;
    Fill(NewSlot(), Frame(ErrorResponse(frame_id, v1::Response::INVALID_REQUEST,
                                        "request holds " + std::to_string(docs) + " documents, over the limit of " +
                                            std::to_string(srv_->opt.max_request_documents) +
                                            " (--max-request-documents): send them in smaller requests")));
    return true;
  }
  v1::Request req;
  bool ok = server_internal::ParseRequest(std::string_view(buf_).substr(hdr, len), &req);
  buf_.erase(0, hdr + len);
  Account();
  // The next frame starts now; a complete request is activity.
  partial_since_ = Clock::now();
  partial_bytes_ = buf_.size();
  ArmIdle();
  if (!ok) return BadFrame("frame does not parse as tributary.v1.Request");
  srv_->counters.requests++;
  Handle(std::move(req));
  return true;
}

bool Connection::BadFrame(const std::string& why) {
  srv_->counters.err_frame++;
  v1::Response r;
  r.set_code(v1::Response::INVALID_REQUEST);
  r.set_message(why + "; closing the connection (framing lost)");
  // Stop reading before anything else: nothing after this point is parsed.
  buf_.clear();
  Account();
  closing_ = true;
  uint64_t slot = NewSlot();
  Fill(slot, Frame(r));
  MaybeFinish();
  return false;
}

uint64_t Connection::NewSlot() {
  uint64_t s = next_slot_++;
  slots_.push_back({s, std::nullopt});
  return s;
}

void Connection::Fill(uint64_t slot, std::string frame) {
  for (auto& s : slots_) {
    if (s.first == slot) {
      s.second = std::move(frame);
      break;
    }
  }
  Flush();
}

void Connection::Flush() {
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

void Connection::MaybeFinish() {
  if (!closing_ || writing_) return;
  if (!peer_gone_ && !slots_.empty()) return;  // answers still owed
  if (reading_) {
    boost::system::error_code ignored;
    socket_.cancel(ignored);
  }
  idle_.cancel();
  auth_deadline_.cancel();
  budget_wait_.cancel();
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

v1::Response Connection::ErrorResponse(uint64_t id, v1::Response::Code code, const std::string& msg) {
  CountError(srv_->counters, code);
  v1::Response r;
  r.set_request_id(id);
  r.set_code(code);
  r.set_message(msg);
  return r;
}

void Connection::Handle(v1::Request req) {
  const uint64_t slot = NewSlot();
  const uint64_t id = req.request_id();
  auto start = Clock::now();
  const server_internal::RequestCheck check = server_internal::CheckRequest(req, srv_->opt.auth_token);
  if (check == server_internal::RequestCheck::kUnauthenticated) {
    RefuseUnauthenticated(slot, id);
    return;
  }
  if (!srv_->opt.auth_token.empty()) MarkAuthenticated();
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
      s->set_documents_learned(srv_->counters.documents_learned);
      s->set_predictions(srv_->counters.predictions);
      s->set_queue_depth(srv_->QueueDepth());
      s->set_wal_sequence(srv_->counters.documents_acknowledged);
      s->set_errors(srv_->counters.errors());
      s->set_learning_enabled(srv_->learning_enabled);
      // (The protocol port opens once recovery is done: a model is published.)
      Status read = srv_->Read([&](const LiveView& pub) {
        s->set_model_version(pub.version);
        s->set_family(pub.model->family().name);
        s->set_loss(pub.model->loss_plugin() ? pub.model->loss_plugin()->name : "");
        return Status::OK();
      });
      if (!read.ok()) {
        Fill(slot, Frame(ErrorResponse(id, v1::Response::INTERNAL, read.ToString())));
        return;
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
  Fill(slot, Frame(ErrorResponse(id, v1::Response::INVALID_REQUEST, server_internal::kNoKindMessage)));
}

v1::Response Connection::Predict(uint64_t id, const v1::PredictRequest& pr, Clock::time_point start) {
  v1::Response r;
  r.set_request_id(id);
  auto* out = r.mutable_predict();
  const Model* model = nullptr;
  int bad = -1;
  // Protobuf: per Prediction its tags, lengths and index (32 bytes), a
  // packed double 8 bytes, a string byte one.
  Status st = srv_->PredictDocuments(
      pr.documents(), Server::Impl::AnswerShape{32, 8, 1},
      [&](const Server::Impl::PredictedOutputs& o) {
        model = o.model;
        out->set_model_version(o.version);
        for (uint32_t k = 0; k < o.model->num_outputs(); ++k) out->add_class_names(o.model->OutputName(k));
      },
      [&](int i, const std::vector<double>& probs, uint32_t best) {
        auto* p = out->add_predictions();
        p->set_id(pr.documents(i).id());
        p->set_index(static_cast<uint64_t>(i));
        p->set_predicted(model->OutputName(best));
        for (double x : probs) p->add_probabilities(x);
      },
      &bad);
  if (!st.ok()) {
    return bad >= 0 || bad == Server::Impl::kAnswerTooLarge
               ? ErrorResponse(id, v1::Response::INVALID_REQUEST, "predict: " + st.message())
               : ErrorResponse(id, v1::Response::INTERNAL, st.ToString());
  }
  srv_->counters.predictions += static_cast<uint64_t>(pr.documents_size());
  srv_->counters.predict_latency.Observe(std::chrono::duration<double>(Clock::now() - start).count());
  return r;
}

void Connection::Learn(uint64_t slot, uint64_t id, v1::LearnRequest lr, Clock::time_point start) {
  if (auto refusal = srv_->CheckLearn(lr)) {
    Fill(slot, Frame(ErrorResponse(id, refusal->code, refusal->message)));
    return;
  }
  const uint64_t n = static_cast<uint64_t>(lr.documents_size());
  auto job = std::make_shared<LearnJob>();
  job->docs.assign(std::make_move_iterator(lr.mutable_documents()->begin()),
                   std::make_move_iterator(lr.mutable_documents()->end()));
  job->complete = [weak = weak_from_this(), slot, this_srv = srv_](v1::Response r) {
    // Errors are counted here, whether or not the client is still there.
    if (r.code() != v1::Response::OK) CountError(this_srv->counters, r.code());
    if (auto c = weak.lock()) c->Complete(slot, std::move(r));
  };
  job->request_id = id;
  job->start = start;
  Enqueue(job, n);
}

void Connection::Enqueue(std::shared_ptr<LearnJob> job, uint64_t n) {
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
  if (srv_->SubmitLearn(*job)) return;
  // The committer has drained and stopped (shutdown): this request, read
  // before the drain but admitted after it, would never be logged or
  // answered. Refuse it instead.
  srv_->ReleaseCapacity(n);
  v1::Response r;
  r.set_request_id(job->request_id);
  r.set_code(v1::Response::UNAVAILABLE);
  r.set_message("server is shutting down");
  job->complete(std::move(r));
}

// ---- Strangers: connections that have not shown the token -------------------------

uint64_t Server::Impl::AdmitStranger(std::string peer, std::function<void()> close) {
  if (opt.auth_token.empty()) return 0;
  std::function<void()> evict;
  uint64_t id;
  {
    std::lock_guard<std::mutex> l(strangers_mu);
    id = next_stranger++;
    strangers.emplace(id, Stranger{std::move(peer), std::move(close)});
    if (opt.max_unauthenticated_connections != 0 && strangers.size() > opt.max_unauthenticated_connections) {
      // The address with the most stranger slots (the earliest to reach that
      // count on a tie), then its oldest connection: O(slots), a few dozen.
      std::map<std::string_view, size_t> per_peer;
      std::string_view busiest;
      size_t most = 0;
      for (const auto& [sid, st] : strangers) {
        const size_t n = ++per_peer[st.peer];
        if (n > most) {
          most = n;
          busiest = st.peer;
        }
      }
      for (auto it = strangers.begin(); it != strangers.end(); ++it) {
        if (it->second.peer == busiest) {
          evict = std::move(it->second.close);
          strangers.erase(it);
          break;
        }
      }
    }
  }
  if (evict) {
    counters.strangers_evicted++;
    evict();
  }
  return id;
}

void Server::Impl::ForgetStranger(uint64_t id) {
  if (id == 0) return;
  std::lock_guard<std::mutex> l(strangers_mu);
  strangers.erase(id);
}

size_t Server::Impl::StrangerCount() {
  std::lock_guard<std::mutex> l(strangers_mu);
  return strangers.size();
}

// ---- Accept loop -----------------------------------------------------------------

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

}  // namespace tributary
