// Table 3 of the thesis (§3.4.1) at the setting (issue 17, item 5):
// three components with Table 3's shapes, 50 counts over 3 terms. The
// criterion: over 5 seeds, with the engine's defaults and a bounded number
// of passes, the learned components separate (assignment accuracy within
// 0.05 of the Bayes-optimal accuracy with the true parameters under the true
// DCM) and recover the shapes (mean relative error <= 20 % after matching
// components by permutation). bench/COUNT_MIXTURE_TABLE3.md has the
// measurements and the reasons behind the settings used here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "count_mixture_table3_util.h"
#include "tributary/document.h"

namespace tributary {
namespace {

using table3::BayesAccuracy;
using table3::Corpus;
using table3::kLength;
using table3::kTable3;
using table3::Learn;
using table3::LogDcm;
using table3::LogEdcm;
using table3::Print;
using table3::Result;
using table3::SampleDcm;
using table3::Shapes;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The mixture's mean log-likelihood per document under eq. 14 (EDCM, the
// default likelihood at scale 1): at the true parameters, and from the
// model's scores (which include log n! - sum_w log x_w, added here too).
double MeanLogEdcmAtTruth(const Corpus& c) {
  double total = 0;
  for (size_t i = 0; i < c.docs.size(); ++i) {
    const trib_document d = c.docs[i].View();
    double c0 = std::lgamma(d.total_count + 1);
    for (uint32_t t = 0; t < d.num_terms; ++t) c0 -= std::log(d.term_counts[t]);
    std::array<double, 3> l{};
    for (uint32_t k = 0; k < 3; ++k) l[k] = std::log(1.0 / 3) + c0 + LogEdcm(c.counts[i], kTable3[k]);
    const double mx = *std::max_element(l.begin(), l.end());
    total += mx + std::log(std::exp(l[0] - mx) + std::exp(l[1] - mx) + std::exp(l[2] - mx));
  }
  return total / static_cast<double>(c.docs.size());
}

// What holds with the thesis's likelihood (eq. 14 / 45, the default) at the
// issue's setting, and why the criterion cannot: Table 3's set (3 x 70
// documents), now with 50 counts each, 20 passes. The learned mixture is
// MORE likely under eq. 14 than the true parameters, and its components are
// copies of one another (every shape within 0.05 of the same component's,
// accuracy 1/3): eq. 14's maximum at these shapes is one component, so a
// learner that fits eq. 14 well cannot separate them (bench/
// COUNT_MIXTURE_TABLE3.md: batch EM on eq. 14 started at the true
// parameters ends there too). The Bayes-optimal accuracies are printed: the
// true DCM ~0.61, eq. 14 with the true parameters ~0.58.
TEST(CountMixtureTable3Test, ThesisLikelihoodPrefersOneComponentAtFiftyCounts) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const Corpus c = SampleDcm(kTable3, 70, kLength, 100 + seed);
    const Result r = Learn(c, "emsd-mixture", {}, seed, 20);
    Print("emsd-mixture", seed, r, BayesAccuracy(c, kTable3, LogDcm), BayesAccuracy(c, kTable3, LogEdcm));
    const double truth_ll = MeanLogEdcmAtTruth(c);
    std::printf("  eq. 14 log-lik/doc: learned %.4f, true parameters %.4f\n", r.log_lik, truth_ll);
    EXPECT_GT(r.log_lik, truth_ll) << "seed " << seed;
    double spread = 0;
    for (size_t k = 1; k < r.shapes.size(); ++k) {
      for (size_t w = 0; w < r.shapes[k].size(); ++w)
        spread = std::max(spread, std::fabs(r.shapes[k][w] - r.shapes[0][w]));
    }
    EXPECT_LT(spread, 0.05) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
}

// The criterion (issue 17, item 5) with likelihood=dcm (the exact
// DCM, eq. 13; the thesis's eq. 14 / 45 cannot meet it, see the test above)
// and everything else the defaults: SEP with the engine's defaults (N = the
// documents, damping 1/N), the family's defaults (revive=split among them),
// 150 shuffled passes over 3 x 1000 documents of 50 counts, seeds 1-5.
// Measured (bench/COUNT_MIXTURE_TABLE3.md §9): accuracy 0.555 / 0.592 /
// 0.599 / 0.621 / 0.589 against Bayes-optimal 0.604 / 0.599 / 0.618 / 0.629
// / 0.601 (gaps 0.049 / 0.006 / 0.019 / 0.008 / 0.012), mean shape errors
// 0.164 / 0.093 / 0.119 / 0.116 / 0.079. Seed 1's corpus is the tight one:
// maximum likelihood itself (batch EM) is 0.041 from Bayes-optimal there.
// Without revival seed 1 keeps a dead component (0.551) whatever the passes.
// ~25 s a seed; under sanitizers seed 5 alone, 60 passes (measured 0.58,
// error 0.10).
TEST(CountMixtureTable3Test, ExactDcmMeetsTheCriterionWithTheDefaults) {
  const std::vector<uint64_t> seeds = kSanitized ? std::vector<uint64_t>{5} : std::vector<uint64_t>{1, 2, 3, 4, 5};
  const uint32_t passes = kSanitized ? 60 : 150;
  for (uint64_t seed : seeds) {
    const Corpus c = SampleDcm(kTable3, 1000, kLength, 100 + seed);
    const Result r = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}}, seed, passes);
    const double bayes = BayesAccuracy(c, kTable3, LogDcm);
    Print("emsd-mixture likelihood=dcm", seed, r, bayes, BayesAccuracy(c, kTable3, LogEdcm));
    EXPECT_GE(r.accuracy, bayes - 0.05) << "seed " << seed;
    EXPECT_LE(r.mean_rel_error, 0.2) << "seed " << seed;
    EXPECT_EQ(r.skipped, 0u);
  }
}

// Revival (version 1.4.0, revive=split, the default; count_mixture.h,
// "Revival"): once a pass SEP splits the heaviest component into one whose
// E[pi] has fallen below prune / K. On Table 3's set (3 x 300 documents of
// 50 counts, likelihood=dcm, 10 passes) measured: with revive=off seed 5
// ends at accuracy 0.42 (E[pi] 0.033 / 0.848 / 0.118: one component took two
// clusters), with revivals 0.58; the mean over the 5 seeds 0.506 -> 0.548.
// Asserted: revive=off never moves; with revive=split no component ends dead
// (every E[pi] >= prune / K) on any seed; a seed without a move learns
// exactly what revive=off learns (the option acts only through the move);
// and the mean accuracy rises by at least 0.02.
TEST(CountMixtureTable3Test, RevivalSplitsTheHeaviestComponentIntoADeadOne) {
  const std::vector<uint64_t> seeds = kSanitized ? std::vector<uint64_t>{5} : std::vector<uint64_t>{1, 2, 3, 4, 5};
  double off_total = 0, split_total = 0;
  size_t moved_seeds = 0;
  for (uint64_t seed : seeds) {
    const Corpus c = SampleDcm(kTable3, 300, kLength, 100 + seed);
    const Result off = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}, {"revive", "off"}}, seed, 10);
    const Result split = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}}, seed, 10);
    const double bayes = BayesAccuracy(c, kTable3, LogDcm);
    Print("revive=off", seed, off, bayes, BayesAccuracy(c, kTable3, LogEdcm));
    Print("revive=split", seed, split, bayes, BayesAccuracy(c, kTable3, LogEdcm));
    std::printf("  moves: %llu\n", static_cast<unsigned long long>(split.moves));
    EXPECT_EQ(off.moves, 0u) << "seed " << seed;
    ASSERT_EQ(split.pi.size(), 3u);
    for (double p : split.pi) EXPECT_GE(p, 0.1 / 3) << "seed " << seed;
    if (split.moves == 0) {
      EXPECT_EQ(split.pi, off.pi) << "seed " << seed;
      EXPECT_EQ(split.accuracy, off.accuracy) << "seed " << seed;
    }
    moved_seeds += split.moves > 0 ? 1 : 0;
    off_total += off.accuracy;
    split_total += split.accuracy;
    EXPECT_EQ(split.skipped, 0u);
  }
  EXPECT_GT(moved_seeds, 0u);
  EXPECT_GE(split_total / static_cast<double>(seeds.size()), off_total / static_cast<double>(seeds.size()) + 0.02);
}

// Regression: with components=1 every update used to be skipped (the
// Dirichlet's Newton step on pi is 0 / 0 when K = 1), so the model stayed at
// its prior. Now one component learns: with likelihood=dcm its shapes come
// within 15 % on average of Table 3's first component (300 documents of 50
// counts, 40 passes; measured 0.03-0.11, the maximum-likelihood DCM's own
// errors being 0.035-0.095 on these corpora; after 10 passes the shapes were
// still 3-20 % below the maximum-likelihood ones: the DCM's precision s
// converges slowly, as Minka's fixed point for it does), and with the
// default likelihood no update is skipped.
TEST(CountMixtureTable3Test, OneComponentLearns) {
  const Shapes truth = {kTable3[0]};
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    if (kSanitized && seed > 1) break;
    const Corpus c = SampleDcm(truth, 300, kLength, 100 + seed);
    const Result dcm = Learn(c, "emsd-mixture", {{"likelihood", "dcm"}}, seed, 40, truth);
    const Result edcm = Learn(c, "edcm-mixture", {}, seed, 10, truth);
    std::printf("seed %llu: likelihood=dcm alpha (%.3f %.3f %.3f), error %.3f; edcm-mixture alpha (%.3f %.3f %.3f)\n",
                static_cast<unsigned long long>(seed), dcm.shapes[0][0], dcm.shapes[0][1], dcm.shapes[0][2],
                dcm.mean_rel_error, edcm.shapes[0][0], edcm.shapes[0][1], edcm.shapes[0][2]);
    EXPECT_EQ(dcm.skipped, 0u) << "seed " << seed;
    EXPECT_EQ(edcm.skipped, 0u) << "seed " << seed;
    EXPECT_LT(dcm.mean_rel_error, 0.15) << "seed " << seed;
  }
}

}  // namespace
}  // namespace tributary
