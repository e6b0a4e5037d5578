// The multinomial mixture (latent class, online EM through sdEM with nll), the
// host's latent-output path (labels ignored in training), the Hungarian
// mapping behind clustering metrics, and document completion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "test_util.h"
#include "tributary/metrics.h"
#include "tributary/sdem_learner.h"
#include "tributary/stream_io.h"

namespace tributary {
namespace {

using json = nlohmann::json;

// ---- Hungarian assignment -------------------------------------------------------

double BruteForceBest(const std::vector<double>& cost, uint32_t rows, uint32_t cols) {
  // rows <= cols: every row gets a distinct column.
  std::vector<uint32_t> perm(cols);
  std::iota(perm.begin(), perm.end(), 0);
  double best = INFINITY;
  do {
    double c = 0;
    for (uint32_t r = 0; r < rows; ++r) c += cost[size_t{r} * cols + perm[r]];
    best = std::min(best, c);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

TEST(HungarianTest, MatchesBruteForceOnRandomMatrices) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-5, 5);
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t rows = 1 + static_cast<uint32_t>(rng() % 5);
    const uint32_t cols = rows + static_cast<uint32_t>(rng() % 3);
    std::vector<double> cost(size_t{rows} * cols);
    for (auto& c : cost) c = std::round(u(rng));  // ties on purpose
    auto a = HungarianAssign(cost, rows, cols);
    ASSERT_EQ(a.size(), rows);
    std::vector<int> used(cols, 0);
    double total = 0;
    for (uint32_t r = 0; r < rows; ++r) {
      ASSERT_GE(a[r], 0);
      ASSERT_LT(a[r], cols);
      ASSERT_EQ(used[a[r]]++, 0) << "column used twice";
      total += cost[size_t{r} * cols + a[r]];
    }
    EXPECT_DOUBLE_EQ(total, BruteForceBest(cost, rows, cols)) << "trial " << trial;
  }
}

TEST(HungarianTest, MoreRowsThanColumnsLeavesRowsUnassigned) {
  // 3 clusters, 2 classes: the two best-matching clusters get the classes.
  const std::vector<double> cost{-1, -9,   //
                                 -8, -2,   //
                                 -5, -6};  //
  auto a = HungarianAssign(cost, 3, 2);
  EXPECT_EQ(a, (std::vector<int64_t>{1, 0, -1}));
}

TEST(ClusteringMetricsTest, MappingAccuracyPrecisionRecall) {
  ClusteringMetrics m(2, 2);
  // Cluster 1 holds class 0 (8 of 10), cluster 0 holds class 1 (6 of 10).
  for (int i = 0; i < 8; ++i) m.Add(1, 0);
  for (int i = 0; i < 2; ++i) m.Add(1, 1);
  for (int i = 0; i < 6; ++i) m.Add(0, 1);
  for (int i = 0; i < 4; ++i) m.Add(0, 0);
  m.Add(0, -1);  // unlabelled: counted, not scored
  EXPECT_EQ(m.Mapping(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(m.documents(), 21u);
  EXPECT_EQ(m.labelled(), 20u);
  EXPECT_DOUBLE_EQ(m.accuracy(), 14.0 / 20.0);
  // class 0: cluster 1, precision 8/10, recall 8/12; class 1: cluster 0, 6/10, 6/8.
  EXPECT_DOUBLE_EQ(m.precision(), (0.8 + 0.6) / 2);
  EXPECT_DOUBLE_EQ(m.recall(), (8.0 / 12 + 6.0 / 8) / 2);
  ClusteringMetrics none(3, 2);
  none.Add(0, -1);
  EXPECT_TRUE(std::isnan(none.accuracy()));
}

// ---- Document completion split ---------------------------------------------------

TEST(CompletionSplitTest, AlternatesTokensOrderedByTermAndRepetition) {
  // Tokens: t1 t1 t1 t4 t7 t7 -> positions 0..5; even = t1, t1, t7; odd = t1, t4, t7.
  auto d = testing::MakeDoc(4, 1, {{1, 3.0}, {4, 1.0}, {7, 2.0}});
  DocumentBuffer obs, held;
  SplitForCompletion(d.View(), &obs, &held);
  EXPECT_EQ(obs.term_ids, (std::vector<uint32_t>{1, 7}));
  EXPECT_EQ(obs.term_counts, (std::vector<double>{2.0, 1.0}));
  EXPECT_EQ(held.term_ids, (std::vector<uint32_t>{1, 4, 7}));
  EXPECT_EQ(held.term_counts, (std::vector<double>{1.0, 1.0, 1.0}));
  EXPECT_EQ(obs.index, 4u);
  EXPECT_EQ(held.label, 1);
  // A single token has nothing held out.
  auto one = testing::MakeDoc(0, -1, {{2, 1.0}});
  SplitForCompletion(one.View(), &obs, &held);
  EXPECT_EQ(obs.TotalCount(), 1.0);
  EXPECT_TRUE(held.term_ids.empty());
}

// ---- The mixture -----------------------------------------------------------------

constexpr uint32_t kV = 60, kK = 3;

struct Truth {
  std::vector<double> pi;
  std::vector<std::vector<double>> theta;  // [k][w]
};

Truth MakeTruth(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> g(0.2, 1.0);  // sparse-ish Dirichlet(0.2) rows
  Truth t;
  t.pi = {0.5, 0.3, 0.2};
  t.theta.assign(kK, std::vector<double>(kV));
  for (auto& row : t.theta) {
    double s = 0;
    for (auto& x : row) s += (x = g(rng) + 1e-6);
    for (auto& x : row) x /= s;
  }
  return t;
}

std::vector<DocumentBuffer> Sample(const Truth& t, uint32_t n, uint32_t len, uint64_t seed, bool labelled) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<uint32_t> comp(t.pi.begin(), t.pi.end());
  std::vector<std::discrete_distribution<uint32_t>> words;
  for (const auto& row : t.theta) words.emplace_back(row.begin(), row.end());
  std::vector<DocumentBuffer> docs;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t k = comp(rng);
    std::vector<double> counts(kV, 0);
    for (uint32_t j = 0; j < len; ++j) counts[words[k](rng)] += 1;
    std::vector<std::pair<uint32_t, double>> terms;
    for (uint32_t w = 0; w < kV; ++w)
      if (counts[w] > 0) terms.emplace_back(w, counts[w]);
    docs.push_back(testing::MakeDoc(i, labelled ? static_cast<int64_t>(k) : -1, terms));
  }
  return docs;
}

std::unique_ptr<Model> NewMixture(uint64_t seed, double n, const std::string& loss = "nll") {
  auto schema = ModelSchema::FromProto(testing::TextSchema(kV, kK));
  EXPECT_TRUE(schema.ok());
  auto m = Model::Create(testing::BuiltinFamily("multinomial-mixture"), testing::BuiltinLoss(loss), *schema,
                         {{"components", std::to_string(kK)}, {"prior", "0.01"}}, seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  auto& ls = (*m)->learner_state();
  ls.effective_size = n;
  // Forgetting schedule (tau0 + t)^-kappa: early posteriors, computed with a
  // random model, fade out (online EM, Cappe & Moulines 2009).
  ls.schedule.kind = StepSchedule::Kind::kPolynomial;
  ls.schedule.tau0 = 2.0;
  ls.schedule.kappa = 0.6;
  EXPECT_TRUE((*m)->Rebuild(trib_step{0.0, n, 0.0, 0}).ok());
  return std::move(m).value();
}

void Train(Model* m, const std::vector<DocumentBuffer>& docs, int epochs, uint64_t seed) {
  auto l = SdemLearner::Create(m, seed);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  for (int e = 0; e < epochs; ++e)
    for (const auto& d : docs) ASSERT_TRUE((*l)->Learn(d.View()).ok());
}

// Mean L1 distance between true and learned component distributions after
// the best one-to-one matching.
double MatchedL1(const Model& m, const Truth& t, std::vector<int64_t>* match = nullptr) {
  std::vector<std::vector<double>> learned(kK);
  for (uint32_t k = 0; k < kK; ++k) EXPECT_TRUE(m.ComponentTerms(k, &learned[k]).ok());
  std::vector<double> cost(kK * kK);
  for (uint32_t a = 0; a < kK; ++a)
    for (uint32_t b = 0; b < kK; ++b) {
      double d = 0;
      for (uint32_t w = 0; w < kV; ++w) d += std::fabs(t.theta[a][w] - learned[b][w]);
      cost[a * kK + b] = d;
    }
  auto assign = HungarianAssign(cost, kK, kK);
  if (match) *match = assign;
  double total = 0;
  for (uint32_t a = 0; a < kK; ++a) total += cost[a * kK + assign[a]];
  return total / kK;
}

TEST(MultinomialMixtureTest, RecoversComponentsAndWeights) {
  const Truth truth = MakeTruth(11);
  const auto docs = Sample(truth, 3000, 60, 12, /*labelled=*/false);
  auto m = NewMixture(7, static_cast<double>(docs.size()));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->latent_outputs());
  EXPECT_EQ(m->num_outputs(), kK);
  Train(m.get(), docs, 2, 7);
  std::vector<int64_t> match;
  const double l1 = MatchedL1(*m, truth, &match);
  RecordProperty("mean_matched_l1", std::to_string(l1));
  EXPECT_LT(l1, 0.15) << "mean L1 between matched true and learned components";
  // Mixing weights: p(k) = C[k] / sum C from the class block (mu = raw map).
  const auto& s = m->stats();
  double total = 0;
  for (uint32_t k = 0; k < kK; ++k) total += s.Mu(k);
  for (uint32_t a = 0; a < kK; ++a) {
    EXPECT_NEAR(s.Mu(static_cast<uint64_t>(match[a])) / total, truth.pi[a], 0.05) << "component " << a;
  }
  // Held-out clustering through the generic metrics.
  const auto test = Sample(truth, 1000, 60, 13, /*labelled=*/true);
  auto st = m->NewScoringState();
  ClusteringMetrics cm(kK, kK);
  std::vector<double> scores(kK);
  for (const auto& d : test) {
    ASSERT_TRUE(m->Score(d.View(), st->get(), scores.data()).ok());
    cm.Add(static_cast<uint32_t>(std::max_element(scores.begin(), scores.end()) - scores.begin()), d.label);
  }
  EXPECT_GT(cm.accuracy(), 0.95);
}

TEST(MultinomialMixtureTest, HeldOutCompletionPerplexityFallsAsDocumentsStreamIn) {
  const Truth truth = MakeTruth(21);
  const auto docs = Sample(truth, 2000, 60, 22, false);
  const auto test = Sample(truth, 300, 60, 23, false);
  auto m = NewMixture(3, static_cast<double>(docs.size()));
  ASSERT_TRUE(m);
  auto l = SdemLearner::Create(m.get(), 3);
  ASSERT_TRUE(l.ok());
  auto perplexity = [&] {
    auto st = m->NewScoringState();
    double lp = 0, n = 0;
    DocumentBuffer obs, held;
    for (const auto& d : test) {
      SplitForCompletion(d.View(), &obs, &held);
      double x = 0;
      EXPECT_TRUE(m->Completion(obs.View(), held.View(), st->get(), &x).ok());
      lp += x;
      n += held.TotalCount();
    }
    return std::exp(-lp / n);
  };
  std::vector<double> curve{perplexity()};
  for (size_t i = 0; i < docs.size(); ++i) {
    ASSERT_TRUE((*l)->Learn(docs[i].View()).ok());
    if ((i + 1) % 500 == 0) curve.push_back(perplexity());
  }
  for (size_t i = 1; i < curve.size(); ++i) EXPECT_LT(curve[i], curve[i - 1] * 1.01) << "checkpoint " << i;
  EXPECT_LT(curve.back(), 0.8 * curve.front());
}

TEST(MultinomialMixtureTest, LabelsAreIgnoredInTrainingAndSeedsAreDeterministic) {
  const Truth truth = MakeTruth(31);
  const auto labelled = Sample(truth, 400, 30, 32, true);
  const auto unlabelled = Sample(truth, 400, 30, 32, false);
  auto a = NewMixture(5, 400), b = NewMixture(5, 400), c = NewMixture(6, 400);
  Train(a.get(), labelled, 1, 5);
  Train(b.get(), unlabelled, 1, 5);
  Train(c.get(), unlabelled, 1, 6);
  EXPECT_EQ(a->stats().raw(), b->stats().raw()) << "labels must not change what a latent family learns";
  EXPECT_NE(b->stats().raw(), c->stats().raw()) << "another seed, another initialisation";
}

// The check-step under deliberately large steps (constant rho = 1 and 0.9,
// tiny n): every statistic stays finite and feasible (mu >= its prior part).
TEST(MultinomialMixtureTest, HugeStepsKeepStatisticsFiniteAndFeasible) {
  const Truth truth = MakeTruth(51);
  const auto docs = Sample(truth, 300, 40, 52, false);
  for (double rho : {1.0, 0.9}) {
    auto m = NewMixture(9, 0.5);
    ASSERT_TRUE(m);
    m->learner_state().schedule.kind = StepSchedule::Kind::kConstant;
    m->learner_state().schedule.rho = rho;
    Train(m.get(), docs, 1, 9);
    const auto& st = m->stats();
    for (uint64_t i = 0; i < st.size(); ++i) {
      const double mu = st.Mu(i);
      ASSERT_TRUE(std::isfinite(mu) && mu > 0) << "entry " << i << " = " << mu << " at rho " << rho;
    }
    std::vector<double> p;
    for (uint32_t k = 0; k < kK; ++k) {
      ASSERT_TRUE(m->ComponentTerms(k, &p).ok());
      double sum = 0;
      for (double x : p) sum += x;
      EXPECT_NEAR(sum, 1.0, 1e-9);
    }
  }
}

TEST(MultinomialMixtureTest, RefusesLossesThatNeedLabelsAndBadOptions) {
  auto m = NewMixture(1, 10, "ncll");
  ASSERT_TRUE(m);
  auto l = SdemLearner::Create(m.get());
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("learns latent components"), std::string::npos) << l.status().message();
  auto schema = ModelSchema::FromProto(testing::TextSchema(5, 1));
  for (const auto& opt : std::vector<std::pair<std::string, std::string>>{
           {"components", "0"}, {"components", "2.5"}, {"init_scale", "-1"}, {"color", "red"}}) {
    auto r = Model::Create(testing::BuiltinFamily("multinomial-mixture"), testing::BuiltinLoss("nll"), *schema, {opt});
    ASSERT_FALSE(r.ok()) << opt.first << "=" << opt.second;
    EXPECT_NE(r.status().message().find(opt.first), std::string::npos) << r.status().message();
  }
}

// ---- The program end to end --------------------------------------------------------

void WriteStream(const std::string& path, const std::vector<DocumentBuffer>& docs) {
  v1::StreamHeader h;
  h.set_magic("tributary.stream");
  h.set_format_version(1);
  *h.mutable_schema() = testing::TextSchema(kV, kK);
  h.set_document_count(docs.size());
  auto w = DocumentWriter::Create(path, h);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& d : docs) {
    v1::Document pd;
    pd.set_id("d" + std::to_string(d.index));
    if (d.label >= 0) pd.set_label("c" + std::to_string(d.label));
    for (size_t i = 0; i < d.term_ids.size(); ++i) {
      pd.add_term_ids(d.term_ids[i]);
      pd.add_term_counts(d.term_counts[i]);
    }
    ASSERT_TRUE((*w)->Write(pd).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

TEST(MultinomialMixtureTest, ProgramTrainsEvaluatesAndDescribesComponents) {
  const std::string dir = testing::TempDir("mixture_cli");
  const Truth truth = MakeTruth(41);
  WriteStream(dir + "/train.pb", Sample(truth, 2000, 60, 42, true));
  WriteStream(dir + "/test.pb", Sample(truth, 500, 60, 43, true));
  const std::string T = testing::ProgramPath();
  std::string out;
  ASSERT_EQ(testing::RunCommand(T + " train -q --family multinomial-mixture --loss nll --components 3 --prior 0.01" +
                                    " --schedule poly --tau0 2 --kappa 0.6 --epochs 2 --seed 3 --in " + dir +
                                    "/train.pb --out " + dir + "/m.trib",
                                &out, true),
            0)
      << out;
  ASSERT_EQ(testing::RunCommand(T + " eval --json --model " + dir + "/m.trib --in " + dir + "/test.pb", &out), 0)
      << out;
  const json j = json::parse(out);
  EXPECT_EQ(j["documents"], 500);
  EXPECT_GT(j["accuracy"].get<double>(), 0.95) << out;
  EXPECT_GT(j["precision"].get<double>(), 0.9);
  EXPECT_GT(j["recall"].get<double>(), 0.9);
  EXPECT_EQ(j["perplexity_kind"], "document_completion");
  EXPECT_GT(j["perplexity"].get<double>(), 1.0);
  EXPECT_LT(j["perplexity"].get<double>(), kV);
  EXPECT_EQ(j["cluster_sizes"].size(), kK);
  // topics: K components, top terms by p(term | k), consistent with the truth.
  ASSERT_EQ(testing::RunCommand(T + " topics --json --top 5 --model " + dir + "/m.trib", &out), 0) << out;
  const json tj = json::parse(out);
  ASSERT_EQ(tj["topics"].size(), kK);
  for (const auto& t : tj["topics"]) {
    ASSERT_EQ(t["terms"].size(), 5u);
    EXPECT_GE(t["terms"][0]["p"].get<double>(), t["terms"][4]["p"].get<double>());
  }
  // infer: proportions per document that sum to 1.
  ASSERT_EQ(testing::RunCommand(T + " infer --model " + dir + "/m.trib --in " + dir + "/test.pb", &out), 0);
  std::istringstream lines(out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const json d = json::parse(line);
    double s = 0;
    for (double p : d["proportions"]) s += p;
    EXPECT_NEAR(s, 1.0, 1e-9);
    ++n;
  }
  EXPECT_EQ(n, 500);
  // Without schedule flags a latent family gets the forgetting schedule that
  // keeps its random initialisation (rho_0 < 1); explicit flags win.
  ASSERT_EQ(testing::RunCommand(T + " train -q --family multinomial-mixture --loss nll --components 3 --in " + dir +
                                    "/train.pb --out " + dir + "/d.trib && " + T + " inspect --json --model " + dir +
                                    "/d.trib",
                                &out, true),
            0)
      << out;
  EXPECT_EQ(json::parse(out)["schedule"], "rho_t = (256 + t)^-0.7") << out;
  ASSERT_EQ(testing::RunCommand(
                T + " train -q --family multinomial-mixture --loss nll --components 3 --lambda 1 --in " + dir +
                    "/train.pb --out " + dir + "/d.trib && " + T + " inspect --json --model " + dir + "/d.trib",
                &out, true),
            0)
      << out;
  EXPECT_EQ(json::parse(out)["schedule"], "rho_t = (1 + 1 t)^-1") << out;
  // A loss that needs labels is refused with the reason; infer on a classifier too.
  EXPECT_NE(testing::RunCommand(T + " train -q --family multinomial-mixture --loss ncll --components 3 --in " + dir +
                                    "/train.pb --out " + dir + "/x.trib",
                                &out, true),
            0);
  EXPECT_NE(out.find("learns latent components"), std::string::npos) << out;
  ASSERT_EQ(testing::RunCommand(
                T + " train -q --family multinomial --loss nll --in " + dir + "/train.pb --out " + dir + "/nb.trib",
                &out, true),
            0)
      << out;
  EXPECT_NE(testing::RunCommand(T + " infer --model " + dir + "/nb.trib --in " + dir + "/test.pb", &out, true), 0);
  EXPECT_NE(out.find("use predict"), std::string::npos) << out;
}

}  // namespace
}  // namespace tributary
