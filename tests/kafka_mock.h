// librdkafka's built-in mock cluster (rdkafka_mock.h) for tests: real
// brokers speaking the Kafka protocol in this process, fed by a real
// librdkafka producer. Used by kafka_source_test.cc and
// server_source_test.cc.
#ifndef TRIBUTARY_TESTS_KAFKA_MOCK_H_
#define TRIBUTARY_TESTS_KAFKA_MOCK_H_

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tributary::testing {

// A message to produce.
struct Message {
  std::optional<std::string> value;
  std::optional<std::string> key;
  std::vector<std::pair<std::string, std::string>> headers;
  int32_t partition = 0;
};

inline Message Text(std::string text, int32_t partition = 0) {
  Message m;
  m.value = std::move(text);
  m.partition = partition;
  return m;
}

// The delivery reports of the test's producer.
struct Deliveries {
  std::map<size_t, int64_t> offsets;  // message index -> offset
  std::vector<std::string> errors;
};

// A mock cluster and a producer to it.
class KafkaMock {
 public:
  ~KafkaMock() { StopCluster(); }
  void StartCluster(int brokers) {
    char err[512] = {};
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
    owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT_NE(owner_, nullptr) << err;
    mock_ = rd_kafka_mock_cluster_new(owner_, brokers);
    ASSERT_NE(mock_, nullptr);
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(mock_);

    conf = rd_kafka_conf_new();
    ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps_.c_str(), err, sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_conf_set(conf, "linger.ms", "0", err, sizeof(err));
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));
    rd_kafka_conf_set_opaque(conf, &deliveries_);
    rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
      auto* d = static_cast<Deliveries*>(opaque);
      const auto index = static_cast<size_t>(reinterpret_cast<uintptr_t>(m->_private));
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        d->errors.push_back(rd_kafka_err2str(m->err));
      } else {
        d->offsets[index] = m->offset;
      }
    });
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT_NE(producer_, nullptr) << err;
  }
  void StopCluster() {
    if (producer_ != nullptr) rd_kafka_destroy(producer_);
    if (mock_ != nullptr) rd_kafka_mock_cluster_destroy(mock_);
    if (owner_ != nullptr) rd_kafka_destroy(owner_);
    producer_ = nullptr;
    mock_ = nullptr;
    owner_ = nullptr;
  }

  void CreateTopic(const std::string& topic, int partitions) {
    ASSERT_EQ(rd_kafka_mock_topic_create(mock_, topic.c_str(), partitions, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  // Produces the messages (each to its partition) and waits for all
  // delivery reports; returns their offsets.
  std::vector<int64_t> Produce(const std::string& topic, const std::vector<Message>& messages) {
    deliveries_ = Deliveries();
    for (size_t i = 0; i < messages.size(); ++i) {
      const Message& m = messages[i];
      rd_kafka_headers_t* headers = rd_kafka_headers_new(m.headers.size());
      for (const auto& [name, value] : m.headers) {
        rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                            static_cast<ssize_t>(value.size()));
      }
      void* value = m.value ? const_cast<char*>(m.value->data()) : nullptr;
      void* key = m.key ? const_cast<char*>(m.key->data()) : nullptr;
      const size_t value_size = m.value ? m.value->size() : 0;
      const size_t key_size = m.key ? m.key->size() : 0;
      // librdkafka's RD_KAFKA_V_* macros use GNU statement expressions.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wgnu-statement-expression"
#endif
      const rd_kafka_resp_err_t err =
          rd_kafka_producev(producer_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(m.partition),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(value, value_size),
                            RD_KAFKA_V_KEY(key, key_size), RD_KAFKA_V_HEADERS(headers),
                            RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(i))), RD_KAFKA_V_END);
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
      EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) rd_kafka_headers_destroy(headers);
    }
    EXPECT_EQ(rd_kafka_flush(producer_, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_TRUE(deliveries_.errors.empty()) << deliveries_.errors.front();
    std::vector<int64_t> offsets;
    for (size_t i = 0; i < messages.size(); ++i) {
      offsets.push_back(deliveries_.offsets.count(i) ? deliveries_.offsets[i] : -1);
    }
    return offsets;
  }

  rd_kafka_mock_cluster_t* mock() const { return mock_; }
  const std::string& bootstraps() const { return bootstraps_; }

 private:
  rd_kafka_t* owner_ = nullptr;  // holds the mock cluster
  rd_kafka_mock_cluster_t* mock_ = nullptr;
  rd_kafka_t* producer_ = nullptr;
  std::string bootstraps_;
  Deliveries deliveries_;
};

}  // namespace tributary::testing

#endif  // TRIBUTARY_TESTS_KAFKA_MOCK_H_
