// A small HTTP service that embeds Tributary's learner (tributary/live_model.h)
// instead of talking to `tributary serve`: it learns from one endpoint and
// predicts on another, at the same time, in one process.
//
//   POST /learn     body: documents, one per line, "label<TAB>text"
//                   -> {"learned": n, "version": v}
//   POST /predict   body: one text -> {"label": "...", "version": v}
//   POST /snapshot  saves the newest publication to the configured path
//                   -> {"version": v}
//   GET  /stats     -> {"version": v, "learned": n, "readers": r}
//
// One thread accepts; each connection gets a thread of its own with its own
// LiveModel::Reader (so predictions take no lock and never wait for a learn
// request), and learn requests go through the handle's writer side.
#ifndef EMBED_SERVICE_SERVICE_H_
#define EMBED_SERVICE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "tributary/live_model.h"
#include "tributary/status.h"

namespace embed {

struct ServiceOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;       // 0: any free port (see Service::port())
  std::string plugin_dir;  // the installed built-in plugins (TRIBUTARY_PLUGIN_DIR from find_package)
  std::string family = "multinomial";
  std::string loss = "ncll";
  std::string snapshot_path;  // POST /snapshot writes here ("" refuses it)
  uint32_t max_connections = 32;
};

class Service {
 public:
  // Creates the model (a text classifier with an open vocabulary and open
  // classes) and binds the port. Errors: plugins not found, the port taken.
  static tributary::Result<std::unique_ptr<Service>> Start(const ServiceOptions& options);
  ~Service();  // Stop()s
  uint16_t port() const { return port_; }
  // Stops accepting, closes the connections and joins every thread.
  void Stop();

 private:
  Service() = default;
  void AcceptLoop();
  void Serve(boost::asio::ip::tcp::socket socket);

  ServiceOptions options_;
  uint16_t port_ = 0;
  std::unique_ptr<tributary::LiveModel> live_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::thread acceptor_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> learned_{0};
  std::atomic<uint32_t> connections_{0};
  std::mutex mu_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Worker> workers_;                                      // joined when done, and by Stop
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> open_;  // closed by Stop
};

}  // namespace embed

#endif  // EMBED_SERVICE_SERVICE_H_
