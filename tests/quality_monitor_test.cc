// QualityMonitor (lib/include/tributary/quality_monitor.h): prequential
// figures computed by hand, per class, the confusions, and a drift alarm.
#include "tributary/quality_monitor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tributary {
namespace {

// Scores log p(k, x) that predict `predicted` with probability p (the rest
// shared evenly) among `k` outputs.
std::vector<double> Scores(uint32_t k, uint32_t predicted, double p) {
  std::vector<double> s(k, std::log((1 - p) / (k - 1)));
  s[predicted] = std::log(p);
  return s;
}

TEST(QualityMonitorTest, FiguresAreTheHandComputedOnes) {
  QualityMonitorOptions o;
  o.half_life = 1;  // each document's weight halves at the next one
  QualityMonitor m(o);
  EXPECT_TRUE(std::isnan(m.accuracy()));
  EXPECT_TRUE(std::isnan(m.window_accuracy()));
  // Three documents: right (p = 0.8), wrong (class 0 predicted for 1, p(y) = 0.1), right (p = 0.5).
  m.Add(Scores(3, 0, 0.8).data(), 3, 0);
  m.Add(Scores(3, 0, 0.8).data(), 3, 1);
  m.Add(Scores(3, 2, 0.5).data(), 3, 2);
  EXPECT_EQ(m.documents(), 3u);
  EXPECT_NEAR(m.accuracy(), 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.log_loss(), (-std::log(0.8) - std::log(0.1) - std::log(0.5)) / 3, 1e-12);
  // Weights 1/4, 1/2, 1 for the three documents.
  EXPECT_NEAR(m.window_accuracy(), (0.25 + 1) / 1.75, 1e-12);
  ASSERT_EQ(m.classes().size(), 3u);
  EXPECT_EQ(m.classes()[1].documents, 1u);
  EXPECT_EQ(m.classes()[1].correct, 0u);
  EXPECT_EQ(m.classes()[2].window_recall, 1.0);
  const auto confused = m.MostConfused(5);
  ASSERT_EQ(confused.size(), 1u);
  EXPECT_EQ(confused[0].truth, 1u);
  EXPECT_EQ(confused[0].predicted, 0u);
  EXPECT_EQ(confused[0].documents, 1u);
  // Not counted: a label out of range, a NaN score.
  std::vector<double> nan = Scores(3, 0, 0.8);
  nan[1] = std::nan("");
  EXPECT_FALSE(m.Add(nan.data(), 3, 0));
  EXPECT_FALSE(m.Add(Scores(3, 0, 0.8).data(), 3, 7));
  EXPECT_EQ(m.documents(), 3u);
}

TEST(QualityMonitorTest, ConfusionsAreOrderedByCount) {
  QualityMonitor m;
  for (int i = 0; i < 3; ++i) m.Add(Scores(4, 2, 0.9).data(), 4, 1);
  for (int i = 0; i < 5; ++i) m.Add(Scores(4, 0, 0.9).data(), 4, 3);
  m.Add(Scores(4, 1, 0.9).data(), 4, 0);
  const auto c = m.MostConfused(2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].truth, 3u);
  EXPECT_EQ(c[0].documents, 5u);
  EXPECT_EQ(c[1].truth, 1u);
  EXPECT_EQ(c[1].predicted, 2u);
}

// Accuracy 0.9 for 5,000 documents, then 0.5: one alarm soon after the change
// (none before it), and the recent accuracy follows while the cumulative lags.
TEST(QualityMonitorTest, ADropInAccuracyRaisesAnAlarm) {
  QualityMonitor m;
  std::mt19937_64 rng(5);
  std::bernoulli_distribution before(0.9), after(0.5);
  for (uint64_t i = 0; i < 8000; ++i) {
    const bool right = i < 5000 ? before(rng) : after(rng);
    m.Add(Scores(2, right ? 0 : 1, 0.8).data(), 2, 0);
  }
  ASSERT_FALSE(m.alarms().empty());
  EXPECT_GT(m.alarms()[0], 5000u);
  EXPECT_LT(m.alarms()[0], 5300u);
  EXPECT_NEAR(m.window_accuracy(), 0.5, 0.06);
  EXPECT_GT(m.accuracy(), 0.7);
}

}  // namespace
}  // namespace tributary
