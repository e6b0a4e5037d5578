// TLS on the server's HTTP port (issue 42 item 5; docs/http-api.md, TLS):
// a throwaway CA and a server certificate for 127.0.0.1 are made with
// OpenSSL at test time; a client trusting the CA gets every endpoint over
// HTTPS, one that does not fails its handshake, plain HTTP gets 400 and a
// closed connection, the strangers' limits and deadlines hold before the
// handshake, and Server::Start refuses certificate and key files that cannot
// serve, naming the file.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tributary/server.h"

namespace tributary {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "tls-test-token";

// ---- Certificates made at test time.

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;

KeyPtr NewKey() { return KeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free); }

// A certificate for `key` named `cn`, signed by `issuer` (nullptr: self-signed
// with `key`); a CA, or a server certificate for IP 127.0.0.1.
CertPtr NewCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
  static long serial = 1;
  CertPtr x(X509_new(), X509_free);
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), key);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x.get(), x.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, const char*>> ext = {{NID_subject_key_identifier, "hash"}};
  if (ca) {
    ext.push_back({NID_basic_constraints, "critical,CA:TRUE"});
    ext.push_back({NID_key_usage, "critical,keyCertSign,cRLSign"});
  } else {
    ext.push_back({NID_basic_constraints, "critical,CA:FALSE"});
    ext.push_back({NID_key_usage, "critical,digitalSignature"});
    ext.push_back({NID_ext_key_usage, "serverAuth"});
    ext.push_back({NID_subject_alt_name, "IP:127.0.0.1"});
    ext.push_back({NID_authority_key_identifier, "keyid"});
  }
  for (const auto& [nid, value] : ext) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    EXPECT_NE(e, nullptr) << value;
    if (e == nullptr) continue;
    X509_add_ext(x.get(), e, -1);
    X509_EXTENSION_free(e);
  }
  EXPECT_GT(X509_sign(x.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()), 0);
  return x;
}

void WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "w"), BIO_free);
  ASSERT_TRUE(bio) << path;
  if (cert != nullptr) {
    ASSERT_EQ(PEM_write_bio_X509(bio.get(), cert), 1);
  }
  if (key != nullptr) {
    ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr), 1);
  }
}

// ---- Clients.

int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

// True when the peer closes `fd` within `timeout_ms` (what it sent before is
// appended to `*got`).
bool ClosedWithin(int fd, int timeout_ms, std::string* got = nullptr) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
    if (got != nullptr) got->append(buf, static_cast<size_t>(n));
  }
}

struct Answer {
  int status = 0;  // 0: no answer
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

// "HTTP/1.1 400 ...\r\n...\r\n\r\nbody": the status and the body (after the
// header; Content-Length is trusted to have been read whole).
Answer ParseAnswer(const std::string& text) {
  Answer a;
  const size_t end = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return a;
  a.status = std::stoi(text.substr(9, 3));
  a.body = text.substr(end + 4);
  return a;
}

// One TLS connection to 127.0.0.1:port, verifying the server's certificate
// against `ca_file` (and its IP address); requests go over it in turn.
class TlsClient {
 public:
  // `max_version`: the newest TLS version offered (0: any).
  TlsClient(uint16_t port, const std::string& ca_file, int max_version = 0)
      : ctx_(SSL_CTX_new(TLS_client_method()), SSL_CTX_free) {
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    if (max_version != 0) {
      // Old versions need the old ciphers and digests, which this library
      // itself refuses by default: allowed here, so that the refusal comes
      // from the server.
      SSL_CTX_set_security_level(ctx_.get(), 0);
      SSL_CTX_set_cipher_list(ctx_.get(), "DEFAULT:@SECLEVEL=0");
      SSL_CTX_set_min_proto_version(ctx_.get(), TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx_.get(), max_version);
    }
    EXPECT_EQ(SSL_CTX_load_verify_locations(ctx_.get(), ca_file.c_str(), nullptr), 1) << ca_file;
    fd_ = Connect(port);
    if (fd_ < 0) return;
    ssl_.reset(SSL_new(ctx_.get()));
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), "127.0.0.1");
    SSL_set_fd(ssl_.get(), fd_);
    handshake_ok_ = SSL_connect(ssl_.get()) == 1;
    if (!handshake_ok_) {
      verify_result_ = SSL_get_verify_result(ssl_.get());
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
      error_ = buf;
      ERR_clear_error();
    }
  }
  ~TlsClient() {
    ssl_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  bool handshake_ok() const { return handshake_ok_; }
  long verify_result() const { return verify_result_; }
  const std::string& error() const { return error_; }
  int version() const { return SSL_version(ssl_.get()); }

  Answer Call(const std::string& method, const std::string& target, const std::string& body = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + kToken +
                      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body;
    if (SSL_write(ssl_.get(), req.data(), static_cast<int>(req.size())) != static_cast<int>(req.size())) return {};
    std::string text;
    size_t length = std::string::npos, end;
    char buf[16384];
    for (;;) {
      if ((end = text.find("\r\n\r\n")) != std::string::npos && length == std::string::npos) {
        const size_t at = text.find("Content-Length: ");
        if (at == std::string::npos || at > end) return {};
        length = std::stoul(text.substr(at + 16));
      }
      if (length != std::string::npos && text.size() >= end + 4 + length) break;
      const int n = SSL_read(ssl_.get(), buf, sizeof(buf));
      if (n <= 0) return {};
      text.append(buf, static_cast<size_t>(n));
    }
    return ParseAnswer(text);
  }

 private:
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx_;
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_{nullptr, SSL_free};
  int fd_ = -1;
  bool handshake_ok_ = false;
  long verify_result_ = X509_V_OK;
  std::string error_;
};

std::unique_ptr<Model> TextModel() {
  v1::Schema s;
  s.set_hashed_dim(1 << 10);
  s.add_class_names("sports");
  s.add_class_names("cooking");
  auto schema = ModelSchema::FromProto(s);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 100;
  return std::move(m).value();
}

class ServerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::TempDir("server_tls"));
    KeyPtr ca_key = NewKey(), other_key = NewKey(), server_key = NewKey(), stray_key = NewKey();
    CertPtr ca = NewCert(ca_key.get(), "tributary test CA", nullptr, nullptr, true);
    CertPtr other = NewCert(other_key.get(), "another CA", nullptr, nullptr, true);
    CertPtr server = NewCert(server_key.get(), "127.0.0.1", ca.get(), ca_key.get(), false);
    WritePem(*dir_ + "/ca.pem", ca.get(), nullptr);
    WritePem(*dir_ + "/other-ca.pem", other.get(), nullptr);
    WritePem(*dir_ + "/cert.pem", server.get(), nullptr);
    WritePem(*dir_ + "/key.pem", nullptr, server_key.get());
    WritePem(*dir_ + "/stray-key.pem", nullptr, stray_key.get());
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    data_ =
        testing::TempDir(std::string("server_tls_") + ::testing::UnitTest::GetInstance()->current_test_info()->name()) +
        "/data";
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  ServerOptions Options() const {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.http = "127.0.0.1:0";
    o.data_dir = data_;
    o.fsync_interval_ms = 2;
    o.publish_interval_ms = 2;
    o.auth_token = kToken;
    o.tls_cert_file = Path("cert.pem");
    o.tls_key_file = Path("key.pem");
    return o;
  }
  std::unique_ptr<Server> Start(const ServerOptions& o) {
    auto s = Server::Start(o, TextModel());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // Server::Start's error for `o` (empty when it started).
  std::string StartError(const ServerOptions& o) {
    auto s = Server::Start(o, TextModel());
    return s.ok() ? std::string() : s.status().ToString();
  }

  static std::string* dir_;
  std::string data_;
};
std::string* ServerTlsTest::dir_ = nullptr;

TEST_F(ServerTlsTest, EveryEndpointAnswersOverTls) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  TlsClient c(srv->http_port(), Path("ca.pem"));
  ASSERT_TRUE(c.handshake_ok()) << c.error() << " (verify result " << c.verify_result() << ")";
  EXPECT_GE(c.version(), TLS1_2_VERSION);
  // Every request below over this one connection (keep-alive over TLS).
  Answer health = c.Call("GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  Answer page = c.Call("GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.body, HasSubstr("<html"));
  json docs = {{"documents",
                {{{"id", "a"}, {"text", "goal striker penalty keeper"}, {"label", "sports"}},
                 {{"id", "b"}, {"text", "whisk flour butter oven"}, {"label", "cooking"}}}}};
  Answer learn = c.Call("POST", "/v1/learn", docs.dump());
  ASSERT_EQ(learn.status, 200) << learn.body;
  EXPECT_EQ(learn.Json()["acknowledged"], 2);
  json probe = {{"documents", {{{"id", "p"}, {"text", "the striker scored a penalty"}}}}};
  json p;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  do {
    Answer predict = c.Call("POST", "/v1/predict", probe.dump());
    ASSERT_EQ(predict.status, 200) << predict.body;
    p = predict.Json();
  } while (p["model_version"].get<uint64_t>() < 2 && Clock::now() < deadline);
  EXPECT_EQ(p["model_version"], 2);
  EXPECT_EQ(p["predictions"][0]["predicted"], "sports") << p;
  Answer status = c.Call("GET", "/v1/status");
  EXPECT_EQ(status.status, 200);
  EXPECT_TRUE(status.Json().is_object()) << status.body;
  Answer metrics = c.Call("GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("\ntributary_http_requests_total{endpoint=\"learn\"} 1\n"));
  // Errors answer as over plain HTTP.
  Answer missing = c.Call("GET", "/nowhere");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.Json()["error"]["code"], "NOT_FOUND");
  // A client gone without close_notify (this one, at the end of its scope)
  // is a closed connection, not a bad request.
  { TlsClient gone(srv->http_port(), Path("ca.pem")); }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_THAT(c.Call("GET", "/metrics").body,
              HasSubstr("tributary_http_errors_total{status=\"400\",code=\"INVALID_REQUEST\"} 0\n"));
}

TEST_F(ServerTlsTest, AClientThatDoesNotTrustTheCaFailsTheHandshake) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  {
    TlsClient stranger(srv->http_port(), Path("other-ca.pem"));
    EXPECT_FALSE(stranger.handshake_ok());
    EXPECT_NE(stranger.verify_result(), X509_V_OK);
    EXPECT_THAT(stranger.error(), HasSubstr("certificate verify failed"));
  }
  // The port goes on serving clients that do trust it.
  TlsClient c(srv->http_port(), Path("ca.pem"));
  ASSERT_TRUE(c.handshake_ok()) << c.error();
  EXPECT_EQ(c.Call("GET", "/healthz").status, 200);
}

TEST_F(ServerTlsTest, TlsBefore12IsRefusedByTheServer) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  TlsClient old(srv->http_port(), Path("ca.pem"), TLS1_1_VERSION);
  EXPECT_FALSE(old.handshake_ok());
  // The server's alert (70, protocol_version), not the client's own refusal.
  EXPECT_THAT(old.error(), HasSubstr("alert protocol version"));
  TlsClient tls12(srv->http_port(), Path("ca.pem"), TLS1_2_VERSION);
  ASSERT_TRUE(tls12.handshake_ok()) << tls12.error();
  EXPECT_EQ(tls12.version(), TLS1_2_VERSION);
  EXPECT_EQ(tls12.Call("GET", "/healthz").status, 200);
}

TEST_F(ServerTlsTest, PlainHttpGets400SayingThePortSpeaksHttpsAndIsClosed) {
  auto srv = Start(Options());
  ASSERT_TRUE(srv);
  const int fd = Connect(srv->http_port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  EXPECT_TRUE(ClosedWithin(fd, 5000, &got)) << got;
  ::close(fd);
  Answer a = ParseAnswer(got);
  EXPECT_EQ(a.status, 400) << got;
  EXPECT_THAT(got, HasSubstr("Connection: close"));
  json j = a.Json();
  EXPECT_EQ(j["error"]["code"], "INVALID_REQUEST") << a.body;
  EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("this port speaks HTTPS (TLS)"));
  // Not /healthz's answer: nothing of the request was served.
  EXPECT_THAT(got, ::testing::Not(HasSubstr("ok\n")));
  // Counted as a 400 (read over TLS).
  TlsClient c(srv->http_port(), Path("ca.pem"));
  ASSERT_TRUE(c.handshake_ok()) << c.error();
  EXPECT_THAT(c.Call("GET", "/metrics").body,
              HasSubstr("tributary_http_errors_total{status=\"400\",code=\"INVALID_REQUEST\"} 1\n"));
}

TEST_F(ServerTlsTest, TheHandshakeHasTheFirstHeadersDeadline) {
  ServerOptions o = Options();
  o.auth_timeout_s = 1;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  // Silent, and a handshake begun but never finished (a TLS record header
  // announcing a ClientHello that never comes): both closed after ~1 s.
  const int silent = Connect(srv->http_port());
  const int stalled = Connect(srv->http_port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(stalled, 0);
  const unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_EQ(::send(stalled, hello_start, sizeof(hello_start), MSG_NOSIGNAL), 6);
  const auto start = Clock::now();
  EXPECT_TRUE(ClosedWithin(silent, 5000));
  EXPECT_TRUE(ClosedWithin(stalled, 5000));
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GT(waited, 0.5);
  EXPECT_LT(waited, 4.0);
  ::close(silent);
  ::close(stalled);
  // A client that shakes hands at once is served within the same deadline.
  TlsClient c(srv->http_port(), Path("ca.pem"));
  ASSERT_TRUE(c.handshake_ok()) << c.error();
  EXPECT_EQ(c.Call("GET", "/healthz").status, 200);
}

TEST_F(ServerTlsTest, StrangerAndConnectionLimitsHoldBeforeTheHandshake) {
  ServerOptions o = Options();
  o.max_unauthenticated_connections = 2;
  auto srv = Start(o);
  ASSERT_TRUE(srv);
  // Three idle strangers: the oldest is closed when the third arrives.
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    fds.push_back(Connect(srv->http_port()));
    ASSERT_GE(fds.back(), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ClosedWithin(fds[0], 3000));
  EXPECT_FALSE(ClosedWithin(fds[2], 200));
  for (int fd : fds) ::close(fd);
  srv.reset();

  // Over max_connections: closed before any handshake.
  o = Options();
  o.max_connections = 1;
  srv = Start(o);
  ASSERT_TRUE(srv);
  TlsClient first(srv->http_port(), Path("ca.pem"));
  ASSERT_TRUE(first.handshake_ok()) << first.error();
  const int second = Connect(srv->http_port());
  ASSERT_GE(second, 0);
  EXPECT_TRUE(ClosedWithin(second, 3000));
  ::close(second);
  EXPECT_THAT(first.Call("GET", "/metrics").body,
              HasSubstr("tributary_http_errors_total{status=\"429\",code=\"OVERLOADED\"} 1\n"));
}

TEST_F(ServerTlsTest, StartRefusesFilesThatCannotServeNamingThem) {
  ServerOptions o = Options();
  o.tls_key_file = Path("stray-key.pem");
  std::string e = StartError(o);
  EXPECT_THAT(e, HasSubstr("TLS private key '" + Path("stray-key.pem") +
                           "' (--tls-key) does not belong to the "
                           "certificate in '" +
                           Path("cert.pem") + "'"));

  o = Options();
  o.tls_cert_file = Path("no-such-cert.pem");
  e = StartError(o);
  EXPECT_THAT(e, HasSubstr("TLS certificate '" + Path("no-such-cert.pem") + "' (--tls-cert): cannot be read"));
  EXPECT_THAT(e, HasSubstr("No such file or directory"));

  o = Options();
  o.tls_key_file = Path("no-such-key.pem");
  EXPECT_THAT(StartError(o),
              HasSubstr("TLS private key '" + Path("no-such-key.pem") + "' (--tls-key): cannot be read"));

  o = Options();
  o.tls_cert_file = Path("key.pem");  // a key where the certificate belongs
  EXPECT_THAT(StartError(o),
              HasSubstr("TLS certificate '" + Path("key.pem") + "' (--tls-cert): holds no PEM certificate"));

  o = Options();
  o.tls_key_file = Path("cert.pem");  // and the other way round
  EXPECT_THAT(StartError(o),
              HasSubstr("TLS private key '" + Path("cert.pem") + "' (--tls-key): holds no PEM private key"));

  // An encrypted key: refused at once, not a passphrase prompt.
  {
    std::unique_ptr<BIO, decltype(&BIO_free)> in(BIO_new_file(Path("key.pem").c_str(), "r"), BIO_free);
    KeyPtr key(PEM_read_bio_PrivateKey(in.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
    ASSERT_TRUE(key);
    std::unique_ptr<BIO, decltype(&BIO_free)> out(BIO_new_file(Path("encrypted-key.pem").c_str(), "w"), BIO_free);
    static char pass[] = "passphrase";
    ASSERT_EQ(PEM_write_bio_PKCS8PrivateKey(out.get(), key.get(), EVP_aes_256_cbc(), pass, 10, nullptr, nullptr), 1);
  }
  o = Options();
  o.tls_key_file = Path("encrypted-key.pem");
  EXPECT_THAT(StartError(o), HasSubstr("TLS private key '" + Path("encrypted-key.pem") +
                                       "' (--tls-key): is encrypted, and serve cannot ask for a passphrase"));

  o = Options();
  o.tls_key_file.clear();
  EXPECT_THAT(StartError(o), HasSubstr("--tls-cert '" + Path("cert.pem") + "' needs --tls-key"));
  o = Options();
  o.tls_cert_file.clear();
  EXPECT_THAT(StartError(o), HasSubstr("--tls-key '" + Path("key.pem") + "' needs --tls-cert"));
  o = Options();
  o.http.clear();
  EXPECT_THAT(StartError(o), HasSubstr("are for the HTTP port, and there is none"));

  // Refused before the data directory was touched.
  EXPECT_FALSE(std::filesystem::exists(data_));
}

}  // namespace
}  // namespace tributary
