// The strangers: connections of both ports (the binary protocol's and
// HTTP's) that have not shown the auth token yet, and the eviction that keeps
// their number under ServerOptions::max_unauthenticated_connections.
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "server/frame.h"
#include "server/server_impl.h"

namespace tributary {

uint64_t Server::Impl::AdmitStranger(std::string peer, std::function<void()> close) {
  if (!server_internal::AuthEnabled(opt.auth_token, &opt.scoped_tokens)) return 0;
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

}  // namespace tributary
