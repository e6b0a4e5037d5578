// One client connection of the framed protobuf protocol (Request / Response):
// framing, authentication, idle timeout, backpressure (connection.cc), and
// the handling of each request kind (connection_requests.cc). Its state lives
// on its strand; Complete() may be called from any thread.
#ifndef TRIBUTARY_STREAMS_SRC_SERVER_CONNECTION_H_
#define TRIBUTARY_STREAMS_SRC_SERVER_CONNECTION_H_

#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace tributary {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl* srv, tcp::socket socket);
  ~Connection();

  void Start();

  // Called from any thread: fills `slot` with `response` and writes what is
  // ready, in request order.
  void Complete(uint64_t slot, v1::Response response);

 private:
  void ArmIdle();
  // Closes a connection that has not shown the auth token in time.
  void ArmAuthDeadline();
  // Refuses with UNAUTHENTICATED and closes once the answer is written.
  void RefuseUnauthenticated(uint64_t slot, uint64_t id);
  // Keeps srv_->buffered_bytes in step with buf_.size().
  void Account();
  // True (and closes) when the frame being received arrives too slowly.
  bool TooSlow();
  // Takes needs_reservation_ bytes from the budget; false when it is spent.
  bool TryReserve();
  void ReleaseReservation();
  void ReadMore();
  // Parses one complete frame from buf_ and handles it. False when more
  // bytes are needed.
  bool ParseOne();
  bool BadFrame(const std::string& why);
  uint64_t NewSlot();
  void Fill(uint64_t slot, std::string frame);
  void Flush();
  void MaybeFinish();
  // The requests (connection_requests.cc).
  v1::Response ErrorResponse(uint64_t id, v1::Response::Code code, const std::string& msg);
  void Handle(v1::Request req);
  v1::Response Predict(uint64_t id, const v1::PredictRequest& pr, Clock::time_point start);
  void Learn(uint64_t slot, uint64_t id, v1::LearnRequest lr, Clock::time_point start);
  void Enqueue(std::shared_ptr<LearnJob> job, uint64_t n);

  Server::Impl* srv_;
  tcp::socket socket_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer idle_;
  asio::steady_timer auth_deadline_;
  asio::steady_timer budget_wait_;  // retries a read held back by max_buffered_bytes
  std::array<char, 64 * 1024> chunk_{};
  std::string buf_, out_;
  std::deque<std::pair<uint64_t, std::optional<std::string>>> slots_;
  uint64_t next_slot_ = 0;
  bool reading_ = false, parsing_ = false, writing_ = false, closing_ = false, paused_ = false, peer_gone_ = false;
  Clock::time_point write_started_{};
  bool authenticated_ = false;  // no token configured, or the token was shown
  uint64_t stranger_id_ = 0;    // in srv_->strangers until the token is shown (0: not)
  // The token was shown: no longer a stranger, no deadline.
  void MarkAuthenticated();
  uint64_t accounted_ = 0;          // this connection's share of srv_->buffered_bytes
  uint64_t reserved_ = 0;           // this frame's reservation in srv_->frame_reservations
  uint64_t needs_reservation_ = 0;  // a frame of this size waits for one
  // The frame being received: since when, and how many of its bytes so far.
  Clock::time_point partial_since_{};
  uint64_t partial_bytes_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_STREAMS_SRC_SERVER_CONNECTION_H_
