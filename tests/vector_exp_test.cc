// The vector exp (tributary/vector_exp.h) against std::exp:
// at most 1 ulp apart over the range it computes itself, and std::exp's own
// value outside it (underflow to subnormals and zero, overflow, NaN).
#include "tributary/vector_exp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tributary/metrics.h"
#include "tributary/simd.h"

namespace {

using tributary::vector_exp::ExpShifted;

// Distance in units in the last place between two finite positive doubles.
uint64_t UlpDistance(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  return static_cast<uint64_t>(ia > ib ? ia - ib : ib - ia);
}

// Checks every x (in odd-sized batches, so the scalar tail runs too) and
// returns the largest ulp distance.
uint64_t MaxUlp(const std::vector<double>& xs, double shift = 0.0) {
  std::vector<double> got(xs.size());
  uint64_t worst = 0;
  for (size_t i = 0; i < xs.size(); i += 37) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(37, xs.size() - i));
    ExpShifted(xs.data() + i, shift, n, got.data() + i);
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::exp(xs[i] - shift);
    if (!(want > 0) || std::isinf(want) || !(xs[i] - shift >= -708.0 && xs[i] - shift <= 709.0)) {
      // Outside the vector range: std::exp's value, bit for bit.
      EXPECT_EQ(std::memcmp(&want, &got[i], sizeof want), 0) << "x = " << xs[i] << " got " << got[i];
      continue;
    }
    const uint64_t d = UlpDistance(got[i], want);
    EXPECT_LE(d, 1u) << "x = " << xs[i] << std::hexfloat << " (" << xs[i] << "): " << got[i] << " vs " << want;
    worst = std::max(worst, d);
  }
  return worst;
}

TEST(VectorExpTest, UniformOverTheWholeRange) {
  std::mt19937_64 rng(20261125);
  std::uniform_real_distribution<double> u(-760.0, 720.0);
  std::vector<double> xs(4000000);
  for (double& x : xs) x = u(rng);
  EXPECT_LE(MaxUlp(xs), 1u);
}

TEST(VectorExpTest, RandomBitPatternsOfSmallArguments) {
  // |x| from 2^-60 to 2^9 with every mantissa: log-uniform, both signs.
  std::mt19937_64 rng(7);
  std::vector<double> xs(4000000);
  for (double& x : xs) {
    const uint64_t bits = (rng() & 0x800fffffffffffffull) | ((0x3c3ull + rng() % (0x408 - 0x3c3)) << 52);
    std::memcpy(&x, &bits, sizeof x);
  }
  EXPECT_LE(MaxUlp(xs), 1u);
}

TEST(VectorExpTest, DenseAroundReductionBoundaries) {
  // Around x = (j + 1/2) ln 2, where the reduction switches k, and around 0.
  std::vector<double> xs;
  for (int j = -1022; j <= 1023; ++j) {
    const double b = (j + 0.5) * 0.6931471805599453;
    double x = b;
    for (int t = 0; t < 200; ++t) x = std::nextafter(x, -INFINITY);
    for (int t = 0; t < 400; ++t, x = std::nextafter(x, INFINITY)) xs.push_back(x);
  }
  for (double x = -1e-3; x <= 1e-3; x += 1e-7) xs.push_back(x);
  EXPECT_LE(MaxUlp(xs), 1u);
}

TEST(VectorExpTest, ShiftAndSpecialValues) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> xs{0.0,
                               -0.0,
                               1.0,
                               -1.0,
                               -708.0,
                               709.0,
                               -708.1,
                               709.1,
                               -745.0,
                               -746.0,
                               710.0,
                               -kInf,
                               kInf,
                               1e-300,
                               -1e-300,
                               5e-324,
                               -1e308,
                               1e308,
                               -707.9,
                               708.9,
                               -700.0,
                               -720.0,
                               -740.0,
                               0.5,
                               -0.5,
                               0.34657,
                               1e-20,
                               -1e-20,
                               3.0,
                               -3.0,
                               std::numeric_limits<double>::quiet_NaN()};
  MaxUlp(xs);
  MaxUlp(xs, 3.5);
  MaxUlp(xs, -100.0);
  // exp(x - max) of a softmax: arguments <= 0.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-800.0, 0.0);
  std::vector<double> scores(100000);
  for (double& s : scores) s = u(rng) - 250.0;
  EXPECT_LE(MaxUlp(scores, -250.0), 1u);
}

// ExpShiftedWide (four lanes, for AVX2 code) gives ExpShifted's bits: every
// lane does the same operations. Whole-range, softmax-like and special
// arguments, every length 1..41 (the two- and one-lane tails).
__attribute__((target("avx2"))) void WideExp(const double* x, double shift, uint32_t n, double* out) {
  tributary::vector_exp::ExpShiftedWide(x, shift, n, out);
}

TEST(VectorExpTest, FourLanesGiveTheTwoLanesBits) {
  if (!__builtin_cpu_supports("avx2")) {
    // Without AVX2 the four-lane path must never be chosen (and cannot run).
    EXPECT_LT(tributary::simd::MaxLevel(), tributary::simd::kAvx2);
    return;
  }
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> wide(-760.0, 720.0), soft(-60.0, 0.0);
  std::vector<double> xs;
  for (int i = 0; i < 20000; ++i) xs.push_back(i % 2 ? wide(rng) : soft(rng));
  for (double v :
       {0.0, -0.0, -708.0, 709.0, -708.1, 709.1, -745.0, 710.0, 1e-300, 5e-324, std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    xs.insert(xs.begin() + static_cast<long>(rng() % xs.size()), v);
  }
  for (double shift : {0.0, 3.5, -100.0}) {
    for (uint32_t n = 1; n <= 41; ++n) {
      std::vector<double> a(xs.size()), b(xs.size()), c(xs.size());
      for (size_t i = 0; i + n <= xs.size(); i += n) {
        ExpShifted(xs.data() + i, shift, n, a.data() + i);
        WideExp(xs.data() + i, shift, n, b.data() + i);
        tributary::vector_exp::ExpShiftedBest(xs.data() + i, shift, n, c.data() + i);  // the dispatcher
      }
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0) << "n = " << n << ", shift " << shift;
      ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(double)), 0) << "n = " << n << ", shift " << shift;
    }
  }
}

}  // namespace

namespace tributary {
namespace {

// ClassificationMetrics::Add's one pass against what it replaced (LogEvidence,
// std::max_element and HingeLoss, each a pass of its own): every metric bit
// for bit, with ties, NaN and -inf scores, unlabelled documents and labels
// out of range.
TEST(ClassificationMetricsTest, OnePassEqualsTheThreePasses) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-300.0, 0.0);
  const double ninf = -std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (uint32_t k : {1u, 2u, 3u, 10u, 39u}) {
    ClassificationMetrics got(k);
    double log_px_sum = 0, tokens = 0, ncll = 0, hinge = 0;
    uint64_t labelled = 0, correct = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<double> x(k), scratch(k);
      for (double& v : x) v = trial % 11 == 0 ? std::round(u(rng) / 50) * 50 : u(rng);  // ties
      if (trial % 7 == 0) x[rng() % k] = ninf;
      if (trial % 13 == 0) x[rng() % k] = nan;
      if (trial % 29 == 0) std::fill(x.begin(), x.end(), ninf);
      const int64_t label = trial % 5 == 0 ? -1 : trial % 17 == 0 ? k : static_cast<int64_t>(rng() % k);
      const double n = static_cast<double>(rng() % 20);
      got.Add(x.data(), label, n);
      const double lp = LogEvidence(x.data(), k, scratch.data());
      if (n > 0 && std::isfinite(lp)) {
        log_px_sum += lp;
        tokens += n;
      }
      if (label < 0 || label >= k) continue;
      ++labelled;
      correct += std::max_element(x.begin(), x.end()) - x.begin() == label;
      ncll += -(x[label] - lp);
      hinge += HingeLoss(x.data(), k, static_cast<uint32_t>(label));
    }
    auto same = [](double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    EXPECT_EQ(got.labelled(), labelled);
    EXPECT_TRUE(same(got.accuracy(), static_cast<double>(correct) / static_cast<double>(labelled))) << k;
    EXPECT_TRUE(same(got.mean_ncll(), ncll / static_cast<double>(labelled))) << k << ": " << got.mean_ncll();
    EXPECT_TRUE(same(got.mean_hinge(), hinge / static_cast<double>(labelled))) << k << ": " << got.mean_hinge();
    EXPECT_TRUE(same(got.perplexity(), std::exp(-log_px_sum / tokens))) << k;
  }
}

// LogEvidence (what eval's metrics use) is Posterior's log p(x) bit for bit,
// for every number of classes, with -inf scores, and all -inf.
TEST(LogEvidenceTest, EqualsPosteriorsReturnBitForBit) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-400.0, 10.0);
  const double ninf = -std::numeric_limits<double>::infinity();
  for (uint32_t k : {1u, 2u, 3u, 10u, 39u, 100u}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<double> x(k), probs(k), scratch(k);
      for (double& v : x) v = u(rng);
      if (trial % 7 == 0) x[rng() % k] = ninf;
      const double a = Posterior(x.data(), k, probs.data());
      const double b = LogEvidence(x.data(), k, scratch.data());
      ASSERT_EQ(std::memcmp(&a, &b, sizeof a), 0) << k << " classes, trial " << trial << ": " << a << " vs " << b;
    }
    std::vector<double> all(k, ninf), probs(k), scratch(k);
    EXPECT_EQ(Posterior(all.data(), k, probs.data()), LogEvidence(all.data(), k, scratch.data()));
  }
}

}  // namespace
}  // namespace tributary
