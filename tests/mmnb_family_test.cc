// Tests of the "mmnb" family: mixed-membership naive Bayes (Shan & Banerjee
// 2010) learned online by sdEM, with Gaussian (REAL), Poisson (COUNT) and
// categorical features, missing values, the standard (eq. 13-14) and fast
// (eq. 23-24) local steps and the DMMNB label term (App. A.4).
#include <gtest/gtest.h>

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../plugins/shared/dirichlet_fit.h"
#include "test_util.h"
#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/schema.h"
#include "tributary/sdem_learner.h"
#include "tributary/stream_io.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {
namespace {

using testing::BuiltinFamily;
using testing::BuiltinLoss;
using testing::BuiltinRegistry;

// ---- A known MMNB and its documents -------------------------------------------

constexpr uint32_t kK = 3;  // true components
constexpr uint32_t kG = 4;  // Gaussian features
constexpr uint32_t kP = 2;  // Poisson features
constexpr uint32_t kC = 3;  // categorical features
constexpr uint32_t kCard = 4;

struct TrueModel {
  double mean[kG][kK], sd[kG][kK];
  double rate[kP][kK];
  double prob[kC][kK][kCard];
};

// Well separated components: Gaussian means 4 standard deviations apart,
// Poisson rates 1 / 5 / 12, each categorical component peaked on its own value.
TrueModel MakeTrue() {
  TrueModel t{};
  const double means[kK] = {-4.0, 0.0, 4.0};
  for (uint32_t g = 0; g < kG; ++g) {
    for (uint32_t c = 0; c < kK; ++c) {
      t.mean[g][c] = means[(c + g) % kK] + 0.5 * g;
      t.sd[g][c] = 0.8 + 0.2 * c;
    }
  }
  const double rates[kK] = {1.0, 5.0, 12.0};
  for (uint32_t p = 0; p < kP; ++p)
    for (uint32_t c = 0; c < kK; ++c) t.rate[p][c] = rates[(c + 2 * p) % kK];
  for (uint32_t j = 0; j < kC; ++j) {
    for (uint32_t c = 0; c < kK; ++c) {
      for (uint32_t r = 0; r < kCard; ++r) t.prob[j][c][r] = 0.1;
      t.prob[j][c][(c + j) % kCard] = 0.7;
    }
  }
  return t;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  double Uniform() { return (static_cast<double>(g_() >> 11) + 0.5) * 0x1.0p-53; }
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // Marsaglia-Tsang; shape < 1 through Gamma(a + 1) U^(1/a).
  double Gamma(double a) {
    if (a < 1) return Gamma(a + 1) * std::pow(Uniform(), 1.0 / a);
    const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = Normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = Uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
  uint32_t Discrete(const double* p, uint32_t n) {
    double u = Uniform(), acc = 0;
    for (uint32_t i = 0; i + 1 < n; ++i) {
      acc += p[i];
      if (u < acc) return i;
    }
    return n - 1;
  }
  double Poisson(double lambda) {  // Knuth (small rates only)
    const double l = std::exp(-lambda);
    double k = 0, p = 1;
    do {
      k += 1;
      p *= Uniform();
    } while (p > l);
    return k - 1;
  }

 private:
  std::mt19937_64 g_;
};

struct Sample {
  std::vector<double> reals;  // G Gaussian then P counts
  std::vector<uint32_t> cats;
  std::vector<uint8_t> real_missing, cat_missing;  // empty: nothing missing
  int64_t label;                                   // argmax of the memberships
};

// pi ~ Dirichlet(alpha); each feature draws z_j ~ pi and x_j from component
// z_j (§3's generative process); each feature is missing with probability
// `missing`, never all of them.
// (alpha: one per component.)
std::vector<Sample> GenerateWith(const TrueModel& t, uint64_t seed, size_t n, const std::vector<double>& alpha,
                                 double missing) {
  Rng rng(seed);
  std::vector<Sample> out(n);
  for (auto& s : out) {
    double pi[kK], tot = 0;
    for (uint32_t c = 0; c < kK; ++c) tot += (pi[c] = rng.Gamma(alpha[c]));
    for (double& p : pi) p /= tot;
    s.label = std::max_element(pi, pi + kK) - pi;
    s.reals.resize(kG + kP);
    s.cats.resize(kC);
    for (uint32_t g = 0; g < kG; ++g) {
      const uint32_t z = rng.Discrete(pi, kK);
      s.reals[g] = t.mean[g][z] + t.sd[g][z] * rng.Normal();
    }
    for (uint32_t p = 0; p < kP; ++p) s.reals[kG + p] = rng.Poisson(t.rate[p][rng.Discrete(pi, kK)]);
    for (uint32_t j = 0; j < kC; ++j) s.cats[j] = rng.Discrete(t.prob[j][rng.Discrete(pi, kK)], kCard);
    if (missing > 0) {
      s.real_missing.assign(kG + kP, 0);
      s.cat_missing.assign(kC, 0);
      uint32_t present = 0;
      for (auto& f : s.real_missing) present += !(f = rng.Uniform() < missing);
      for (auto& f : s.cat_missing) present += !(f = rng.Uniform() < missing);
      if (present == 0) s.real_missing[0] = 0;
      for (uint32_t i = 0; i < kG + kP; ++i)
        if (s.real_missing[i]) s.reals[i] = 0;
      for (uint32_t j = 0; j < kC; ++j)
        if (s.cat_missing[j]) s.cats[j] = 0;
    }
  }
  return out;
}

std::vector<Sample> Generate(const TrueModel& t, uint64_t seed, size_t n, double alpha, double missing) {
  return GenerateWith(t, seed, n, std::vector<double>(kK, alpha), missing);
}

v1::Schema MixedSchema(uint32_t classes) {
  v1::Schema s;
  for (uint32_t g = 0; g < kG; ++g) {
    auto* f = s.add_features();
    f->set_name("g" + std::to_string(g));
    f->set_kind(v1::FeatureSpec::REAL);
  }
  for (uint32_t p = 0; p < kP; ++p) {
    auto* f = s.add_features();
    f->set_name("p" + std::to_string(p));
    f->set_kind(v1::FeatureSpec::COUNT);
  }
  for (uint32_t j = 0; j < kC; ++j) {
    auto* f = s.add_features();
    f->set_name("c" + std::to_string(j));
    f->set_kind(v1::FeatureSpec::CATEGORICAL);
    for (uint32_t r = 0; r < kCard; ++r) f->add_categories("v" + std::to_string(r));
  }
  for (uint32_t k = 0; k < classes; ++k) s.add_class_names("y" + std::to_string(k));
  return s;
}

ModelSchema Schema(const v1::Schema& proto) {
  auto s = ModelSchema::FromProto(proto);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.value();
}

void Fill(const Sample& s, uint64_t index, bool with_label, DocumentBuffer* d) {
  d->index = index;
  d->id = "d" + std::to_string(index);
  d->label = with_label ? s.label : -1;
  d->reals = s.reals;
  d->categoricals = s.cats;
  d->real_missing = s.real_missing;
  d->categorical_missing = s.cat_missing;
}

struct TrainSettings {
  std::string loss = "nll";
  Options options;
  int epochs = 1;
  uint64_t seed = 1;
  bool labels = false;
  StepSchedule schedule;  // default: rho_t = 1/(1+t)
};

std::unique_ptr<Model> NewModel(const TrainSettings& ts, uint32_t classes, size_t n) {
  auto m =
      Model::Create(BuiltinFamily("mmnb"), BuiltinLoss(ts.loss), Schema(MixedSchema(classes)), ts.options, ts.seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  auto model = std::move(m).value();
  model->learner_state().effective_size = static_cast<double>(n);
  model->learner_state().schedule = ts.schedule;
  // What the program does right after creating a model: rebuild with n.
  EXPECT_TRUE(model->Rebuild(trib_step{0.0, static_cast<double>(n), 0.0, 0}).ok());
  return model;
}

// Trains on `data` for ts.epochs passes in stream order (n = |data|).
std::unique_ptr<Model> Train(const TrainSettings& ts, const std::vector<Sample>& data, uint32_t classes = kK) {
  auto model = NewModel(ts, classes, data.size());
  if (!model) return nullptr;
  auto learner = SdemLearner::Create(model.get(), ts.seed);
  EXPECT_TRUE(learner.ok()) << learner.status().ToString();
  if (!learner.ok()) return nullptr;
  DocumentBuffer d;
  for (int e = 0; e < ts.epochs; ++e) {
    for (size_t i = 0; i < data.size(); ++i) {
      Fill(data[i], i, ts.labels, &d);
      Status st = (*learner)->Learn(d.View());
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return nullptr;
    }
  }
  return model;
}

double LogSumExp(const double* x, uint32_t n) {
  const double mx = *std::max_element(x, x + n);
  double z = 0;
  for (uint32_t i = 0; i < n; ++i) z += std::exp(x[i] - mx);
  return mx + std::log(z);
}

// ---- Reading the learned parameters (layout: see plugins/mmnb/mmnb.cc) -----------

struct Learned {
  double mean[kG][kK], var[kG][kK];
  double rate[kP][kK];
  double prob[kC][kK][kCard];
};

// Blocks in order: Gaussian N, S, V; Poisson N, S; categorical M
// (feature-major, runs of K components).
Learned Read(const Model& m, uint32_t K = kK) {
  Learned l{};
  const auto& b = m.stats().blocks();
  const auto& st = m.stats();
  for (uint32_t g = 0; g < kG; ++g) {
    for (uint32_t c = 0; c < K && c < kK; ++c) {
      const uint64_t i = uint64_t{g} * K + c;
      const double n = st.Mu(b[0].offset + i), s = st.Mu(b[1].offset + i), v = st.Mu(b[2].offset + i);
      l.mean[g][c] = s / n;
      l.var[g][c] = v / n - (s / n) * (s / n);
    }
  }
  for (uint32_t p = 0; p < kP; ++p) {
    for (uint32_t c = 0; c < K && c < kK; ++c) {
      const uint64_t i = uint64_t{p} * K + c;
      l.rate[p][c] = st.Mu(b[4].offset + i) / st.Mu(b[3].offset + i);
    }
  }
  for (uint32_t j = 0; j < kC; ++j) {
    for (uint32_t c = 0; c < K && c < kK; ++c) {
      double tot = 0;
      for (uint32_t r = 0; r < kCard; ++r) tot += st.Mu(b[5].offset + (uint64_t{j} * kCard + r) * K + c);
      for (uint32_t r = 0; r < kCard; ++r)
        l.prob[j][c][r] = st.Mu(b[5].offset + (uint64_t{j} * kCard + r) * K + c) / tot;
    }
  }
  return l;
}

struct Recovery {
  double mean_err = 1e300;  // max |learned mean - true mean| / true sd
  double sd_rel_err = 0;    // max |learned sd / true sd - 1|
  double rate_rel_err = 0;  // max |learned rate / true rate - 1|
  double prob_err = 0;      // max |learned p - true p|
  std::vector<int> perm;    // true component c <-> learned perm[c]
};

// Optimal matching over the 3! permutations, by the Gaussian means.
Recovery Match(const TrueModel& t, const Learned& l) {
  std::vector<int> perm(kK);
  std::iota(perm.begin(), perm.end(), 0);
  Recovery best;
  do {
    Recovery r;
    r.mean_err = 0;
    r.perm = perm;
    for (uint32_t g = 0; g < kG; ++g) {
      for (uint32_t c = 0; c < kK; ++c) {
        r.mean_err = std::max(r.mean_err, std::fabs(l.mean[g][perm[c]] - t.mean[g][c]) / t.sd[g][c]);
        r.sd_rel_err = std::max(r.sd_rel_err, std::fabs(std::sqrt(l.var[g][perm[c]]) / t.sd[g][c] - 1));
      }
    }
    for (uint32_t p = 0; p < kP; ++p)
      for (uint32_t c = 0; c < kK; ++c)
        r.rate_rel_err = std::max(r.rate_rel_err, std::fabs(l.rate[p][perm[c]] / t.rate[p][c] - 1));
    for (uint32_t j = 0; j < kC; ++j)
      for (uint32_t c = 0; c < kK; ++c)
        for (uint32_t v = 0; v < kCard; ++v)
          r.prob_err = std::max(r.prob_err, std::fabs(l.prob[j][perm[c]][v] - t.prob[j][c][v]));
    if (r.mean_err < best.mean_err) best = r;
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

void Print(const char* what, const Recovery& r) {
  std::printf("[mmnb] %s: mean error %.3f sd, sd rel error %.3f, rate rel error %.3f, prob error %.3f\n", what,
              r.mean_err, r.sd_rel_err, r.rate_rel_err, r.prob_err);
}

// Every statistic finite and feasible, every score finite.
// With learn_alpha the last block holds E[log pi] (negative): a Dirichlet's
// mean log-memberships instead (log sum exp < 0).
void ExpectFeasible(const Model& m, const std::string& where, bool learn_alpha = false) {
  const auto& st = m.stats();
  for (uint64_t i = 0; i < st.size(); ++i) {
    ASSERT_TRUE(std::isfinite(st.Mu(i)) && std::isfinite(st.raw()[i])) << where << ": mu[" << i << "]";
  }
  const auto& b = st.blocks();
  for (size_t k = 0; k < b.size(); ++k) {
    ASSERT_GT(b[k].scale, 0) << where;
    ASSERT_GE(b[k].shift, 0) << where;
    if (k == 1) continue;  // Gaussian sums: any sign
    if (learn_alpha && k + 1 == b.size()) {
      double z = 0;
      for (uint64_t i = b[k].offset; i < b[k].offset + b[k].size; ++i) z += std::exp(st.Mu(i));
      ASSERT_LT(z, 1.0) << where << ": E[log pi] statistics outside a Dirichlet's";
      continue;
    }
    for (uint64_t i = b[k].offset; i < b[k].offset + b[k].size; ++i) {
      ASSERT_GT(st.Mu(i), 0) << where << ": block " << k << " entry " << i - b[k].offset;
    }
  }
  const uint32_t K = static_cast<uint32_t>(b[0].size / kG);
  for (uint64_t i = 0; i < b[0].size; ++i) {
    const double n = st.Mu(b[0].offset + i), s = st.Mu(b[1].offset + i), v = st.Mu(b[2].offset + i);
    ASSERT_GT(v / n - (s / n) * (s / n), 0) << where << ": Gaussian " << i / K << " component " << i % K;
  }
}

constexpr double kTrueAlpha = 0.2;
constexpr size_t kTrainDocs = 3000;

const TrueModel& Truth() {
  static const TrueModel t = MakeTrue();
  return t;
}
const std::vector<Sample>& TrainData() {
  static const auto* d = new std::vector<Sample>(Generate(Truth(), 11, kTrainDocs, kTrueAlpha, 0.0));
  return *d;
}

// The schedule and warm-up that recover the components: rho_t = (10 + t)^-0.7
// (--schedule poly --tau0 10 --kappa 0.7; the default rho_0 = 1 lets the
// first document overwrite the random initialisation, and every component
// starts from it) and the first 1000 documents with the fast step, whose
// shared phi ties a document's features to the same components; with the
// standard step from the start, 2 of 5 initialisation seeds end in a local
// optimum where components are matched differently in different features.
TrainSettings Recover(const char* inference, uint64_t seed = 1) {
  TrainSettings ts;
  ts.options = {{"components", "3"}, {"inference", inference}, {"alpha", "0.2"}, {"warmup", "1000"}};
  ts.epochs = 5;
  ts.seed = seed;
  ts.schedule.kind = StepSchedule::Kind::kPolynomial;
  ts.schedule.tau0 = 10;
  ts.schedule.kappa = 0.7;
  return ts;
}

// Every learned parameter is closer to its matched true component than to any
// other true component of the same feature (the right structure, allowing
// the fast step's shrinkage).
bool Consistent(const TrueModel& t, const Learned& l, const std::vector<int>& perm) {
  for (uint32_t c = 0; c < kK; ++c) {
    for (uint32_t o = 0; o < kK; ++o) {
      if (o == c) continue;
      for (uint32_t g = 0; g < kG; ++g) {
        const double x = l.mean[g][perm[c]];
        if (std::fabs(x - t.mean[g][c]) >= std::fabs(x - t.mean[g][o])) return false;
      }
      for (uint32_t p = 0; p < kP; ++p) {
        const double x = std::log(l.rate[p][perm[c]]);
        if (std::fabs(x - std::log(t.rate[p][c])) >= std::fabs(x - std::log(t.rate[p][o]))) return false;
      }
    }
    for (uint32_t j = 0; j < kC; ++j) {
      const double* lp = l.prob[j][perm[c]];
      const double* tp = t.prob[j][c];
      if (std::max_element(lp, lp + kCard) - lp != std::max_element(tp, tp + kCard) - tp) return false;
    }
  }
  return true;
}

// ---- Recovery -------------------------------------------------------------------

// Standard local step (eq. 13-14), 3000 documents with mixed memberships
// (alpha = 0.2), 5 passes. Measured: mean error 0.100 sd, sd 8.6%, rates
// 5.2%, probabilities 0.042 on every one of 5 initialisation seeds.
TEST(MmnbRecovery, StandardMatchesTrueComponents) {
  for (uint64_t seed : {1, 2, 3}) {
    auto model = Train(Recover("standard", seed), TrainData());
    ASSERT_TRUE(model);
    ExpectFeasible(*model, "standard");
    const Recovery r = Match(Truth(), Read(*model));
    Print(("standard, seed " + std::to_string(seed)).c_str(), r);
    EXPECT_LT(r.mean_err, 0.25) << seed;
    EXPECT_LT(r.sd_rel_err, 0.2) << seed;
    EXPECT_LT(r.rate_rel_err, 0.15) << seed;
    EXPECT_LT(r.prob_err, 0.1) << seed;
    EXPECT_TRUE(Consistent(Truth(), Read(*model), r.perm)) << seed;
  }
}

// ~20% of the features missing (never all of a document's): still recovered.
// Measured: mean error 0.100 sd, sd 5.9%, rates 6.0%, probabilities 0.082.
TEST(MmnbRecovery, StandardWithMissingFeatures) {
  const auto data = Generate(Truth(), 12, kTrainDocs, kTrueAlpha, 0.2);
  size_t missing = 0, total = 0;
  for (const auto& s : data) {
    for (auto f : s.real_missing) missing += f;
    for (auto f : s.cat_missing) missing += f;
    total += kG + kP + kC;
  }
  EXPECT_NEAR(static_cast<double>(missing) / static_cast<double>(total), 0.2, 0.02);
  auto model = Train(Recover("standard"), data);
  ASSERT_TRUE(model);
  ExpectFeasible(*model, "missing");
  const Recovery r = Match(Truth(), Read(*model));
  Print("standard, 20% missing", r);
  EXPECT_LT(r.mean_err, 0.3);
  EXPECT_LT(r.sd_rel_err, 0.2);
  EXPECT_LT(r.rate_rel_err, 0.2);
  EXPECT_LT(r.prob_err, 0.12);
  EXPECT_TRUE(Consistent(Truth(), Read(*model), r.perm));
}

// The fast local step (eq. 23-24) shares one phi among a document's features,
// so a mixed document spreads all its features over its components: the
// learned components have the right structure but are shrunk towards each
// other (measured: means off by up to 1.65 sd, sds up to 3.5x too wide, on
// alpha = 0.2 data).
TEST(MmnbRecovery, FastFindsTheComponentStructure) {
  auto model = Train(Recover("fast"), TrainData());
  ASSERT_TRUE(model);
  ExpectFeasible(*model, "fast");
  const Learned l = Read(*model);
  const Recovery r = Match(Truth(), l);
  Print("fast, no missing", r);
  EXPECT_TRUE(Consistent(Truth(), l, r.perm));
  EXPECT_LT(r.mean_err, 2.0);
  EXPECT_LT(r.rate_rel_err, 0.6);
}

// Scores are log E[pi_c] + L: their softmax is the membership and their
// log-sum-exp a lower bound on log p(x); documents generated mostly by one
// component get it as the argmax (after the matching).
TEST(MmnbRecovery, ScoresAreMembershipsAndLowerBound) {
  auto model = Train(Recover("standard"), TrainData());
  ASSERT_TRUE(model);
  ASSERT_TRUE(model->latent_outputs());
  ASSERT_EQ(model->num_outputs(), kK);
  const Recovery r = Match(Truth(), Read(*model));
  const auto test = Generate(Truth(), 99, 1000, kTrueAlpha, 0.0);
  auto state = model->NewScoringState();
  ASSERT_TRUE(state.ok());
  DocumentBuffer d;
  double scores[kK];
  size_t correct = 0;
  double mean_lb = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    Fill(test[i], i, false, &d);
    ASSERT_TRUE(model->Score(d.View(), state->get(), scores).ok());
    const int best = static_cast<int>(std::max_element(scores, scores + kK) - scores);
    correct += best == r.perm[static_cast<size_t>(test[i].label)];
    double mx = *std::max_element(scores, scores + kK), z = 0;
    for (double s : scores) z += std::exp(s - mx);
    mean_lb += (mx + std::log(z)) / static_cast<double>(test.size());
  }
  const double acc = static_cast<double>(correct) / static_cast<double>(test.size());
  std::printf("[mmnb] dominant-component accuracy %.3f, mean lower bound %.3f nats per document\n", acc, mean_lb);
  EXPECT_GT(acc, 0.85);
  // The bound of the true model's data under a far-off model is much lower.
  auto untrained = NewModel(Recover("standard"), kK, 1000);
  double lb_untrained = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    Fill(test[i], i, false, &d);
    ASSERT_TRUE(untrained->Score(d.View(), state->get(), scores).ok());
    lb_untrained += LogSumExp(scores, kK) / static_cast<double>(test.size());
  }
  EXPECT_GT(mean_lb, lb_untrained + 5.0);
}

// ---- Discriminative (DMMNB, App. A.4) ---------------------------------------------

// Labels = the dominant component of each document; trained with nll on the
// labelled stream, score() ranks log p(x, y) and beats chance (1/3) clearly.
TEST(MmnbDiscriminative, PredictsMembershipLabels) {
  for (const char* inference : {"standard", "fast"}) {
    TrainSettings ts = Recover(inference);
    ts.options.push_back({"discriminative", "1"});
    ts.labels = true;
    auto model = Train(ts, TrainData(), kK);
    ASSERT_TRUE(model);
    ASSERT_FALSE(model->latent_outputs());
    ExpectFeasible(*model, "discriminative");
    const auto test = Generate(Truth(), 98, 1000, kTrueAlpha, 0.1);
    auto state = model->NewScoringState();
    ASSERT_TRUE(state.ok());
    DocumentBuffer d;
    double scores[kK];
    size_t correct = 0;
    for (size_t i = 0; i < test.size(); ++i) {
      Fill(test[i], i, false, &d);
      ASSERT_TRUE(model->Score(d.View(), state->get(), scores).ok());
      correct += (std::max_element(scores, scores + kK) - scores) == test[i].label;
    }
    const double acc = static_cast<double>(correct) / static_cast<double>(test.size());
    std::printf("[mmnb] discriminative %s: test accuracy %.3f (chance 0.333)\n", inference, acc);
    EXPECT_GT(acc, 0.75) << inference;
  }
}

// ---- Check-step --------------------------------------------------------------------

// Deliberately large steps: rho = 1 on every document (nll: the decay factor
// is 0, every step re-materialises the blocks; ncll / hinge on the
// discriminative model push statistics below zero). Everything stays finite
// and feasible after every step, and every score is finite.
TEST(MmnbCheckStep, LargeStepsStayFeasible) {
  struct Case {
    const char* loss;
    bool discriminative;
    const char* inference;
  };
  for (const Case& cs : {Case{"nll", false, "standard"}, Case{"nll", false, "fast"}, Case{"ncll", true, "standard"},
                         Case{"hinge", true, "fast"}, Case{"nll", true, "standard"}}) {
    TrainSettings ts;
    ts.loss = cs.loss;
    ts.options = {{"components", "3"}, {"inference", cs.inference}};
    if (cs.discriminative) ts.options.push_back({"discriminative", "1"});
    ts.labels = cs.discriminative;
    ts.schedule.kind = StepSchedule::Kind::kConstant;
    ts.schedule.rho = 1.0;
    const auto data = Generate(Truth(), 5, 150, 0.5, 0.2);
    auto model = NewModel(ts, kK, 10);  // n = 10: the prior's share rho/n is large too
    ASSERT_TRUE(model);
    auto learner = SdemLearner::Create(model.get());
    ASSERT_TRUE(learner.ok());
    DocumentBuffer d;
    auto state = model->NewScoringState();
    double scores[kK];
    const std::string where = std::string(cs.loss) + (cs.discriminative ? " discriminative " : " ") + cs.inference;
    for (size_t i = 0; i < data.size(); ++i) {
      Fill(data[i], i, ts.labels, &d);
      ASSERT_TRUE((*learner)->Learn(d.View()).ok()) << where << " doc " << i;
      ExpectFeasible(*model, where + " after doc " + std::to_string(i));
      ASSERT_TRUE(model->Score(d.View(), state->get(), scores).ok());
      for (double s : scores) ASSERT_TRUE(std::isfinite(s)) << where;
    }
    std::printf("[mmnb] %s: %llu materialisations in %zu steps, all feasible\n", where.c_str(),
                static_cast<unsigned long long>(model->learner_state().materializations), data.size());
  }
}

// ---- Determinism and snapshots -------------------------------------------------------

bool SameStats(const Model& a, const Model& b) {
  if (a.stats().size() != b.stats().size()) return false;
  if (std::memcmp(a.stats().raw().data(), b.stats().raw().data(), a.stats().size() * sizeof(double)) != 0) return false;
  for (size_t k = 0; k < a.stats().blocks().size(); ++k) {
    const auto &x = a.stats().blocks()[k], &y = b.stats().blocks()[k];
    if (std::memcmp(&x.scale, &y.scale, sizeof(double)) != 0 || std::memcmp(&x.shift, &y.shift, sizeof(double)) != 0)
      return false;
  }
  return true;
}

TEST(MmnbDeterminism, SameSeedSameModelBitForBit) {
  const auto data = Generate(Truth(), 21, 400, kTrueAlpha, 0.2);
  TrainSettings ts = Recover("standard", 7);
  ts.epochs = 2;
  auto a = Train(ts, data), b = Train(ts, data);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(SameStats(*a, *b));
  ts.seed = 8;
  auto c = Train(ts, data);
  ASSERT_TRUE(c);
  EXPECT_FALSE(SameStats(*a, *c));
}

// Train on half, save, load, train both on the other half: bit-identical
// (the categorical totals travel through export/import_cache).
TEST(MmnbSnapshot, ResumedModelContinuesBitForBit) {
  for (const char* extra : {"0", "1"}) {
    const auto data = Generate(Truth(), 31, 600, kTrueAlpha, 0.2);
    TrainSettings ts = Recover("standard");
    ts.options.push_back({"discriminative", extra});
    ts.labels = true;
    auto model = NewModel(ts, kK, data.size());
    ASSERT_TRUE(model);
    auto learner = SdemLearner::Create(model.get());
    ASSERT_TRUE(learner.ok());
    DocumentBuffer d;
    for (size_t i = 0; i < 300; ++i) {
      Fill(data[i], i, true, &d);
      ASSERT_TRUE((*learner)->Learn(d.View()).ok());
    }
    const std::string path = testing::TempDir("mmnb_snapshot") + "/m.trib";
    ASSERT_TRUE(model->Save(path).ok());
    auto loaded = Model::Load(path, BuiltinRegistry());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    auto resumed = std::move(loaded).value();
    EXPECT_TRUE(SameStats(*model, *resumed));
    auto learner2 = SdemLearner::Create(resumed.get());
    ASSERT_TRUE(learner2.ok());
    for (size_t i = 300; i < data.size(); ++i) {
      Fill(data[i], i, true, &d);
      ASSERT_TRUE((*learner)->Learn(d.View()).ok());
      ASSERT_TRUE((*learner2)->Learn(d.View()).ok());
    }
    EXPECT_TRUE(SameStats(*model, *resumed)) << "discriminative=" << extra;
  }
}

// ---- Refusals ---------------------------------------------------------------------------

std::string CreateError(const v1::Schema& schema, Options options) {
  auto m = Model::Create(BuiltinFamily("mmnb"), BuiltinLoss("nll"), Schema(schema), std::move(options));
  return m.ok() ? std::string() : m.status().ToString();
}

TEST(MmnbOptions, BadOptionsAndSchemasRefused) {
  const v1::Schema s = MixedSchema(kK);
  EXPECT_NE(CreateError(s, {{"colour", "red"}}).find("unknown option 'colour'"), std::string::npos);
  EXPECT_NE(CreateError(s, {{"components", "0"}}).find("components='0'"), std::string::npos);
  EXPECT_NE(CreateError(s, {{"inference", "exact"}}).find("inference='exact'"), std::string::npos);
  EXPECT_NE(CreateError(s, {{"alpha", "-1"}}).find("alpha='-1'"), std::string::npos);
  EXPECT_NE(CreateError(s, {{"discriminative", "yes"}}).find("discriminative='yes'"), std::string::npos);
  EXPECT_NE(CreateError(s, {{"components", "3"}, {"topics", "4"}}).find("disagree"), std::string::npos);
  EXPECT_EQ(CreateError(s, {{"topics", "4"}}), "");
  v1::Schema one_class = MixedSchema(1);
  EXPECT_NE(CreateError(one_class, {{"discriminative", "1"}}).find(">= 2 classes"), std::string::npos);
  // A text-only schema has nothing this family models.
  EXPECT_NE(CreateError(testing::TextSchema(10, 2), {}).find("needs dense features"), std::string::npos);
  // Latent outputs: K components whatever the classes.
  auto m = Model::Create(BuiltinFamily("mmnb"), BuiltinLoss("nll"), Schema(s), {{"components", "5"}});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*m)->latent_outputs());
  EXPECT_EQ((*m)->num_outputs(), 5u);
}

// A count feature must be an integer >= 0 (the host checks streams; the family
// checks documents handed to it directly).
TEST(MmnbOptions, BadDocumentRefused) {
  auto model = NewModel(Recover("standard"), kK, 10);
  auto state = model->NewScoringState();
  DocumentBuffer d;
  Fill(TrainData()[0], 0, false, &d);
  d.reals[kG] = 2.5;
  double scores[kK];
  Status st = model->Score(d.View(), state->get(), scores);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("count feature"), std::string::npos) << st.ToString();
}

// ---- The program, end to end -------------------------------------------------------------

void WriteStream(const std::string& path, const std::vector<Sample>& data) {
  v1::StreamHeader h = NewStreamHeader();
  *h.mutable_schema() = MixedSchema(kK);
  h.set_document_count(data.size());
  auto w = DocumentWriter::Create(path, h);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (size_t i = 0; i < data.size(); ++i) {
    v1::Document doc;
    doc.set_id("d" + std::to_string(i));
    doc.set_label("y" + std::to_string(data[i].label));
    for (double x : data[i].reals) doc.add_reals(x);
    for (uint32_t c : data[i].cats) doc.add_categoricals(c);
    for (uint32_t f = 0; f < data[i].real_missing.size(); ++f)
      if (data[i].real_missing[f]) doc.add_missing_features(f);
    for (uint32_t f = 0; f < data[i].cat_missing.size(); ++f)
      if (data[i].cat_missing[f]) doc.add_missing_features(kG + kP + f);
    ASSERT_TRUE((*w)->Write(doc).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(MmnbProgram, TrainAndEvalEndToEnd) {
  const std::string dir = testing::TempDir("mmnb_cli");
  WriteStream(dir + "/train.pb", Generate(Truth(), 41, 2000, kTrueAlpha, 0.1));
  WriteStream(dir + "/test.pb", Generate(Truth(), 42, 500, kTrueAlpha, 0.1));
  const std::string t = testing::ProgramPath();
  std::string out;
  int rc = testing::RunCommand(t + " train --family mmnb --loss nll --components 3 --opt alpha=0.2 --opt warmup=1000" +
                                   " --schedule poly --tau0 10 --kappa 0.7 --epochs 3 --quiet --in " + dir +
                                   "/train.pb --out " + dir + "/m.trib",
                               &out, true);
  ASSERT_EQ(rc, 0) << out;
  rc = testing::RunCommand(t + " eval --model " + dir + "/m.trib --in " + dir + "/test.pb --json", &out, true);
  ASSERT_EQ(rc, 0) << out;
  std::printf("[mmnb] tributary eval: %s\n", out.c_str());
  // Clustering accuracy of the dominant component (Hungarian mapping).
  const size_t at = out.find("\"accuracy\":");
  ASSERT_NE(at, std::string::npos) << out;
  const double acc = std::atof(out.c_str() + at + 11);
  EXPECT_GT(acc, 0.8) << out;
  EXPECT_NE(out.find("\"perplexity\""), std::string::npos);
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

// ---- Learned alpha (learn_alpha=1, eq. 21 / 52) ---------------------------------

double Psi(double x) { return boost::math::digamma(x); }
double Psi1(double x) { return boost::math::trigamma(x); }

// eq. 51 / 52's Newton iteration finds the Dirichlet whose mean
// log-components are t: from t computed for known alphas (symmetric,
// skewed, tiny, large, K = 2 and 20), from a start far away.
TEST(MmnbLearnedAlpha, NewtonStepFindsTheDirichletOfItsMeanLogs) {
  const std::vector<std::vector<double>> cases = {{0.2, 0.2, 0.2}, {0.1, 0.3, 0.8}, {0.01, 0.05, 2.0},
                                                  {5, 20, 50},     {0.7, 0.04},     std::vector<double>(20, 0.05)};
  for (const auto& alpha : cases) {
    double sum = 0;
    for (double a : alpha) sum += a;
    std::vector<double> t;
    for (double a : alpha) t.push_back(Psi(a) - Psi(sum));
    for (double start : {1.0 / static_cast<double>(alpha.size()), 10.0}) {
      std::vector<double> fit;
      const uint32_t steps =
          dirichlet::FitDirichlet(t.data(), static_cast<uint32_t>(alpha.size()), start, Psi, Psi1, &fit);
      EXPECT_LT(steps, 200u) << "did not converge from " << start;
      for (size_t c = 0; c < alpha.size(); ++c) {
        EXPECT_NEAR(fit[c], alpha[c], 1e-8 * alpha[c]) << "component " << c << " from " << start;
      }
    }
  }
}

// Learned from the stream: memberships drawn from Dirichlet(0.3, 0.3, 0.1)
// (an asymmetric prior the option's symmetric 0.2 cannot express), the
// model's learned alpha (fitted to its E[log pi] statistics, read here
// through the same step) has the truth's proportions after the components
// are matched (alpha / sum alpha within 0.03; measured 0.42 0.43 0.15 vs
// 0.43 0.43 0.14) and is flatter than the truth by a common factor (measured
// 1.7: with nine features a document's posterior over its memberships stays
// broad, and E[log pi] under it is closer to uniform than log pi; the
// variational EM estimate of alpha, the paper's too, inherits this), and it
// fits held-out documents better than the fixed symmetric prior (a higher
// mean bound on log p(x)). The model predicts with it: a document with no
// feature present gets the memberships alpha / sum alpha.
TEST(MmnbLearnedAlpha, LearnsAnAsymmetricMembershipPrior) {
  const std::vector<double> truth = {0.3, 0.3, 0.1};
  const auto data = GenerateWith(Truth(), 17, kTrainDocs, truth, 0.0);
  const auto test = GenerateWith(Truth(), 18, 1000, truth, 0.0);
  TrainSettings ts = Recover("standard", 1);
  auto fixed = Train(ts, data);
  ts.options.emplace_back("learn_alpha", "1");
  auto model = Train(ts, data);
  ASSERT_TRUE(model && fixed);
  ExpectFeasible(*model, "learn_alpha", true);
  const Recovery r = Match(Truth(), Read(*model));
  Print("learn_alpha", r);
  ASSERT_TRUE(Consistent(Truth(), Read(*model), r.perm));
  // The E[log pi] block is the last one.
  const trib_block& b = model->stats().blocks().back();
  ASSERT_EQ(b.size, kK);
  std::vector<double> t(kK), alpha;
  for (uint32_t c = 0; c < kK; ++c) t[c] = model->stats().Mu(b.offset + c);
  dirichlet::FitDirichlet(t.data(), kK, 0.2, Psi, Psi1, &alpha);
  const double asum = alpha[0] + alpha[1] + alpha[2], tsum = truth[0] + truth[1] + truth[2];
  for (uint32_t c = 0; c < kK; ++c) {
    std::printf("component %u: true alpha %.3f, learned %.3f\n", c, truth[c], alpha[r.perm[c]]);
    EXPECT_NEAR(alpha[r.perm[c]] / asum, truth[c] / tsum, 0.03) << c;
  }
  EXPECT_GT(asum, tsum) << "flatter than the truth, not sharper";
  EXPECT_LT(asum, 2.5 * tsum);
  // Held-out fit: the mean bound on log p(x) (the scores' log-sum-exp).
  auto mean_bound = [&](const Model& m) {
    auto st = m.NewScoringState();
    std::vector<double> sc(kK);
    DocumentBuffer d;
    double total = 0;
    for (size_t i = 0; i < test.size(); ++i) {
      Fill(test[i], i, false, &d);
      EXPECT_TRUE(m.Score(d.View(), st->get(), sc.data()).ok());
      total += LogSumExp(sc.data(), kK);
    }
    return total / static_cast<double>(test.size());
  };
  const double learned_fit = mean_bound(*model), fixed_fit = mean_bound(*fixed);
  std::printf("held-out mean bound: learned alpha %.4f, fixed alpha 0.2 %.4f\n", learned_fit, fixed_fit);
  EXPECT_GT(learned_fit, fixed_fit);
  // Scores of a document without features: log(alpha_c / sum alpha) + L.
  DocumentBuffer empty;
  Sample none;
  none.reals.assign(kG + kP, 0.0);
  none.cats.assign(kC, 0);
  none.real_missing.assign(kG + kP, 1);
  none.cat_missing.assign(kC, 1);
  Fill(none, 0, false, &empty);
  auto st = model->NewScoringState();
  ASSERT_TRUE(st.ok());
  std::vector<double> scores(kK);
  ASSERT_TRUE(model->Score(empty.View(), st->get(), scores.data()).ok());
  const double lse = LogSumExp(scores.data(), kK);
  for (uint32_t c = 0; c < kK; ++c) EXPECT_NEAR(std::exp(scores[c] - lse), alpha[c] / asum, 1e-9) << c;
}

// alpha=learn (the spelling) is learn_alpha=1 started at 1/K.
TEST(MmnbLearnedAlpha, AlphaLearnIsLearnAlphaFromOneOverK) {
  const auto data = GenerateWith(Truth(), 23, 300, {0.3, 0.3, 0.1}, 0.0);
  TrainSettings a = Recover("fast", 1), b = Recover("fast", 1);
  a.epochs = b.epochs = 1;
  a.options = {{"components", "3"}, {"inference", "fast"}, {"alpha", "learn"}};
  b.options = {{"components", "3"}, {"inference", "fast"}, {"alpha", "0.333333333333333333"}, {"learn_alpha", "1"}};
  auto ma = Train(a, data), mb = Train(b, data);
  ASSERT_TRUE(ma && mb);
  EXPECT_EQ(ma->stats().size(), mb->stats().size());
  EXPECT_EQ(ma->stats().raw(), mb->stats().raw());
}

// A model with a learned alpha resumes from its snapshot bit for bit (alpha
// is refitted from the statistics: no cache to carry).
TEST(MmnbLearnedAlpha, SnapshotResumesBitForBit) {
  const auto data = GenerateWith(Truth(), 19, 600, {0.3, 0.3, 0.1}, 0.1);
  TrainSettings ts = Recover("fast", 2);
  ts.options.emplace_back("learn_alpha", "1");
  auto learn = [&](Model* m, size_t begin, size_t end) {
    auto l = SdemLearner::Create(m, ts.seed);
    ASSERT_TRUE(l.ok());
    DocumentBuffer d;
    for (size_t i = begin; i < end; ++i) {
      Fill(data[i], i, false, &d);
      ASSERT_TRUE((*l)->Learn(d.View()).ok());
    }
  };
  auto whole = NewModel(ts, kK, data.size());
  auto first = NewModel(ts, kK, data.size());
  ASSERT_TRUE(whole && first);
  learn(whole.get(), 0, data.size());
  learn(first.get(), 0, 300);
  const std::string path = testing::TempDir("mmnb_alpha") + "/m.trib";
  ASSERT_TRUE(first->Save(path).ok());
  auto loaded = Model::Load(path, testing::BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  learn(loaded->get(), 300, data.size());
  EXPECT_EQ((*loaded)->stats().raw(), whole->stats().raw());
  auto s1 = whole->NewScoringState(), s2 = (*loaded)->NewScoringState();
  std::vector<double> a(kK), b(kK);
  DocumentBuffer d;
  Fill(data[7], 7, false, &d);
  ASSERT_TRUE(whole->Score(d.View(), s1->get(), a.data()).ok());
  ASSERT_TRUE((*loaded)->Score(d.View(), s2->get(), b.data()).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace tributary
