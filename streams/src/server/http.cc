// The HTTP port (ServerOptions::http): /healthz and /metrics (text), the
// status page at / (status_page.h: HTML that polls /v1/status), and the
// JSON API, POST /v1/learn, POST /v1/predict and GET /v1/status
// (docs/http-api.md).
//
// One request at a time per connection (keep-alive, no pipelining): the
// header is read first and judged alone (path, method, bearer token,
// Content-Type, Content-Length against max_frame_bytes) before any of the
// body is read; the body then reserves its length from the same budget as
// the binary protocol's large frames (max_buffered_bytes) and must arrive at
// min_frame_bytes_per_s after rate_grace_s. Learn requests take the binary
// protocol's path (Server::Impl::CheckLearn, TryReserve, the committer) and
// are answered once their documents are in the fsynced log.
//
// TLS (ServerOptions::tls_cert_file, tls_key_file): the same session over
// beast::ssl_stream (HttpSession<TlsStream>; without TLS, over the TCP stream
// itself). The first bytes of a connection are looked at before the
// handshake (beast::async_detect_ssl): a plain HTTP request is answered 400
// in plain text, saying the port speaks HTTPS, and closed. Detection,
// handshake and the first header share the first header's deadline.
#include "server/server_impl.h"  // first: it configures Asio for TSan builds

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>

#include "server/frame.h"
#include "server/http_body.h"
#include "server/status_page.h"
#include "tributary/metrics.h"
#include "tributary/utf8.h"

namespace tributary {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using json = nlohmann::json;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

using server_internal::DocumentsFromBody;
using server_internal::Dump;

namespace {

// Bodies up to this size need no reservation (as the binary protocol's
// frames that fit one read chunk).
constexpr uint64_t kSmallBody = 64 * 1024;

size_t ErrorSlot(unsigned status) {
  for (size_t i = 0; i < server_internal::kHttpErrors.size(); ++i) {
    if (server_internal::kHttpErrors[i].status == status) return i;
  }
  return server_internal::kHttpErrors.size();
}

unsigned StatusOf(v1::Response::Code code) {
  switch (code) {
    case v1::Response::INVALID_REQUEST:
      return 400;
    case v1::Response::UNAUTHENTICATED:
      return 401;
    case v1::Response::PERMISSION_DENIED:
      return 403;
    case v1::Response::OVERLOADED:
      return 429;
    case v1::Response::UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// The text of OpenSSL's oldest queued error (and the queue cleared), or
// `fallback` when there is none.
std::string OpenSslError(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "error " + std::to_string(e);
}

// The error of a read that ends a connection without anything to answer:
// closed between requests, timed out, reset; over TLS also a peer gone
// without close_notify, or a record that does not decrypt.
bool EndsConnection(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == ssl::error::stream_truncated || ec.category() == asio::error::get_ssl_category();
}

// One connection of the HTTP port, over `Stream`: beast::tcp_stream (plain
// HTTP) or TlsStream (HTTPS). Runs on its own strand.
template <class Stream>
class HttpSession : public std::enable_shared_from_this<HttpSession<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  using std::enable_shared_from_this<HttpSession>::shared_from_this;
  using std::enable_shared_from_this<HttpSession>::weak_from_this;

  // `tls`: the server's TLS context (TlsStream only), kept alive by the session.
  HttpSession(Server::Impl* srv, tcp::socket s, std::shared_ptr<ssl::context> tls = nullptr)
      : srv_(srv),
        tls_(std::move(tls)),
        stream_(MakeStream(std::move(s), tls_.get())),
        budget_wait_(stream_.get_executor()),
        authenticated_(!server_internal::AuthEnabled(srv->opt.auth_token, &srv->opt.scoped_tokens)) {}
  ~HttpSession() {
    srv_->ForgetStranger(stranger_id_);
    srv_->frame_reservations -= reserved_;
    srv_->http_connections--;
  }

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->authenticated_) {
        // Until it shows the token, one of the few slots kept for strangers
        // (ServerOptions::max_unauthenticated_connections): the oldest is
        // closed when a newer stranger needs it.
        beast::error_code peer_ec;
        const auto remote = self->Lowest().socket().remote_endpoint(peer_ec);
        self->stranger_id_ = self->srv_->AdmitStranger(peer_ec ? std::string() : remote.address().to_string(),
                                                       [weak = self->weak_from_this()] {
                                                         if (auto s = weak.lock()) {
                                                           asio::post(s->stream_.get_executor(), [s] {
                                                             if (!s->authenticated_) s->Close();
                                                           });
                                                         }
                                                       });
      }
      if constexpr (kTls) {
        self->Detect();
      } else {
        self->ReadHeader();
      }
    });
  }

  // Refuses a connection over max_connections: 429, then closed. Over TLS
  // closed at once, counted as a 429: a handshake would cost a refused
  // connection as much as an admitted one.
  void Refuse() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if constexpr (kTls) {
        self->Count(429);
        return self->Close();
      }
      self->version_ = 11;
      self->close_ = true;
      self->Error(429, "too many connections (limit " + std::to_string(self->srv_->opt.max_connections) + ")");
    });
  }

 private:
  // The time a header may take: the idle timeout between requests; a
  // connection that has not shown the token gets auth_timeout_s (as the
  // binary protocol's strangers).
  std::chrono::seconds HeaderDeadline() const {
    uint32_t s = srv_->opt.idle_timeout_s;
    if (!authenticated_ && srv_->opt.auth_timeout_s > 0)
      s = s == 0 ? srv_->opt.auth_timeout_s : std::min(s, srv_->opt.auth_timeout_s);
    return std::chrono::seconds(s);
  }

  static Stream MakeStream(tcp::socket s, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(s), *tls);
    } else {
      (void)tls;
      return Stream(std::move(s));
    }
  }

  // The TCP stream (with its timeouts) under the TLS layer, if any.
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void SetDeadline(std::chrono::seconds timeout) {
    if (timeout.count() > 0) {
      Lowest().expires_after(timeout);
    } else {
      Lowest().expires_never();
    }
  }

  // TLS: the first bytes say whether the peer starts a handshake; a plain
  // HTTP request is answered 400 (plain text), then closed. The deadline,
  // the first header's, covers the handshake and that header too.
  void Detect() {
    SetDeadline(HeaderDeadline());
    keep_deadline_ = true;
    beast::async_detect_ssl(Lowest(), buf_,
                            [self = shared_from_this()](beast::error_code ec, bool tls) { self->OnDetect(ec, tls); });
  }

  void OnDetect(beast::error_code ec, bool tls) {
    if (ec) {
      if (ec == beast::error::timeout && buf_.size() > 0) Count(408);
      return Close();
    }
    if (!tls) {
      plain_ = true;
      version_ = 11;
      close_ = true;
      return Error(400, "this port speaks HTTPS (TLS): plain HTTP is refused; use https://");
    }
    if constexpr (kTls) {
      stream_.async_handshake(ssl::stream_base::server, buf_.data(),
                              [self = shared_from_this()](beast::error_code hec, size_t used) {
                                if (hec) return self->Close();  // no trust, no common protocol, timed out
                                self->buf_.consume(used);
                                self->ReadHeader();
                              });
    }
  }

  void ReadHeader() {
    parser_.emplace();
    // No limit while the header is read: the parser would refuse a long
    // Content-Length before the token and the path are judged (OnHeader
    // answers 413 itself); the limit is set for the body (ReadBody).
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (keep_deadline_) {
      keep_deadline_ = false;  // the first header, after the handshake: its deadline is set
    } else {
      SetDeadline(HeaderDeadline());
    }
    http::async_read_header(stream_, buf_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      // Closed between requests, timed out, or a header that does not
      // parse (too long, not HTTP): nothing more is read.
      if (EndsConnection(ec)) {
        if (ec == beast::error::timeout && buf_.size() > 0) Count(408);
        return Close();
      }
      version_ = 11;
      close_ = true;
      return Error(400, "bad HTTP request header: " + ec.message());
    }
    start_ = Clock::now();
    const auto& req = parser_->get();
    version_ = req.version();
    close_ = !req.keep_alive();
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const bool learn = path == "/v1/learn", predict = path == "/v1/predict", status = path == "/v1/status";
    const bool models = path == "/v1/models" || path.rfind("/v1/models/", 0) == 0;
    const bool feedback = path == "/v1/feedback";
    if (learn) {
      srv_->counters.http_learn_requests++;
    } else if (predict) {
      srv_->counters.http_predict_requests++;
    } else {
      srv_->counters.http_other_requests++;
    }
    // Whatever is refused below leaves its body unread: close after answering.
    if (!parser_->is_done()) close_on_error_ = true;
    allow_ = learn || predict || feedback ? "POST" : "GET";
    if (path == "/") {
      // The status page holds no data (it fetches /v1/status, behind the
      // token, itself): served without the token, as /healthz.
      if (req.method() != http::verb::get) {
        return Error(405, "method " + std::string(req.method_string()) + " not allowed on / (use GET)");
      }
      if (!parser_->is_done()) close_ = true;
      res_ = {};
      res_.set(http::field::cache_control, "no-store");
      res_.set("Content-Security-Policy",
               "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
               "connect-src 'self'");
      return Reply(200, std::string(server_internal::StatusPageHtml()), "text/html; charset=utf-8",
                   /*fresh=*/false);
    }
    if (path == "/healthz" || path == "/metrics") {
      if (!parser_->is_done()) close_ = true;
      return path == "/healthz" ? Health() : Metrics();
    }
    if (!learn && !predict && !status && !models && !feedback) {
      return Error(
          404,
          "not found: " + std::string(path) +
              " (try GET / (the status page), POST /v1/learn, POST /v1/predict, POST /v1/feedback, GET /v1/status, GET "
              "/v1/models, /healthz, /metrics)");
    }
    if (server_internal::AuthEnabled(srv_->opt.auth_token, &srv_->opt.scoped_tokens)) {
      const auto auth = req[http::field::authorization];
      const std::string_view a(auth.data(), auth.size());
      const uint32_t scopes =
          StartsWithNoCase(a, "Bearer ")
              ? server_internal::TokenScopes(a.substr(7), srv_->opt.auth_token, &srv_->opt.scoped_tokens)
              : 0;
      if (scopes == 0) {
        // One guess per connection, as the binary protocol.
        close_ = true;
        return Error(401, a.empty() ? "missing Authorization: Bearer <token>; closing the connection"
                                    : "wrong auth token; closing the connection");
      }
      authenticated_ = true;
      srv_->ForgetStranger(stranger_id_);
      stranger_id_ = 0;
      // A valid token without the scope: 403, the connection kept (no wrong
      // guess). /v1/status takes any valid token.
      uint32_t need = 0;
      if (learn || feedback) need = kScopeLearn;
      if (predict) need = kScopePredict;
      if (models && req.method() != http::verb::get) need = kScopeAdmin;  // keep a version, restore one
      if ((scopes & need) != need) {
        return Error(403,
                     "this token may " + ScopeNames(scopes) + "; " + std::string(path) + " needs " + ScopeNames(need));
      }
    }
    if (status) {
      // What the model and its learner know of themselves (docs/http-api.md):
      // behind the token like the rest of the API (it names the classes).
      if (req.method() != http::verb::get) {
        return Error(405, "method " + std::string(req.method_string()) + " not allowed on /v1/status (use GET)");
      }
      if (!parser_->is_done()) close_ = true;
      return Reply(200, srv_->StatusJson(), "application/json");
    }
    if (models) return Models(req.method(), target);
    if (req.method() != http::verb::post) {
      return Error(
          405, "method " + std::string(req.method_string()) + " not allowed on " + std::string(path) + " (use POST)");
    }
    const auto ctype = req[http::field::content_type];
    const std::string_view ct(ctype.data(), ctype.size());
    if (!StartsWithNoCase(ct, "application/json") || (ct.size() > 16 && ct[16] != ';' && ct[16] != ' ')) {
      return Error(415, "Content-Type must be application/json, found '" + std::string(ct) + "'");
    }
    const auto length = parser_->content_length();
    if (length && *length > srv_->opt.max_frame_bytes) {
      return Error(413, "body of " + std::to_string(*length) + " bytes is over the limit of " +
                            std::to_string(srv_->opt.max_frame_bytes) + " bytes (--max-frame-bytes)");
    }
    // A chunked body is bounded by body_limit while it is read.
    need_ = length ? *length : srv_->opt.max_frame_bytes;
    learn_ = learn;
    feedback_ = feedback;
    ReserveBody();
  }

  // Takes the body's length from the budget for large bodies (all or
  // nothing; one alone may exceed it, as in the binary protocol), waiting
  // without reading while it is spent.
  void ReserveBody() {
    if (need_ > kSmallBody && reserved_ == 0) {
      uint64_t cur = srv_->frame_reservations.load();
      for (;;) {
        if (cur != 0 && cur + need_ > srv_->opt.max_buffered_bytes) {
          budget_wait_.expires_after(std::chrono::milliseconds(5));
          budget_wait_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
            if (!ec) self->ReserveBody();
          });
          return;
        }
        if (srv_->frame_reservations.compare_exchange_weak(cur, cur + need_)) break;
      }
      reserved_ = need_;
    }
    const auto& req = parser_->get();
    if (StartsWithNoCase(std::string_view(req[http::field::expect].data(), req[http::field::expect].size()),
                         "100-continue")) {
      // curl asks before sending a body over 1 KiB.
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // The minimum rate of the binary protocol's frames, after its grace.
    const auto& o = srv_->opt;
    parser_->body_limit(o.max_frame_bytes);
    if (o.min_frame_bytes_per_s > 0) {
      Lowest().expires_after(std::chrono::seconds(o.rate_grace_s + need_ / o.min_frame_bytes_per_s + 1));
    } else {
      SetDeadline(std::chrono::seconds(o.idle_timeout_s));
    }
    http::async_read(stream_, buf_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      close_ = true;
      return Error(
          413, "body is over the limit of " + std::to_string(srv_->opt.max_frame_bytes) + " bytes (--max-frame-bytes)");
    }
    if (ec) {
      if (ec == beast::error::timeout) {
        srv_->counters.err_frame++;
        Count(408);
      }
      return Close();  // a peer this slow, or gone, would not read an answer
    }
    close_on_error_ = false;
    std::string body = std::move(parser_->get().body());
    ReleaseReservation();
    if (feedback_) return Feedback(body);
    v1::LearnRequest lr;  // predict takes the same body
    int64_t index = -1;
    bool too_many = false;
    bool keep = false;
    const std::string why = DocumentsFromBody(body, lr.mutable_documents(), &index, srv_->opt.max_request_documents,
                                              &too_many, learn_ ? nullptr : &keep);
    body.clear();
    body.shrink_to_fit();
    if (too_many) srv_->counters.document_limit_refusals++;
    if (!why.empty()) return Error(too_many ? 413 : 400, (learn_ ? "learn: " : "predict: ") + why, index);
    if (srv_->opt.max_request_documents != 0 &&
        static_cast<uint64_t>(lr.documents_size()) > srv_->opt.max_request_documents) {
      srv_->counters.document_limit_refusals++;
      return Error(413, std::string(learn_ ? "learn: " : "predict: ") + "request holds " +
                            std::to_string(lr.documents_size()) + " documents, over the limit of " +
                            std::to_string(srv_->opt.max_request_documents) +
                            " (--max-request-documents): send them in smaller requests");
    }
    if (learn_) return Learn(std::move(lr));
    Predict(lr, keep);
  }

  // POST /v1/feedback (docs/http-api.md "Late labels"): each kept document,
  // labelled, learned as /v1/learn would (one request, whole or refused);
  // the prediction made at the time counted in the delayed figures.
  void Feedback(const std::string& body) {
    std::vector<server_internal::Feedback> items;
    int64_t index = -1;
    bool too_many = false;
    const std::string why =
        server_internal::FeedbackFromBody(body, &items, &index, srv_->opt.max_request_documents, &too_many);
    if (!why.empty()) return Error(too_many ? 413 : 400, "feedback: " + why, index);
    if (srv_->recovery_phase.load() != RecoveryPhase::kReady || srv_->feedback == nullptr) {
      return Error(503, "not ready: recovering the model (see /healthz)");
    }
    auto job = std::make_shared<LearnJob>();
    auto taken = std::make_shared<std::vector<std::string>>();
    FeedbackStore* store = srv_->feedback.get();
    auto release = [store, taken] {
      for (const auto& id : *taken) store->Release(id);
    };
    v1::LearnRequest lr;
    for (size_t i = 0; i < items.size(); ++i) {
      const auto& f = items[i];
      v1::Document doc;
      v1::KeptPrediction pred;
      const int64_t at_index = static_cast<int64_t>(i);
      const std::string at =
          "feedback item " + std::to_string(i) + ": prediction_id '" + Printable(f.prediction_id, 64) + "'";
      const FeedbackStore::Lookup found = store->Take(f.prediction_id, &doc, &pred);
      if (found != FeedbackStore::Lookup::kFound) {
        // The whole request is refused: the ids it took wait again.
        release();
        unsigned code = 409;
        std::string problem;
        switch (found) {
          case FeedbackStore::Lookup::kMalformed:
            code = 400;
            problem = " is not an id this server gives (\"k\" and digits)";
            break;
          case FeedbackStore::Lookup::kUnknown:
            code = 404;
            problem = " was never given by this server";
            break;
          case FeedbackStore::Lookup::kExpired:
            code = 410;
            problem = " expired: kept predictions last --feedback-max-age-s " +
                      std::to_string(srv_->opt.feedback_max_age_s) + " s and --feedback-max-bytes " +
                      std::to_string(srv_->opt.feedback_max_bytes) + " bytes; send the document to /v1/learn";
            break;
          case FeedbackStore::Lookup::kLabelled:
            problem = " is labelled already (its label was learned)";
            break;
          case FeedbackStore::Lookup::kBeingLabelled:
          case FeedbackStore::Lookup::kFound:
            problem = " has a label on its way (this request or another names it twice)";
            break;
        }
        return Error(code, at + problem, at_index);
      }
      taken->push_back(f.prediction_id);
      doc.set_label(f.label);
      *lr.add_documents() = std::move(doc);
      job->predictions.push_back(std::move(pred));
    }
    if (auto refusal = srv_->CheckLearn(lr)) {
      release();
      return Error(StatusOf(refusal->code), "feedback: " + refusal->message, refusal->document_index);
    }
    job->docs.assign(std::make_move_iterator(lr.mutable_documents()->begin()),
                     std::make_move_iterator(lr.mutable_documents()->end()));
    job->start = start_;
    job->complete = [self = shared_from_this(), release](v1::Response r) {
      if (r.code() != v1::Response::OK) release();  // not logged: they wait for their label again
      asio::post(self->stream_.get_executor(), [self, r = std::move(r)] { self->Learned(r); });
    };
    Enqueue(job, job->docs.size());
  }

  void Learn(v1::LearnRequest lr) {
    if (auto refusal = srv_->CheckLearn(lr)) {
      return Error(StatusOf(refusal->code), refusal->message, refusal->document_index);
    }
    auto job = std::make_shared<LearnJob>();
    job->docs.assign(std::make_move_iterator(lr.mutable_documents()->begin()),
                     std::make_move_iterator(lr.mutable_documents()->end()));
    job->start = start_;
    job->complete = [self = shared_from_this()](v1::Response r) {
      asio::post(self->stream_.get_executor(), [self, r = std::move(r)] { self->Learned(r); });
    };
    Enqueue(job, job->docs.size());
  }

  void Enqueue(std::shared_ptr<LearnJob> job, uint64_t n) {
    auto self = shared_from_this();
    // Backpressure: this connection reads nothing more until admitted.
    auto retry = [self, job, n] {
      asio::post(self->stream_.get_executor(), [self, job, n] { self->Enqueue(job, n); });
    };
    if (!srv_->TryReserve(n, retry)) return;
    if (srv_->SubmitLearn(*job)) return;
    srv_->ReleaseCapacity(n);
    Error(503, "server is shutting down");
  }

  // GET /v1/models (the versions kept), POST /v1/models (keep one now),
  // POST /v1/models/VERSION/restore[?replay=true] (docs/http-api.md
  // "Versions"). A body is not read: the connection closes after the answer.
  void Models(http::verb method, std::string_view target) {
    if (!parser_->is_done()) close_ = true;
    const size_t q = target.find('?');
    const std::string_view path = target.substr(0, q);
    const std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    if (srv_->recovery_phase.load() != RecoveryPhase::kReady) {
      return Error(503, "not ready: recovering the model (see /healthz)");
    }
    auto self = shared_from_this();
    if (path == "/v1/models") {
      allow_ = "GET, POST";
      if (method == http::verb::get) return Reply(200, srv_->ModelsJson(), "application/json");
      if (method != http::verb::post) {
        return Error(405, "method " + std::string(http::to_string(method)) + " not allowed on /v1/models");
      }
      Status st = srv_->RequestVersion([self](const Status& kept, uint64_t version) {
        asio::post(self->stream_.get_executor(), [self, kept, version] {
          if (!kept.ok()) return self->Error(500, "keeping a model version: " + kept.ToString());
          self->Reply(200, "{\"version\":" + std::to_string(version) + "}", "application/json");
        });
      });
      if (!st.ok()) return Error(st.code() == Status::Code::kInvalidArgument ? 400 : 503, st.message());
      return;
    }
    // /v1/models/VERSION/restore
    std::string_view rest = path.substr(std::string_view("/v1/models/").size());
    const size_t slash = rest.find('/');
    const std::string_view number = rest.substr(0, slash);
    uint64_t version = 0;
    bool numeric = !number.empty() && number.size() <= 19;
    for (char c : number) {
      if (c < '0' || c > '9') numeric = false;
    }
    if (!numeric || slash == std::string_view::npos || rest.substr(slash) != "/restore") {
      return Error(404, "not found: " + std::string(path) +
                            " (try GET /v1/models, POST /v1/models, POST /v1/models/VERSION/restore)");
    }
    for (char c : number) version = version * 10 + static_cast<uint64_t>(c - '0');
    allow_ = "POST";
    if (method != http::verb::post) {
      return Error(405, "method " + std::string(http::to_string(method)) + " not allowed on " + std::string(path) +
                            " (use POST)");
    }
    bool replay = false;
    if (!query.empty()) {
      if (query == "replay=true" || query == "replay=1") {
        replay = true;
      } else if (query != "replay=false" && query != "replay=0") {
        return Error(400, "restore: unknown query '" + std::string(query) + "': expected replay=true or replay=false");
      }
    }
    Status st = srv_->SubmitRestore(version, replay, [self](const RestoreOutcome& out) {
      asio::post(self->stream_.get_executor(), [self, out] { self->Restored(out); });
    });
    if (!st.ok()) return Error(st.IsNotFound() ? 404 : 503, "restore: " + st.message());
  }

  // On the strand: the learner's answer to a restore.
  void Restored(const RestoreOutcome& out) {
    if (!out.status.ok()) {
      const unsigned code = out.status.IsNotFound() ? 404 : out.status.code() == Status::Code::kIOError ? 503 : 500;
      return Error(code, "restore of model version " + std::to_string(out.version) + ": " + out.status.ToString());
    }
    json body = {{"restored", out.version},
                 {"record", out.record},
                 {"replay", out.replay},
                 {"documents_after", out.documents},
                 {"published_version", out.published}};
    if (out.first <= out.last) body["after"] = {out.first, out.last};
    if (!out.kept_as.empty()) body["kept_as"] = out.kept_as;
    if (!out.note.empty()) body["note"] = out.note;
    Reply(200, server_internal::Dump(body), "application/json");
  }

  // On the strand: the committer's answer.
  void Learned(const v1::Response& r) {
    if (r.code() != v1::Response::OK) return Error(StatusOf(r.code()), r.message());
    const auto& l = r.learn();
    json out = {{"acknowledged", l.acknowledged()},
                {"first_sequence", l.first_sequence()},
                {"sequence", l.first_sequence() + l.acknowledged() - 1}};
    Reply(200, Dump(out), "application/json");
  }

  void Predict(const v1::LearnRequest& pr, bool keep) {
    if (srv_->recovery_phase.load() != RecoveryPhase::kReady) {
      return Error(503, "not ready: recovering the model (see /healthz)");
    }
    json classes = json::array(), predictions = json::array();
    std::vector<v1::WalRecord> kept;  // keep: each answered document with its prediction
    std::vector<size_t> kept_at;      // its place in `predictions`
    uint64_t version = 0;
    const Model* model = nullptr;
    int bad = -1;
    uint64_t refused = 0;
    // JSON: per document {"id":..,"index":..,"predicted":..,"probabilities":[..]}
    // (96 bytes of keys, braces and an index); a double takes at most 24
    // characters and a comma; a string byte at most 6 (\u00XX).
    Status st = srv_->PredictDocuments(
        pr.documents(), Server::Impl::AnswerShape{96, 26, 6},
        [&](const Server::Impl::PredictedOutputs& o) {
          model = o.model;
          version = o.version;
          for (uint32_t k = 0; k < o.model->num_outputs(); ++k) classes.push_back(o.model->OutputName(k));
        },
        [&](int i, const std::vector<double>& probs, uint32_t best) {
          // In the order of "classes": each class name is sent once per
          // answer, not once per prediction.
          json p = json::array();
          for (double x : probs) p.push_back(x);
          predictions.push_back({{"id", pr.documents(i).id()},
                                 {"index", i},
                                 {"predicted", model->OutputName(best)},
                                 {"probabilities", std::move(p)}});
          if (keep) {
            v1::WalRecord rec;
            *rec.mutable_document() = pr.documents(i);
            rec.mutable_document()->clear_label();  // its label is what feedback brings
            auto* kp = rec.mutable_prediction();
            for (double x : probs) kp->add_probabilities(x);
            kp->set_predicted(best);
            kp->set_model_version(version);
            kept.push_back(std::move(rec));
            kept_at.push_back(predictions.size() - 1);
          }
        },
        [&](int i, const Status& why) {
          // Refused alone (empty, bad ids, ...): the others are answered.
          predictions.push_back({{"id", pr.documents(i).id()}, {"index", i}, {"error", why.message()}});
          ++refused;
        },
        &bad);
    if (bad == Server::Impl::kAnswerTooLarge) return Error(413, "predict: " + st.message());
    if (!st.ok()) return bad >= 0 ? Error(400, "predict: " + st.message(), bad) : Error(500, st.ToString());
    if (keep && !kept.empty()) {
      // Durable before the answer gives their ids (feedback.h).
      Status k = srv_->feedback != nullptr ? srv_->feedback->Keep(&kept) : Status::IOError("no store");
      if (!k.ok()) return Error(503, "predict: the predictions could not be kept: " + k.ToString());
      for (size_t j = 0; j < kept.size(); ++j) {
        predictions[kept_at[j]]["prediction_id"] = kept[j].prediction().prediction_id();
      }
    }
    json out = {{"model_version", version},
                {"classes", std::move(classes)},
                {"predictions", std::move(predictions)},
                {"refused", refused}};
    srv_->counters.predictions += static_cast<uint64_t>(pr.documents_size()) - refused;
    srv_->counters.predict_latency.Observe(std::chrono::duration<double>(Clock::now() - start_).count());
    Reply(200, Dump(out), "application/json");
  }

  void Health() {
    // Unhealthy while learning is off, or while a damage report waits for
    // the operator (it names what was lost; removing it clears this).
    std::string body;
    switch (srv_->recovery_phase.load()) {
      case RecoveryPhase::kLoading:
        body += "not ready: loading the snapshot\n";
        break;
      case RecoveryPhase::kReplaying:
        body += "not ready: replaying the write-ahead log (" + std::to_string(srv_->replay_progress.load()) +
                " records so far)\n";
        break;
      case RecoveryPhase::kSnapshot:
        body += "not ready: writing the recovered snapshot\n";
        break;
      case RecoveryPhase::kReady:
        break;
    }
    if (!srv_->learning_enabled) {
      body += "degraded: learning disabled (write-ahead log failure: " + srv_->WalError() + ")";
      body += srv_->opt.wal_retry_interval_ms > 0
                  ? "; retrying every " + std::to_string(srv_->opt.wal_retry_interval_ms) + " ms\n"
                  : "; restart to learn again\n";
    }
    for (const auto& report : srv_->DamageReports()) {
      std::string text;
      (void)srv_->env->ReadFileToString(report, &text);  // (a report removed meanwhile: listed empty)
      body += "damaged: " + report + "\n" + text;
    }
    const bool ok = body.empty();
    Reply(ok ? 200 : 503, ok ? "ok\n" : body, "text/plain");
  }

  void Metrics() { Reply(200, srv_->MetricsText(), "text/plain; version=0.0.4"); }

  void Count(unsigned status) {
    const size_t slot = ErrorSlot(status);
    if (slot < srv_->counters.http_errors.size()) srv_->counters.http_errors[slot]++;
  }

  void Error(unsigned status, const std::string& message, int64_t document_index = -1) {
    Count(status);
    if (close_on_error_) close_ = true;
    const size_t slot = ErrorSlot(status);
    json err = {
        {"code", slot < server_internal::kHttpErrors.size() ? server_internal::kHttpErrors[slot].code : "INTERNAL"},
        {"message", message}};
    if (document_index >= 0) err["document_index"] = document_index;
    res_ = {};
    if (status == 401) res_.set(http::field::www_authenticate, "Bearer");
    if (status == 405) res_.set(http::field::allow, allow_);
    if (status == 429) res_.set(http::field::retry_after, "1");
    if (status == 503) res_.set(http::field::retry_after, "1");
    Reply(status, Dump(json{{"error", std::move(err)}}), "application/json", /*fresh=*/false);
  }

  void Reply(unsigned status, std::string body, const char* content_type, bool fresh = true) {
    ReleaseReservation();
    if (fresh) res_ = {};
    res_.version(version_);
    res_.result(status);
    res_.set(http::field::content_type, content_type);
    res_.keep_alive(!close_);
    res_.body() = std::move(body);
    res_.prepare_payload();
    // A peer that does not take its answer within the idle timeout is gone.
    if (srv_->opt.idle_timeout_s > 0) Lowest().expires_after(std::chrono::seconds(srv_->opt.idle_timeout_s));
    auto written = [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      if (self->close_) return self->Finish();
      self->close_on_error_ = false;
      self->ReadHeader();
    };
    if (plain_) return http::async_write(Lowest(), res_, std::move(written));
    http::async_write(stream_, res_, std::move(written));
  }

  // Ends the connection after its last answer. TLS: close_notify first, so
  // that the peer tells the end of the stream from a cut (bounded wait for
  // its own). A plain request on the TLS port: the rest of what it sent is
  // read and dropped (for at most a second) before closing, so the close
  // does not reset the connection before the peer has read the 400.
  void Finish() {
    if constexpr (kTls) {
      Lowest().expires_after(std::chrono::seconds(1));
      if (plain_) {
        beast::error_code ignored;
        Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
        return Drain();
      }
      return stream_.async_shutdown([self = shared_from_this()](beast::error_code) { self->Close(); });
    }
    Close();
  }

  void Drain() {
    buf_.clear();
    Lowest().async_read_some(buf_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->Drain();
    });
  }

  void ReleaseReservation() {
    srv_->frame_reservations -= reserved_;
    reserved_ = 0;
  }

  void Close() {
    budget_wait_.cancel();
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  Server::Impl* srv_;
  std::shared_ptr<ssl::context> tls_;  // TlsStream: the context its streams were made with
  Stream stream_;
  asio::steady_timer budget_wait_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  bool authenticated_;
  uint64_t stranger_id_ = 0;  // in srv_->strangers until the token is shown (0: not)
  unsigned version_ = 11;
  bool close_ = false;           // close once the answer is written
  bool close_on_error_ = false;  // the body is unread: an error answer closes
  bool plain_ = false;           // TLS port, plain HTTP request: answered in plain text on Lowest()
  bool keep_deadline_ = false;   // the next header's deadline is set already (TLS: since the first byte)
  bool learn_ = false;           // this request is /v1/learn (else /v1/predict)
  bool feedback_ = false;        // this request is /v1/feedback
  const char* allow_ = "POST";   // the methods the request's path takes (405's Allow)
  uint64_t need_ = 0;            // the body's length (or limit, when chunked)
  uint64_t reserved_ = 0;        // this body's share of srv_->frame_reservations
  Clock::time_point start_{};
};

// OpenSSL's prompt for a passphrase on the terminal, replaced: there is
// none, so an encrypted key fails to load (and Start says why) instead of
// waiting for a passphrase nobody will type.
int NoPassphrase(char*, int, int, void*) { return 0; }

// The TLS context of the HTTP port: `cert` (PEM: the certificate, then its
// chain) and `key` (its private key, PEM, not encrypted), read through
// `env`; TLS 1.2 or later. Errors name the file, its option and what is wrong.
Result<std::shared_ptr<ssl::context>> NewTlsContext(Env* env, const std::string& cert, const std::string& key) {
  const std::string cert_name = "TLS certificate '" + cert + "' (--tls-cert)";
  const std::string key_name = "TLS private key '" + key + "' (--tls-key)";
  std::string cert_pem, key_pem;
  if (Status st = env->ReadFileToString(cert, &cert_pem); !st.ok()) {
    return st.WithContext(cert_name + ": cannot be read");
  }
  if (Status st = env->ReadFileToString(key, &key_pem); !st.ok()) {
    return st.WithContext(key_name + ": cannot be read");
  }
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  // No TLS 1.0 / 1.1 (RFC 8996), and no renegotiation (a peer could make
  // the server repeat the costly half of a handshake on one connection).
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Status::Internal("TLS: cannot require TLS 1.2: " + OpenSslError("unknown error"));
  }
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_default_passwd_cb(native, NoPassphrase);

  using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
  using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
  Bio cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), BIO_free);
  X509Ptr leaf(cert_bio ? PEM_read_bio_X509_AUX(cert_bio.get(), nullptr, NoPassphrase, nullptr) : nullptr, X509_free);
  if (!leaf) {
    return Status::InvalidArgument(
        cert_name + ": holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"): " + OpenSslError("no certificate"));
  }
  if (SSL_CTX_use_certificate(native, leaf.get()) != 1) {
    return Status::InvalidArgument(cert_name + ": its certificate is refused: " + OpenSslError("unknown error"));
  }
  // The rest of the file: the chain sent after it (intermediate CAs).
  for (int n = 2;; ++n) {
    X509Ptr ca(PEM_read_bio_X509(cert_bio.get(), nullptr, NoPassphrase, nullptr), X509_free);
    if (!ca) break;
    if (SSL_CTX_add0_chain_cert(native, ca.get()) != 1) {
      return Status::InvalidArgument(cert_name + ": certificate " + std::to_string(n) +
                                     " of the chain is refused: " + OpenSslError("unknown error"));
    }
    (void)ca.release();  // the context owns it (add0)
  }
  ERR_clear_error();  // the end of the file ("no start line")

  Bio key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, NoPassphrase, nullptr) : nullptr, EVP_PKEY_free);
  if (!pkey) {
    if (key_pem.find("ENCRYPTED") != std::string::npos) {
      ERR_clear_error();
      return Status::InvalidArgument(key_name +
                                     ": is encrypted, and serve cannot ask for a passphrase: store it decrypted "
                                     "(openssl pkey -in KEY -out PLAIN), readable by the service's user only");
    }
    return Status::InvalidArgument(
        key_name + ": holds no PEM private key (\"-----BEGIN PRIVATE KEY-----\"): " + OpenSslError("no private key"));
  }
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    return Status::InvalidArgument(key_name + " does not belong to the certificate in '" + cert +
                                   "' (--tls-cert): " + OpenSslError("key values mismatch") +
                                   "; give the key the certificate was issued for");
  }
  if (SSL_CTX_use_PrivateKey(native, pkey.get()) != 1) {
    return Status::InvalidArgument(key_name + ": is refused: " + OpenSslError("unknown error"));
  }
  return ctx;
}

template <class Stream>
void Open(Server::Impl* srv, tcp::socket s, bool over, std::shared_ptr<ssl::context> tls) {
  auto session = std::make_shared<HttpSession<Stream>>(srv, std::move(s), std::move(tls));
  if (over) {
    session->Refuse();
  } else {
    session->Start();
  }
}

}  // namespace

void Server::Impl::StartHttpAccept() {
  http_acceptor.async_accept(asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket s) {
    if (ec) return;  // closed
    const bool over = http_connections.load() >= opt.max_connections;
    http_connections++;
    if (tls) {
      Open<TlsStream>(this, std::move(s), over, tls);
    } else {
      Open<beast::tcp_stream>(this, std::move(s), over, nullptr);
    }
    StartHttpAccept();
  });
}

Status Server::Impl::LoadTls() {
  const bool cert = !opt.tls_cert_file.empty(), key = !opt.tls_key_file.empty();
  if (!cert && !key) return Status::OK();
  if (cert != key) {
    return Status::InvalidArgument(cert ? "--tls-cert '" + opt.tls_cert_file + "' needs --tls-key, its private key"
                                        : "--tls-key '" + opt.tls_key_file + "' needs --tls-cert, its certificate");
  }
  if (opt.http.empty()) {
    return Status::InvalidArgument(
        "--tls-cert and --tls-key are for the HTTP port, and there is none: give --http HOST:PORT (the binary "
        "protocol's port is not encrypted)");
  }
  auto ctx = NewTlsContext(env, opt.tls_cert_file, opt.tls_key_file);
  if (!ctx.ok()) return ctx.status();
  tls = std::move(ctx).value();
  return Status::OK();
}

}  // namespace tributary
