// Data-parallel learning: the documents of a round are split into shards,
// each shard is learned from the same statistics by its own learner (a
// thread here, an MPI rank in distributed.h), and the shards' results are
// composed into one model (docs/design.md §10).
//
// Two rules, chosen by the kind of step (docs/design.md §10):
//
// Averaging steps (NLL, whose self-weight c = 1 makes every step a running
// average, and SEP's damped site, eq. 11) are COMPOSED in shard order, as if
// shard 0's documents had been learned first, then shard 1's, and so on.
// Every step maps each block affinely: entries the document does not touch
// move by mu <- f mu + g alpha_bar, touched ones get a change on top. Over its
// documents shard r therefore turns the round's start mu0 into
//     mu_r = A_r mu0 + beta_r alpha_bar + D_r,
// with A_r, beta_r per block (BlockTrace) and D_r zero off the entries it
// touched, and the composition is
//     mu = (prod_r A_r) mu0 + sum_r P_r (beta_r alpha_bar + D_r),
//     P_r = prod_{s > r} A_s.
// Each shard's step counter starts where the documents before it end (t0 +
// the sizes of the shards before), so it uses the step sizes of the
// sequential pass. When a step's change does not depend on the statistics
// (NLL on a family without latent variables: the document's own counts) the
// composition IS the sequential pass over the round in order, up to
// rounding: exact averaging stays batch MAP whatever the number of threads
// or ranks. Late in a stream A_r -> 1 and the rule becomes the sum of the
// shards' changes, SEP's own parallel rule (Li et al. 2015, §4: the workers'
// site changes are summed).
//
// Gradient steps (c = 0: NCLL and hinge, sdEM's natural-gradient steps of a
// discriminative loss) are AVERAGED, weighted by the shards' documents:
//     mu = sum_r (n_r / n) mu_r,
// iterative parameter mixing (McDonald et al. 2010). Summing them instead
// applies a correction every shard made on its own copy once per shard (with
// rho ~ 1, the defaults' early steps, two shards then overshoot: 3-6 points
// of held-out accuracy lost for hinge in tests/parallel_test.cc, none lost
// by averaging).
//
// Thread safety: ParallelLearner is driven by one thread, which it borrows
// for shard 0; the other shards run on threads it starts per round.
#ifndef TRIBUTARY_PARALLEL_H_
#define TRIBUTARY_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/status.h"

namespace tributary {

/// Documents per shard between two compositions when the caller gives none:
/// at least kMinSyncEvery, and P / kStatisticsPerSyncDocument for a model of
/// P statistics, so that a round's learning (2-4 us per document and shard on
/// short documents) outweighs the composition (about 5.5 ns per statistic
/// per round: every shard's statistics read once, the family's rebuild) by
/// about ten to one (bench/PARALLEL_RESULTS.md). Fortunes (1.09 M
/// statistics): 34,000 documents; a 10^6-term, 45-class model: 1.4 M.
inline constexpr uint64_t kMinSyncEvery = 8192;
inline constexpr uint64_t kStatisticsPerSyncDocument = 32;  ///< the default is P / this when above kMinSyncEvery
/// max(kMinSyncEvery, statistics / kStatisticsPerSyncDocument): the default
/// documents per shard and round for a model of `statistics` statistics.
inline uint64_t DefaultSyncEvery(uint64_t statistics) {
  return statistics / kStatisticsPerSyncDocument > kMinSyncEvery ? statistics / kStatisticsPerSyncDocument
                                                                 : kMinSyncEvery;
}

/// The arithmetic of one composition, shared by the threads and the MPI ranks.
class ShardComposition {
 public:
  /// `base`: the block maps at the start of the round; traces[r]: shard r's
  /// (sized for base.size()).
  void Plan(const std::vector<trib_block>& base, const std::vector<const BlockTrace*>& traces);
  uint32_t shards() const { return static_cast<uint32_t>(decay_.size()); }  ///< traces given to the last Plan
  /// True when Plan chose the average (some shard took gradient steps).
  bool averaged() const { return average_; }
  /// acc[i - lo] += P_r (mu_r,i - A_r mu0_i - beta_r alpha_bar) for i in
  /// [lo, hi): shard r's contribution, `shard` being its statistics after
  /// its documents and `base` the round's start (same layout).
  void AddContribution(uint32_t r, const SufficientStats& base, const SufficientStats& shard, uint64_t lo, uint64_t hi,
                       double* acc) const;
  /// The composed raw values of [lo, hi) given the summed contributions,
  /// written to out_raw[i - lo], in the block maps of blocks().
  void Finish(const SufficientStats& base, const double* acc, uint64_t lo, uint64_t hi, double* out_raw) const;
  /// The composed block maps: scale = S0 A, shift = A H0 + B for the
  /// composed map mu <- A mu + B alpha_bar, so that shift - scale (sdEM's
  /// gamma, model.h) composes like the statistics; a scale that would leave
  /// (0, 1e-100] is folded (scale 1).
  const std::vector<trib_block>& blocks() const { return blocks_; }

 private:
  std::vector<std::vector<double>> decay_, offset_, coef_;  ///< [r][b]: A_r, beta_r, the weight of D_r
  std::vector<double> total_decay_;                         ///< [b] prod A
  std::vector<trib_block> base_, blocks_;
  bool average_ = false;
};

/// How ParallelLearner::Create splits the learning.
struct ParallelOptions {
  uint32_t threads = 2;     ///< >= 1; 1 learns sequentially (no composition)
  uint64_t sync_every = 0;  ///< documents per shard and round; 0: DefaultSyncEvery(the model's statistics)
  LearnerOptions learner;   ///< shard r's seed is learner.seed + r
  /// When set, a document a shard refuses as invalid or numerically bad is
  /// passed here (from the driving thread, after the round, in document
  /// order) and left out; when null such an error ends Learn().
  std::function<void(const Status&)> on_bad;
};

/// Learns one model with `threads` shards composed every round (the rules at
/// the top of this file).
class ParallelLearner {
 public:
  /// Learns into `model` (borrowed; shard 0 learns it in place, the other
  /// shards on copies). Errors: options out of range; an engine that keeps
  /// state per document (EP) or has no step map to compose (ADF); Learner's.
  static Result<std::unique_ptr<ParallelLearner>> Create(Model* model, const ParallelOptions& options);
  ~ParallelLearner();

  /// Learns docs[0, n) in order, in rounds of at most threads x sync_every
  /// documents (each round's documents split into `threads` contiguous
  /// shards). The model may have grown (classes, terms) since the last call;
  /// it must not grow during one. On error the model is as it was after the
  /// last completed round and the message names the document.
  Status Learn(const trib_document* docs, size_t n);

  Model* model() const { return model_; }                                     ///< the model learned (borrowed)
  uint32_t threads() const { return static_cast<uint32_t>(shards_.size()); }  ///< shards, ParallelOptions::threads
  /// Rounds composed so far. A round learned sequentially (one thread, or
  /// fewer than 2 x threads documents) or a failed one is not counted.
  uint64_t rounds() const { return rounds_; }
  /// The engine in use ("sdem" or "sep").
  Engine engine() const { return shards_[0].learner->engine(); }
  /// Shard r's learner (its engine's counters); shard 0 learns the model.
  const Learner& shard(uint32_t r) const { return *shards_[r].learner; }

 private:
  struct Shard {
    std::unique_ptr<Model> owned;  ///< null for shard 0 (the caller's model)
    Model* model = nullptr;
    std::unique_ptr<Learner> learner;
    BlockTrace trace;
    Status status;
    std::vector<Status> bad;  ///< refused documents (on_bad)
    std::vector<double> acc;  ///< composition scratch for this thread's slice
  };
  ParallelLearner() = default;
  /// Makes shards 1.. copies of the model again (after growth or a failed round).
  Status Resync();
  Status Round(const trib_document* docs, size_t n);

  Model* model_ = nullptr;
  ParallelOptions options_;
  std::vector<Shard> shards_;
  bool dirty_ = true;  ///< shards 1.. differ from the model
  uint64_t layout_ = 0, vocab_ = 0;
  uint32_t classes_ = 0;
  std::vector<double> base_raw_;
  SufficientStats base_;
  ShardComposition plan_;
  uint64_t rounds_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_PARALLEL_H_
