// Tests of the "gaussian" family (Gaussian naive Bayes), including the toy
// example of sdEM §4.1 (Masegosa et al. 2014, Figure 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::BuiltinLoss;
using testing::BuiltinRegistry;
using testing::RealSchema;

ModelSchema Schema(const v1::Schema& proto) {
  auto s = ModelSchema::FromProto(proto);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

std::unique_ptr<Model> NewModel(const std::string& loss, uint32_t reals = 1, uint32_t classes = 2,
                                Options options = {}) {
  auto m = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss(loss), Schema(RealSchema(reals, classes)),
                         std::move(options));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

DocumentBuffer RealDoc(uint64_t index, int64_t label, std::vector<double> reals) {
  DocumentBuffer d;
  d.index = index;
  d.id = "d" + std::to_string(index);
  d.label = label;
  d.reals = std::move(reals);
  return d;
}

// The statistics of class k, feature j, as mu (the layout is class-major:
// N[k], then S[k][j], then V[k][j]).
struct ClassStats {
  double n, s, v;
};
ClassStats StatsOf(const Model& m, uint32_t k, uint32_t j) {
  const auto& b = m.stats().blocks();
  const uint32_t J = m.schema().num_reals();
  return {m.stats().Mu(b[0].offset + k), m.stats().Mu(b[1].offset + uint64_t{k} * J + j),
          m.stats().Mu(b[2].offset + uint64_t{k} * J + j)};
}

// Every statistic finite and feasible: N > 0 and V/N - (S/N)^2 > 0.
void ExpectFeasible(const Model& m, const std::string& where) {
  for (uint64_t i = 0; i < m.stats().size(); ++i) {
    ASSERT_TRUE(std::isfinite(m.stats().Mu(i))) << where << ": mu[" << i << "] = " << m.stats().Mu(i);
    ASSERT_TRUE(std::isfinite(m.stats().raw()[i])) << where << ": raw[" << i << "]";
  }
  for (uint32_t k = 0; k < m.num_classes(); ++k) {
    for (uint32_t j = 0; j < m.schema().num_reals(); ++j) {
      const ClassStats c = StatsOf(m, k, j);
      ASSERT_GT(c.n, 0) << where << ": class " << k;
      const double mean = c.s / c.n;
      ASSERT_GT(c.v / c.n - mean * mean, 0)
          << where << ": class " << k << " feature " << j << " N=" << c.n << " S=" << c.s << " V=" << c.v;
    }
  }
}

// ---- The toy data of §4.1 ------------------------------------------------
// pi(y = -1) = pi(y = +1) = 0.5; x | y=-1 ~ N(0, sd 3);
// x | y=+1 ~ 0.8 N(-5, sd 0.1) + 0.2 N(5, sd 0.1).
// Class index 0 is y = -1, class index 1 is y = +1. The generator uses its
// own Box-Muller transform so the data do not depend on the standard
// library's normal_distribution.
struct Sample {
  int64_t label;
  double x;
};

class ToyGenerator {
 public:
  explicit ToyGenerator(uint64_t seed) : rng_(seed) {}
  double Uniform() { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  Sample Next() {
    if (Uniform() < 0.5) return {0, 3.0 * Normal()};
    const double centre = Uniform() < 0.8 ? -5.0 : 5.0;
    return {1, centre + 0.1 * Normal()};
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<Sample> ToyData(uint64_t seed, size_t n) {
  ToyGenerator g(seed);
  std::vector<Sample> out(n);
  for (auto& s : out) s = g.Next();
  return out;
}

struct ToySettings {
  std::string loss;
  double lambda = -1;  // < 0: the loss's default
  int epochs = 1;
  Options options;
};

// Trains a Gaussian NB on `train` with sdEM (n = |train|) for `epochs` passes,
// each over a fresh shuffle after the first.
std::unique_ptr<Model> TrainToy(const ToySettings& ts, const std::vector<Sample>& train) {
  auto model = NewModel(ts.loss, 1, 2, ts.options);
  if (!model) return nullptr;
  model->learner_state().effective_size = static_cast<double>(train.size());
  if (ts.lambda >= 0) model->learner_state().schedule.lambda = ts.lambda;
  auto learner = SdemLearner::Create(model.get());
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  if (!learner.ok()) return nullptr;
  std::vector<size_t> order(train.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 shuffle_rng(7);
  DocumentBuffer doc;
  doc.reals.resize(1);
  for (int e = 0; e < ts.epochs; ++e) {
    if (e > 0) std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (size_t i : order) {
      doc.index = i;
      doc.label = train[i].label;
      doc.reals[0] = train[i].x;
      Status st = (*learner)->Learn(doc.View());
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return nullptr;
    }
  }
  return model;
}

double Accuracy(const Model& model, const std::vector<Sample>& data) {
  auto state = model.NewScoringState();
  EXPECT_TRUE(state.ok());
  double scores[2];
  size_t correct = 0;
  DocumentBuffer d;
  d.reals.resize(1);
  for (size_t i = 0; i < data.size(); ++i) {
    d.index = i;
    d.reals[0] = data[i].x;
    Status st = model.Score(d.View(), state->get(), scores);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(std::isfinite(scores[0]) && std::isfinite(scores[1]));
    const int64_t pred = scores[1] > scores[0] ? 1 : 0;
    correct += (pred == data[i].label);
  }
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

constexpr uint64_t kToyTrainSeed = 2014;
constexpr uint64_t kToyTestSeed = 2015;
constexpr size_t kToySize = 30000;

const std::vector<Sample>& ToyTrain() {
  static const auto* d = new std::vector<Sample>(ToyData(kToyTrainSeed, kToySize));
  return *d;
}
const std::vector<Sample>& ToyTest() {
  static const auto* d = new std::vector<Sample>(ToyData(kToyTestSeed, kToySize));
  return *d;
}

double RunToy(const ToySettings& ts) {
  auto model = TrainToy(ts, ToyTrain());
  if (!model) return 0;
  ExpectFeasible(*model, "toy " + ts.loss);
  const double acc = Accuracy(*model, ToyTest());
  std::printf("[toy] loss=%s lambda=%g epochs=%d options=%s test accuracy=%.4f\n", ts.loss.c_str(),
              model->learner_state().schedule.lambda, ts.epochs,
              ts.options.empty() ? "-" : (ts.options[0].first + "=" + ts.options[0].second).c_str(), acc);
  return acc;
}

// The paper's MLE: 78.6%. NLL with the default lambda = 1 (rho_t = 1/(1+t))
// averages the statistics, i.e. the MAP estimate.
TEST(GaussianToy, NllMatchesPaper) {
  const double acc = RunToy({"nll", -1, 1, {}});
  EXPECT_GE(acc, 0.78);
  EXPECT_LE(acc, 0.80);
}

// The paper: NCLL 90.4%, hinge 90.6%. With the paper's prior (pseudo-count
// 1) and rho_0 = 1 the first steps of the discriminative losses move the
// statistics by a whole sample each, and the result depends on the first
// few samples (from 50% to 93% across data seeds, for any lambda; the
// default lambda = 1e-4 fails on most seeds). A prior pseudo-count of 10
// with lambda = 0.01 (CLI: --prior 10 --lambda 0.01 --epochs 3 --shuffle)
// is robust: 90.8% - 92.4% (NCLL) and 91.4% - 92.3% (hinge) over 10 seeds.
TEST(GaussianToy, NcllMatchesPaper) {
  const double acc = RunToy({"ncll", 0.01, 3, {{"prior", "10"}}});
  EXPECT_GE(acc, 0.88);
}

TEST(GaussianToy, HingeMatchesPaper) {
  const double acc = RunToy({"hinge", 0.01, 3, {{"prior", "10"}}});
  EXPECT_GE(acc, 0.88);
}

// The same with the paper's own prior and a step schedule starting lower:
// rho_t = (10 + t)^-1 (--schedule poly --tau0 10 --kappa 1).
TEST(GaussianToy, DiscriminativeWithPaperPriorAndShiftedSchedule) {
  for (const char* loss : {"ncll", "hinge"}) {
    auto model = NewModel(loss);
    ASSERT_TRUE(model);
    auto& ls = model->learner_state();
    ls.effective_size = kToySize;
    ls.schedule.kind = StepSchedule::Kind::kPolynomial;
    ls.schedule.tau0 = 10;
    ls.schedule.kappa = 1;
    auto learner = SdemLearner::Create(model.get());
    ASSERT_TRUE(learner.ok());
    DocumentBuffer doc;
    doc.reals.resize(1);
    for (size_t i = 0; i < ToyTrain().size(); ++i) {
      doc.index = i;
      doc.label = ToyTrain()[i].label;
      doc.reals[0] = ToyTrain()[i].x;
      ASSERT_TRUE((*learner)->Learn(doc.View()).ok());
    }
    const double acc = Accuracy(*model, ToyTest());
    std::printf("[toy] loss=%s rho_t=1/(10+t) epochs=1 test accuracy=%.4f\n", loss, acc);
    EXPECT_GE(acc, 0.88) << loss;
  }
}

// ---- The update equations of §4.1 -----------------------------------------

// One NCLL step from the prior reproduces the paper's equations
//   N <- N + rho(1[y=k] - p(k|x)) + rho/n
//   S <- (1 - rho/n) S + rho x (1[y=k] - p(k|x))
//   V <- (1 - rho/n) V + rho x^2 (1[y=k] - p(k|x)) + rho/n
TEST(GaussianFamily, NcllStepFollowsPaperEquations) {
  auto model = NewModel("ncll");  // the paper's prior: N = 1, S = 0, V = 1
  ASSERT_TRUE(model);
  const double n = 50;
  model->learner_state().effective_size = n;
  model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
  model->learner_state().schedule.rho = 0.5;
  const ClassStats before[2] = {StatsOf(*model, 0, 0), StatsOf(*model, 1, 0)};
  EXPECT_EQ(before[0].n, 1.0);
  EXPECT_EQ(before[0].s, 0.0);
  EXPECT_EQ(before[0].v, 1.0);
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  const double x = 0.7, rho = 0.5;
  DocumentBuffer d = RealDoc(0, 1, {x});
  ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  // Identical classes at the prior: p(k|x) = 1/2.
  for (uint32_t k = 0; k < 2; ++k) {
    const double g = (k == 1 ? 1.0 : 0.0) - 0.5;
    const ClassStats c = StatsOf(*model, k, 0);
    EXPECT_NEAR(c.n, before[k].n + rho * g + rho / n, 1e-12) << k;
    EXPECT_NEAR(c.s, (1 - rho / n) * before[k].s + rho * x * g, 1e-12) << k;
    EXPECT_NEAR(c.v, (1 - rho / n) * before[k].v + rho * x * x * g + rho / n, 1e-12) << k;
  }
}

// Hinge: N <- N + k y rho 1[margin < 1] + rho/n, etc. (§4.1).
TEST(GaussianFamily, HingeStepFollowsPaperEquations) {
  auto model = NewModel("hinge");
  ASSERT_TRUE(model);
  const double n = 50, rho = 0.25, x = -1.5;
  model->learner_state().effective_size = n;
  model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
  model->learner_state().schedule.rho = rho;
  const ClassStats before[2] = {StatsOf(*model, 0, 0), StatsOf(*model, 1, 0)};
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  DocumentBuffer d = RealDoc(0, 0, {x});
  ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  for (uint32_t k = 0; k < 2; ++k) {
    const double sign = k == 0 ? 1.0 : -1.0;  // margin 0 < 1: y gains, ybar loses
    const ClassStats c = StatsOf(*model, k, 0);
    EXPECT_NEAR(c.n, before[k].n + sign * rho + rho / n, 1e-12) << k;
    EXPECT_NEAR(c.s, (1 - rho / n) * before[k].s + sign * rho * x, 1e-12) << k;
    EXPECT_NEAR(c.v, (1 - rho / n) * before[k].v + sign * rho * x * x + rho / n, 1e-12) << k;
  }
}

// score() is log p(k) + sum_j log N(x_j; S/N, V/N - (S/N)^2).
TEST(GaussianFamily, ScoreIsLogJointOfTheStatistics) {
  auto model = NewModel("nll", 2, 3);
  ASSERT_TRUE(model);
  model->learner_state().effective_size = 10;
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  for (uint64_t i = 0; i < 60; ++i) {
    const int64_t y = static_cast<int64_t>(i % 3);
    DocumentBuffer d = RealDoc(i, y, {normal(rng) + static_cast<double>(y), 2.0 * normal(rng) - 1.0});
    ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  }
  auto state = model->NewScoringState();
  ASSERT_TRUE(state.ok());
  const std::vector<double> x = {0.3, -2.0};
  DocumentBuffer d = RealDoc(0, -1, x);
  double scores[3];
  ASSERT_TRUE(model->Score(d.View(), state->get(), scores).ok());
  double total = 0;
  for (uint32_t k = 0; k < 3; ++k) total += StatsOf(*model, k, 0).n;
  for (uint32_t k = 0; k < 3; ++k) {
    double expect = std::log(StatsOf(*model, k, 0).n / total);
    for (uint32_t j = 0; j < 2; ++j) {
      const ClassStats c = StatsOf(*model, k, j);
      const double m = c.s / c.n, s2 = c.v / c.n - m * m;
      expect += -0.5 * std::log(2 * M_PI * s2) - (x[j] - m) * (x[j] - m) / (2 * s2);
    }
    EXPECT_NEAR(scores[k], expect, 1e-9) << k;
  }
}

// Terms and categorical features are ignored by this family.
TEST(GaussianFamily, IgnoresTermsAndCategoricals) {
  v1::Schema proto = RealSchema(1, 2);
  for (int i = 0; i < 4; ++i) proto.add_vocabulary("w" + std::to_string(i));
  auto* cat = proto.add_features();
  cat->set_name("colour");
  cat->set_kind(v1::FeatureSpec::CATEGORICAL);
  cat->add_categories("red");
  cat->add_categories("blue");
  auto model = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss("nll"), Schema(proto), {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto state = (*model)->NewScoringState();
  ASSERT_TRUE(state.ok());
  DocumentBuffer plain = RealDoc(0, 0, {1.25});
  plain.categoricals = {0};
  DocumentBuffer rich = plain;
  rich.term_ids = {1, 3};
  rich.term_counts = {2, 5};
  rich.categoricals = {1};
  double a[2], b[2];
  ASSERT_TRUE((*model)->Score(plain.View(), state->get(), a).ok());
  ASSERT_TRUE((*model)->Score(rich.View(), state->get(), b).ok());
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
}

// ---- Check-step ------------------------------------------------------------

// Constant rho = 1 on adversarial data (constant features, huge and tiny
// values, flipping labels, a feature far from zero with a tiny spread): every
// statistic stays finite and feasible, the paper's check-step holds after
// every step, and scores stay finite.
TEST(GaussianFamily, CheckStepKeepsStatisticsFeasibleUnderHugeSteps) {
  for (const char* loss : {"nll", "ncll", "hinge"}) {
    for (double n : {1.0, 3.0, 1e6}) {
      SCOPED_TRACE(std::string(loss) + " n=" + std::to_string(n));
      auto model = NewModel(loss, 3, 3);
      ASSERT_TRUE(model);
      model->learner_state().effective_size = n;
      model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
      model->learner_state().schedule.rho = 1.0;
      auto learner = SdemLearner::Create(model.get());
      ASSERT_TRUE(learner.ok());
      auto state = model->NewScoringState();
      ASSERT_TRUE(state.ok());
      std::mt19937_64 rng(11);
      std::uniform_real_distribution<double> u(-1, 1);
      const double extremes[] = {0.0, 1e6, -1e6, 1e-300, 5e-324, 1e8 + 1e-8, 1e100, -1e100, 3.0};
      for (uint64_t i = 0; i < 600; ++i) {
        std::vector<double> x(3);
        x[0] = 7.0;  // constant: zero variance in the data
        x[1] = extremes[(i / 3) % (sizeof(extremes) / sizeof(extremes[0]))] * (i % 2 ? 1 : -1);
        x[2] = 1e8 + 1e-3 * u(rng);                               // far from 0, tiny spread
        const int64_t y = static_cast<int64_t>((i * 7 / 5) % 3);  // labels unrelated to x
        DocumentBuffer d = RealDoc(i, y, x);
        LearnOutcome out;
        Status st = (*learner)->Learn(d.View(), &out);
        ASSERT_TRUE(st.ok()) << "step " << i << ": " << st.ToString();
        ExpectFeasible(*model, "after step " + std::to_string(i));
        // The paper's check-step: N >= rho/n, V >= S^2/N + rho/n (up to rounding).
        const double r = out.rho / n;
        for (uint32_t k = 0; k < 3; ++k) {
          for (uint32_t j = 0; j < 3; ++j) {
            const ClassStats c = StatsOf(*model, k, j);
            ASSERT_GE(c.n, r * (1 - 1e-9)) << "step " << i << " class " << k;
            ASSERT_GE(c.v - c.s * c.s / c.n, r - 1e-9 * c.v) << "step " << i << " class " << k << " feature " << j;
          }
        }
        double scores[3];
        for (double probe : {0.0, 7.0, 1e6, -3.5}) {
          DocumentBuffer p = RealDoc(0, -1, {probe, probe, 1e8});
          ASSERT_TRUE(model->Score(p.View(), state->get(), scores).ok());
          for (double s : scores) ASSERT_FALSE(std::isnan(s)) << "step " << i;
          for (double s : scores) ASSERT_LT(s, INFINITY) << "step " << i;
        }
        DocumentBuffer p = RealDoc(0, -1, {7.0, 0.5, 1e8});
        ASSERT_TRUE(model->Score(p.View(), state->get(), scores).ok());
        for (double s : scores) ASSERT_TRUE(std::isfinite(s)) << "step " << i;
        // Statistics produced by training are feasible, so the rho = 0
        // check-step run at snapshot load leaves them bit-for-bit unchanged.
        const auto raw = model->stats().raw();
        ASSERT_TRUE(model->Rebuild(trib_step{0.0, n, 0.0, model->learner_state().updates}).ok());
        ASSERT_EQ(0, std::memcmp(raw.data(), model->stats().raw().data(), raw.size() * sizeof(double)))
            << "rebuild with rho = 0 changed the statistics after step " << i;
      }
    }
  }
}

// The check-step sees N lowered and V touched in the same call (hinge, rho = 1,
// at the paper's prior): N drops to rho/n and V is raised against the new N.
TEST(GaussianFamily, CheckStepUsesTheFinalN) {
  auto model = NewModel("hinge");
  ASSERT_TRUE(model);
  const double n = 100;
  model->learner_state().effective_size = n;
  model->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
  model->learner_state().schedule.rho = 1.0;
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  DocumentBuffer d = RealDoc(0, 0, {-5.0});
  ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  const ClassStats wrong = StatsOf(*model, 1, 0);  // ybar: N = 1 - 1 + 1/n, V = 1 - 25 + 1/n
  EXPECT_NEAR(wrong.n, 1.0 / n, 1e-12);
  EXPECT_NEAR(wrong.s, 5.0, 1e-12);
  EXPECT_GE(wrong.v, 25.0 / wrong.n + 1.0 / n - 1e-9);
  EXPECT_LE(wrong.v, (25.0 / wrong.n + 1.0 / n) * (1 + 1e-12));
  ExpectFeasible(*model, "after one hinge step");
}

// Documents whose values would overflow x^2 are refused; the model is unchanged.
TEST(GaussianFamily, RefusesOutOfRangeValues) {
  auto model = NewModel("nll");
  ASSERT_TRUE(model);
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  const auto raw = model->stats().raw();
  DocumentBuffer d = RealDoc(0, 1, {1e200});
  Status st = (*learner)->Learn(d.View());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidDocument()) << st.ToString();
  EXPECT_NE(st.message().find("|x|"), std::string::npos) << st.message();
  EXPECT_EQ(raw, model->stats().raw());
  EXPECT_EQ(model->learner_state().updates, 0u);
}

// ---- Snapshots, clones, classes ---------------------------------------------

TEST(GaussianFamily, SnapshotRoundTripIsExact) {
  std::vector<Sample> train(ToyTrain().begin(), ToyTrain().begin() + 3000);
  ToySettings ts{"ncll", 0.01, 2, {{"prior", "10"}, {"prior_variance", "2.5"}}};
  auto model = TrainToy(ts, train);
  ASSERT_TRUE(model);
  const std::string path = testing::TempDir("gaussian_snapshot") + "/model.trib";
  ASSERT_TRUE(model->Save(path).ok());
  auto loaded = Model::Load(path, BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& l = **loaded;
  EXPECT_EQ(l.family().name, "gaussian");
  EXPECT_EQ(l.family().version, "1.0.0");
  ASSERT_EQ(l.stats().size(), model->stats().size());
  EXPECT_EQ(0,
            std::memcmp(l.stats().raw().data(), model->stats().raw().data(), model->stats().size() * sizeof(double)));
  ASSERT_EQ(l.stats().blocks().size(), model->stats().blocks().size());
  for (size_t b = 0; b < l.stats().blocks().size(); ++b) {
    const trib_block& x = l.stats().blocks()[b];
    const trib_block& y = model->stats().blocks()[b];
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(0, std::memcmp(&x.scale, &y.scale, sizeof(double))) << b;
    EXPECT_EQ(0, std::memcmp(&x.shift, &y.shift, sizeof(double))) << b;
    EXPECT_EQ(x.nu, y.nu);
    EXPECT_EQ(x.alpha_bar, y.alpha_bar);
  }
  auto s1 = model->NewScoringState();
  auto s2 = l.NewScoringState();
  ASSERT_TRUE(s1.ok() && s2.ok());
  for (size_t i = 0; i < 200; ++i) {
    DocumentBuffer d = RealDoc(i, -1, {ToyTest()[i].x});
    double a[2], b[2];
    ASSERT_TRUE(model->Score(d.View(), s1->get(), a).ok());
    ASSERT_TRUE(l.Score(d.View(), s2->get(), b).ok());
    EXPECT_EQ(0, std::memcmp(a, b, sizeof(a))) << i;
  }
}

TEST(GaussianFamily, CloneScoresIdentically) {
  std::vector<Sample> train(ToyTrain().begin(), ToyTrain().begin() + 500);
  auto model = TrainToy({"hinge", 0.01, 1, {{"prior", "10"}}}, train);
  ASSERT_TRUE(model);
  auto clone = model->Clone();
  ASSERT_TRUE(clone.ok());
  auto s1 = model->NewScoringState();
  auto s2 = (*clone)->NewScoringState();
  ASSERT_TRUE(s1.ok() && s2.ok());
  DocumentBuffer d = RealDoc(0, -1, {-4.9});
  double a[2], b[2];
  ASSERT_TRUE(model->Score(d.View(), s1->get(), a).ok());
  ASSERT_TRUE((*clone)->Score(d.View(), s2->get(), b).ok());
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
}

TEST(GaussianFamily, AddClassKeepsOldClassesAndStartsNewOneAtThePrior) {
  v1::Schema proto = RealSchema(2, 2);
  proto.set_open_classes(true);
  auto created = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss("nll"), Schema(proto), {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto model = std::move(created).value();
  model->learner_state().effective_size = 20;
  auto learner = SdemLearner::Create(model.get());
  ASSERT_TRUE(learner.ok());
  for (uint64_t i = 0; i < 20; ++i) {
    DocumentBuffer d = RealDoc(i, static_cast<int64_t>(i % 2), {static_cast<double>(i), -0.5 * static_cast<double>(i)});
    ASSERT_TRUE((*learner)->Learn(d.View()).ok());
  }
  std::vector<ClassStats> before;
  for (uint32_t k = 0; k < 2; ++k)
    for (uint32_t j = 0; j < 2; ++j) before.push_back(StatsOf(*model, k, j));
  ASSERT_TRUE(model->AddClass("c2").ok());
  ASSERT_EQ(model->num_classes(), 3u);
  for (uint32_t k = 0; k < 2; ++k) {
    for (uint32_t j = 0; j < 2; ++j) {
      const ClassStats c = StatsOf(*model, k, j);
      EXPECT_EQ(c.n, before[k * 2 + j].n);
      EXPECT_EQ(c.s, before[k * 2 + j].s);
      EXPECT_EQ(c.v, before[k * 2 + j].v);
    }
  }
  ExpectFeasible(*model, "after AddClass");
  auto state = model->NewScoringState();
  ASSERT_TRUE(state.ok());
  DocumentBuffer d = RealDoc(0, -1, {1.0, 2.0});
  double scores[3];
  ASSERT_TRUE(model->Score(d.View(), state->get(), scores).ok());
  for (double s : scores) EXPECT_TRUE(std::isfinite(s));
}

// ---- Options and schema ------------------------------------------------------

TEST(GaussianFamily, RefusesUnknownOption) {
  auto m = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss("nll"), Schema(RealSchema(1, 2)), {{"smoothing", "3"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(m.status().message().find("smoothing"), std::string::npos) << m.status().message();
}

TEST(GaussianFamily, RefusesBadOptionValues) {
  for (const auto& [key, value] :
       Options{{"prior", "0"}, {"prior", "-1"}, {"prior", "abc"}, {"prior_variance", "0"}, {"prior_variance", "nan"}}) {
    auto m = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss("nll"), Schema(RealSchema(1, 2)), {{key, value}});
    ASSERT_FALSE(m.ok()) << key << "=" << value;
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(m.status().message().find(key), std::string::npos) << m.status().message();
  }
}

TEST(GaussianFamily, OptionsSetTheInitialStatistics) {
  auto model = NewModel("nll", 1, 2, {{"prior", "4"}, {"prior_variance", "0.25"}});
  ASSERT_TRUE(model);
  const ClassStats c = StatsOf(*model, 1, 0);
  EXPECT_EQ(c.n, 4.0);
  EXPECT_EQ(c.s, 0.0);
  EXPECT_EQ(c.v, 1.0);  // variance 0.25 with pseudo-count 4
}

TEST(GaussianFamily, RefusesSchemaWithoutRealFeatures) {
  auto m = Model::Create(BuiltinFamily("gaussian"), BuiltinLoss("nll"), Schema(testing::TextSchema(5, 2)), {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(m.status().message().find("REAL feature"), std::string::npos) << m.status().message();
}

// ---- Defaults under a gradient loss (ABI 1.6) --------------------------------

// Two separated blobs in 2-D (centres (-3, 3) and (3, -3) times `scale`,
// standard deviation `scale`), labels at random: prequential accuracy of one
// learner over the stream (each document predicted, then learned).
double PrequentialBlobs(Model* m, double scale, uint64_t seed) {
  auto learner = Learner::Create(m, LearnerOptions());
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  if (!learner.ok()) return 0;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise;
  size_t correct = 0;
  const size_t n = 4000;
  LearnResult r;
  for (size_t i = 0; i < n; ++i) {
    const int64_t y = static_cast<int64_t>(rng() % 2);
    const double c = y == 1 ? 3.0 : -3.0;
    DocumentBuffer d = RealDoc(i, y, {scale * (c + noise(rng)), scale * (-c + noise(rng))});
    EXPECT_TRUE((*learner)->Learn(d.View(), &r).ok());
    correct += static_cast<int64_t>(r.predicted) == y;
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

// A new model's defaults (NewModel: what prequential, serve, Python and
// `train --select off` use) under NCLL and hinge: the family's gradient_prior
// (10, recorded in the model's options) and gradient_lambda (0.01). With the
// paper's prior 1 and the losses' lambda 1e-4 one learner predicted at chance
// (0.505) at every scale.
TEST(GaussianDefaults, OneLearnerUnderGradientLossesLearnsSeparatedBlobs) {
  for (const char* loss : {"ncll", "hinge"}) {
    for (double scale : {0.1, 100.0}) {
      SCOPED_TRACE(std::string(loss) + " scale " + std::to_string(scale));
      ModelConfig cfg;
      cfg.family = "gaussian";
      cfg.loss = loss;
      auto m = tributary::NewModel(cfg, BuiltinRegistry(), RealSchema(2, 2), 0);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ((*m)->family_options(), (Options{{"prior", "10"}}));
      EXPECT_EQ((*m)->learner_state().schedule.lambda, 0.01);
      EXPECT_EQ(StatsOf(**m, 0, 0).n, 10.0);
      EXPECT_GE(PrequentialBlobs(m->get(), scale, 7), 0.97);
    }
  }
}

// What the user sets wins, and a loss that decays the statistics (NLL, c = 1)
// keeps the paper's prior and its own lambda.
TEST(GaussianDefaults, GivenSettingsAndNllAreLeftAlone) {
  ModelConfig cfg;
  cfg.family = "gaussian";
  cfg.loss = "ncll";
  cfg.family_options = {{"prior", "1"}};
  cfg.lambda = 1e-4;
  auto m = tributary::NewModel(cfg, BuiltinRegistry(), RealSchema(2, 2), 0);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->family_options(), (Options{{"prior", "1"}}));
  EXPECT_EQ((*m)->learner_state().schedule.lambda, 1e-4);
  EXPECT_LT(PrequentialBlobs(m->get(), 1.0, 7), 0.7);  // the failure the defaults avoid
  cfg.loss = "nll";
  cfg.family_options.clear();
  cfg.lambda = -1;
  auto nll = tributary::NewModel(cfg, BuiltinRegistry(), RealSchema(2, 2), 0);
  ASSERT_TRUE(nll.ok()) << nll.status().ToString();
  EXPECT_TRUE((*nll)->family_options().empty());
  EXPECT_EQ((*nll)->learner_state().schedule.lambda, 1.0);
  EXPECT_GE(PrequentialBlobs(nll->get(), 1.0, 7), 0.97);
}

}  // namespace
}  // namespace tributary
