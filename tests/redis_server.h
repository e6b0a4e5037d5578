// A real redis-server for tests: started by the test itself on a free port
// (no persistence), killed or restarted to simulate failures; and small
// hiredis helpers. Used by redis_source_test.cc and server_source_test.cc.
#ifndef TRIBUTARY_TESTS_REDIS_SERVER_H_
#define TRIBUTARY_TESTS_REDIS_SERVER_H_

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tributary::testing {

constexpr const char* kRedisServer = "/usr/bin/redis-server";

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;
struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;

inline std::string Str(const redisReply* r) { return r && r->str ? std::string(r->str, r->len) : std::string(); }

inline uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// A redis-server child process.
class RedisServer {
 public:
  ~RedisServer() { Kill(); }
  // Starts the server on `port` with its files in `dir`; true once it
  // answers PING (within 10 s).
  bool Start(uint16_t port, const std::string& dir) {
    port_ = port;
    std::vector<std::string> args = {kRedisServer, "--port",    std::to_string(port), "--bind",      "127.0.0.1",
                                     "--save",     "",          "--appendonly",       "no",          "--dir",
                                     dir,          "--logfile", dir + "/redis.log",   "--daemonize", "no"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, kRedisServer, nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      return false;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken?
        pid_ = -1;
        return false;
      }
      Context c(redisConnectWithTimeout("127.0.0.1", port, timeval{0, 200000}));
      // A read timeout too: between the waitpid above and this connect our
      // server may have exited (the port taken after FreePort chose it) and
      // another program listening there would never answer the PING (seen
      // once on a loaded machine: the test blocked in read() until ctest's
      // timeout). With it the PING fails and the next waitpid sees the exit.
      if (c && c->err == 0 && redisSetTimeout(c.get(), timeval{1, 0}) == REDIS_OK) {
        Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
        if (r && Str(r.get()) == "PONG") return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Kill();
    return false;
  }
  // SIGKILL: the server vanishes without closing anything cleanly.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// Runs a command (binary-safe arguments); nullptr when the connection failed.
inline Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

}  // namespace tributary::testing

#endif  // TRIBUTARY_TESTS_REDIS_SERVER_H_
