// A client connection of the framed protobuf protocol (connection.h): its
// reads and framing, the token deadline, the idle timer, the budget of
// buffered bytes, and its answers written in request order; and the accept
// loop that creates connections. What each request does is in
// connection_requests.cc.
#include "server/connection.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "server/frame.h"

namespace tributary {

using server_internal::FrameMessage;
using server_internal::FrameParse;

// ---- Connection --------------------------------------------------------------

Connection::Connection(Server::Impl* srv, tcp::socket socket)
    : srv_(srv),
      socket_(std::move(socket)),
      strand_(asio::make_strand(srv->io)),
      idle_(strand_),
      auth_deadline_(strand_),
      budget_wait_(strand_),
      authenticated_(!server_internal::AuthEnabled(srv->opt.auth_token, &srv->opt.scoped_tokens)) {}

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
  Fill(slot, FrameMessage(ErrorResponse(id, v1::Response::UNAUTHENTICATED,
                                        "missing or wrong auth_token; closing the connection")));
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
  asio::post(strand_, [self = shared_from_this(), slot, r = std::move(response)]() mutable {
    self->Fill(slot, FrameMessage(r));
  });
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
  limits.scoped_tokens = &srv_->opt.scoped_tokens;
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
    Fill(NewSlot(),
         FrameMessage(ErrorResponse(frame_id, v1::Response::INVALID_REQUEST,
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
  Fill(slot, FrameMessage(r));
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
      auto frame = std::make_shared<std::string>(FrameMessage(r));
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
