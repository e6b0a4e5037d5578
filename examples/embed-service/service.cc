#include "service.h"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <sstream>
#include <string_view>

#include "tributary/input_document.h"
#include "tributary/model_config.h"
#include "tributary/plugin_registry.h"

namespace embed {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

http::response<http::string_body> Reply(const http::request<http::string_body>& req, http::status status,
                                        std::string body) {
  http::response<http::string_body> res{status, req.version()};
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http::response<http::string_body> Error(const http::request<http::string_body>& req, http::status status,
                                        const std::string& message) {
  return Reply(req, status, "{\"error\": " + Quote(message) + "}\n");
}

}  // namespace

tributary::Result<std::unique_ptr<Service>> Service::Start(const ServiceOptions& options) {
  std::unique_ptr<Service> s(new Service());
  s->options_ = options;
  // The installed built-in plugins, and nothing else.
  static tributary::PluginRegistry* registry = new tributary::PluginRegistry({options.plugin_dir});
  tributary::ModelConfig config;
  config.family = options.family;
  config.loss = options.loss;
  auto model = tributary::NewModel(config, *registry, tributary::TextStreamSchema(), 0, "the service's text stream");
  if (!model.ok()) return model.status();
  auto live = tributary::LiveModel::Create(std::move(model).value(), tributary::LiveModelOptions{});
  if (!live.ok()) return live.status();
  s->live_ = std::move(live).value();
  try {
    tcp::endpoint at(asio::ip::make_address(options.address), options.port);
    s->acceptor_ = std::make_unique<tcp::acceptor>(s->io_, at);
    s->port_ = s->acceptor_->local_endpoint().port();
  } catch (const std::exception& e) {
    return tributary::Status::IOError("cannot listen on " + options.address + ":" + std::to_string(options.port) +
                                      ": " + e.what());
  }
  s->acceptor_thread_ = std::thread([raw = s.get()] { raw->AcceptLoop(); });
  return s;
}

Service::~Service() { Stop(); }

void Service::Stop() {
  if (stopping_.exchange(true)) return;
  boost::system::error_code ec;
  // Wake the blocking accept with a connection of our own, then close.
  {
    tcp::socket poke(io_);
    poke.connect(tcp::endpoint(asio::ip::make_address(options_.address), port_), ec);
  }
  if (acceptor_thread_.joinable()) acceptor_thread_.join();
  acceptor_->close(ec);
  std::vector<Worker> workers;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& sock : open_) sock->shutdown(tcp::socket::shutdown_both, ec);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.thread.join();
}

void Service::AcceptLoop() {
  while (!stopping_.load()) {
    tcp::socket socket(io_);
    boost::system::error_code ec;
    acceptor_->accept(socket, ec);
    if (ec || stopping_.load()) continue;
    std::lock_guard<std::mutex> l(mu_);
    // Join the connections that ended.
    for (size_t i = 0; i < workers_.size();) {
      if (workers_[i].done->load()) {
        workers_[i].thread.join();
        workers_[i] = std::move(workers_.back());
        workers_.pop_back();
      } else {
        ++i;
      }
    }
    if (workers_.size() >= options_.max_connections) {
      socket.close(ec);  // (over the limit: refused at once)
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    workers_.push_back(Worker{std::thread([this, done, sock = std::move(socket)]() mutable {
                                Serve(std::move(sock));
                                done->store(true);
                              }),
                              done});
  }
}

void Service::Serve(tcp::socket socket) {
  auto shared = std::make_shared<tcp::socket>(std::move(socket));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_.load()) return;
    open_.push_back(shared);
  }
  connections_++;
  // This connection's reader: predictions take no lock.
  auto reader = live_->NewReader();
  boost::beast::flat_buffer buffer;
  tributary::InputDocument doc;
  tributary::LivePrediction prediction;
  boost::system::error_code ec;
  for (;;) {
    http::request<http::string_body> req;
    http::read(*shared, buffer, req, ec);
    if (ec) break;
    http::response<http::string_body> res;
    const std::string target(req.target());
    if (!reader.ok()) {
      res = Error(req, http::status::service_unavailable, reader.status().ToString());
    } else if (req.method() == http::verb::post && target == "/predict") {
      doc.Clear();
      doc.AddText(req.body());
      tributary::Status st = (*reader)->Predict(doc, &prediction);
      res = st.ok() ? Reply(req, http::status::ok,
                            "{\"label\": " + Quote(prediction.label) +
                                ", \"version\": " + std::to_string(prediction.version) + "}\n")
                    : Error(req, http::status::bad_request, st.ToString());
    } else if (req.method() == http::verb::post && target == "/learn") {
      // One document per line: label TAB text. The request stops at the
      // first document refused (those before it are learned), naming it.
      std::istringstream lines(req.body());
      std::string line, failure;
      uint64_t n = 0;
      while (failure.empty() && std::getline(lines, line)) {
        if (line.empty()) continue;
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) {
          failure = "line " + std::to_string(n + 1) + ": expected 'label<TAB>text', found no tab";
          break;
        }
        doc.Clear();
        doc.SetId("line " + std::to_string(n + 1)).SetLabel(line.substr(0, tab)).AddText(line.substr(tab + 1));
        tributary::Status st = live_->Learn(doc);
        if (!st.ok()) {
          failure = st.ToString();
        } else {
          ++n;
        }
      }
      learned_ += n;
      // What a request learned is visible to predictions once it is answered.
      if (n > 0) {
        auto published = live_->Publish();
        if (!published.ok() && failure.empty()) failure = published.status().ToString();
      }
      res = failure.empty()
                ? Reply(req, http::status::ok,
                        "{\"learned\": " + std::to_string(n) + ", \"version\": " + std::to_string(live_->version()) +
                            "}\n")
                : Error(req, http::status::bad_request, "learned " + std::to_string(n) + ", then: " + failure);
    } else if (req.method() == http::verb::post && target == "/snapshot") {
      uint64_t version = 0;
      tributary::Status st = options_.snapshot_path.empty()
                                 ? tributary::Status::InvalidArgument("no snapshot path configured (--snapshot)")
                                 : live_->SaveSnapshot(options_.snapshot_path, &version);
      res = st.ok() ? Reply(req, http::status::ok, "{\"version\": " + std::to_string(version) + "}\n")
                    : Error(req, http::status::internal_server_error, st.ToString());
    } else if (req.method() == http::verb::get && target == "/stats") {
      res = Reply(req, http::status::ok,
                  "{\"version\": " + std::to_string(live_->version()) +
                      ", \"learned\": " + std::to_string(learned_.load()) +
                      ", \"connections\": " + std::to_string(connections_.load()) + "}\n");
    } else {
      res = Error(req, http::status::not_found, "no endpoint " + std::string(req.method_string()) + " " + target);
    }
    http::write(*shared, res, ec);
    if (ec || !req.keep_alive()) break;
  }
  shared->shutdown(tcp::socket::shutdown_both, ec);
  connections_--;
  std::lock_guard<std::mutex> l(mu_);
  open_.erase(std::find(open_.begin(), open_.end(), shared));
}

}  // namespace embed
