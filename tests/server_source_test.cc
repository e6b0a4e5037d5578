// `serve --source` (ServerOptions::sources) against a real redis-server the
// tests start themselves, and librdkafka's mock cluster: entries learned through the log and acknowledged
// only after it, bad entries dead-lettered, nothing acknowledged while the
// log fails, a broker that is down at start. The crash cases (kill -9,
// entries delivered again and recognised in the log) are
// tests/cli/redis_source.sh.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fault_env.h"
#include "kafka_mock.h"
#include "redis_server.h"
#include "test_util.h"
#include "tributary/model.h"
#include "tributary/redis_source.h"
#include "tributary/server.h"

namespace tributary {
namespace {

using testing::Context;
using testing::FreePort;
using testing::kRedisServer;
using testing::RedisServer;
using testing::Reply;
using testing::Str;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kVocab = 50;

std::unique_ptr<Model> NewModel() {
  v1::Schema proto;  // raw text hashed into kVocab ids, classes as they come
  proto.set_hashed_dim(kVocab);
  proto.set_open_classes(true);
  auto schema = ModelSchema::FromProto(proto);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("ncll"), *schema, {}, 1);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  (*m)->learner_state().effective_size = 1000;
  return std::move(m).value();
}

// A server on free ports with quick group commits and publishing, in `dir`.
ServerOptions QuickOptions(const std::string& dir) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.http = "127.0.0.1:0";
  o.data_dir = dir + "/data";
  o.fsync_interval_ms = 2;
  o.publish_interval_ms = 2;
  return o;
}

// Polls the server's /metrics until `pred` holds or `seconds` pass; *last
// (if set): the metrics last read.
bool WaitForMetrics(uint16_t http, const std::function<bool(std::map<std::string, double>&)>& pred,
                    std::map<std::string, double>* last, int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  std::map<std::string, double> m;
  bool held = false;
  while (!held && Clock::now() < deadline) {
    m = testing::HttpMetrics(http);
    held = pred(m);
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (last) *last = m;
  return held;
}

class ServerSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kRedisServer, X_OK), 0) << kRedisServer << " is missing (scripts/install_deps.sh installs it)";
    dir_ = testing::TempDir(std::string("server_source_") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  bool StartRedis(uint16_t port = 0) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const uint16_t p = port != 0 ? port : FreePort();
      if (p != 0 && redis_.Start(p, dir_)) {
        client_.reset(redisConnectWithTimeout("127.0.0.1", p, timeval{2, 0}));
        return client_ != nullptr && client_->err == 0;
      }
      if (port != 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
  Reply Cmd(const std::vector<std::string>& args) { return testing::Command(client_.get(), args); }
  void Add(const std::string& label, const std::string& text) {
    Reply r = Cmd({"XADD", "docs", "*", "label", label, "text", text});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << (r ? Str(r.get()) : "no reply");
  }
  long long Integer(const std::vector<std::string>& args) {
    Reply r = Cmd(args);
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  }
  // Entries delivered to the group and not acknowledged (XPENDING summary).
  long long Pending() {
    Reply r = Cmd({"XPENDING", "docs", "tributary"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) return -1;
    return r->element[0]->integer;
  }
  std::string Url(const std::string& params = "") const {
    return "redis://127.0.0.1:" + std::to_string(redis_.port()) + "/docs?block_ms=50&batch=8" + params;
  }
  ServerOptions Options() const {
    ServerOptions o = QuickOptions(dir_);
    o.wal_retry_interval_ms = 50;
    return o;
  }
  // Polls /metrics until `pred` holds (10 s at most).
  bool WaitFor(uint16_t http, const std::function<bool(std::map<std::string, double>&)>& pred,
               std::map<std::string, double>* last = nullptr) {
    return WaitForMetrics(http, pred, last, 10);
  }
  // The `error` field of every entry of the dead-letter stream, a line each.
  std::string DeadLetterErrors(const std::string& stream) {
    Reply bad = Cmd({"XRANGE", stream, "-", "+"});
    std::string reasons;
    if (!bad || bad->type != REDIS_REPLY_ARRAY) return reasons;
    for (size_t i = 0; i < bad->elements; ++i) {
      const redisReply* fields = bad->element[i]->element[1];
      for (size_t k = 0; k + 1 < fields->elements; k += 2) {
        if (Str(fields->element[k]) == "error") reasons += Str(fields->element[k + 1]) + "\n";
      }
    }
    return reasons;
  }
  std::string Entries(const std::string& url, const std::string& outcome) const {
    return "tributary_source_entries_total{source=\"" + url + "\",outcome=\"" + outcome + "\"}";
  }

  std::string dir_;
  RedisServer redis_;
  Context client_;
};

TEST_F(ServerSourceTest, LearnsEveryEntryOnceAndDeadLettersTheBadOnes) {
  ASSERT_TRUE(StartRedis());
  for (int i = 0; i < 30; ++i) Add(i % 2 ? "odd" : "even", "document number " + std::to_string(i) + " with words");
  Add("odd", "");                                           // no text: not a document
  ASSERT_TRUE(Cmd({"XADD", "docs", "*", "label", "odd"}));  // neither text nor doc
  for (int i = 30; i < 40; ++i) Add(i % 2 ? "odd" : "even", "more words " + std::to_string(i));
  ServerOptions o = Options();
  const std::string url = Url("&dead_letter=bad");
  o.sources = {url};
  auto s = Server::Start(o, NewModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::map<std::string, double> m;
  EXPECT_TRUE(WaitFor((*s)->http_port(), [](auto& x) { return x["tributary_documents_learned_total"] >= 40; }, &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 40);
  EXPECT_EQ(m["tributary_documents_acknowledged_total"], 40);
  EXPECT_EQ(m[Entries(url, "read")], 42);
  EXPECT_EQ(m[Entries(url, "logged")], 40);
  EXPECT_EQ(m[Entries(url, "dead_lettered")], 2);
  EXPECT_EQ(m[Entries(url, "duplicate")], 0);
  EXPECT_EQ(m["tributary_source_connected{source=\"" + url + "\"}"], 1);
  // Acknowledged after the log: nothing pending once learned (the XACK
  // follows the committer's answer; give it a moment).
  for (int i = 0; i < 100 && Pending() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Integer({"XLEN", "bad"}), 2);
  const std::string reasons = DeadLetterErrors("bad");
  EXPECT_NE(reasons.find("docs"), std::string::npos) << reasons;  // names the stream
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), '\n'), 2) << reasons;
  (*s)->Shutdown();
  EXPECT_TRUE((*s)->Wait().ok());
}

// Entries whose text, label or id are not UTF-8 are dead-lettered with the
// field named, never logged nor learned (before the one UTF-8 rule they were
// acknowledged and logged, and the next start refused the data directory:
// its records and snapshot no longer parsed).
TEST_F(ServerSourceTest, InvalidUtf8IsDeadLetteredAndTheServerRestarts) {
  ASSERT_TRUE(StartRedis());
  for (int i = 0; i < 10; ++i) Add(i % 2 ? "odd" : "even", "first words " + std::to_string(i));
  ASSERT_TRUE(Cmd({"XADD", "docs", "*", "label", std::string("bad\xff", 4), "text", "a label of latin-1"}));
  ASSERT_TRUE(Cmd({"XADD", "docs", "*", "label", "odd", "text", std::string("caf\xc3 cut", 8)}));
  ASSERT_TRUE(Cmd({"XADD", "docs", "*", "label", "odd", "text", "fine words", "id", "\xed\xa0\x80"}));
  for (int i = 10; i < 20; ++i) Add(i % 2 ? "odd" : "even", "more words " + std::to_string(i));
  ServerOptions o = Options();
  const std::string url = Url("&dead_letter=bad");
  o.sources = {url};
  {
    auto s = Server::Start(o, NewModel());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::map<std::string, double> m;
    EXPECT_TRUE(WaitFor(
        (*s)->http_port(),
        [&](auto& x) { return x[Entries(url, "dead_lettered")] >= 3 && x["tributary_documents_learned_total"] >= 20; },
        &m));
    EXPECT_EQ(m["tributary_documents_acknowledged_total"], 20);
    EXPECT_EQ(m[Entries(url, "dead_lettered")], 3);
    EXPECT_EQ(m["tributary_model_classes"], 2);
    const std::string reasons = DeadLetterErrors("bad");
    EXPECT_EQ(std::count(reasons.begin(), reasons.end(), '\n'), 3) << reasons;
    for (const char* field : {"field 'label'", "field 'text'", "field 'id'"}) {
      EXPECT_NE(reasons.find(field), std::string::npos) << field << " in " << reasons;
    }
    EXPECT_NE(reasons.find("expected UTF-8"), std::string::npos) << reasons;
    (*s)->Shutdown();
    EXPECT_TRUE((*s)->Wait().ok());
  }
  // The same data directory starts again, with nothing to report.
  auto again = Server::Start(o, NewModel());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)->recovery().damage.empty());
  std::map<std::string, double> m;
  EXPECT_TRUE(WaitFor((*again)->http_port(), [](auto& x) { return x["tributary_ready"] == 1; }, &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 20);
  EXPECT_EQ(m["tributary_damage_reports"], 0);
  (*again)->Shutdown();
  EXPECT_TRUE((*again)->Wait().ok());
}

// A stream or group name that is not UTF-8 once percent-decoded would be in
// every log record's source position: refused at start.
TEST_F(ServerSourceTest, RefusesANameThatIsNotUtf8) {
  for (const char* url : {"redis://127.0.0.1:7000/docs%FF", "redis://127.0.0.1:7000/docs?group=g%C3"}) {
    auto r = ParseRedisSourceUrl(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_NE(r.status().message().find("a UTF-8 name"), std::string::npos) << r.status().ToString();
  }
}

TEST_F(ServerSourceTest, NothingIsAcknowledgedWhileTheLogFailsAndEverythingIsLearnedOnceAfter) {
  ASSERT_TRUE(StartRedis());
  testing::FaultEnv env;
  ServerOptions o = Options();
  o.env = &env;
  const std::string url = Url();
  o.sources = {url};
  auto s = Server::Start(o, NewModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Every fsync of a log segment fails from now on.
  env.Add({testing::FaultEnv::Op::kSync, "wal-", 0});
  for (int i = 0; i < 20; ++i) Add(i % 2 ? "odd" : "even", "words of document " + std::to_string(i));
  std::map<std::string, double> m;
  EXPECT_TRUE(WaitFor((*s)->http_port(), [](auto& x) { return x["tributary_learning_enabled"] == 0; }, &m));
  // Give the reader time to try again: still nothing learned or acknowledged.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  m = testing::HttpMetrics((*s)->http_port());
  EXPECT_EQ(m["tributary_documents_learned_total"], 0);
  EXPECT_EQ(m[Entries(url, "logged")], 0);
  EXPECT_GT(m["tributary_source_errors_total{source=\"" + url + "\"}"], 0);
  EXPECT_GT(Pending(), 0) << "entries read while the log failed must stay pending in the group";
  // The disk is back: the log recovers, the reader reads the entries again
  // and learns each once.
  env.Clear();
  EXPECT_TRUE(WaitFor((*s)->http_port(), [](auto& x) { return x["tributary_documents_learned_total"] >= 20; }, &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 20);
  EXPECT_EQ(m["tributary_documents_acknowledged_total"], 20);
  for (int i = 0; i < 100 && Pending() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Pending(), 0);
  (*s)->Shutdown();
  EXPECT_TRUE((*s)->Wait().ok());
}

TEST_F(ServerSourceTest, StartsWhileTheBrokerIsDownAndLearnsOnceItIsUp) {
  const uint16_t port = FreePort();
  ASSERT_NE(port, 0);
  ServerOptions o = Options();
  const std::string url = "redis://127.0.0.1:" + std::to_string(port) + "/docs?block_ms=50";
  o.sources = {url};
  auto s = Server::Start(o, NewModel());
  ASSERT_TRUE(s.ok()) << "an unreachable broker must not stop the server: " << s.status().ToString();
  std::map<std::string, double> m;
  EXPECT_TRUE(WaitFor((*s)->http_port(),
                      [&](auto& x) { return x["tributary_source_errors_total{source=\"" + url + "\"}"] > 0; }, &m));
  EXPECT_EQ(m["tributary_source_connected{source=\"" + url + "\"}"], 0);
  ASSERT_TRUE(StartRedis(port));
  for (int i = 0; i < 5; ++i) Add("a", "late words " + std::to_string(i));
  EXPECT_TRUE(WaitFor((*s)->http_port(), [](auto& x) { return x["tributary_documents_learned_total"] >= 5; }, &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 5);
  EXPECT_EQ(m["tributary_source_connected{source=\"" + url + "\"}"], 1);
  (*s)->Shutdown();
  EXPECT_TRUE((*s)->Wait().ok());
}

TEST_F(ServerSourceTest, RefusesAMalformedUrlAndTheSameSourceTwice) {
  ServerOptions o = Options();
  o.sources = {"redis://127.0.0.1:99999/docs"};
  auto s = Server::Start(o, NewModel());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("port"), std::string::npos) << s.status().ToString();
  o.sources = {"kafkaa://host/topic"};
  s = Server::Start(o, NewModel());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("expected a URL starting with redis://"), std::string::npos)
      << s.status().ToString();
  o.sources = {"redis://127.0.0.1:7000/docs?consumer=a", "redis://127.0.0.1:7000/docs?consumer=b"};
  s = Server::Start(o, NewModel());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("the same source is given twice"), std::string::npos) << s.status().ToString();
}

// ---- Kafka (librdkafka's mock cluster) ---------------------------------------------

class ServerKafkaSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(std::string("server_kafka_") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    kafka_.StartCluster(1);
  }
  std::string Url(const std::string& params = "") const {
    // Short group timings: the mock coordinator makes a group's first member
    // wait 3 s (kafka_source_test.cc says more).
    return "kafka://" + kafka_.bootstraps() +
           "/docs?poll_ms=50&session_timeout_ms=4000&heartbeat_interval_ms=100&connect_timeout_ms=5000" + params;
  }
  ServerOptions Options(const std::string& url) const {
    ServerOptions o = QuickOptions(dir_);
    o.sources = {url};
    return o;
  }
  double ProducedSoFar() const { return produced_; }
  void ProduceTexts(int from, int to, int partitions) {
    produced_ += to - from;
    std::vector<testing::Message> ms;
    for (int i = from; i < to; ++i) {
      testing::Message m = testing::Text("words of message " + std::to_string(i), i % partitions);
      m.headers.emplace_back("label", i % 2 ? "odd" : "even");
      ms.push_back(std::move(m));
    }
    kafka_.Produce("docs", ms);
  }
  static bool WaitFor(uint16_t http, const std::function<bool(std::map<std::string, double>&)>& pred,
                      std::map<std::string, double>* last, int seconds = 30) {
    return WaitForMetrics(http, pred, last, seconds);
  }
  std::string Key(const std::string& metric, const std::string& url, const std::string& outcome = "") const {
    return metric + "{source=\"" + url + "\"" + (outcome.empty() ? "" : ",outcome=\"" + outcome + "\"") + "}";
  }

  std::string dir_;
  testing::KafkaMock kafka_;
  double produced_ = 0;
};

TEST_F(ServerKafkaSourceTest, LearnsEveryMessageOnceCommitsAfterTheLogAndDeadLettersTheBadOnes) {
  kafka_.CreateTopic("docs", 2);
  kafka_.CreateTopic("bad", 1);
  ProduceTexts(0, 30, 2);
  testing::Message bad = testing::Text("<p>not text</p>", 1);
  bad.headers.emplace_back("content-type", "text/html");
  kafka_.Produce("docs", {bad});
  const std::string url = Url("&dead_letter=bad");
  auto s = Server::Start(Options(url), NewModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::map<std::string, double> m;
  // Learned, and committed: the group's lag back to 0.
  EXPECT_TRUE(WaitFor((*s)->http_port(),
                      [&](auto& x) {
                        return x["tributary_documents_learned_total"] >= 30 &&
                               x[Key("tributary_source_entries_total", url, "read")] >= 31 &&
                               x[Key("tributary_source_lag", url)] == 0;
                      },
                      &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 30);
  EXPECT_EQ(m["tributary_documents_acknowledged_total"], 30);
  EXPECT_EQ(m[Key("tributary_source_entries_total", url, "logged")], 30);
  EXPECT_EQ(m[Key("tributary_source_entries_total", url, "dead_lettered")], 1);
  EXPECT_EQ(m[Key("tributary_source_lag", url)], 0);
  (*s)->Shutdown();
  EXPECT_TRUE((*s)->Wait().ok());
}

// The crash window between the log's fsync and the commit: every commit
// fails (the broker refuses OffsetCommit), so the group's offset stays at
// the start while the log holds 20 messages. The next server on the same
// data directory starts the partition after what its log holds: nothing is
// learned twice (without the log's positions it would relearn all 20).
TEST_F(ServerKafkaSourceTest, MessagesLoggedButNotCommittedAreNotLearnedAgain) {
  kafka_.CreateTopic("docs", 1);
  ProduceTexts(0, 20, 1);
  constexpr int16_t kOffsetCommit = 8;  // Kafka's ApiKey
  std::vector<rd_kafka_resp_err_t> refusals(500, RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE);
  rd_kafka_mock_push_request_errors_array(kafka_.mock(), kOffsetCommit, refusals.size(), refusals.data());
  const std::string url = Url();
  std::map<std::string, double> m;
  {
    auto s = Server::Start(Options(url), NewModel());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(WaitFor((*s)->http_port(),
                        [&](auto& x) {
                          // The lag gauge is refreshed once a second; it
                          // reads 0 until the first refresh after the
                          // partition was assigned.
                          return x["tributary_documents_learned_total"] >= 20 &&
                                 x[Key("tributary_source_errors_total", url)] > 0 &&
                                 x[Key("tributary_source_lag", url)] > 0;
                        },
                        &m))
        << "the commits were refused: the group's offset should stay behind (lag "
        << m[Key("tributary_source_lag", url)] << ")";
    EXPECT_EQ(m["tributary_documents_learned_total"], 20);
    // Refused commits are retried with a growing pause: a tight loop would
    // use up the 500 refusals (and let a commit through) within a second.
    EXPECT_LT(m[Key("tributary_source_errors_total", url)], 50);
    (*s)->Shutdown();
    EXPECT_TRUE((*s)->Wait().ok());
  }
  rd_kafka_mock_clear_request_errors(kafka_.mock(), kOffsetCommit);
  ProduceTexts(20, 30, 1);
  auto s = Server::Start(Options(url), NewModel());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(WaitFor(
      (*s)->http_port(),
      [&](auto& x) { return x["tributary_documents_learned_total"] >= 30 && x[Key("tributary_source_lag", url)] == 0; },
      &m));
  EXPECT_EQ(m["tributary_documents_learned_total"], 30);
  EXPECT_EQ(m["tributary_documents_acknowledged_total"], 30) << "a message logged twice";
  EXPECT_EQ(m[Key("tributary_source_entries_total", url, "logged")], 10);
  // Not even delivered again: the partition started after the log's last
  // offset (start_offset), not at the group's; a message delivered again
  // would be found in the log and counted here.
  EXPECT_EQ(m[Key("tributary_source_entries_total", url, "duplicate")], 0);
  EXPECT_EQ(m[Key("tributary_source_entries_total", url, "read")], 10);
  (*s)->Shutdown();
  EXPECT_TRUE((*s)->Wait().ok());
}

// Fortunes (Debian's fortunes package), one document per fortune, four
// files interleaved: (label, text) in stream order.
std::vector<std::pair<std::string, std::string>> Fortunes(size_t max) {
  std::vector<std::vector<std::pair<std::string, std::string>>> by_file;
  for (const char* name : {"computers", "science", "love", "people"}) {
    std::ifstream in(std::string("/usr/share/games/fortunes/") + name);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    by_file.emplace_back();
    size_t pos = 0;
    while (pos < all.size()) {
      size_t end = all.find("\n%\n", pos);
      if (end == std::string::npos) end = all.size();
      std::string text;
      for (size_t i = pos; i < end; ++i) {
        const char c = all[i];
        const bool space = c == '\n' || c == '\t' || c == '\r' || c == ' ';
        if (space) {
          if (!text.empty() && text.back() != ' ') text += ' ';
        } else {
          text += c;
        }
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      if (!text.empty()) by_file.back().emplace_back(name, text);
      pos = end + 3;
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; out.size() < max; ++i) {
    bool any = false;
    for (auto& f : by_file) {
      if (i < f.size() && out.size() < max) {
        out.push_back(f[i]);
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

// `tributary serve` as a child process.
class ServeProcess {
 public:
  ~ServeProcess() { Kill(SIGKILL); }
  // Starts it and waits for its port file; returns the HTTP port (0: failed).
  uint16_t Start(const std::vector<std::string>& flags, const std::string& dir, const std::string& log) {
    const std::string port_file = dir + "/port";
    std::remove(port_file.c_str());
    std::vector<std::string> args = {testing::ProgramPath(), "serve",       "--listen", "127.0.0.1:0", "--http",
                                     "127.0.0.1:0",          "--port-file", port_file};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      std::ifstream in(port_file);
      unsigned port = 0, http = 0;
      if (in >> port >> http) return static_cast<uint16_t>(http);
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }
  // Sends `sig` and waits; returns the exit status (-1: not running).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

std::string InspectField(const std::string& model, const std::string& field) {
  std::string out;
  testing::RunCommand(testing::ProgramPath() + " inspect --json --model " + model, &out);
  const size_t at = out.find("\"" + field + "\"");
  if (at == std::string::npos) return "";
  size_t v = out.find(':', at) + 1;
  while (v < out.size() && (out[v] == ' ' || out[v] == '"')) ++v;
  size_t e = v;
  while (e < out.size() && out[e] != ',' && out[e] != '"' && out[e] != '}' && out[e] != '\n') ++e;
  return out.substr(v, e - v);
}

// The scenario for Kafka: a `tributary serve` process reads a topic
// of fortunes from the mock cluster (over TCP), is killed with SIGKILL three
// times part-way and restarted: every message learned once (the log's
// length is the number of messages), the group's lag back to 0, and the
// model equal to `tributary train` on the same texts in topic order.
TEST_F(ServerKafkaSourceTest, KilledThreeTimesEveryMessageIsLearnedOnceAndTheModelEqualsOfflineTraining) {
  kafka_.CreateTopic("docs", 1);
  const auto rows = Fortunes(1500);
  ASSERT_GE(rows.size(), 1000u) << "fortunes missing (scripts/install_deps.sh installs them)";
  std::vector<testing::Message> ms;
  std::ofstream tsv(dir_ + "/stream.tsv");
  for (const auto& [label, text] : rows) {
    testing::Message m = testing::Text(text);
    m.headers.emplace_back("label", label);
    ms.push_back(std::move(m));
    tsv << label << "\t" << text << "\n";
  }
  tsv.close();
  kafka_.Produce("docs", ms);
  const double n = static_cast<double>(rows.size());
  const std::string url = Url();
  const std::vector<std::string> flags = {"--data-dir",
                                          dir_ + "/data",
                                          "--source",
                                          url,
                                          "--family",
                                          "multinomial",
                                          "--loss",
                                          "ncll",
                                          "--select",
                                          "off",
                                          "--n",
                                          "10000",
                                          "--seed",
                                          "1",
                                          "--snapshot-every",
                                          "400",
                                          "--fsync-interval-ms",
                                          "50"};
  ServeProcess serve;
  uint16_t http = serve.Start(flags, dir_, dir_ + "/serve.log");
  ASSERT_NE(http, 0) << testing::ReadFile(dir_ + "/serve.log");
  std::map<std::string, double> m;
  for (int k = 1; k <= 3; ++k) {
    const double want = n * k / 4;
    ASSERT_TRUE(WaitFor(
        http, [&](auto& x) { return x["tributary_documents_acknowledged_total"] >= want; }, &m, 60))
        << "crash " << k << ": stuck at " << m["tributary_documents_acknowledged_total"] << "; "
        << testing::ReadFile(dir_ + "/serve.log");
    serve.Kill(SIGKILL);
    http = serve.Start(flags, dir_, dir_ + "/serve.log");
    ASSERT_NE(http, 0) << testing::ReadFile(dir_ + "/serve.log");
  }
  EXPECT_TRUE(WaitFor(
      http,
      [&](auto& x) { return x["tributary_documents_learned_total"] >= n && x[Key("tributary_source_lag", url)] == 0; },
      &m, 60));
  EXPECT_EQ(m["tributary_documents_learned_total"], n);
  EXPECT_EQ(m["tributary_documents_acknowledged_total"], n) << "a message logged twice";
  EXPECT_EQ(m[Key("tributary_source_lag", url)], 0);
  const int status = serve.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::ReadFile(dir_ + "/serve.log");

  const std::string T = testing::ProgramPath();
  std::string out;
  ASSERT_EQ(testing::RunCommand("cat " + dir_ + "/stream.tsv | " + T +
                                    " convert -q --format tsv --open-vocabulary --in - --out " + dir_ +
                                    "/stream.pb && " + T + " train -q --in " + dir_ + "/stream.pb --out " + dir_ +
                                    "/offline.trib --family multinomial --loss ncll --n 10000 --seed 1 "
                                    "--select off",
                                &out, true),
            0)
      << out;
  const std::string served = dir_ + "/data/model.trib", offline = dir_ + "/offline.trib";
  EXPECT_EQ(InspectField(served, "updates"), std::to_string(rows.size()));
  EXPECT_FALSE(InspectField(served, "stats_digest").empty());
  EXPECT_EQ(InspectField(served, "stats_digest"), InspectField(offline, "stats_digest"));
}

// Two servers (each with its own data directory and model) in one consumer
// group: when the second joins, the partitions are shared out (a
// rebalance); together they learn every message, and the group's lag goes
// back to 0. A message is learned by both only if its commit failed in the
// rebalance (librdkafka's mock refuses commits while a group rebalances).
TEST_F(ServerKafkaSourceTest, ARebalanceSharesThePartitionsAndLosesNothing) {
  kafka_.CreateTopic("docs", 4);
  ProduceTexts(0, 200, 4);
  const std::string url = Url();
  ServerOptions a = Options(url), b = Options(url);
  a.data_dir = dir_ + "/a";
  b.data_dir = dir_ + "/b";
  auto first = Server::Start(a, NewModel());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::map<std::string, double> ma, mb;
  EXPECT_TRUE(
      WaitFor((*first)->http_port(), [&](auto& x) { return x["tributary_documents_learned_total"] >= 200; }, &ma));
  auto second = Server::Start(b, NewModel());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  // Wait until the second has partitions (it learns from the new messages).
  bool shared = false;
  // (Up to 20 s: the mock coordinator's group waits are 3-4 s, and a run
  // beside a sanitizer build once needed more than the 10 s this was.)
  for (int round = 0; round < 80 && !shared; ++round) {
    ProduceTexts(200 + round * 20, 220 + round * 20, 4);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    mb = testing::HttpMetrics((*second)->http_port());
    shared = mb[Key("tributary_source_entries_total", url, "logged")] > 0;
  }
  ASSERT_TRUE(shared) << "the second server never got a partition";
  ma = testing::HttpMetrics((*first)->http_port());
  // Together they log every message at least once (metrics are read as
  // they come; the lag is sampled every second, so it is checked after).
  auto logged = [&] {
    ma = testing::HttpMetrics((*first)->http_port());
    mb = testing::HttpMetrics((*second)->http_port());
    return ma[Key("tributary_source_entries_total", url, "logged")] +
           mb[Key("tributary_source_entries_total", url, "logged")];
  };
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (logged() < ProducedSoFar() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(logged(), ProducedSoFar());
  // And commit it: the group's lag on each one's partitions goes to 0.
  deadline = Clock::now() + std::chrono::seconds(30);
  // Each one's own (-1 until its lag is known: a sum could hide it).
  auto lags = [&] {
    return std::make_pair(testing::HttpMetrics((*first)->http_port())[Key("tributary_source_lag", url)],
                          testing::HttpMetrics((*second)->http_port())[Key("tributary_source_lag", url)]);
  };
  const auto zero = std::make_pair(0.0, 0.0);
  while (lags() != zero && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(lags(), zero);
  logged();
  EXPECT_GT(ma[Key("tributary_source_entries_total", url, "logged")], 0);
  EXPECT_EQ(ma["tributary_documents_acknowledged_total"], ma[Key("tributary_source_entries_total", url, "logged")]);
  EXPECT_EQ(mb["tributary_documents_acknowledged_total"], mb[Key("tributary_source_entries_total", url, "logged")]);
  (*second)->Shutdown();
  EXPECT_TRUE((*second)->Wait().ok());
  (*first)->Shutdown();
  EXPECT_TRUE((*first)->Wait().ok());
}

}  // namespace
}  // namespace tributary
