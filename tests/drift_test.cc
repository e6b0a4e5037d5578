// ADWIN (lib/include/tributary/drift.h) on synthetic Bernoulli streams with
// known change points: detection delay, false alarms on stationary streams,
// and only rises reported.
#include "tributary/drift.h"

#include <gtest/gtest.h>

#include <random>

namespace tributary {
namespace {

// Bernoulli(p) values until `change`, Bernoulli(q) after; returns the index
// (0-based) of the first alarm at or after `from`, or -1.
int64_t FirstAlarm(Adwin* a, uint64_t seed, double p, double q, uint64_t change, uint64_t n, uint64_t from = 0) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution before(p), after(q);
  int64_t first = -1;
  for (uint64_t i = 0; i < n; ++i) {
    const bool alarm = a->Add((i < change ? before(rng) : after(rng)) ? 1.0 : 0.0);
    if (alarm && first < 0 && i >= from) first = static_cast<int64_t>(i);
  }
  return first;
}

// False alarms: ten stationary streams of 100,000 errors each (rates 0.05 to
// 0.5): at most one alarm per 100,000 values over all of them.
TEST(AdwinTest, StationaryStreamsRaiseAtMostOneAlarmPer100000) {
  uint64_t alarms = 0, values = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Adwin a;
    const double p = 0.05 * static_cast<double>(seed);
    FirstAlarm(&a, seed, p, p, 0, 100000);
    alarms += a.alarms();
    values += a.added();
    EXPECT_GT(a.width(), 1000u) << "seed " << seed << ": the window was cut on a stationary stream";
  }
  EXPECT_EQ(values, 1000000u);
  EXPECT_LE(alarms, 10u) << "false alarms per 100,000: " << static_cast<double>(alarms) / 10.0;
}

// A rise of the error rate (a learner that got worse) is found within a few
// hundred values; the bigger the rise, the sooner.
TEST(AdwinTest, DetectsARiseWithBoundedDelay) {
  double delay_small = 0, delay_big = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Adwin a, b;
    const int64_t small = FirstAlarm(&a, seed, 0.2, 0.35, 10000, 20000);
    const int64_t big = FirstAlarm(&b, seed, 0.2, 0.6, 10000, 20000);
    ASSERT_GE(small, 10000) << "seed " << seed << ": no alarm, or one before the change";
    ASSERT_GE(big, 10000) << "seed " << seed;
    EXPECT_LT(small - 10000, 1500) << "seed " << seed;
    EXPECT_LT(big - 10000, 200) << "seed " << seed;
    delay_small += static_cast<double>(small - 10000) / 10;
    delay_big += static_cast<double>(big - 10000) / 10;
    // After the cut the window holds (mostly) the new concept.
    EXPECT_NEAR(a.mean(), 0.35, 0.05);
  }
  EXPECT_LT(delay_big, delay_small);
}

// A fall (the learner improves) shrinks the window but is no alarm.
TEST(AdwinTest, AFallIsNoAlarm) {
  Adwin a;
  EXPECT_LT(FirstAlarm(&a, 7, 0.6, 0.1, 5000, 10000), 0);
  EXPECT_EQ(a.alarms(), 0u);
  EXPECT_LT(a.width(), 6000u) << "the old concept was not dropped";
  EXPECT_NEAR(a.mean(), 0.1, 0.03);
}

TEST(AdwinTest, SameValuesSameAlarmsAndNonFiniteValuesIgnored) {
  Adwin a, b;
  FirstAlarm(&a, 3, 0.1, 0.5, 3000, 6000);
  FirstAlarm(&b, 3, 0.1, 0.5, 3000, 6000);
  EXPECT_EQ(a.alarms(), b.alarms());
  EXPECT_EQ(a.width(), b.width());
  EXPECT_DOUBLE_EQ(a.mean(), b.mean());
  const uint64_t added = a.added();
  EXPECT_FALSE(a.Add(std::nan("")));
  EXPECT_FALSE(a.Add(INFINITY));
  EXPECT_EQ(a.added(), added);
  a.Reset();
  EXPECT_EQ(a.width(), 0u);
  EXPECT_EQ(a.mean(), 0.0);
}

TEST(AdwinTest, OptionsOutOfRangeAreNamed) {
  AdwinOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.delta = 1.5;
  EXPECT_NE(o.Validate().message().find("delta"), std::string::npos);
  o = AdwinOptions();
  o.clock = 0;
  EXPECT_NE(o.Validate().message().find("clock"), std::string::npos);
  o = AdwinOptions();
  o.max_buckets = 1;
  EXPECT_NE(o.Validate().message().find("max_buckets"), std::string::npos);
}

}  // namespace
}  // namespace tributary
