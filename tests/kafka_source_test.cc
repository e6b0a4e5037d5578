// KafkaSource against librdkafka's built-in mock cluster (rdkafka_mock.h):
// real brokers speaking the Kafka protocol in this process, one cluster per
// test, fed by a real librdkafka producer. Brokers are taken down and up
// through the mock's controls.
#include "tributary/kafka_source.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kafka_mock.h"

namespace tributary {
namespace {

using Clock = std::chrono::steady_clock;

using testing::KafkaMock;
using testing::Message;
using testing::Text;

class KafkaSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { kafka_.StartCluster(1); }
  void TearDown() override { kafka_.StopCluster(); }
  void StartCluster(int brokers) { kafka_.StartCluster(brokers); }
  void StopCluster() { kafka_.StopCluster(); }
  void CreateTopic(const std::string& topic, int partitions) { kafka_.CreateTopic(topic, partitions); }
  std::vector<int64_t> Produce(const std::string& topic, const std::vector<Message>& messages) {
    return kafka_.Produce(topic, messages);
  }

  KafkaSourceOptions Options(const std::string& topic, const std::string& group = "g") const {
    KafkaSourceOptions o;
    o.brokers = {kafka_.bootstraps()};  // "127.0.0.1:port[,...]": librdkafka splits it
    o.topic = topic;
    o.group = group;
    o.poll_ms = 100;
    // The mock coordinator waits session_timeout_ms - 1000 for members to
    // rejoin a rebalance, and 3 s for the first member of a group (its
    // session must outlast that join).
    o.session_timeout_ms = 4000;
    o.heartbeat_interval_ms = 100;
    o.connect_timeout_ms = 5000;
    return o;
  }
  static std::unique_ptr<KafkaSource> Open(const KafkaSourceOptions& o) {
    auto r = KafkaSource::Connect(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  // Reads until `n` entries came or `seconds` passed (joining the group and
  // the first assignment happen inside these Reads).
  static std::vector<KafkaEntry> ReadN(KafkaSource* s, size_t n, double seconds = 15) {
    std::vector<KafkaEntry> all, batch;
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    while (all.size() < n && Clock::now() < deadline) {
      Status st = s->Read(&batch);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) break;
      for (KafkaEntry& e : batch) all.push_back(std::move(e));
    }
    return all;
  }
  static std::vector<int64_t> Offsets(const std::vector<KafkaEntry>& entries) {
    std::vector<int64_t> out;
    for (const KafkaEntry& e : entries) out.push_back(e.offset);
    return out;
  }
  static std::vector<int64_t> Range(int64_t from, int64_t to) {
    std::vector<int64_t> out;
    for (int64_t i = from; i < to; ++i) out.push_back(i);
    return out;
  }

  KafkaMock kafka_;
};

// ---- URL parsing ----

TEST(KafkaSourceUrl, ParsesEveryPart) {
  auto r = ParseKafkaSourceUrl(
      "kafka://k1.example:9093,[::1]:19092,k3/news%2Een?group=learn%20ers&batch=64&poll_ms=0"
      "&session_timeout_ms=10000&heartbeat_interval_ms=500&connect_timeout_ms=300&dead_letter=news.dead"
      "&client_id=host-1&assignor=cooperative-sticky");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->brokers, (std::vector<std::string>{"k1.example:9093", "[::1]:19092", "k3:9092"}));
  EXPECT_EQ(r->topic, "news.en");
  EXPECT_EQ(r->group, "learn ers");
  EXPECT_EQ(r->batch, 64u);
  EXPECT_EQ(r->poll_ms, 0u);
  EXPECT_EQ(r->session_timeout_ms, 10000u);
  EXPECT_EQ(r->heartbeat_interval_ms, 500u);
  EXPECT_EQ(r->connect_timeout_ms, 300u);
  EXPECT_EQ(r->dead_letter, "news.dead");
  EXPECT_EQ(r->client_id, "host-1");
  EXPECT_EQ(r->assignor, "cooperative-sticky");
}

TEST(KafkaSourceUrl, Defaults) {
  auto r = ParseKafkaSourceUrl("kafka://localhost:9092/docs");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->brokers, std::vector<std::string>{"localhost:9092"});
  EXPECT_EQ(r->topic, "docs");
  EXPECT_EQ(r->group, "tributary");
  EXPECT_EQ(r->client_id, "tributary");
  EXPECT_EQ(r->dead_letter, "");
  EXPECT_EQ(r->batch, 256u);
  EXPECT_EQ(r->poll_ms, 500u);
  EXPECT_EQ(r->session_timeout_ms, 45000u);
  EXPECT_EQ(r->assignor, "range,roundrobin");
  EXPECT_FALSE(r->start_offset);
  EXPECT_FALSE(r->on_revoke);
}

TEST(KafkaSourceUrl, EachBadPartIsNamed) {
  struct Case {
    const char* url;
    std::vector<const char*> message;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"http://h:1/t", {"scheme", "expected 'kafka://'", "found 'http://'"}},
      {"h:9092/t", {"scheme", "no scheme"}},
      {"kafka://h:9092", {"topic", "'/TOPIC'", "none"}},
      {"kafka://h:9092/", {"topic", "a topic name", "none"}},
      {"kafka://h:9092?group=g", {"topic", "'/TOPIC'"}},
      {"kafka://h/bad%20topic", {"topic", "[a-zA-Z0-9._-]", "'bad topic'"}},
      {"kafka://h/..", {"topic", "'..'"}},
      {"kafka://h/t%zz", {"topic", "escape"}},
      {"kafka:///t", {"brokers", "HOST[:PORT]", "none"}},
      {"kafka://a:1,,b:2/t", {"broker", "an empty entry"}},
      {"kafka://h:99999/t", {"port of broker 'h:99999'", "1..65535", "'99999'"}},
      {"kafka://a:1,b:x/t", {"port of broker 'b:x'", "'x'"}},
      {"kafka://h:/t", {"port", "found ''"}},
      {"kafka://::1:9092/t", {"broker", "brackets"}},
      {"kafka://[::1/t", {"broker", "']'"}},
      {"kafka://user:pw@h/t", {"brokers", "without credentials"}},
      {"kafka://h/t?grp=g", {"parameter", "one of group, batch", "'grp'"}},
      {"kafka://h/t?group=", {"parameter 'group'", "non-empty", "empty value"}},
      {"kafka://h/t?group", {"parameter", "NAME=VALUE", "'group'"}},
      {"kafka://h/t?group=a&group=b", {"parameter 'group'", "once"}},
      {"kafka://h/t?batch=0", {"parameter 'batch'", "1..1000000", "'0'"}},
      {"kafka://h/t?batch=12x", {"parameter 'batch'", "'12x'"}},
      {"kafka://h/t?poll_ms=-1", {"parameter 'poll_ms'", "'-1'"}},
      {"kafka://h/t?session_timeout_ms=0", {"parameter 'session_timeout_ms'", "1..3600000", "'0'"}},
      {"kafka://h/t?dead_letter=a/b", {"parameter 'dead_letter'", "topic name", "'a/b'"}},
      {"kafka://h/t?assignor=sticky", {"parameter 'assignor'", "cooperative-sticky", "'sticky'"}},
      {"kafka://h/t#frag", {"fragment", "'#frag'"}},
  };
  for (const Case& c : cases) {
    auto r = ParseKafkaSourceUrl(c.url);
    ASSERT_FALSE(r.ok()) << c.url;
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << c.url;
    for (const char* part : c.message) {
      EXPECT_NE(r.status().message().find(part), std::string::npos)
          << c.url << ": '" << part << "' not in: " << r.status().message();
    }
  }
}

// ---- against the mock cluster ----

// Text and serialized documents decode with id from the key and label from
// the header; bad messages come back in their place with an error naming
// topic/partition/offset, and DeadLetter produces them, unchanged plus
// `error` and `source`, to the dead-letter topic.
TEST_F(KafkaSourceTest, DecodesMessagesAndDeadLettersBadOnes) {
  CreateTopic("docs", 1);
  CreateTopic("docs-dead", 1);
  v1::Document inner;
  inner.set_id("inner-id");
  inner.set_label("inner-label");
  inner.add_term_ids(0);
  inner.add_term_ids(7);
  inner.add_tokens(std::string("zero\0byte", 9));
  const std::string inner_bytes = inner.SerializeAsString();
  v1::Document anonymous;
  anonymous.add_tokens("hello");
  const std::string doc_type(kKafkaDocumentContentType);
  const std::string garbage("\x0a\xff\x01\x00\xff", 5);

  std::vector<Message> ms(11);
  ms[0] = Text("first good");
  ms[0].key = "k0";
  ms[0].headers = {{"label", "a"}, {"source", "crawler-7"}};
  ms[1].value = inner_bytes;  // its own id wins over the key; the header label over its own
  ms[1].key = "k1";
  ms[1].headers = {{"content-type", doc_type}, {"label", "outer"}};
  ms[2].value = anonymous.SerializeAsString();
  ms[2].key = "k2";
  ms[2].headers = {{"content-type", doc_type}};
  ms[3].value = garbage;
  ms[3].key = "bad-key";
  ms[3].headers = {{"content-type", doc_type}, {"x-trace", "t-3"}};
  ms[4] = Text("");
  ms[5].key = "tombstone";  // no value
  ms[6] = Text("{\"text\": \"json\"}");
  ms[6].headers = {{"content-type", "application/json"}};
  ms[7] = Text(std::string("bad \xff utf-8"));
  ms[8] = Text("two labels");
  ms[8].headers = {{"label", "a"}, {"label", "b"}};
  ms[9] = Text("plain text, no key");
  ms[9].headers = {{"content-type", "Text/Plain; charset=UTF-8"}};
  ms[10] = Text("");  // an empty protobuf is a valid (empty) document
  ms[10].headers = {{"content-type", doc_type}};
  ASSERT_EQ(Produce("docs", ms), Range(0, 11));

  KafkaSourceOptions o = Options("docs");
  o.dead_letter = "docs-dead";
  auto source = Open(o);
  ASSERT_TRUE(source);
  std::vector<KafkaEntry> got = ReadN(source.get(), 11);
  ASSERT_EQ(Offsets(got), Range(0, 11));

  EXPECT_TRUE(got[0].error.ok()) << got[0].error.ToString();
  EXPECT_EQ(got[0].topic, "docs");
  EXPECT_EQ(got[0].partition, 0);
  EXPECT_EQ(got[0].doc.text(), "first good");
  EXPECT_EQ(got[0].doc.id(), "k0");
  EXPECT_EQ(got[0].doc.label(), "a");
  EXPECT_FALSE(got[0].value.has_value());  // raw parts kept only for errors
  EXPECT_TRUE(got[0].headers.empty());
  ASSERT_TRUE(got[1].error.ok()) << got[1].error.ToString();
  EXPECT_EQ(got[1].doc.id(), "inner-id");
  EXPECT_EQ(got[1].doc.label(), "outer");
  EXPECT_EQ(got[1].doc.tokens(0), inner.tokens(0));
  EXPECT_EQ(got[1].doc.term_ids_size(), 2);
  ASSERT_TRUE(got[2].error.ok()) << got[2].error.ToString();
  EXPECT_EQ(got[2].doc.id(), "k2");
  EXPECT_FALSE(got[2].doc.has_label());
  ASSERT_TRUE(got[9].error.ok()) << got[9].error.ToString();
  EXPECT_EQ(got[9].doc.id(), "docs:0:9");
  EXPECT_EQ(got[9].doc.text(), "plain text, no key");
  ASSERT_TRUE(got[10].error.ok()) << got[10].error.ToString();
  EXPECT_EQ(got[10].doc.id(), "docs:0:10");

  const std::map<size_t, std::vector<std::string>> expected = {
      {3, {"tributary.v1.Document", "found 5 bytes that do not parse"}},
      {4, {"non-empty UTF-8 text", "empty value"}},
      {5, {"expected a value", "tombstone"}},
      {6, {"'content-type'", "text/plain", "found 'application/json'"}},
      {7, {"UTF-8 text", "invalid byte at position 4"}},
      {8, {"'label' at most once", "2 times"}},
  };
  for (const auto& [i, parts] : expected) {
    const Status& e = got[i].error;
    ASSERT_TRUE(e.IsInvalidDocument()) << i << ": " << e.ToString();
    EXPECT_NE(e.message().find("kafka topic 'docs' partition 0 offset " + std::to_string(i)), std::string::npos)
        << e.message();
    for (const std::string& p : parts) EXPECT_NE(e.message().find(p), std::string::npos) << p << " in " << e.message();
  }
  EXPECT_EQ(got[3].value, garbage);
  EXPECT_EQ(got[3].key, "bad-key");
  EXPECT_EQ(got[5].value, std::nullopt);
  EXPECT_EQ(got[5].key, "tombstone");

  for (size_t i : {size_t{3}, size_t{5}}) ASSERT_TRUE(source->DeadLetter(got[i]).ok());
  ASSERT_TRUE(source->Commit(NextPositions(got)).ok());

  // Read the dead-letter topic back with a plain consumer.
  char err[512] = {};
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka_.bootstraps().c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", "dead-reader", err, sizeof(err));
  rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
  rd_kafka_t* reader = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  ASSERT_NE(reader, nullptr) << err;
  rd_kafka_topic_partition_list_t* tp = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(tp, "docs-dead", 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  ASSERT_EQ(rd_kafka_assign(reader, tp), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(tp);
  struct Dead {
    std::optional<std::string> value, key;
    std::map<std::string, std::string> headers;
  };
  std::vector<Dead> dead;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (dead.size() < 2 && Clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(reader, 100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      Dead d;
      if (m->payload) d.value = std::string(static_cast<const char*>(m->payload), m->len);
      if (m->key) d.key = std::string(static_cast<const char*>(m->key), m->key_len);
      rd_kafka_headers_t* h = nullptr;
      if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0; rd_kafka_header_get_all(h, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i) {
          d.headers[name] = std::string(static_cast<const char*>(value), size);
        }
      }
      dead.push_back(std::move(d));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(reader);
  rd_kafka_destroy(reader);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].value, garbage);  // the exact bytes
  EXPECT_EQ(dead[0].key, "bad-key");
  EXPECT_EQ(dead[0].headers["content-type"], doc_type);
  EXPECT_EQ(dead[0].headers["x-trace"], "t-3");
  EXPECT_EQ(dead[0].headers["source"], "docs/0/3");
  EXPECT_NE(dead[0].headers["error"].find("do not parse"), std::string::npos) << dead[0].headers["error"];
  EXPECT_NE(dead[0].headers["error"].find("offset 3"), std::string::npos) << dead[0].headers["error"];
  EXPECT_EQ(dead[1].value, std::nullopt);  // still a tombstone
  EXPECT_EQ(dead[1].key, "tombstone");
  EXPECT_EQ(dead[1].headers["source"], "docs/0/5");

  // Without a dead-letter topic DeadLetter does nothing.
  source.reset();
  auto plain = Open(Options("docs", "other"));
  ASSERT_TRUE(plain);
  std::vector<KafkaEntry> again = ReadN(plain.get(), 11);
  ASSERT_EQ(again.size(), 11u);
  EXPECT_TRUE(plain->DeadLetter(again[3]).ok());
}

// Found by the broker_entry fuzz target (tests/fuzz/findings/broker_entry/
// kafka-content-type-not-utf8): an unknown content-type was quoted in the
// error as it was, so a producer's bytes (invalid UTF-8, terminal escapes)
// went into the error that is logged and dead-lettered. It is now quoted as
// printable text, cut after 64 bytes; the dead letter keeps the header.
TEST_F(KafkaSourceTest, AnUnknownContentTypeIsQuotedAsPrintableText) {
  CreateTopic("docs", 1);
  const std::string type = "\x1b[31mtext/html\xff" + std::string(100, 'x');
  Message m = Text("<p>hi</p>");
  m.headers = {{"content-type", type}};
  ASSERT_EQ(Produce("docs", {m}), Range(0, 1));
  auto source = Open(Options("docs"));
  ASSERT_TRUE(source);
  std::vector<KafkaEntry> got = ReadN(source.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(got[0].error.IsInvalidDocument()) << got[0].error.ToString();
  const std::string& e = got[0].error.message();
  EXPECT_NE(e.find("found '\\x1b[31mtext/html\\xffxxx"), std::string::npos) << e;
  EXPECT_NE(e.find("... (115 bytes)'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  EXPECT_EQ(e.find('\xff'), std::string::npos) << e;
  ASSERT_EQ(got[0].headers.size(), 1u);
  EXPECT_EQ(got[0].headers[0].second, type);
}

// At least once: after reading everything and committing only part of it,
// a reconnected member of the same group starts exactly at the commit.
TEST_F(KafkaSourceTest, ReconnectedGroupStartsAtTheCommittedOffset) {
  CreateTopic("docs", 2);
  std::vector<Message> ms;
  for (int i = 0; i < 20; ++i) ms.push_back(Text("doc " + std::to_string(i), i % 2));
  Produce("docs", ms);
  KafkaSourceOptions o = Options("docs");
  o.batch = 3;
  {
    auto first = Open(o);
    ASSERT_TRUE(first);
    std::vector<KafkaEntry> got = ReadN(first.get(), 20);
    ASSERT_EQ(got.size(), 20u);
    std::vector<KafkaEntry> batch;
    ASSERT_TRUE(first->Read(&batch).ok());
    EXPECT_TRUE(batch.empty());  // nothing more: not an error
    ASSERT_TRUE(first->Commit({{"docs", 0, 4}, {"docs", 1, 7}}).ok());
    ASSERT_TRUE(first->Close().ok());
    EXPECT_EQ(first->Read(&batch).code(), Status::Code::kInvalidArgument);
  }
  auto second = Open(o);
  ASSERT_TRUE(second);
  std::vector<KafkaEntry> got = ReadN(second.get(), 9);
  std::map<int32_t, std::vector<int64_t>> by_partition;
  for (const KafkaEntry& e : got) by_partition[e.partition].push_back(e.offset);
  EXPECT_EQ(by_partition[0], Range(4, 10));
  EXPECT_EQ(by_partition[1], Range(7, 10));
  for (const KafkaEntry& e : got) EXPECT_EQ(e.doc.text(), "doc " + std::to_string(e.offset * 2 + e.partition));
  std::vector<KafkaEntry> batch;
  ASSERT_TRUE(second->Read(&batch).ok());
  EXPECT_TRUE(batch.empty());
}

// The start_offset hook overrides the committed offset; nullopt keeps it; an
// error is reported by Read, naming the partition, which is not read.
TEST_F(KafkaSourceTest, StartOffsetHookChoosesWhereAPartitionStarts) {
  CreateTopic("docs", 2);
  std::vector<Message> ms;
  for (int i = 0; i < 40; ++i) ms.push_back(Text("doc " + std::to_string(i), i % 2));
  Produce("docs", ms);
  {
    auto first = Open(Options("docs"));
    ASSERT_TRUE(first);
    ASSERT_EQ(ReadN(first.get(), 40).size(), 40u);
    ASSERT_TRUE(first->Commit({{"docs", 0, 5}, {"docs", 1, 5}}).ok());
  }
  KafkaSourceOptions o = Options("docs");
  std::vector<std::pair<std::string, int32_t>> asked;
  std::map<int32_t, std::optional<int64_t>> told;  // the committed offsets the hook was given
  o.start_offset = [&](const std::string& topic, int32_t partition,
                       std::optional<int64_t> committed) -> Result<std::optional<int64_t>> {
    asked.emplace_back(topic, partition);
    told[partition] = committed;
    if (partition == 0) return std::optional<int64_t>(12);  // "my log is ahead"
    return std::optional<int64_t>();
  };
  auto second = Open(o);
  ASSERT_TRUE(second);
  std::vector<KafkaEntry> got = ReadN(second.get(), 8 + 15);
  std::map<int32_t, std::vector<int64_t>> by_partition;
  for (const KafkaEntry& e : got) by_partition[e.partition].push_back(e.offset);
  EXPECT_EQ(by_partition[0], Range(12, 20));
  EXPECT_EQ(by_partition[1], Range(5, 20));
  EXPECT_EQ(asked, (std::vector<std::pair<std::string, int32_t>>{{"docs", 0}, {"docs", 1}}));
  EXPECT_EQ(told[0], std::optional<int64_t>(5));
  EXPECT_EQ(told[1], std::optional<int64_t>(5));
  second.reset();

  // A failing hook: Read returns its error; the other partition is read.
  o.start_offset = [&](const std::string&, int32_t partition,
                       std::optional<int64_t>) -> Result<std::optional<int64_t>> {
    if (partition == 1) return Status::IOError("write-ahead log unreadable");
    return std::optional<int64_t>();
  };
  auto third = Open(o);
  ASSERT_TRUE(third);
  Status error;
  std::vector<KafkaEntry> all, batch;
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < deadline && (error.ok() || all.size() < 15)) {
    Status st = third->Read(&batch);
    if (!st.ok()) error = st;
    for (KafkaEntry& e : batch) all.push_back(std::move(e));
  }
  ASSERT_EQ(error.code(), Status::Code::kInternal) << error.ToString();
  EXPECT_NE(error.message().find("start_offset hook for topic 'docs' partition 1"), std::string::npos)
      << error.message();
  EXPECT_NE(error.message().find("write-ahead log unreadable"), std::string::npos) << error.message();
  EXPECT_EQ(all.size(), 15u);
  for (const KafkaEntry& e : all) EXPECT_EQ(e.partition, 0);
  EXPECT_EQ(third->Assignment(), (std::vector<KafkaPartition>{{"docs", 0}}));
}

// Two members of one group on a topic with four partitions, reading in turns
// as two reader threads would. When the second joins, the first's on_revoke
// runs while it still owns the partitions and commits what it processed of
// them; it never returns a message of a partition after giving it up; each
// member starts a partition exactly at the last successful commit, so a
// message comes twice only if it was not committed; together they see every
// message. When the first closes, its on_revoke commit hands its partitions
// over with no message delivered twice.
TEST_F(KafkaSourceTest, RebalanceRevokesBeforeGivingUpAndRestartsAtTheCommit) {
  constexpr int kPartitions = 4;
  constexpr int kPerPartition = 40;
  CreateTopic("docs", kPartitions);
  std::vector<Message> ms;
  for (int i = 0; i < kPartitions * kPerPartition; ++i) ms.push_back(Text("m" + std::to_string(i), i % kPartitions));
  Produce("docs", ms);

  struct Member {
    std::unique_ptr<KafkaSource> source;
    std::set<int32_t> owned;                 // per the hooks
    std::map<int32_t, int64_t> next;         // processed: next offset per partition
    std::map<int32_t, int64_t> expect_next;  // where an assigned partition must go on
    std::vector<std::string> violations;     // broken promises, reported at the end
    std::vector<Status> revoke_commits;
    int revocations = 0;
  };
  Member members[2];
  std::map<int32_t, int64_t> committed;             // the last successful commit per partition
  std::map<std::pair<int32_t, int64_t>, int> seen;  // (partition, offset) -> deliveries
  auto open = [&](Member* m) {
    KafkaSourceOptions o = Options("docs");
    o.batch = 7;
    o.poll_ms = 50;
    o.start_offset = [m, &committed](const std::string&, int32_t partition,
                                     std::optional<int64_t>) -> Result<std::optional<int64_t>> {
      m->owned.insert(partition);
      m->expect_next[partition] = committed.count(partition) ? committed[partition] : 0;
      return std::optional<int64_t>();
    };
    o.on_revoke = [m, &committed](const std::vector<KafkaPartition>& revoked) {
      ++m->revocations;
      const std::vector<KafkaPartition> assigned = m->source->Assignment();
      std::vector<KafkaPosition> commit;
      for (const KafkaPartition& p : revoked) {
        if (std::find(assigned.begin(), assigned.end(), p) == assigned.end()) {
          m->violations.push_back("on_revoke after partition " + std::to_string(p.partition) + " was given up");
        }
        if (m->next.count(p.partition)) commit.push_back({p.topic, p.partition, m->next[p.partition]});
        m->owned.erase(p.partition);
      }
      Status st = m->source->Commit(commit);
      if (st.ok()) {
        for (const KafkaPosition& c : commit) committed[c.partition] = c.offset;
      }
      m->revoke_commits.push_back(std::move(st));
    };
    m->source = Open(o);
  };
  auto read = [&](Member* m) {
    std::vector<KafkaEntry> batch;
    Status st = m->source->Read(&batch);
    if (!st.ok()) m->violations.push_back("Read: " + st.ToString());
    for (const KafkaEntry& e : batch) {
      const std::string where = "partition " + std::to_string(e.partition) + " offset " + std::to_string(e.offset);
      if (m->owned.count(e.partition) == 0) m->violations.push_back(where + " after it was revoked");
      if (e.offset != m->expect_next[e.partition]) {
        m->violations.push_back(where + ": expected offset " + std::to_string(m->expect_next[e.partition]));
      }
      m->expect_next[e.partition] = e.offset + 1;
      ++seen[{e.partition, e.offset}];
      m->next[e.partition] = e.offset + 1;  // "processed" at once
    }
  };
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  Member* a = &members[0];
  Member* b = &members[1];
  open(a);
  ASSERT_TRUE(a->source);
  while (seen.size() < 60 && Clock::now() < deadline) read(a);
  ASSERT_GE(seen.size(), 60u);
  ASSERT_EQ(a->owned.size(), static_cast<size_t>(kPartitions));

  open(b);
  ASSERT_TRUE(b->source);
  while ((a->revocations == 0 || a->owned.empty() || b->owned.empty()) && Clock::now() < deadline) {
    read(a);
    read(b);
  }
  ASSERT_GE(a->revocations, 1);
  ASSERT_FALSE(b->owned.empty());
  ASSERT_FALSE(a->owned.empty());
  Produce("docs", ms);  // more messages after the rebalance
  const size_t total = 2 * ms.size();
  while (seen.size() < total && Clock::now() < deadline) {
    read(a);
    read(b);
  }
  EXPECT_EQ(seen.size(), total);
  // librdkafka 2.0.2's mock coordinator refuses commits while the group
  // rebalances (REBALANCE_IN_PROGRESS; a real broker accepts them from the
  // current generation); the refusal must come back named, not as success.
  size_t duplicates = 0;
  for (const auto& [pos, n] : seen) duplicates += static_cast<size_t>(n - 1);
  bool refused = false;
  for (const Status& st : a->revoke_commits) {
    if (st.ok()) continue;
    refused = true;
    EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
    EXPECT_NE(st.message().find("REBALANCE_IN_PROGRESS"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("topic 'docs' partition "), std::string::npos) << st.message();
  }
  if (!refused) {
    EXPECT_EQ(duplicates, 0u);
  }
  std::set<int32_t> both = a->owned;
  for (int32_t p : b->owned) EXPECT_TRUE(both.insert(p).second) << "partition " << p << " at both members";
  EXPECT_EQ(both.size(), static_cast<size_t>(kPartitions));

  // Everything read is processed; the first leaves: its on_revoke commits
  // in a stable group, and the second goes on exactly there.
  const std::set<int32_t> handed_over = a->owned;
  const size_t revoke_commits = a->revoke_commits.size();
  ASSERT_TRUE(a->source->Close().ok());
  ASSERT_EQ(a->revoke_commits.size(), revoke_commits + 1);
  EXPECT_TRUE(a->revoke_commits.back().ok()) << a->revoke_commits.back().ToString();
  EXPECT_TRUE(a->owned.empty());
  const std::map<std::pair<int32_t, int64_t>, int> before = seen;
  Produce("docs", ms);
  while (seen.size() < 3 * ms.size() && Clock::now() < deadline) read(b);
  EXPECT_EQ(seen.size(), 3 * ms.size());
  EXPECT_EQ(b->owned.size(), static_cast<size_t>(kPartitions));
  for (const auto& [pos, n] : seen) {
    // (The second's own partitions are revoked and assigned again too; its
    // commit there meets the mock's refusal, so they start over at its last
    // successful commit, which expect_next checked.)
    if (handed_over.count(pos.first) == 0) continue;
    const int earlier = before.count(pos) ? before.at(pos) : 0;
    EXPECT_EQ(n, earlier == 0 ? 1 : earlier)
        << "partition " << pos.first << " offset " << pos.second << " delivered again after the commit in on_revoke";
  }
  for (int32_t p : handed_over) EXPECT_EQ(b->expect_next[p], 3 * kPerPartition) << "partition " << p;
  for (Member* m : {a, b}) {
    for (const std::string& v : m->violations) ADD_FAILURE() << (m == a ? "first: " : "second: ") << v;
  }
  // on_revoke runs inside Close and uses b->source: close before destroying.
  EXPECT_TRUE(b->source->Close().ok());
}

// A broker that goes down: Read reports IOError naming the broker (the
// source stays usable), and delivery resumes where it stopped once the
// broker is back.
TEST_F(KafkaSourceTest, BrokerDownIsAnIOErrorAndReadingResumes) {
  CreateTopic("docs", 1);
  Produce("docs", {Text("before 0"), Text("before 1")});
  KafkaSourceOptions o = Options("docs");
  auto source = Open(o);
  ASSERT_TRUE(source);
  std::vector<KafkaEntry> got = ReadN(source.get(), 2);
  ASSERT_EQ(Offsets(got), Range(0, 2));

  ASSERT_EQ(rd_kafka_mock_broker_set_down(kafka_.mock(), 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  Status error;
  std::vector<KafkaEntry> batch;
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (error.ok() && Clock::now() < deadline) {
    error = source->Read(&batch);
    EXPECT_TRUE(batch.empty());
  }
  ASSERT_EQ(error.code(), Status::Code::kIOError) << error.ToString();
  EXPECT_NE(error.message().find(kafka_.bootstraps()), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("all brokers are down"), std::string::npos) << error.message();

  ASSERT_EQ(rd_kafka_mock_broker_set_up(kafka_.mock(), 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  Produce("docs", {Text("after 2")});
  std::vector<KafkaEntry> more;
  deadline = Clock::now() + std::chrono::seconds(20);
  while (more.empty() && Clock::now() < deadline) {
    Status st = source->Read(&batch);  // may still report the outage once
    for (KafkaEntry& e : batch) more.push_back(std::move(e));
  }
  ASSERT_EQ(Offsets(more), std::vector<int64_t>{2});
  EXPECT_EQ(more[0].doc.text(), "after 2");
  EXPECT_TRUE(source->Commit(NextPositions(more)).ok());
}

// Lag: committed offset, watermarks and lag per assigned partition.
TEST_F(KafkaSourceTest, LagCountsWhatTheGroupHasNotCommitted) {
  CreateTopic("docs", 2);
  std::vector<Message> ms;
  for (int i = 0; i < 10; ++i) ms.push_back(Text("p0 " + std::to_string(i), 0));
  for (int i = 0; i < 4; ++i) ms.push_back(Text("p1 " + std::to_string(i), 1));
  Produce("docs", ms);
  auto source = Open(Options("docs"));
  ASSERT_TRUE(source);
  auto lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_TRUE(lag->partitions.empty());  // nothing assigned before the first Read
  EXPECT_FALSE(lag->joined) << "a total of 0 before the group's assignment would read as 'caught up'";
  ASSERT_EQ(ReadN(source.get(), 14).size(), 14u);
  lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_TRUE(lag->joined);
  ASSERT_EQ(lag->partitions.size(), 2u);
  EXPECT_EQ(lag->partitions[0].committed, -1);
  EXPECT_EQ(lag->partitions[0].low, 0);
  EXPECT_EQ(lag->partitions[0].high, 10);
  EXPECT_EQ(lag->partitions[0].lag, 10);
  EXPECT_EQ(lag->total, 14);

  ASSERT_TRUE(source->Commit({{"docs", 0, 6}, {"docs", 1, 4}}).ok());
  Produce("docs", {Text("late", 1)});
  lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->partitions[0].topic, "docs");
  EXPECT_EQ(lag->partitions[0].partition, 0);
  EXPECT_EQ(lag->partitions[0].committed, 6);
  EXPECT_EQ(lag->partitions[0].lag, 4);
  EXPECT_EQ(lag->partitions[1].partition, 1);
  EXPECT_EQ(lag->partitions[1].committed, 4);
  EXPECT_EQ(lag->partitions[1].high, 5);
  EXPECT_EQ(lag->partitions[1].lag, 1);
  EXPECT_EQ(lag->total, 5);
}

// Commit: a partition this consumer does not own is refused by name (the
// owned ones are still committed); a broker's refusal is an IOError naming
// the partition and the error.
TEST_F(KafkaSourceTest, CommitErrorsNameThePartition) {
  CreateTopic("docs", 1);
  CreateTopic("other", 1);
  Produce("docs", {Text("a"), Text("b"), Text("c")});
  auto source = Open(Options("docs"));
  ASSERT_TRUE(source);
  ASSERT_EQ(ReadN(source.get(), 3).size(), 3u);

  Status st = source->Commit({{"docs", 0, 2}, {"other", 0, 1}, {"docs", 3, 1}});
  ASSERT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("topic 'other' partition 0 offset 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("topic 'docs' partition 3"), std::string::npos) << st.message();
  auto lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->partitions[0].committed, 2);  // the owned one was committed

  st = source->Commit({{"docs", 0, -1}});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();

  // The broker refuses the next OffsetCommit (API key 8) with a
  // non-retriable error.
  rd_kafka_mock_push_request_errors(kafka_.mock(), 8, 1, RD_KAFKA_RESP_ERR_OFFSET_METADATA_TOO_LARGE);
  st = source->Commit({{"docs", 0, 3}});
  ASSERT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("topic 'docs' partition 0 offset 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("OFFSET_METADATA_TOO_LARGE"), std::string::npos) << st.message();
  lag = source->Lag();
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_EQ(lag->partitions[0].committed, 2);
  EXPECT_TRUE(source->Commit({{"docs", 0, 3}}).ok());
  EXPECT_TRUE(source->Commit({}).ok());
}

TEST_F(KafkaSourceTest, ConnectErrorsNameTheBrokersAndTheTopic) {
  CreateTopic("docs", 1);
  KafkaSourceOptions o = Options("docs");
  o.brokers = {"127.0.0.1:1"};  // nothing listens there
  o.connect_timeout_ms = 500;
  auto r = KafkaSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos) << r.status().message();

  // The mock creates unknown topics on a metadata request; make it say no.
  rd_kafka_mock_topic_set_error(kafka_.mock(), "missing", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  r = KafkaSource::Connect(Options("missing"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("'missing'"), std::string::npos) << r.status().message();

  o = Options("docs");
  o.properties = {{"enable.auto.commit", "true"}};
  r = KafkaSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'enable.auto.commit'"), std::string::npos) << r.status().message();
  o.properties = {{"no.such.property", "1"}};
  r = KafkaSource::Connect(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'no.such.property'"), std::string::npos) << r.status().message();
  o = Options("docs");
  o.batch = 0;
  EXPECT_EQ(KafkaSource::Connect(o).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace tributary
