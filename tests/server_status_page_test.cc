// The status page at GET / of the HTTP port (issue 42; docs/http-api.md):
// the page is served without the token, /v1/status keeps it and carries the
// fields the page draws (history, documents_per_second, the model's age, the
// queue), QualityMonitor's bounded history, and a real browser (Debian's
// chromium, headless) rendering the page from a server that is learning:
// the DOM it builds shows the model version moving and the accuracy chart
// with points, and a screenshot at 1280x800 is written to the build tree.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tributary/quality_monitor.h"
#include "tributary/server.h"

extern char** environ;

namespace tributary {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "page-token";

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// One request on its own connection (Connection: close), read to the end.
HttpResponse Request(uint16_t port, const std::string& method, const std::string& target, const std::string& token = "",
                     const std::string& body = "") {
  HttpResponse r;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) req += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string in;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  char chunk[65536];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    in.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos || in.size() < 12) return r;
  r.status = std::atoi(in.substr(9, 3).c_str());
  size_t pos = in.find("\r\n");
  while (pos < end) {
    size_t next = in.find("\r\n", pos + 2);
    std::string line = in.substr(pos + 2, next - pos - 2);
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
  r.body = in.substr(end + 4);
  return r;
}

const std::vector<std::string> kSports = {"goal",  "match",  "striker", "referee", "league",
                                          "score", "keeper", "stadium", "penalty", "coach"};
const std::vector<std::string> kCooking = {"oven",   "flour", "butter", "simmer", "recipe",
                                           "garlic", "sauce", "bake",   "whisk",  "pepper"};

// `n` labelled documents of two separable topics; from document
// `drift_at` of the whole stream on, the labels are noise (a drift the
// model cannot follow: the recent accuracy falls to about a half).
json Batch(std::mt19937_64& rng, uint64_t first, int n, uint64_t drift_at) {
  json docs = json::array();
  for (int i = 0; i < n; ++i) {
    const bool sports = rng() % 3 != 0;  // a 2:1 class mix
    std::string t;
    for (int w = 0; w < 8; ++w) t += (sports ? kSports : kCooking)[rng() % 10] + " ";
    const bool noise = first + static_cast<uint64_t>(i) >= drift_at;
    const bool label = noise ? rng() % 2 == 0 : sports;
    docs.push_back({{"id", "d" + std::to_string(first + static_cast<uint64_t>(i))},
                    {"text", t},
                    {"label", label ? "sports" : "cooking"}});
  }
  return json{{"documents", docs}};
}

std::unique_ptr<Model> TextModel() {
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

class StatusPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(std::string("server_status_page_") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  ServerOptions Options(const std::string& token) const {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.http = "127.0.0.1:0";
    o.data_dir = dir_ + "/data" + (token.empty() ? "" : "_token");
    o.fsync_interval_ms = 2;
    o.publish_interval_ms = 2;
    o.auth_token = token;
    return o;
  }
  std::unique_ptr<Server> Start(const std::string& token = "") {
    auto s = Server::Start(Options(token), TextModel());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // Learns documents [first, first + n) in batches of 20.
  void Learn(uint16_t port, std::mt19937_64& rng, uint64_t first, int n, const std::string& token = "",
             uint64_t drift_at = UINT64_MAX) {
    for (int done = 0; done < n; done += 20) {
      HttpResponse r = Request(port, "POST", "/v1/learn", token, Batch(rng, first + done, 20, drift_at).dump());
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  json Status(uint16_t port, const std::string& token = "") {
    HttpResponse r = Request(port, "GET", "/v1/status", token);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  // Waits until the server has learned `n` documents.
  json StatusWhenLearned(uint16_t port, uint64_t n, const std::string& token = "") {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    for (;;) {
      json j = Status(port, token);
      // Learned and published (the publication may follow the learning).
      const bool learned = j.value("documents_learned", uint64_t{0}) >= n;
      const bool published = j.contains("model") && j["model"].value("version", uint64_t{0}) >= n;
      if ((learned && published) || Clock::now() > deadline) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::string dir_;
};

TEST(QualityMonitorHistoryTest, SamplesEveryKDocumentsAndStaysBounded) {
  QualityMonitorOptions o;
  o.history_capacity = 8;
  o.history_every = 5;
  QualityMonitor q(o);
  const double right[2] = {0.0, -5.0};  // predicts class 0
  for (int i = 1; i <= 40; ++i) q.Add(right, 2, 0);
  // 8 points at 5, 10, ..., 40: full.
  ASSERT_EQ(q.history().size(), 8u);
  EXPECT_EQ(q.history().front().documents, 5u);
  EXPECT_EQ(q.history().back().documents, 40u);
  EXPECT_DOUBLE_EQ(q.history().back().window_accuracy, 1.0);
  EXPECT_GT(q.history().back().time, 1.5e9);  // seconds since the epoch
  // The 45th halves it: points at multiples of 10, every 10 from then on.
  for (int i = 41; i <= 100; ++i) q.Add(right, 2, 1);
  EXPECT_LE(q.history().size(), 8u);
  EXPECT_EQ(q.history_every(), 20u);
  for (const QualityPoint& p : q.history()) EXPECT_EQ(p.documents % 20, 0u) << p.documents;
  EXPECT_EQ(q.history().back().documents, 100u);
  EXPECT_LT(q.history().back().window_accuracy, 0.5);
  for (size_t i = 1; i < q.history().size(); ++i) {
    EXPECT_LT(q.history()[i - 1].documents, q.history()[i].documents);
  }
  QualityMonitorOptions none;
  none.history_capacity = 0;
  QualityMonitor q0(none);
  for (int i = 0; i < 50; ++i) q0.Add(right, 2, 0);
  EXPECT_TRUE(q0.history().empty());
}

TEST_F(StatusPageTest, ServesThePageAndTheStatusItDraws) {
  auto srv = Start();
  ASSERT_TRUE(srv);
  const uint16_t port = srv->http_port();
  HttpResponse page = Request(port, "GET", "/");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(page.headers["cache-control"], "no-store");
  EXPECT_NE(page.body.find("<meta name=\"tributary-status-page\""), std::string::npos);
  EXPECT_NE(page.body.find("/v1/status"), std::string::npos);
  // Self-contained: nothing fetched from elsewhere.
  EXPECT_EQ(page.body.find("http://"), std::string::npos);
  EXPECT_EQ(page.body.find("https://"), std::string::npos);
  EXPECT_EQ(page.body.find("<script src"), std::string::npos);
  // A query string is the same page; other methods are refused.
  EXPECT_EQ(Request(port, "GET", "/?refresh=1").status, 200);
  HttpResponse post = Request(port, "POST", "/", "", "{}");
  EXPECT_EQ(post.status, 405) << post.body;
  EXPECT_EQ(post.headers["allow"], "GET");
  EXPECT_EQ(Request(port, "DELETE", "/").status, 405);
  EXPECT_EQ(Request(port, "GET", "/index.html").status, 404);

  std::mt19937_64 rng(42);
  Learn(port, rng, 0, 400);
  json s = StatusWhenLearned(port, 400);
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["documents_learned"], 400);
  ASSERT_TRUE(s["model"].contains("age_seconds"));
  EXPECT_GE(s["model"]["age_seconds"].get<double>(), 0.0);
  EXPECT_EQ(s["model"]["version"], 400);
  ASSERT_TRUE(s.contains("documents_per_second"));
  EXPECT_GT(s["documents_per_second"].get<double>(), 0.0);
  EXPECT_GT(s["uptime_seconds"].get<double>(), 0.0);
  ASSERT_TRUE(s["queue"].is_object());
  EXPECT_EQ(s["queue"]["depth"], 0);
  EXPECT_EQ(s["queue"]["learning_enabled"], true);
  const json& h = s["history"];
  ASSERT_TRUE(h.is_object()) << s.dump();
  EXPECT_EQ(h["fields"], json({"documents", "time", "window_accuracy", "window_log_loss"}));
  EXPECT_EQ(h["every"], 10);
  ASSERT_EQ(h["points"].size(), 40u) << h.dump();  // a point every 10 labelled documents
  EXPECT_EQ(h["points"][0][0], 10);
  EXPECT_EQ(h["points"][39][0], 400);
  EXPECT_GT(h["points"][39][2].get<double>(), 0.9);  // separable: the recent accuracy is high
  EXPECT_TRUE(h["alarms"].is_array());
  // The class mix (documents per class) and recall.
  ASSERT_EQ(s["quality"]["per_class"].size(), 2u);
  EXPECT_EQ(s["quality"]["per_class"][0]["documents"].get<uint64_t>() +
                s["quality"]["per_class"][1]["documents"].get<uint64_t>(),
            400u);

  // A drift: the labels turn to noise. The recent accuracy falls, ADWIN alarms,
  // and the alarm is on the history's axis.
  Learn(port, rng, 400, 400, "", /*drift_at=*/400);
  s = StatusWhenLearned(port, 800);
  const json& h2 = s["history"];
  EXPECT_EQ(h2["points"].size(), 80u);
  double lowest = 1;
  for (size_t i = 40; i < 80; ++i) lowest = std::min(lowest, h2["points"][i][2].get<double>());
  EXPECT_LT(lowest, h2["points"][39][2].get<double>() - 0.1) << h2.dump();
  ASSERT_FALSE(h2["alarms"].empty()) << s.dump();
  for (const auto& a : h2["alarms"]) {
    EXPECT_GT(a.get<uint64_t>(), 400u);
    EXPECT_LE(a.get<uint64_t>(), 800u);
  }
  EXPECT_EQ(s["quality"]["drift_alarms"], h2["alarms"]);
  // The model's age grows while nothing is learned.
  const double age0 = s["model"]["age_seconds"];
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  s = Status(port);
  EXPECT_GE(s["model"]["age_seconds"].get<double>(), age0 + 0.25);
  EXPECT_EQ(s["model"]["version"], 800);
  {
    // The age counts from the publication, whoever watches: idle, it grows;
    // a new version starts it again.
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    EXPECT_GE(Status(port)["model"]["age_seconds"].get<double>(), 1.0);
    std::mt19937_64 more(43);
    Learn(port, more, 800, 20);
    json fresh = StatusWhenLearned(port, 820);
    EXPECT_EQ(fresh["model"]["version"], 820);
    EXPECT_LT(fresh["model"]["age_seconds"].get<double>(), 1.0);
  }
}

TEST_F(StatusPageTest, PageNeedsNoTokenButTheStatusDoes) {
  auto srv = Start(kToken);
  ASSERT_TRUE(srv);
  const uint16_t port = srv->http_port();
  HttpResponse page = Request(port, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("tributary-status-page"), std::string::npos);
  HttpResponse denied = Request(port, "GET", "/v1/status");
  EXPECT_EQ(denied.status, 401) << denied.body;
  EXPECT_EQ(denied.headers["www-authenticate"], "Bearer");
  EXPECT_EQ(Request(port, "GET", "/v1/status", "wrong").status, 401);
  HttpResponse ok = Request(port, "GET", "/v1/status", kToken);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(json::parse(ok.body, nullptr, false).contains("history"));
  // The 405 of /v1/status names GET.
  HttpResponse post = Request(port, "POST", "/v1/status", kToken, "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET");
}

// ---- The real browser --------------------------------------------------------------

std::string FindChromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// Runs headless chromium with `args` (its own process group, a fresh
// profile), stdout to `out_file`; kills the group after `timeout`. Returns
// the exit status (-1: killed at the timeout or not started).
int RunChromium(const std::string& chromium, const std::string& profile, std::vector<std::string> args,
                const std::string& out_file, std::chrono::seconds timeout) {
  std::vector<std::string> argv = {chromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-dev-shm-usage",
                                   "--no-first-run",
                                   "--disable-extensions",
                                   "--disable-background-networking",
                                   "--hide-scrollbars",
                                   "--user-data-dir=" + profile};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::string err_file = out_file + ".stderr";
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, chromium.c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (Clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid, SIGKILL);  // helpers it left behind, if any
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The value of attribute `attr` of the element with id `id` in a dumped DOM
// ("" when absent).
std::string Attribute(const std::string& dom, const std::string& id, const std::string& attr) {
  const size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind('<', at), close = dom.find('>', at);
  const std::string tag = dom.substr(open, close - open);
  const size_t a = tag.find(" " + attr + "=\"");
  if (a == std::string::npos) return "";
  const size_t v = a + attr.size() + 3;
  return tag.substr(v, tag.find('"', v) - v);
}

class BrowserTest : public StatusPageTest {
 protected:
  void SetUp() override {
    StatusPageTest::SetUp();
    chromium_ = FindChromium();
    ASSERT_FALSE(chromium_.empty()) << "chromium is not installed: the status page's browser test needs it; run "
                                       "scripts/install_deps.sh (it installs Debian's chromium)";
  }
  // Loads the page for `budget_ms` of virtual time; returns the DOM it built.
  std::string DumpDom(uint16_t port, const std::string& name, int budget_ms) {
    const std::string out = dir_ + "/" + name + ".html";
    const int rc = RunChromium(chromium_, dir_ + "/profile_" + name,
                               {"--virtual-time-budget=" + std::to_string(budget_ms), "--dump-dom",
                                "http://127.0.0.1:" + std::to_string(port) + "/"},
                               out, std::chrono::seconds(25));
    EXPECT_EQ(rc, 0) << "chromium --dump-dom failed; its stderr: " << testing::ReadFile(out + ".stderr");
    return testing::ReadFile(out);
  }
  std::string chromium_;
};

TEST_F(BrowserTest, ChromiumRendersTheLearningServer) {
  auto srv = Start();
  ASSERT_TRUE(srv);
  const uint16_t port = srv->http_port();
  std::mt19937_64 rng(7);
  Learn(port, rng, 0, 600, "", /*drift_at=*/400);  // a drift at 400: an alarm to mark
  StatusWhenLearned(port, 600);
  // A client learns on while the browser watches.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sent{600};
  std::thread learner([&] {
    std::mt19937_64 r(8);
    while (!stop) {
      HttpResponse resp = Request(port, "POST", "/v1/learn", "", Batch(r, sent, 20, 400).dump());
      if (resp.status != 200) break;
      sent += 20;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const std::string dom1 = DumpDom(port, "first", 3000);
  // Wait until more has been learned than the first load can have seen.
  const uint64_t after_first = sent.load();
  StatusWhenLearned(port, after_first + 40);
  const std::string dom2 = DumpDom(port, "second", 3000);
  const std::string shot_dir = std::string(TRIBUTARY_BINARY_DIR) + "/test_output";
  std::filesystem::create_directories(shot_dir);
  const std::string shot = shot_dir + "/status_page_1280x800.png";
  std::filesystem::remove(shot);
  const int shot_rc = RunChromium(chromium_, dir_ + "/profile_shot",
                                  {"--virtual-time-budget=3000", "--window-size=1280,800", "--screenshot=" + shot,
                                   "http://127.0.0.1:" + std::to_string(port) + "/"},
                                  dir_ + "/shot.out", std::chrono::seconds(25));
  stop = true;
  learner.join();

  ASSERT_NE(dom1.find("tributary-status-page"), std::string::npos) << dom1.substr(0, 2000);
  // The page polled /v1/status and drew it.
  const std::string polls1 = dom1.substr(dom1.find("<body"), 40);
  EXPECT_EQ(polls1.find("data-polls=\"0\""), std::string::npos) << polls1;
  const std::string v1 = Attribute(dom1, "version", "data-version");
  const std::string v2 = Attribute(dom2, "version", "data-version");
  ASSERT_FALSE(v1.empty()) << dom1;
  ASSERT_FALSE(v2.empty()) << dom2;
  EXPECT_GE(std::stoull(v1), 600u);
  EXPECT_GT(std::stoull(v2), std::stoull(v1)) << "the model version did not move between two loads";
  // The accuracy and log-loss charts: a line over the history's points, the
  // drift alarm marked.
  for (const std::string* dom : {&dom1, &dom2}) {
    EXPECT_GE(std::atoi(Attribute(*dom, "acc-chart", "data-points").c_str()), 2) << *dom;
    EXPECT_GE(std::atoi(Attribute(*dom, "loss-chart", "data-points").c_str()), 2);
    EXPECT_GE(std::atoi(Attribute(*dom, "acc-chart", "data-alarms").c_str()), 1) << *dom;
    EXPECT_NE(dom->find("<polyline"), std::string::npos);
  }
  // The classes' recall and mix, and the numbers of the tiles.
  EXPECT_NE(dom2.find("<td>sports</td>"), std::string::npos);
  EXPECT_NE(dom2.find("<td>cooking</td>"), std::string::npos);
  EXPECT_EQ(dom2.find("id=\"docs\">—<"), std::string::npos);
  EXPECT_EQ(dom2.find("id=\"rate\">—<"), std::string::npos);
  EXPECT_EQ(dom2.find("class=\"show\""), std::string::npos) << "an error or the token box is shown";

  EXPECT_EQ(shot_rc, 0) << testing::ReadFile(dir_ + "/shot.out.stderr");
  ASSERT_TRUE(std::filesystem::exists(shot));
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
  std::cout << "status page screenshot (1280x800): " << shot << std::endl;
}

TEST_F(BrowserTest, ChromiumAsksForTheToken) {
  auto srv = Start(kToken);
  ASSERT_TRUE(srv);
  const std::string dom = DumpDom(srv->http_port(), "token", 1000);
  ASSERT_NE(dom.find("tributary-status-page"), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(Attribute(dom, "tokenbox", "class"), "show") << dom;
  EXPECT_EQ(Attribute(dom, "version", "data-version"), "");
}

}  // namespace
}  // namespace tributary
