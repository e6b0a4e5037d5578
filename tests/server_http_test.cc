// The server's HTTP/JSON API (issue 14; docs/http-api.md), in-process on
// ephemeral ports: learn and predict text and term-count documents, every
// error status, keep-alive, that acknowledged documents are in the log (a
// restart recovers them), and a `tributary serve` child killed with SIGKILL
// while learning over HTTP loses nothing it acknowledged. The client is a
// plain POSIX socket writing HTTP/1.1 by hand, so malformed and oversized
// requests can be sent as they are.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fault_env.h"
#include "test_util.h"
#include "tributary/server.h"

namespace tributary {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "s3cret-token";

struct HttpResponse {
  int status = 0;                              // 0: no answer (closed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

// One HTTP/1.1 connection; several requests may go over it (keep-alive).
class HttpClient {
 public:
  // `source`: the local address to connect from (any address of 127/8 is
  // this machine's), or null for the default.
  explicit HttpClient(uint16_t port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~HttpClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  bool SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Sends a request; `headers` are extra lines ("Name: value").
  HttpResponse Call(const std::string& method, const std::string& target, const std::string& body,
                    std::vector<std::string> headers = {}, bool with_token = true,
                    const std::string& content_type = "application/json") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (with_token) req += std::string("Authorization: Bearer ") + kToken + "\r\n";
    if (!content_type.empty()) req += "Content-Type: " + content_type + "\r\n";
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& h : headers) req += h + "\r\n";
    req += "\r\n" + body;
    if (!SendRaw(req)) return {};
    return Receive();
  }

  HttpResponse Receive(int timeout_ms = 20000) {
    HttpResponse r;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadSome(deadline)) return r;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end;
    while (pos != std::string::npos && pos < head.size()) {
      size_t next = head.find("\r\n", pos + 2);
      std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = next;
    }
    const size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    while (buf_.size() < length) {
      if (!ReadSome(deadline)) return {};
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // True when the server closes the connection (within the timeout).
  bool WaitClosed(int timeout_ms = 10000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_) {
      if (!ReadSome(deadline)) break;
    }
    return eof_;
  }

  bool connected() const { return fd_ >= 0; }

  // Reads until at least `n` bytes came (or the timeout passed); returns what
  // came and forgets it.
  std::string ReadAvailable(size_t n, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (buf_.size() < n) {
      if (!ReadSome(deadline)) break;
    }
    std::string out;
    out.swap(buf_);
    return out;
  }

 private:
  bool ReadSome(Clock::time_point deadline) {
    if (eof_ || fd_ < 0) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

json Docs(const std::vector<json>& docs) { return json{{"documents", docs}}; }

// Two clearly separable topics over a hashed vocabulary (raw text).
const std::vector<std::string> kSports = {"goal",  "match",  "striker", "referee", "league",
                                          "score", "keeper", "stadium", "penalty", "coach"};
const std::vector<std::string> kCooking = {"oven",   "flour", "butter", "simmer", "recipe",
                                           "garlic", "sauce", "bake",   "whisk",  "pepper"};

std::string TopicText(std::mt19937_64& rng, const std::vector<std::string>& words) {
  std::string t;
  for (int i = 0; i < 8; ++i) t += words[rng() % words.size()] + (i % 3 == 0 ? ", " : " ");
  return t;
}

std::unique_ptr<Model> HashedTextModel() {
  v1::Schema s;
  s.set_hashed_dim(1 << 12);
  s.add_class_names("sports");
  s.add_class_names("cooking");
  auto schema = ModelSchema::FromProto(s);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 200;
  return std::move(m).value();
}

std::unique_ptr<Model> VocabModel() {
  auto schema = ModelSchema::FromProto(testing::TextSchema(50, 3));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  EXPECT_TRUE(m.ok());
  (*m)->learner_state().effective_size = 200;
  return std::move(m).value();
}

// The value of one metric line ("name{labels} value") in /metrics text.
double Metric(const std::string& text, const std::string& name) {
  size_t p = text.find("\n" + name + " ");
  if (p == std::string::npos) return -1;
  return std::stod(text.substr(p + name.size() + 2));
}

class ServerHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        testing::TempDir(std::string("server_http_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  ServerOptions Options() const {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.http = "127.0.0.1:0";
    o.data_dir = dir_ + "/data";
    o.fsync_interval_ms = 2;
    o.publish_interval_ms = 2;
    o.max_frame_bytes = 1 << 20;
    o.auth_token = kToken;
    return o;
  }
  std::unique_ptr<Server> Start(const ServerOptions& o, std::unique_ptr<Model> initial) {
    auto s = Server::Start(o, std::move(initial));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::string MetricsText(uint16_t port) {
    HttpClient c(port);
    return c.Call("GET", "/metrics", "", {}, false, "").body;
  }
  // Predicts `docs` until the answering model has learned `n` documents.
  json PredictWhenLearned(HttpClient& c, const json& docs, uint64_t n) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      HttpResponse r = c.Call("POST", "/v1/predict", docs.dump());
      EXPECT_EQ(r.status, 200) << r.body;
      json j = r.Json();
      if (r.status != 200 || j.value("model_version", uint64_t{0}) >= n || Clock::now() > deadline) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::string dir_;
};

TEST_F(ServerHttpTest, LearnsTextAndPredictsSeparableClasses) {
  auto srv = Start(Options(), HashedTextModel());
  ASSERT_TRUE(srv);
  HttpClient c(srv->http_port());  // every request below over one connection
  std::mt19937_64 rng(7);
  uint64_t sent = 0, last_sequence = 0;
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<json> docs;
    for (int i = 0; i < 20; ++i) {
      const bool sports = rng() % 2 == 0;
      docs.push_back({{"id", "d" + std::to_string(sent + docs.size())},
                      {"text", TopicText(rng, sports ? kSports : kCooking)},
                      {"label", sports ? "sports" : "cooking"}});
    }
    HttpResponse r = c.Call("POST", "/v1/learn", Docs(docs).dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/json");
    json j = r.Json();
    EXPECT_EQ(j["acknowledged"], 20);
    EXPECT_EQ(j["sequence"].get<uint64_t>(), last_sequence + 20);
    last_sequence = j["sequence"];
    sent += 20;
  }
  json probe = Docs({{{"id", "s"}, {"text", "The striker scored a penalty past the keeper!"}},
                     {{"id", "k"}, {"text", "Whisk the flour and butter, then bake in the oven."}}});
  json p = PredictWhenLearned(c, probe, sent);
  EXPECT_EQ(p["model_version"].get<uint64_t>(), sent);
  EXPECT_EQ(p["classes"], json({"sports", "cooking"}));
  ASSERT_EQ(p["predictions"].size(), 2u);
  EXPECT_EQ(p["predictions"][0]["id"], "s");
  EXPECT_EQ(p["predictions"][0]["predicted"], "sports");
  EXPECT_GT(p["predictions"][0]["probabilities"][0].get<double>(), 0.9);  // in the order of "classes"
  EXPECT_EQ(p["predictions"][1]["predicted"], "cooking");
  EXPECT_GT(p["predictions"][1]["probabilities"][1].get<double>(), 0.9);
  EXPECT_EQ(p["refused"], 0);

  // A batch with one punctuation-only text: that one is refused in its
  // place, saying why; the others are answered (issue 42). All of them
  // refused: 400 naming the first.
  HttpResponse mixed = c.Call("POST", "/v1/predict",
                              Docs({{{"id", "s"}, {"text", "The striker scored a penalty!"}},
                                    {{"id", "blank"}, {"text", " ... !!! "}},
                                    {{"id", "k"}, {"text", "Bake the flour in the oven."}}})
                                  .dump());
  ASSERT_EQ(mixed.status, 200) << mixed.body;
  json mj = mixed.Json();
  ASSERT_EQ(mj["predictions"].size(), 3u);
  EXPECT_EQ(mj["refused"], 1);
  EXPECT_EQ(mj["predictions"][0]["predicted"], "sports");
  EXPECT_EQ(mj["predictions"][1]["id"], "blank");
  EXPECT_EQ(mj["predictions"][1]["index"], 1);
  EXPECT_FALSE(mj["predictions"][1].contains("predicted"));
  EXPECT_NE(mj["predictions"][1]["error"].get<std::string>().find("its text has no words"), std::string::npos) << mj;
  EXPECT_EQ(mj["predictions"][2]["predicted"], "cooking");
  HttpResponse all_bad = c.Call("POST", "/v1/predict", Docs({{{"id", "blank"}, {"text", "?!"}}}).dump());
  ASSERT_EQ(all_bad.status, 400) << all_bad.body;
  EXPECT_EQ(all_bad.Json()["error"]["document_index"], 0);

  // An unknown class on this closed-class model: refused whole, with the
  // document named; nothing of the request is logged.
  HttpResponse bad = c.Call(
      "POST", "/v1/learn",
      Docs({{{"text", "goal"}, {"label", "sports"}}, {{"id", "odd"}, {"text", "garlic"}, {"label", "gardening"}}})
          .dump());
  ASSERT_EQ(bad.status, 400) << bad.body;
  json e = bad.Json()["error"];
  EXPECT_EQ(e["code"], "INVALID_REQUEST");
  EXPECT_EQ(e["document_index"], 1);
  EXPECT_NE(e["message"].get<std::string>().find("document #1 (id 'odd')"), std::string::npos) << e;
  HttpResponse next = c.Call("POST", "/v1/learn", Docs({{{"text", "goal"}, {"label", "sports"}}}).dump());
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.Json()["sequence"].get<uint64_t>(), last_sequence + 1);  // the refused request took none

  const std::string m = MetricsText(srv->http_port());
  EXPECT_EQ(Metric(m, "tributary_http_requests_total{endpoint=\"learn\"}"), 12);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"400\",code=\"INVALID_REQUEST\"}"), 2);
  EXPECT_EQ(Metric(m, "tributary_documents_acknowledged_total"), static_cast<double>(sent + 1));
  // Publications after the first two reuse a copy nobody reads any more,
  // brought up to date page by page instead of copying the model.
  EXPECT_GE(Metric(m, "tributary_publications_total"), 3);
  EXPECT_GE(Metric(m, "tributary_publications_refreshed_total"), 1);
  EXPECT_LT(Metric(m, "tributary_publications_refreshed_total"), Metric(m, "tributary_publications_total"));
}

// What the learner knows of itself: every labelled document is scored
// before it is learned, and /v1/status and /metrics show the prequential
// accuracy, per class, the classes confused, and the drift alarm that a label
// swap half-way raises (issue 39 item 3).
TEST_F(ServerHttpTest, StatusAndMetricsShowTheLearnersQualityAndDrift) {
  // The generative learner (exact averaging): after the swap it is wrong
  // until the swapped documents outnumber the others.
  auto model = HashedTextModel();
  ASSERT_TRUE(model->SetLoss(testing::BuiltinLoss("nll"), {}).ok());
  model->learner_state().schedule.lambda = testing::BuiltinLoss("nll")->loss().default_lambda;
  auto srv = Start(Options(), std::move(model));
  ASSERT_TRUE(srv);
  HttpClient c(srv->http_port());
  std::mt19937_64 rng(11);
  const uint64_t n = 1200, swap_at = 600;
  for (uint64_t sent = 0; sent < n; sent += 100) {
    std::vector<json> docs;
    for (uint64_t i = sent; i < sent + 100; ++i) {
      const bool sports = rng() % 2 == 0;
      // From document 600 on, the labels are swapped (a change of p(y | x)).
      const bool labelled_sports = i < swap_at ? sports : !sports;
      docs.push_back(
          {{"text", TopicText(rng, sports ? kSports : kCooking)}, {"label", labelled_sports ? "sports" : "cooking"}});
    }
    HttpResponse r = c.Call("POST", "/v1/learn", Docs(docs).dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }
  PredictWhenLearned(c, Docs({{{"text", "goal"}}}), n);
  // Behind the token, GET only.
  EXPECT_EQ(c.Call("GET", "/v1/status", "", {}, false).status, 401);
  HttpClient c2(srv->http_port());
  EXPECT_EQ(c2.Call("POST", "/v1/status", "{}").status, 405);
  HttpClient c3(srv->http_port());
  HttpResponse st = c3.Call("GET", "/v1/status", "");
  ASSERT_EQ(st.status, 200) << st.body;
  const json j = st.Json();
  EXPECT_EQ(j["model"]["family"], "multinomial");
  EXPECT_EQ(j["model"]["version"].get<uint64_t>(), n);
  const json& q = j["quality"];
  EXPECT_EQ(q["documents"].get<uint64_t>(), n);
  ASSERT_EQ(q["per_class"].size(), 2u) << q;
  double right = 0;
  for (const auto& cl : q["per_class"]) {
    EXPECT_TRUE(cl["class"] == "sports" || cl["class"] == "cooking") << cl;
    right += cl["recall"].get<double>() * cl["documents"].get<double>();
  }
  EXPECT_NEAR(right / static_cast<double>(n), q["accuracy"].get<double>(), 1e-9);
  // Before the swap the classes are separable; the swap makes the learner
  // wrong until it relearns them, and the detector says so soon after.
  EXPECT_LT(q["accuracy"].get<double>(), 0.9);
  ASSERT_FALSE(q["drift_alarms"].empty()) << q;
  const uint64_t alarm = q["drift_alarms"][0];
  EXPECT_GT(alarm, swap_at) << q;
  EXPECT_LT(alarm, swap_at + 200) << q;
  ASSERT_FALSE(q["most_confused"].empty());
  EXPECT_NE(q["most_confused"][0]["class"], q["most_confused"][0]["predicted"]);
  const std::string m = MetricsText(srv->http_port());
  EXPECT_EQ(Metric(m, "tributary_prequential_documents_total"), static_cast<double>(n));
  EXPECT_NEAR(Metric(m, "tributary_prequential_accuracy{window=\"cumulative\"}"), q["accuracy"].get<double>(), 1e-5);
  const double recent = Metric(m, "tributary_prequential_accuracy{window=\"recent\"}");
  EXPECT_GE(recent, 0.0);
  EXPECT_LE(recent, 1.0);
  EXPECT_GE(Metric(m, "tributary_class_recall{class=\"sports\"}"), 0.0);
  EXPECT_GE(Metric(m, "tributary_class_recall{class=\"cooking\"}"), 0.0);
  EXPECT_EQ(Metric(m, "tributary_drift_alarms_total"), static_cast<double>(q["drift_alarms"].size()));
  EXPECT_EQ(Metric(m, "tributary_drift_last_alarm_document"), static_cast<double>(q["drift_alarms"].back()));
}

TEST_F(ServerHttpTest, TermCountDocumentsAndBadCounts) {
  auto srv = Start(Options(), VocabModel());
  ASSERT_TRUE(srv);
  HttpClient c(srv->http_port());
  std::vector<json> docs;
  for (int i = 0; i < 60; ++i) {
    const int k = i % 3;
    json terms = json::object();
    for (int j = 0; j < 4; ++j) terms["t" + std::to_string(15 * k + (i + j) % 15)] = 1 + j % 3;
    docs.push_back({{"terms", terms}, {"label", "c" + std::to_string(k)}, {"weight", 1.0}});
  }
  HttpResponse r = c.Call("POST", "/v1/learn", Docs(docs).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["acknowledged"], 60);
  json p = PredictWhenLearned(c, Docs({{{"terms", {{"t16", 3}, {"t17", 2}}}}}), 60);
  EXPECT_EQ(p["predictions"][0]["predicted"], "c1") << p;

  const std::vector<std::pair<std::string, std::string>> bad_docs = {
      {R"({"terms": {"t1": -2}, "label": "c0"})", "count"},
      {R"({"terms": {"t1": 1e999}, "label": "c0"})", ""},  // not finite (or not JSON)
      {R"({"terms": {"t1": "two"}, "label": "c0"})", "must be a number"},
      {R"({"terms": ["t1"], "label": "c0"})", "\"terms\" must be an object"},
      {R"({"text": "t1", "lable": "c0"})", "unknown field \"lable\""},
      {R"({"text": 5, "label": "c0"})", "\"text\" must be a string"},
      {R"({"terms": {"t1": 1}, "label": "c0", "weight": -1})", "weight"},
      // A given 0 is refused as InputDocument refuses it (it used to be read as 1).
      {R"({"terms": {"t1": 1}, "label": "c0", "weight": 0})",
       "\"weight\": weight is 0, expected a finite number in (0, 1e6]"},
      {R"({"terms": {"t1": 1}, "label": "c0", "weight": 2e6})", "expected a finite number in (0, 1e6]"},
  };
  for (const auto& [doc, want] : bad_docs) {
    const std::string body = R"({"documents": [{"text": "t1 t2", "label": "c0"}, )" + doc + "]}";
    HttpResponse b = c.Call("POST", "/v1/learn", body);
    ASSERT_EQ(b.status, 400) << doc << ": " << b.body;
    json e = b.Json()["error"];
    EXPECT_EQ(e["code"], "INVALID_REQUEST") << doc;
    if (e.contains("document_index")) {
      EXPECT_EQ(e["document_index"], 1) << doc;
      EXPECT_NE(e["message"].get<std::string>().find("document #1"), std::string::npos) << e;
    } else {
      EXPECT_NE(e["message"].get<std::string>().find("not JSON"), std::string::npos) << doc << ": " << e;
    }
    if (!want.empty()) {
      EXPECT_NE(e["message"].get<std::string>().find(want), std::string::npos) << e;
    }
  }
  const std::string m = MetricsText(srv->http_port());
  EXPECT_EQ(Metric(m, "tributary_documents_acknowledged_total"), 60);  // all-or-nothing
}

// Scoped tokens over HTTP: a predict-only token gets 403 on /v1/learn,
// predicts and reads /v1/status; the full token learns.
TEST_F(ServerHttpTest, APredictOnlyTokenCannotLearn) {
  ServerOptions o = Options();
  o.scoped_tokens = {{"predict-only", kScopePredict}};
  auto srv = Start(o, HashedTextModel());
  ASSERT_TRUE(srv);
  const json learn = Docs({{{"text", "goal"}, {"label", "sports"}}});
  HttpClient p(srv->http_port());
  const std::vector<std::string> predict_only = {"Authorization: Bearer predict-only"};
  HttpResponse r = p.Call("POST", "/v1/learn", learn.dump(), predict_only, false);
  ASSERT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.Json()["error"]["code"], "PERMISSION_DENIED");
  EXPECT_NE(r.Json()["error"]["message"].get<std::string>().find("/v1/learn needs learn"), std::string::npos) << r.body;
  // (Refused from its header, the request's body is left unread: the
  // connection is closed after the answer, as for every such refusal.)
  HttpClient p2(srv->http_port());
  HttpResponse pr = p2.Call("POST", "/v1/predict", learn.dump(), predict_only, false);
  EXPECT_EQ(pr.status, 200) << pr.body;
  EXPECT_EQ(p2.Call("GET", "/v1/status", "", predict_only, false, "").status, 200);
  HttpClient a(srv->http_port());
  EXPECT_EQ(a.Call("POST", "/v1/learn", learn.dump()).status, 200);  // (the client's default: the full token)
  const std::string m = MetricsText(srv->http_port());
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"403\",code=\"PERMISSION_DENIED\"}"), 1);
}

TEST_F(ServerHttpTest, EachErrorHasItsStatus) {
  ServerOptions o = Options();
  o.max_frame_bytes = 4096;
  auto srv = Start(o, VocabModel());
  ASSERT_TRUE(srv);
  const uint16_t port = srv->http_port();
  const std::string good = R"({"documents": [{"text": "t1 t2", "label": "c0"}]})";
  auto error_code = [](const HttpResponse& r) { return r.Json()["error"]["code"].get<std::string>(); };
  {
    HttpClient c(port);
    HttpResponse r = c.Call("POST", "/v1/learn", "{\"documents\": [");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(error_code(r), "INVALID_REQUEST");
    EXPECT_FALSE(r.Json()["error"].contains("document_index"));
    // The connection goes on after a bad body (it was read whole).
    EXPECT_EQ(c.Call("POST", "/v1/learn", good).status, 200);
    EXPECT_EQ(c.Call("POST", "/v1/learn", R"({"docs": []})").status, 400);
    EXPECT_EQ(c.Call("POST", "/v1/learn", R"({"documents": []})").status, 400);
  }
  for (const bool with_token : {false, true}) {
    HttpClient c(port);
    std::vector<std::string> h;
    if (with_token) h.push_back("Authorization: Bearer wrong");
    HttpResponse r = c.Call("POST", "/v1/learn", good, h, false);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
    EXPECT_EQ(error_code(r), "UNAUTHENTICATED");
    EXPECT_TRUE(c.WaitClosed()) << "a failed token closes the connection";
  }
  {
    HttpClient c(port);
    HttpResponse r = c.Call("GET", "/v1/learn", "");
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.headers["allow"], "POST");
    EXPECT_EQ(error_code(r), "METHOD_NOT_ALLOWED");
    r = c.Call("POST", "/v2/nothing", good);
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(error_code(r), "NOT_FOUND");
  }
  {
    HttpClient c(port);
    HttpResponse r = c.Call("POST", "/v1/predict", good, {}, true, "text/plain");
    EXPECT_EQ(r.status, 415);
    EXPECT_EQ(error_code(r), "UNSUPPORTED_MEDIA_TYPE");
    EXPECT_TRUE(c.WaitClosed()) << "the body was not read: the connection is closed";
    HttpClient c2(port);
    EXPECT_EQ(c2.Call("POST", "/v1/predict", good, {}, true, "application/json; charset=utf-8").status, 200);
  }
  {
    // Oversized by Content-Length: refused from the header alone. The body
    // is never sent, so an answer proves the server did not wait for it.
    HttpClient c(port);
    ASSERT_TRUE(c.SendRaw(std::string("POST /v1/learn HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kToken +
                          "\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"));
    HttpResponse r = c.Receive(5000);
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(error_code(r), "PAYLOAD_TOO_LARGE");
    EXPECT_TRUE(c.WaitClosed());
  }
  {
    // Oversized while chunked: stopped at the limit by the parser.
    HttpClient c(port);
    std::string chunk(3000, ' ');
    std::string req = std::string("POST /v1/learn HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") + kToken +
                      "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 2; ++i) req += "bb8\r\n" + chunk + "\r\n";
    ASSERT_TRUE(c.SendRaw(req));
    HttpResponse r = c.Receive(5000);
    EXPECT_EQ(r.status, 413) << r.body;
  }
  const std::string m = MetricsText(port);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"401\",code=\"UNAUTHENTICATED\"}"), 2);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"413\",code=\"PAYLOAD_TOO_LARGE\"}"), 2);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"405\",code=\"METHOD_NOT_ALLOWED\"}"), 1);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"404\",code=\"NOT_FOUND\"}"), 1);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"415\",code=\"UNSUPPORTED_MEDIA_TYPE\"}"), 1);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"400\",code=\"INVALID_REQUEST\"}"), 3);
  EXPECT_EQ(Metric(m, "tributary_documents_acknowledged_total"), 1);
}

// The two statuses that say "not now" (docs/http-api.md): 429 past
// --max-connections, 503 while learning is disabled by a write-ahead log
// failure (the request whose fsync failed, and those after it); both with
// Retry-After, and predictions still answered during the 503s.
TEST_F(ServerHttpTest, OverloadAndLogFailureHaveTheirStatuses) {
  testing::FaultEnv env;
  ServerOptions o = Options();
  o.max_connections = 2;
  o.env = &env;
  o.wal_retry_interval_ms = 0;  // stay off: the 503s are stable
  auto srv = Start(o, VocabModel());
  ASSERT_TRUE(srv);
  const uint16_t port = srv->http_port();
  const std::string good = R"({"documents": [{"text": "t1 t2", "label": "c0"}]})";
  auto error_code = [](const HttpResponse& r) {
    return r.Json().contains("error") ? r.Json()["error"]["code"].get<std::string>() : std::string();
  };
  {
    HttpClient a(port), b(port);
    ASSERT_EQ(a.Call("POST", "/v1/learn", good).status, 200);
    ASSERT_EQ(b.Call("POST", "/v1/predict", good).status, 200);
    HttpClient third(port);
    HttpResponse r = third.Call("POST", "/v1/learn", good);
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(error_code(r), "OVERLOADED");
    EXPECT_EQ(r.headers["retry-after"], "1");
    EXPECT_TRUE(third.WaitClosed());
  }
  // Room again once the two have gone (the server notices the closes).
  HttpResponse again;
  int overloaded = 1;  // the third's
  for (int i = 0; i < 200; ++i) {
    HttpClient c(port);
    again = c.Call("POST", "/v1/predict", good);
    if (again.status == 200) break;
    EXPECT_EQ(again.status, 429) << again.body;
    overloaded += again.status == 429;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(again.status, 200);

  env.Add({testing::FaultEnv::Op::kSync, "wal-", 0});
  HttpClient c(port);
  HttpResponse failed = c.Call("POST", "/v1/learn", good);
  EXPECT_EQ(failed.status, 503) << failed.body;
  EXPECT_EQ(error_code(failed), "UNAVAILABLE");
  EXPECT_NE(failed.body.find("write-ahead log"), std::string::npos) << failed.body;
  HttpResponse refused = c.Call("POST", "/v1/learn", good);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "1");
  EXPECT_EQ(error_code(refused), "UNAVAILABLE");
  EXPECT_EQ(c.Call("POST", "/v1/predict", good).status, 200) << "predictions go on";
  const std::string m = MetricsText(port);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"429\",code=\"OVERLOADED\"}"), overloaded);
  EXPECT_EQ(Metric(m, "tributary_http_errors_total{status=\"503\",code=\"UNAVAILABLE\"}"), 2);
  EXPECT_EQ(Metric(m, "tributary_documents_acknowledged_total"), 1);
}

TEST_F(ServerHttpTest, AcknowledgedDocumentsAreRecoveredAfterRestart) {
  ServerOptions o = Options();
  o.snapshot_every_documents = 1000000;  // the restart replays the log
  uint64_t acked = 0;
  {
    auto srv = Start(o, VocabModel());
    ASSERT_TRUE(srv);
    HttpClient c(srv->http_port());
    for (int i = 0; i < 5; ++i) {
      HttpResponse r =
          c.Call("POST", "/v1/learn",
                 Docs({{{"terms", {{"t1", 1}}}, {"label", "c0"}}, {{"text", "t20 t21"}, {"label", "c1"}}}).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      acked = r.Json()["sequence"];
    }
    // A crash image: copy the data directory while the server runs.
    std::filesystem::copy(o.data_dir, dir_ + "/image", std::filesystem::copy_options::recursive);
    srv->Shutdown();
    EXPECT_TRUE(srv->Wait().ok());
  }
  EXPECT_EQ(acked, 10u);
  ServerOptions o2 = o;
  o2.data_dir = dir_ + "/image";
  auto srv = Start(o2, nullptr);
  ASSERT_TRUE(srv);
  EXPECT_EQ(srv->recovery().snapshot_sequence + srv->recovery().replayed, acked);
  HttpClient c(srv->http_port());
  json p = PredictWhenLearned(c, Docs({{{"text", "t1"}}}), acked);
  EXPECT_EQ(p["model_version"].get<uint64_t>(), acked);
}

// `tributary serve` in a child process, learning over HTTP, killed with
// SIGKILL after some acknowledgements; restarted on the same data
// directory, it has every acknowledged document.
TEST_F(ServerHttpTest, KillNineLosesNothingAcknowledgedOverHttp) {
  const std::string model = dir_ + "/initial.trib";
  ASSERT_TRUE(VocabModel()->Save(model).ok());
  const std::string data = dir_ + "/data", port_file = dir_ + "/port";
  testing::WriteFile(dir_ + "/token", kToken);
  std::atomic<uint64_t> acked{0};  // the highest acknowledged sequence
  uint16_t binary_port = 0, port = 0;
  const pid_t pid =
      testing::SpawnServe({"--data-dir", data, "--model", model, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
                           "--auth-token-file", dir_ + "/token", "--snapshot-every", "150"},
                          port_file, &binary_port, &port);
  ASSERT_GT(pid, 0);
  {
    ASSERT_NE(port, 0);
    std::atomic<bool> stop{false}, feeder_done{false};
    std::thread feeder([&] {
      HttpClient c(port);
      for (int i = 0; !stop; ++i) {
        HttpResponse r = c.Call(
            "POST", "/v1/learn",
            Docs({{{"id", std::to_string(i)}, {"terms", {{"t" + std::to_string(i % 50), 1 + i % 3}}}, {"label", "c0"}}})
                .dump());
        if (r.status != 200) break;  // killed
        acked = r.Json()["sequence"].get<uint64_t>();
      }
      feeder_done = true;
    });
    while (acked < 300 && !feeder_done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    stop = true;
    feeder.join();
  }
  ASSERT_GE(acked.load(), 300u);
  // Restarted in-process on the same directory: recovery has them all.
  ServerOptions o = Options();
  o.data_dir = data;
  auto srv = Start(o, nullptr);
  ASSERT_TRUE(srv);
  EXPECT_GE(srv->recovery().snapshot_sequence + srv->recovery().replayed, acked.load());
  HttpClient c(srv->http_port());
  json p = PredictWhenLearned(c, Docs({{{"text", "t1"}}}), acked);
  EXPECT_GE(p["model_version"].get<uint64_t>(), acked);
}

// The probe's memory attacks on the quick-start server (open vocabulary,
// open classes), at a 64 MiB statistics budget: a 1 MiB label, one document
// of 100,000 distinct terms, 10,000 new labels in one request, and a predict
// request whose answer would be far larger than its body. Each is refused
// (or bounded) with a specific error, counted in /metrics, and the server
// answers afterwards.
TEST_F(ServerHttpTest, MemoryLimitsHoldAgainstHostileRequests) {
  v1::Schema proto;
  proto.set_open_vocabulary(true);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  ASSERT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 200;
  ServerOptions o = Options();
  o.max_frame_bytes = 4u << 20;
  o.max_model_bytes = 64u << 20;
  o.max_answer_bytes = 256u << 10;
  o.max_request_documents = 20000;
  auto srv = Start(o, std::move(m).value());
  ASSERT_TRUE(srv);
  HttpClient c(srv->http_port());

  HttpResponse r =
      c.Call("POST", "/v1/learn", Docs({{{"text", "hello world"}, {"label", std::string(1 << 20, 'L')}}}).dump());
  ASSERT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("expected at most 1024 bytes"));
  EXPECT_LT(r.body.size(), 2000u);  // the label is not echoed

  std::string text;
  for (int i = 0; i < 100000; ++i) text += "w" + std::to_string(i) + " ";
  r = c.Call("POST", "/v1/learn", Docs({{{"text", text}, {"label", "a"}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  PredictWhenLearned(c, Docs({{{"text", "w1"}}}), 1);

  std::vector<json> labels;
  for (int i = 0; i < 10000; ++i) labels.push_back({{"text", "w1 w2"}, {"label", "c" + std::to_string(i)}});
  r = c.Call("POST", "/v1/learn", Docs(labels).dump());
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("over the model's limit of"));

  std::vector<json> too_many(20001, json{{"text", "w1"}});
  r = c.Call("POST", "/v1/predict", Docs(too_many).dump());
  ASSERT_EQ(r.status, 413) << r.body.substr(0, 300);
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(),
              HasSubstr("request holds more than 20000 documents (--max-request-documents)"));
  std::vector<json> many(4000, json{{"text", "w1"}});
  r = c.Call("POST", "/v1/predict", Docs(many).dump());
  ASSERT_EQ(r.status, 413) << r.body.substr(0, 300);
  EXPECT_THAT(r.Json()["error"]["message"].get<std::string>(), HasSubstr("--max-answer-bytes): send at most"));
  many.resize(10);
  r = c.Call("POST", "/v1/predict", Docs(many).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["predictions"][0]["probabilities"].size(), r.Json()["classes"].size());

  const std::string metrics = MetricsText(srv->http_port());
  EXPECT_LE(Metric(metrics, "tributary_model_statistics_bytes"), 64u << 20);
  EXPECT_GT(Metric(metrics, "tributary_model_terms"), 1000);
  EXPECT_EQ(Metric(metrics, "tributary_model_classes"), 1);
  EXPECT_GE(Metric(metrics, "tributary_model_classes_limit"), 1);
  EXPECT_LT(Metric(metrics, "tributary_model_classes_limit"), 10000);
  EXPECT_EQ(Metric(metrics, "tributary_limit_refusals_total{limit=\"label_bytes\"}"), 1);
  EXPECT_EQ(Metric(metrics, "tributary_limit_refusals_total{limit=\"classes\"}"), 1);
  EXPECT_EQ(Metric(metrics, "tributary_limit_refusals_total{limit=\"answer_bytes\"}"), 1);
  EXPECT_EQ(Metric(metrics, "tributary_limit_refusals_total{limit=\"request_documents\"}"), 1);
  EXPECT_EQ(Metric(metrics, "tributary_documents_skipped_total"), 0);
}

// One binary-protocol ping carrying the token, on a new connection: true
// when the pong comes back.
bool BinaryPing(uint16_t port) {
  HttpClient c(port);  // a TCP connection; the bytes are the protocol's
  if (!c.connected()) return false;
  v1::Request req;
  req.set_request_id(7);
  req.set_auth_token(kToken);
  req.mutable_ping();
  std::string body = req.SerializeAsString(), frame;
  for (uint64_t n = body.size();; n >>= 7) {
    if (n < 0x80) {
      frame += static_cast<char>(n);
      break;
    }
    frame += static_cast<char>((n & 0x7f) | 0x80);
  }
  if (!c.SendRaw(frame + body)) return false;
  const std::string got = c.ReadAvailable(2, 10000);
  if (got.size() < 2) return false;
  v1::Response r;
  const size_t len = static_cast<unsigned char>(got[0]);
  std::string rest = got.substr(1);
  if (rest.size() < len) rest += c.ReadAvailable(len - rest.size(), 10000);
  return r.ParseFromString(rest.substr(0, len)) && r.has_pong() && r.request_id() == 7;
}

// Strangers cannot crowd out clients with the token (issue 41 item 6): 300
// idle connections to each port (fewer if descriptors are short), three
// times max_connections, then a flood
// of new ones from another address that goes on throughout, and every
// authenticated request on either port is answered; the strangers hold at
// most max_unauthenticated_connections slots (the busiest address's oldest
// closed for a newcomer). Before, the idle connections filled
// max_connections and authenticated clients got 429 or a closed socket.
TEST_F(ServerHttpTest, IdleStrangersCannotCrowdOutAuthenticatedClients) {
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 8192);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lim), 0);
  // 300 a port where the process may open ~1,800 descriptors (the clients'
  // and the server's ends, and the flood's), fewer where it may not.
  const int per_port = static_cast<int>(std::clamp<rlim_t>((lim.rlim_cur - 300) / 5, 60, 300));
  ServerOptions o = Options();
  o.max_connections = static_cast<uint32_t>(per_port / 3);
  o.max_unauthenticated_connections = 16;
  auto srv = Start(o, HashedTextModel());
  ASSERT_TRUE(srv);
  constexpr char kOther[] = "127.0.0.2";  // the strangers' address; clients come from 127.0.0.1
  std::vector<std::unique_ptr<HttpClient>> idle;
  for (int i = 0; i < per_port; ++i) {
    idle.push_back(std::make_unique<HttpClient>(srv->http_port(), kOther));
    idle.push_back(std::make_unique<HttpClient>(srv->port(), kOther));
    ASSERT_TRUE(idle.back()->connected());
  }
  // Strangers were closed to make room for newer ones until 16 are left
  // (or refused while the closed ones had not yet let go of their slots).
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::string m;
  while (Clock::now() < deadline) {
    m = MetricsText(srv->http_port());
    if (Metric(m, "tributary_unauthenticated_connections") <= 16 && Metric(m, "tributary_open_connections") <= 16 &&
        Metric(m, "tributary_http_open_connections") <= 17) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_LE(Metric(m, "tributary_unauthenticated_connections"), 16) << m;
  EXPECT_GT(Metric(m, "tributary_unauthenticated_evictions_total"), 0) << m;
  // A flood of new strangers throughout, as fast as this thread connects.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> flood{0};
  std::thread flooder([&] {
    std::deque<std::unique_ptr<HttpClient>> mine;
    while (!stop) {
      mine.push_back(std::make_unique<HttpClient>(flood % 2 ? srv->port() : srv->http_port(), kOther));
      ++flood;
      if (mine.size() > static_cast<size_t>(per_port)) mine.pop_front();
    }
  });
  std::vector<double> ms;
  for (int i = 0; i < 100; ++i) {
    const auto t0 = Clock::now();
    HttpClient c(srv->http_port());
    HttpResponse r = c.Call("POST", "/v1/predict", Docs({{{"text", "goal"}}}).dump());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    EXPECT_EQ(r.status, 200) << i << ": " << r.body;
    EXPECT_TRUE(BinaryPing(srv->port())) << i;
  }
  stop = true;
  flooder.join();
  std::printf("(%llu more strangers connected meanwhile)\n", static_cast<unsigned long long>(flood.load()));
  std::sort(ms.begin(), ms.end());
  std::printf("authenticated HTTP predictions under %zu idle strangers: p50 %.2f ms, p99 %.2f ms\n", idle.size(),
              ms[ms.size() / 2], ms[ms.size() * 99 / 100]);
  const std::string metrics = MetricsText(srv->http_port());
  EXPECT_LE(Metric(metrics, "tributary_unauthenticated_connections"), 16);
  EXPECT_LE(Metric(metrics, "tributary_open_connections"), 16 + 2);
}

}  // namespace
}  // namespace tributary
