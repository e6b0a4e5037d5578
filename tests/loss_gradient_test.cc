// Each loss's class weights w and self-weight c must equal the negative
// finite-difference gradient of that loss with respect to the natural
// parameters theta (sdEM Theorem 2 / eq. 15):
//     -dL/dtheta = sum_k w_k s(k, x) - c mu(theta).
// The test model is a genuine exponential family over (k, x) with a finite
// support for x, so its log-partition A(theta) and mu = dA/dtheta are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "test_util.h"

namespace tributary {
namespace {

struct ToyFamily {
  uint32_t K, X, D;
  std::vector<double> s;  // s[(k * X + x) * D + d]
  double S(uint32_t k, uint32_t x, uint32_t d) const { return s[(size_t{k} * X + x) * D + d]; }
  double Dot(const std::vector<double>& th, uint32_t k, uint32_t x) const {
    double v = 0;
    for (uint32_t d = 0; d < D; ++d) v += th[d] * S(k, x, d);
    return v;
  }
  double LogPartition(const std::vector<double>& th) const {
    double m = -INFINITY;
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t x = 0; x < X; ++x) m = std::max(m, Dot(th, k, x));
    double z = 0;
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t x = 0; x < X; ++x) z += std::exp(Dot(th, k, x) - m);
    return m + std::log(z);
  }
  std::vector<double> Mu(const std::vector<double>& th) const {
    double a = LogPartition(th);
    std::vector<double> mu(D, 0.0);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t x = 0; x < X; ++x) {
        double p = std::exp(Dot(th, k, x) - a);
        for (uint32_t d = 0; d < D; ++d) mu[d] += p * S(k, x, d);
      }
    return mu;
  }
  std::vector<double> Scores(const std::vector<double>& th, uint32_t x) const {
    double a = LogPartition(th);
    std::vector<double> out(K);
    for (uint32_t k = 0; k < K; ++k) out[k] = Dot(th, k, x) - a;
    return out;
  }
};

double LossValue(const Plugin& loss, const std::vector<double>& scores, int64_t y) {
  std::vector<double> w(scores.size());
  double c = 0, value = 0;
  trib_error err{};
  EXPECT_EQ(loss.loss().weights(scores.data(), static_cast<uint32_t>(scores.size()), y, w.data(), &c, &value, &err),
            TRIB_OK);
  return value;
}

void CheckGradient(const std::string& loss_name, int64_t label, uint64_t seed, bool want_active_hinge) {
  auto loss = testing::BuiltinLoss(loss_name);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  ToyFamily f{4, 5, 6, {}};
  f.s.resize(size_t{f.K} * f.X * f.D);
  for (auto& v : f.s) v = g(rng);
  std::vector<double> th(f.D);
  for (auto& v : th) v = 0.5 * g(rng);
  const uint32_t x0 = 2;
  auto scores = f.Scores(th, x0);
  if (loss_name == "hinge" && want_active_hinge) {
    label = std::min_element(scores.begin(), scores.end()) - scores.begin();  // surely inside the margin
  }
  if (loss_name == "hinge") {
    // Stay away from the kink: the margin must be clearly on one side.
    double other = -INFINITY;
    for (uint32_t k = 0; k < f.K; ++k)
      if (static_cast<int64_t>(k) != label) other = std::max(other, scores[k]);
    double margin = scores[label] - other;
    if (want_active_hinge) {
      ASSERT_LT(margin, 0.9) << "test setup: pick another seed";
    } else {
      // Scale theta until the margin exceeds 1 (the loss is flat there).
      for (int it = 0; it < 60 && margin <= 1.2; ++it) {
        for (uint32_t k = 0; k < f.K; ++k)
          for (uint32_t d = 0; d < f.D; ++d) th[d] += 0.05 * (f.S(static_cast<uint32_t>(label), x0, d) - f.S(k, x0, d));
        scores = f.Scores(th, x0);
        other = -INFINITY;
        for (uint32_t k = 0; k < f.K; ++k)
          if (static_cast<int64_t>(k) != label) other = std::max(other, scores[k]);
        margin = scores[label] - other;
      }
      ASSERT_GT(margin, 1.1);
    }
  }
  std::vector<double> w(f.K);
  double c = 0, value = 0;
  trib_error err{};
  ASSERT_EQ(loss->loss().weights(scores.data(), f.K, label, w.data(), &c, &value, &err), TRIB_OK) << err.message;
  EXPECT_NEAR(value, LossValue(*loss, scores, label), 1e-12);
  // c is the coefficient of mu: sum_k w_k (scores contain -A(theta)).
  double wsum = 0;
  for (double v : w) wsum += v;
  EXPECT_NEAR(c, wsum, 1e-12) << loss_name;
  auto mu = f.Mu(th);
  const double h = 1e-6;
  for (uint32_t d = 0; d < f.D; ++d) {
    auto tp = th, tm = th;
    tp[d] += h;
    tm[d] -= h;
    double fd = (LossValue(*loss, f.Scores(tp, x0), label) - LossValue(*loss, f.Scores(tm, x0), label)) / (2 * h);
    double claimed = -c * mu[d];
    for (uint32_t k = 0; k < f.K; ++k) claimed += w[k] * f.S(k, x0, d);
    EXPECT_NEAR(-fd, claimed, 1e-6 * std::max(1.0, std::fabs(claimed))) << loss_name << " d=" << d;
  }
}

TEST(LossGradientTest, NllLabelled) {
  for (uint64_t s = 1; s <= 5; ++s) CheckGradient("nll", static_cast<int64_t>(s % 4), s, false);
}
TEST(LossGradientTest, NllUnlabelledUsesPosterior) {
  for (uint64_t s = 1; s <= 5; ++s) CheckGradient("nll", -1, s, false);
}
TEST(LossGradientTest, Ncll) {
  for (uint64_t s = 1; s <= 5; ++s) CheckGradient("ncll", static_cast<int64_t>(s % 4), s, false);
}
TEST(LossGradientTest, HingeActive) {
  for (uint64_t s = 1; s <= 5; ++s) CheckGradient("hinge", 0, s, true);
}
TEST(LossGradientTest, HingeInactiveIsZero) {
  for (uint64_t s = 1; s <= 3; ++s) CheckGradient("hinge", 1, s, false);
}

TEST(LossGradientTest, NcllAndHingeRefuseUnlabelled) {
  std::vector<double> scores{-1.0, -2.0, -3.0}, w(3);
  double c, v;
  for (const char* name : {"ncll", "hinge"}) {
    auto loss = testing::BuiltinLoss(name);
    trib_error err{};
    EXPECT_EQ(loss->loss().weights(scores.data(), 3, -1, w.data(), &c, &v, &err), TRIB_ERR_INVALID_DOCUMENT) << name;
    EXPECT_TRUE(loss->loss().requires_label);
  }
}

// ABI 1.2 loss options: hinge's `margin` moves the kink from 1 to m, and the
// loss value is m - (log p(y, x) - log p(ybar, x)) inside it.
TEST(LossOptionsTest, HingeMarginMovesTheKink) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(4, 3));
  ASSERT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), nullptr, *schema, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Model& model = **m;
  const std::vector<double> scores{-10.0, -13.0, -16.0};  // margin of class 0: 3 nats
  std::vector<double> w(3);
  double c = -1, v = -1;
  ASSERT_TRUE(model.SetLoss(testing::BuiltinLoss("hinge")).ok());
  ASSERT_TRUE(model.LossWeights(scores.data(), 0, w.data(), &c, &v).ok());
  EXPECT_EQ(w, (std::vector<double>{0, 0, 0})) << "margin 3 > 1: outside the default margin";
  EXPECT_EQ(v, 0.0);
  ASSERT_TRUE(model.SetLoss(testing::BuiltinLoss("hinge"), {{"margin", "5"}}).ok());
  ASSERT_TRUE(model.LossWeights(scores.data(), 0, w.data(), &c, &v).ok());
  EXPECT_EQ(w, (std::vector<double>{1, -1, 0}));
  EXPECT_EQ(c, 0.0);
  EXPECT_DOUBLE_EQ(v, 2.0);
  ASSERT_TRUE(model.SetLoss(testing::BuiltinLoss("hinge"), {{"margin", "2.5"}}).ok());
  ASSERT_TRUE(model.LossWeights(scores.data(), 0, w.data(), &c, &v).ok());
  EXPECT_EQ(w, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(model.loss_options(), (Options{{"margin", "2.5"}}));
}

TEST(LossOptionsTest, BadOptionsAreRefusedNamingTheKey) {
  auto schema = ModelSchema::FromProto(testing::TextSchema(4, 3));
  ASSERT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial"), testing::BuiltinLoss("nll"), *schema, {});
  ASSERT_TRUE(m.ok());
  struct Case {
    const char* loss;
    Options opts;
    const char* expect;
  };
  for (const auto& c :
       {Case{"hinge", {{"margni", "3"}}, "unknown option 'margni'"},
        Case{"hinge", {{"margin", "-1"}}, "margin='-1': expected a number > 0"},
        Case{"hinge", {{"margin", "abc"}}, "margin='abc'"}, Case{"hinge", {{"margin", "nan"}}, "margin='nan'"},
        Case{"ncll", {{"margin", "3"}}, "loss 'ncll' takes no options, got 'margin'"}}) {
    Status st = (*m)->SetLoss(testing::BuiltinLoss(c.loss), c.opts);
    EXPECT_FALSE(st.ok()) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
    // A refused loss leaves the model's loss as it was.
    EXPECT_EQ((*m)->loss_plugin()->name, "nll");
    EXPECT_TRUE((*m)->loss_options().empty());
  }
}

}  // namespace
}  // namespace tributary
