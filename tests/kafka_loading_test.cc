// librdkafka is loaded by the first KafkaSource::Connect, not at start-up
// (streams/src/rdkafka_api.cc, "librdkafka, loaded on first use"). This program does not
// link librdkafka (unlike kafka_source_test, whose mock cluster needs it), so
// it sees the process before and after the load.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tributary/kafka_source.h"

namespace tributary {
namespace {

bool Mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  return all.str().find(library) != std::string::npos;
}

KafkaSourceOptions Unreachable() {
  KafkaSourceOptions o;
  o.brokers = {"127.0.0.1:1"};  // nothing listens on port 1
  o.topic = "t";
  o.connect_timeout_ms = 300;
  return o;
}

// Runs first in its own process (death-test child, re-executed): the
// library is not loaded until a source connects, and options refused
// before connecting do not load it either.
TEST(KafkaLoadingTest, LibrdkafkaIsLoadedByTheFirstConnect) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (Mapped("librdkafka")) std::_Exit(10);  // loaded at start-up
        KafkaSourceOptions bad = Unreachable();
        bad.batch = 0;
        if (KafkaSource::Connect(bad).status().ok() || Mapped("librdkafka")) std::_Exit(11);
        Result<std::unique_ptr<KafkaSource>> r = KafkaSource::Connect(Unreachable());
        if (!Mapped("librdkafka")) std::_Exit(12);
        // The functions were resolved and ran: librdkafka's own answer, not
        // a loading error.
        const std::string m = r.status().ToString();
        if (r.ok() || m.find("no broker answered a metadata request within 300 ms") == std::string::npos) {
          std::_Exit(13);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A library that cannot be loaded is an error naming the file and what is
// expected, from every Connect of the process; nothing crashes.
TEST(KafkaLoadingTest, AMissingLibraryIsNamedByEveryConnect) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TRIBUTARY_RDKAFKA_LIBRARY", "/nonexistent/librdkafka.so.1", 1);
        for (int i = 0; i < 2; ++i) {
          Result<std::unique_ptr<KafkaSource>> r = KafkaSource::Connect(Unreachable());
          const std::string m = r.status().ToString();
          if (r.ok() || m.find("cannot load /nonexistent/librdkafka.so.1") == std::string::npos ||
              m.find("expected librdkafka >= 1.6") == std::string::npos) {
            std::_Exit(20 + i);
          }
        }
        std::_Exit(Mapped("librdkafka") ? 22 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A file that loads but is not librdkafka names the first missing function.
TEST(KafkaLoadingTest, ALibraryWithoutTheFunctionsIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("TRIBUTARY_RDKAFKA_LIBRARY", "libz.so.1", 1);
        Result<std::unique_ptr<KafkaSource>> r = KafkaSource::Connect(Unreachable());
        const std::string m = r.status().ToString();
        std::_Exit(!r.ok() && m.find("libz.so.1 has no rd_kafka_") != std::string::npos ? 0 : 30);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tributary
