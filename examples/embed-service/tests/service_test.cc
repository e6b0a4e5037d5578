// The embed-service example under concurrent clients: one client teaches it
// a synthetic three-topic text stream in batches while three others predict
// all the time over keep-alive connections (the teacher waits for
// predictions between its batches, so the two interleave however fast the
// learner is). Checks: every request answered; predictions made while the
// model was part-way through the stream; each predicting client sees
// versions that never go back; after learning, the service classifies
// held-out texts (accuracy >= 0.9) and reports every document learned; a
// snapshot holds that version; bad requests are refused with the line or
// endpoint named.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "service.h"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// One keep-alive HTTP connection.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }
  // The status and the body.
  std::pair<int, std::string> Request(http::verb verb, const std::string& target, const std::string& body = "") {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::write(socket_, req);
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res);
    return {static_cast<int>(res.result_int()), res.body()};
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

// A number field of a flat JSON object ("version": 12).
uint64_t Field(const std::string& json, const std::string& name) {
  const size_t at = json.find("\"" + name + "\": ");
  if (at == std::string::npos) return UINT64_MAX;
  return std::stoull(json.substr(at + name.size() + 4));
}
std::string Label(const std::string& json) {
  const size_t at = json.find("\"label\": \"");
  if (at == std::string::npos) return "";
  const size_t start = at + 10;
  return json.substr(start, json.find('"', start) - start);
}

// Three topics, 30 words of their own each, and 20 words they share.
struct Corpus {
  std::vector<std::pair<std::string, std::string>> train, test;  // (label, text)
};
Corpus MakeCorpus() {
  const std::vector<std::string> topics = {"sport", "cooking", "weather"};
  std::mt19937_64 rng(42);
  auto text = [&](size_t topic) {
    std::string t;
    const int n = 6 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      if (!t.empty()) t += ' ';
      t += rng() % 3 == 0 ? "common" + std::to_string(rng() % 20) : topics[topic] + "word" + std::to_string(rng() % 30);
    }
    return t;
  };
  Corpus c;
  for (int i = 0; i < 3000; ++i) {
    const size_t k = rng() % 3;
    c.train.emplace_back(topics[k], text(k));
  }
  for (int i = 0; i < 300; ++i) {
    const size_t k = rng() % 3;
    c.test.emplace_back(topics[k], text(k));
  }
  return c;
}

TEST(EmbedService, LearnsAndPredictsAtOnceUnderConcurrentClients) {
  const std::string dir = std::filesystem::temp_directory_path() / ("embed_service_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  embed::ServiceOptions opt;
  opt.plugin_dir = TRIBUTARY_PLUGIN_DIR;
  opt.snapshot_path = dir + "/model.trib";
  auto service = embed::Service::Start(opt);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  const uint16_t port = (*service)->port();
  const Corpus corpus = MakeCorpus();

  std::atomic<bool> learning_done{false};
  // mid_learning: predictions answered by a model that had learned some of
  // the stream but not all of it (the point of the test: both at once).
  std::atomic<uint64_t> predictions{0}, failures{0}, mid_learning{0};
  std::vector<std::thread> predictors;
  for (int c = 0; c < 3; ++c) {
    predictors.emplace_back([&, c] {
      Client client(port);
      uint64_t last = 0;
      for (size_t i = static_cast<size_t>(c); !learning_done.load(); i = (i + 7) % corpus.test.size()) {
        auto [status, body] = client.Request(http::verb::post, "/predict", corpus.test[i].second);
        const uint64_t v = Field(body, "version");
        if (status != 200 || v == UINT64_MAX || v < last) {
          ADD_FAILURE() << "client " << c << ": " << status << " " << body << " (last version " << last << ")";
          failures++;
          return;
        }
        last = v;
        if (v > 0 && v < corpus.train.size()) mid_learning++;
        predictions++;
      }
    });
  }
  {
    Client teacher(port);
    uint64_t last = 0, seen = 0;
    for (size_t b = 0; b < corpus.train.size(); b += 100) {
      if (b > 0) {
        // The readers get in between learning requests (the learner takes
        // ~1 ms a batch: without this, the whole stream can be learned before
        // a reader's first request). Four more answers than at the last
        // reply: each of the three readers has at most one request in
        // flight, so the fourth was asked after that reply and answered by
        // the model at version b (published before the reply). 10 s at
        // most, then the counts below say what happened.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (predictions.load() < seen + 4 && failures.load() == 0 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      std::string body;
      for (size_t i = b; i < b + 100; ++i) body += corpus.train[i].first + "\t" + corpus.train[i].second + "\n";
      auto [status, reply] = teacher.Request(http::verb::post, "/learn", body);
      ASSERT_EQ(status, 200) << reply;
      EXPECT_EQ(Field(reply, "learned"), 100u) << reply;
      EXPECT_EQ(Field(reply, "version"), b + 100) << reply;  // published before the answer
      EXPECT_GT(Field(reply, "version"), last);
      last = Field(reply, "version");
      seen = predictions.load();
    }
  }
  learning_done = true;
  for (auto& t : predictors) t.join();
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GE(predictions.load(), 4 * (corpus.train.size() / 100 - 1));
  EXPECT_GT(mid_learning.load(), 0u);

  Client client(port);
  size_t right = 0;
  for (const auto& [label, text] : corpus.test) {
    auto [status, body] = client.Request(http::verb::post, "/predict", text);
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(Field(body, "version"), corpus.train.size());
    right += Label(body) == label;
  }
  const double accuracy = static_cast<double>(right) / static_cast<double>(corpus.test.size());
  EXPECT_GE(accuracy, 0.9);
  auto [st, stats] = client.Request(http::verb::get, "/stats");
  EXPECT_EQ(st, 200);
  EXPECT_EQ(Field(stats, "learned"), corpus.train.size()) << stats;
  auto [ss, snap] = client.Request(http::verb::post, "/snapshot");
  EXPECT_EQ(ss, 200) << snap;
  EXPECT_EQ(Field(snap, "version"), corpus.train.size()) << snap;
  EXPECT_TRUE(std::filesystem::exists(opt.snapshot_path));

  // Bad requests: named.
  auto [bs, bad] = client.Request(http::verb::post, "/learn", "sport\tgood line\nno tab here\n");
  EXPECT_EQ(bs, 400);
  EXPECT_NE(bad.find("learned 1, then: line 2: expected 'label<TAB>text', found no tab"), std::string::npos) << bad;
  auto [es, empty] = client.Request(http::verb::post, "/learn", "sport\t...\n");
  EXPECT_EQ(es, 400);
  EXPECT_NE(empty.find("line 1"), std::string::npos) << empty;
  auto [ns, none] = client.Request(http::verb::get, "/nowhere");
  EXPECT_EQ(ns, 404);
  EXPECT_NE(none.find("no endpoint GET /nowhere"), std::string::npos) << none;
  (*service)->Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
