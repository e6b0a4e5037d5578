// RedisSource against a real redis-server that each test starts itself on a
// free port (no persistence), and kills or restarts to simulate failures.
#include "tributary/redis_source.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "redis_server.h"
#include "test_util.h"

namespace tributary {
namespace {

using testing::Context;
using testing::FreePort;
using testing::kRedisServer;
using testing::RedisServer;
using testing::Reply;
using testing::Str;

class RedisSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kRedisServer, X_OK), 0) << kRedisServer << " is missing (scripts/install_deps.sh installs it)";
    dir_ = testing::TempDir(std::string("redis_source_") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    bool started = false;
    for (int attempt = 0; attempt < 5 && !started; ++attempt) {
      const uint16_t port = FreePort();
      started = port != 0 && server_.Start(port, dir_);
    }
    ASSERT_TRUE(started) << "cannot start " << kRedisServer << "; see " << dir_ << "/redis.log";
    client_ = Connect();
    ASSERT_TRUE(client_ != nullptr);
  }
  void TearDown() override {
    client_.reset();
    server_.Kill();
  }

  Context Connect() {
    Context c(redisConnectWithTimeout("127.0.0.1", server_.port(), timeval{2, 0}));
    if (c == nullptr || c->err != 0) return nullptr;
    return c;
  }
  // Runs a command on the test's own connection (binary-safe arguments).
  Reply Cmd(const std::vector<std::string>& args) { return testing::Command(client_.get(), args); }
  std::string Xadd(const std::string& stream, const std::vector<std::string>& fields) {
    std::vector<std::string> args = {"XADD", stream, "*"};
    args.insert(args.end(), fields.begin(), fields.end());
    Reply r = Cmd(args);
    EXPECT_TRUE(r && r->type == REDIS_REPLY_STRING) << (r ? Str(r.get()) : "no reply");
    return Str(r.get());
  }
  // XPENDING's summary count for the group.
  long long Pending(const std::string& stream, const std::string& group) {
    Reply r = Cmd({"XPENDING", stream, group});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) return -1;
    return r->element[0]->integer;
  }

  RedisSourceOptions Options(const std::string& consumer) const {
    RedisSourceOptions o;
    o.port = server_.port();
    o.stream = "docs";
    o.group = "g";
    o.consumer = consumer;
    o.block_ms = 100;
    return o;
  }
  std::unique_ptr<RedisSource> Open(const RedisSourceOptions& o) {
    auto r = RedisSource::Connect(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // Reads until `n` entries came or a Read returns nothing.
  std::vector<SourceEntry> ReadAll(RedisSource* s, size_t n) {
    std::vector<SourceEntry> all, batch;
    while (all.size() < n) {
      Status st = s->Read(&batch);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok() || batch.empty()) break;
      for (SourceEntry& e : batch) all.push_back(std::move(e));
    }
    return all;
  }
  static std::vector<std::string> Ids(const std::vector<SourceEntry>& entries) {
    std::vector<std::string> ids;
    for (const SourceEntry& e : entries) ids.push_back(e.entry_id);
    return ids;
  }

  std::string dir_;
  RedisServer server_;
  Context client_;
};

// ---- URL parsing ----

TEST(RedisSourceUrl, ParsesEveryPart) {
  auto r = ParseRedisSourceUrl(
      "redis://:s%40cret@cache.example:6380/news%2Fen?group=learners&consumer=host-1&dead_letter=bad"
      "&batch=64&block_ms=0&claim_idle_ms=5000&connect_timeout_ms=300");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->password, "s@cret");
  EXPECT_EQ(r->host, "cache.example");
  EXPECT_EQ(r->port, 6380);
  EXPECT_EQ(r->stream, "news/en");
  EXPECT_EQ(r->group, "learners");
  EXPECT_EQ(r->consumer, "host-1");
  EXPECT_EQ(r->dead_letter, "bad");
  EXPECT_EQ(r->batch, 64u);
  EXPECT_EQ(r->block_ms, 0u);
  EXPECT_EQ(r->claim_idle_ms, 5000u);
  EXPECT_EQ(r->connect_timeout_ms, 300u);
}

TEST(RedisSourceUrl, Defaults) {
  auto r = ParseRedisSourceUrl("redis://localhost/docs");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->host, "localhost");
  EXPECT_EQ(r->port, 6379);
  EXPECT_EQ(r->stream, "docs");
  EXPECT_EQ(r->group, "tributary");
  EXPECT_EQ(r->consumer, "");  // Connect uses DefaultRedisConsumer()
  EXPECT_EQ(r->dead_letter, "");
  EXPECT_EQ(r->password, "");
  EXPECT_EQ(r->batch, 256u);
  EXPECT_EQ(r->block_ms, 500u);
  EXPECT_EQ(r->claim_idle_ms, 60000u);
  EXPECT_FALSE(DefaultRedisConsumer().empty());

  auto v6 = ParseRedisSourceUrl("redis://[::1]:7000/s");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);
}

TEST(RedisSourceUrl, EachBadPartIsNamed) {
  struct Case {
    const char* url;
    std::vector<const char*> message;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"http://h:1/s", {"scheme", "expected 'redis://'", "found 'http://'"}},
      {"localhost:6379/s", {"scheme", "no scheme"}},
      {"rediss://h:1/s", {"scheme", "'rediss://'"}},
      {"redis://h:6379", {"stream", "'/STREAM'", "none"}},
      {"redis://h:6379/", {"stream", "a stream name"}},
      {"redis://h:6379?group=g", {"stream", "'/STREAM'"}},
      {"redis://h:99999/s", {"port", "1..65535", "'99999'"}},
      {"redis://h:abc/s", {"port", "'abc'"}},
      {"redis://h:0/s", {"port", "'0'"}},
      {"redis://h:/s", {"port", "found ''"}},
      {"redis:///s", {"host", "none"}},
      {"redis://::1:6379/s", {"host", "brackets"}},
      {"redis://[::1/s", {"host", "']'"}},
      {"redis://user:pw@h/s", {"password", "user names are not supported"}},
      {"redis://:@h/s", {"password", "non-empty"}},
      {"redis://h/s?grp=g", {"parameter", "one of group, consumer", "'grp'"}},
      {"redis://h/s?group=", {"parameter 'group'", "non-empty", "empty value"}},
      {"redis://h/s?consumer=", {"parameter 'consumer'", "empty value"}},
      {"redis://h/s?group", {"parameter", "NAME=VALUE", "'group'"}},
      {"redis://h/s?group=a&group=b", {"parameter 'group'", "once"}},
      {"redis://h/s?batch=0", {"parameter 'batch'", "1..1000000", "'0'"}},
      {"redis://h/s?batch=12x", {"parameter 'batch'", "'12x'"}},
      {"redis://h/s?block_ms=-1", {"parameter 'block_ms'", "'-1'"}},
      {"redis://h/s?claim_idle_ms=soon", {"parameter 'claim_idle_ms'", "'soon'"}},
      {"redis://h/s%zz", {"stream", "escape"}},
      {"redis://h/s#frag", {"fragment", "'#frag'"}},
  };
  for (const Case& c : cases) {
    auto r = ParseRedisSourceUrl(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << c.url;
    for (const char* part : c.message) {
      EXPECT_NE(r.status().message().find(part), std::string::npos)
          << c.url << ": '" << part << "' not in: " << r.status().message();
    }
  }
  // The password never shows in a message.
  auto r = ParseRedisSourceUrl("redis://:hunter2@h:99999/s");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(":***@"), std::string::npos) << r.status().message();
}

// ---- against redis-server ----

// Every non-blank line of two fortune files, XADDed as raw text with the
// file name as label, comes back as the right Document, in order.
TEST_F(RedisSourceTest, ReadsARealCorpusThroughAGroup) {
  struct Line {
    std::string text, label, entry_id;
  };
  std::vector<Line> lines;
  for (const std::string name : {"computers", "science"}) {
    std::ifstream in("/usr/share/games/fortunes/" + name);
    ASSERT_TRUE(in) << "fortunes missing (scripts/install_deps.sh installs them)";
    std::string line;
    while (std::getline(in, line)) {
      if (line == "%" || line.find_first_not_of(" \t\r") == std::string::npos) continue;
      lines.push_back({line, name, ""});
    }
  }
  ASSERT_GT(lines.size(), 5000u);
  // Pipelined XADDs.
  for (const Line& l : lines) {
    const char* argv[] = {"XADD", "docs", "*", "text", l.text.data(), "label", l.label.data()};
    const size_t lens[] = {4, 4, 1, 4, l.text.size(), 5, l.label.size()};
    ASSERT_EQ(redisAppendCommandArgv(client_.get(), 7, argv, lens), REDIS_OK);
  }
  for (Line& l : lines) {
    void* raw = nullptr;
    ASSERT_EQ(redisGetReply(client_.get(), &raw), REDIS_OK);
    Reply r(static_cast<redisReply*>(raw));
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << Str(r.get());
    l.entry_id = Str(r.get());
  }

  auto source = Open(Options("reader"));
  ASSERT_TRUE(source);
  std::vector<SourceEntry> got = ReadAll(source.get(), lines.size());
  ASSERT_EQ(got.size(), lines.size());
  std::vector<std::string> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    const SourceEntry& e = got[i];
    ASSERT_TRUE(e.error.ok()) << e.error.ToString();
    ASSERT_EQ(e.entry_id, lines[i].entry_id);
    EXPECT_EQ(e.doc.text(), lines[i].text);
    EXPECT_EQ(e.doc.label(), lines[i].label);
    EXPECT_EQ(e.doc.id(), lines[i].entry_id);  // no `id` field: the entry id
    EXPECT_TRUE(e.fields.empty());
    ids.push_back(e.entry_id);
  }
  std::vector<SourceEntry> more;
  ASSERT_TRUE(source->Read(&more).ok());  // nothing new within block_ms: not an error
  EXPECT_TRUE(more.empty());

  EXPECT_EQ(Pending("docs", "g"), static_cast<long long>(lines.size()));
  ASSERT_TRUE(source->Ack(ids).ok());
  EXPECT_EQ(Pending("docs", "g"), 0);
  auto lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->pending, 0u);
  EXPECT_EQ(lag->lag, 0);
  EXPECT_EQ(lag->last_delivered_id, lines.back().entry_id);
  EXPECT_TRUE(source->Ack({}).ok());
}

// A reader that read without acknowledging and vanished: a new reader with
// the same consumer name gets exactly those entries first, in order, then
// the rest.
TEST_F(RedisSourceTest, SameConsumerGetsItsUnacknowledgedEntriesFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Xadd("docs", {"text", "old " + std::to_string(i)}));
  RedisSourceOptions o = Options("worker");
  o.batch = 4;
  {
    auto crashed = Open(o);
    ASSERT_TRUE(crashed);
    std::vector<SourceEntry> got = ReadAll(crashed.get(), 8);
    ASSERT_EQ(Ids(got), std::vector<std::string>(ids.begin(), ids.begin() + 8));
    ASSERT_TRUE(crashed->Ack({ids[2]}).ok());  // one was done before the crash
  }                                            // destroyed without acknowledging the rest
  for (int i = 0; i < 3; ++i) ids.push_back(Xadd("docs", {"text", "new " + std::to_string(i)}));

  auto restarted = Open(o);
  ASSERT_TRUE(restarted);
  std::vector<SourceEntry> batch;
  ASSERT_TRUE(restarted->Read(&batch).ok());
  EXPECT_EQ(Ids(batch), (std::vector<std::string>{ids[0], ids[1], ids[3], ids[4]}));
  ASSERT_TRUE(restarted->Read(&batch).ok());
  EXPECT_EQ(Ids(batch), (std::vector<std::string>{ids[5], ids[6], ids[7]}));
  EXPECT_EQ(batch[0].doc.text(), "old 5");
  // Then the entries never delivered.
  std::vector<SourceEntry> rest = ReadAll(restarted.get(), 5);
  EXPECT_EQ(Ids(rest), std::vector<std::string>(ids.begin() + 8, ids.end()));
}

// Entries another consumer left pending longer than claim_idle_ms are
// claimed before new entries are read.
TEST_F(RedisSourceTest, ClaimsEntriesIdleAtAnotherConsumer) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Xadd("docs", {"text", "doc " + std::to_string(i)}));
  auto a = Open(Options("a"));
  ASSERT_TRUE(a);
  ASSERT_EQ(ReadAll(a.get(), 5).size(), 5u);  // `a` hangs on to them
  Xadd("docs", {"text", "later"});

  RedisSourceOptions ob = Options("b");
  ob.claim_idle_ms = 100;
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // well past claim_idle_ms
  auto b = Open(ob);
  ASSERT_TRUE(b);
  std::vector<SourceEntry> batch;
  ASSERT_TRUE(b->Read(&batch).ok());
  EXPECT_EQ(Ids(batch), ids);
  EXPECT_EQ(batch[3].doc.text(), "doc 3");
  // They now belong to b.
  Reply r = Cmd({"XPENDING", "docs", "g", "-", "+", "10", "b"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->elements, 5u);
  ASSERT_TRUE(b->Read(&batch).ok());
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].doc.text(), "later");
}

// Bad entries come back with an error naming the entry; good ones around
// them are unaffected; DeadLetter moves them to the dead-letter stream.
TEST_F(RedisSourceTest, BadEntriesAreReportedAndDeadLettered) {
  v1::Document doc;
  doc.set_id("inner-id");
  doc.set_label("inner-label");
  doc.add_term_ids(0);  // zero bytes in the value: binary-safe
  doc.add_term_ids(7);
  doc.add_tokens(std::string("zero\0byte", 9));
  std::string doc_bytes = doc.SerializeAsString();
  ASSERT_NE(doc_bytes.find('\0'), std::string::npos);

  const std::string good1 = Xadd("docs", {"text", "first good", "label", "a", "source", "crawler-7"});
  const std::string none = Xadd("docs", {"body", "no text here", "Text", "case matters"});
  const std::string good2 = Xadd("docs", {"doc", doc_bytes});
  const std::string both = Xadd("docs", {"text", "x", "doc", doc_bytes});
  const std::string garbage = Xadd("docs", {"doc", std::string("\x0a\xff\x01\x00\xff", 5)});
  const std::string empty = Xadd("docs", {"text", "", "label", "a"});
  const std::string good3 = Xadd("docs", {"doc", doc_bytes, "label", "outer", "id", "outer-id"});
  const std::string twice = Xadd("docs", {"text", "one", "text", "two"});
  const std::string good4 = Xadd("docs", {"id", "doc-4", "text", "last good"});

  RedisSourceOptions o = Options("reader");
  o.dead_letter = "docs-dead";
  auto source = Open(o);
  ASSERT_TRUE(source);
  std::vector<SourceEntry> got = ReadAll(source.get(), 9);
  ASSERT_EQ(Ids(got), (std::vector<std::string>{good1, none, good2, both, garbage, empty, good3, twice, good4}));

  EXPECT_TRUE(got[0].error.ok());
  EXPECT_EQ(got[0].doc.text(), "first good");
  EXPECT_EQ(got[0].doc.label(), "a");
  EXPECT_EQ(got[0].doc.id(), good1);
  EXPECT_TRUE(got[2].error.ok()) << got[2].error.ToString();
  EXPECT_EQ(got[2].doc.SerializeAsString(), doc_bytes);  // ids and label from inside
  EXPECT_TRUE(got[6].error.ok()) << got[6].error.ToString();
  EXPECT_EQ(got[6].doc.id(), "outer-id");
  EXPECT_EQ(got[6].doc.label(), "outer");
  EXPECT_EQ(got[6].doc.tokens(0), doc.tokens(0));
  EXPECT_TRUE(got[8].error.ok());
  EXPECT_EQ(got[8].doc.id(), "doc-4");
  EXPECT_FALSE(got[8].doc.has_label());

  const std::map<size_t, std::vector<std::string>> expected = {
      {1, {"neither", "'body'", "'Text'"}}, {3, {"found both"}},  {4, {"'doc'", "5 bytes", "do not parse"}},
      {5, {"non-empty 'text'", "empty"}},   {7, {"'text' once"}},
  };
  for (const auto& [i, parts] : expected) {
    const Status& e = got[i].error;
    ASSERT_TRUE(e.IsInvalidDocument()) << i << ": " << e.ToString();
    EXPECT_NE(e.message().find("redis stream 'docs' entry " + got[i].entry_id), std::string::npos) << e.message();
    for (const std::string& p : parts) EXPECT_NE(e.message().find(p), std::string::npos) << p << " in " << e.message();
    EXPECT_FALSE(got[i].fields.empty());
  }

  std::vector<std::string> good_ids;
  for (const SourceEntry& e : got) {
    if (e.error.ok()) {
      good_ids.push_back(e.entry_id);
    } else {
      ASSERT_TRUE(source->DeadLetter(e).ok());
    }
  }
  EXPECT_EQ(Pending("docs", "g"), 4);
  ASSERT_TRUE(source->Ack(good_ids).ok());
  EXPECT_EQ(Pending("docs", "g"), 0);

  Reply r = Cmd({"XRANGE", "docs-dead", "-", "+"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
  ASSERT_EQ(r->elements, 5u);
  // The garbage entry keeps its exact bytes, plus error and source_id.
  const redisReply* fields = r->element[2]->element[1];
  std::map<std::string, std::string> dead;
  for (size_t k = 0; k + 1 < fields->elements; k += 2) dead[Str(fields->element[k])] = Str(fields->element[k + 1]);
  EXPECT_EQ(dead["doc"], std::string("\x0a\xff\x01\x00\xff", 5));
  EXPECT_EQ(dead["source_id"], garbage);
  EXPECT_NE(dead["error"].find("do not parse"), std::string::npos) << dead["error"];
  EXPECT_NE(dead["error"].find(garbage), std::string::npos);

  // Without a dead-letter stream, DeadLetter only acknowledges.
  const std::string bad = Xadd("docs", {"nothing", "useful"});
  auto plain = Open(Options("other"));
  ASSERT_TRUE(plain);
  std::vector<SourceEntry> batch;
  ASSERT_TRUE(plain->Read(&batch).ok());
  ASSERT_EQ(batch.size(), 1u);
  ASSERT_FALSE(batch[0].error.ok());
  ASSERT_TRUE(plain->DeadLetter(batch[0]).ok());
  EXPECT_EQ(Pending("docs", "g"), 0);
  Reply len = Cmd({"XLEN", "docs-dead"});
  EXPECT_EQ(len->integer, 5);
}

// Found by the broker_entry fuzz target (tests/fuzz/findings/broker_entry/
// redis-field-name-not-utf8): an entry with neither `text` nor `doc` was
// refused with its field names as they were, so a producer's bytes (invalid
// UTF-8, terminal escapes) went into the error that is logged and
// dead-lettered, and an entry with thousands of fields gave an error as
// long. The names are now quoted as printable text, the first 8 of them.
TEST_F(RedisSourceTest, AnErrorQuotesAFewFieldNamesAsPrintableText) {
  std::vector<std::string> fields = {"\x1b[2J", "v", std::string("caf\xc3", 4), "v"};
  for (int i = 0; i < 20; ++i) fields.insert(fields.end(), {"meta-" + std::to_string(i), "v"});
  const std::string id = Xadd("docs", fields);
  auto source = Open(Options("reader"));
  ASSERT_TRUE(source);
  std::vector<SourceEntry> got = ReadAll(source.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].error.IsInvalidDocument()) << got[0].error.ToString();
  const std::string& m = got[0].error.message();
  EXPECT_NE(m.find("redis stream 'docs' entry " + id), std::string::npos) << m;
  EXPECT_NE(m.find("found neither (fields: '\\x1b[2J', 'caf\\xc3', 'meta-0', "), std::string::npos) << m;
  EXPECT_NE(m.find("'meta-5', ... (22 fields))"), std::string::npos) << m;
  EXPECT_EQ(m.find("meta-6"), std::string::npos) << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_EQ(m.find('\xc3'), std::string::npos) << m;
  // The dead letter still gets every field as it was.
  ASSERT_EQ(got[0].fields.size(), 22u);
  EXPECT_EQ(got[0].fields[0].first, "\x1b[2J");
  EXPECT_EQ(got[0].fields[1].first, std::string("caf\xc3", 4));
}

// Found by the broker_entry fuzz target (findings/broker_entry/
// redis-empty-id): an empty `id` field gave the document no id; it now gets
// the default, as an entry without `id` does (the id inside `doc`, else the
// stream entry id), so every document from a broker has an id.
TEST_F(RedisSourceTest, AnEmptyIdFieldGivesTheDefaultId) {
  v1::Document inner;
  inner.set_id("inner-id");
  inner.add_tokens("word");
  const std::string plain = Xadd("docs", {"text", "some words", "id", ""});
  Xadd("docs", {"doc", inner.SerializeAsString(), "id", ""});
  auto source = Open(Options("reader"));
  ASSERT_TRUE(source);
  std::vector<SourceEntry> got = ReadAll(source.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].error.ok()) << got[0].error.ToString();
  EXPECT_EQ(got[0].doc.id(), plain);
  ASSERT_TRUE(got[1].error.ok()) << got[1].error.ToString();
  EXPECT_EQ(got[1].doc.id(), "inner-id");
}

// A pending entry deleted from the stream (XDEL) before it was acknowledged
// comes back on redelivery as an error, and DeadLetter clears it.
TEST_F(RedisSourceTest, DeletedPendingEntryIsAnError) {
  const std::string first = Xadd("docs", {"text", "one"});
  const std::string second = Xadd("docs", {"text", "two"});
  RedisSourceOptions o = Options("worker");
  o.dead_letter = "docs-dead";
  {
    auto crashed = Open(o);
    ASSERT_TRUE(crashed);
    ASSERT_EQ(ReadAll(crashed.get(), 2).size(), 2u);
  }
  Cmd({"XDEL", "docs", first});
  auto source = Open(o);
  ASSERT_TRUE(source);
  std::vector<SourceEntry> batch;
  ASSERT_TRUE(source->Read(&batch).ok());
  ASSERT_EQ(Ids(batch), (std::vector<std::string>{first, second}));
  ASSERT_TRUE(batch[0].error.IsInvalidDocument()) << batch[0].error.ToString();
  EXPECT_NE(batch[0].error.message().find("deleted"), std::string::npos) << batch[0].error.message();
  EXPECT_TRUE(batch[1].error.ok());
  ASSERT_TRUE(source->DeadLetter(batch[0]).ok());
  ASSERT_TRUE(source->Ack({second}).ok());
  EXPECT_EQ(Pending("docs", "g"), 0);
  EXPECT_EQ(Cmd({"XLEN", "docs-dead"})->integer, 1);
}

TEST_F(RedisSourceTest, LagReportsPendingAndUndelivered) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Xadd("docs", {"text", "doc " + std::to_string(i)}));
  RedisSourceOptions o = Options("reader");
  o.batch = 4;
  auto source = Open(o);
  ASSERT_TRUE(source);
  auto lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->pending, 0u);
  EXPECT_EQ(lag->lag, 10);
  std::vector<SourceEntry> batch;
  ASSERT_TRUE(source->Read(&batch).ok());
  ASSERT_EQ(batch.size(), 4u);
  lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->pending, 4u);
  EXPECT_EQ(lag->lag, 6);
  EXPECT_EQ(lag->last_delivered_id, ids[3]);
  ASSERT_TRUE(source->Ack({ids[0], ids[1]}).ok());
  lag = source->Lag();
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(lag->pending, 2u);
}

TEST_F(RedisSourceTest, ServerGoingAwayIsAnIOErrorAndReconnectRecovers) {
  RedisSourceOptions o = Options("reader");
  o.block_ms = 5000;  // Read is blocked in XREADGROUP when the server dies
  auto source = Open(o);
  ASSERT_TRUE(source);
  std::vector<SourceEntry> batch;
  auto pending_read = std::async(std::launch::async, [&] { return source->Read(&batch); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_.Kill();
  Status st = pending_read.get();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  const std::string address = "127.0.0.1:" + std::to_string(server_.port());
  EXPECT_NE(st.message().find(address), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("XREADGROUP"), std::string::npos) << st.message();
  // Later calls say the connection is gone instead of crashing.
  st = source->Ack({"1-0"});
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("Reconnect"), std::string::npos) << st.message();
  st = source->Reconnect();
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find(address), std::string::npos) << st.message();

  // The server comes back (empty: it kept nothing) on the same port.
  ASSERT_TRUE(server_.Start(server_.port(), dir_));
  client_ = Connect();
  ASSERT_TRUE(client_);
  ASSERT_TRUE(source->Reconnect().ok());  // recreates the group
  const std::string id = Xadd("docs", {"text", "after the restart"});
  std::vector<SourceEntry> got = ReadAll(source.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].entry_id, id);
  EXPECT_EQ(got[0].doc.text(), "after the restart");
}

TEST_F(RedisSourceTest, ConnectErrorsNameTheServerAndTheCommand) {
  RedisSourceOptions o = Options("reader");
  o.port = FreePort();  // nothing listens there
  auto r = RedisSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(o.port)), std::string::npos)
      << r.status().message();

  // A key that is not a stream.
  Cmd({"SET", "plain", "value"});
  o = Options("reader");
  o.stream = "plain";
  r = RedisSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("XGROUP"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("WRONGTYPE"), std::string::npos) << r.status().message();

  // Passwords.
  Reply set = Cmd({"CONFIG", "SET", "requirepass", "s3cret"});
  ASSERT_TRUE(set && set->type == REDIS_REPLY_STATUS) << Str(set.get());
  o = Options("reader");
  r = RedisSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("NOAUTH"), std::string::npos) << r.status().message();
  o.password = "wrong";
  r = RedisSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AUTH refused"), std::string::npos) << r.status().message();
  o.password = "s3cret";
  r = RedisSource::Connect(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();

  // The group destroyed under a reader: NotFound naming the command.
  ASSERT_TRUE(r.ok());
  auto source = std::move(r).value();
  Context admin = Connect();
  Reply auth(static_cast<redisReply*>(redisCommand(admin.get(), "AUTH s3cret")));
  Reply destroy(static_cast<redisReply*>(redisCommand(admin.get(), "XGROUP DESTROY docs g")));
  std::vector<SourceEntry> batch;
  Status st = source->Read(&batch);
  EXPECT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("NOGROUP"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tributary
