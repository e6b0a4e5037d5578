// sdEM: stochastic discriminative EM (Masegosa et al. 2014, Algorithm 1).
//
// One call to Learn() is one stochastic step on one document:
//   1. the family scores log p(k, x | theta(mu_t)) for every class k;
//   2. the loss turns the scores and the label into class weights w and the
//      self-weight c = sum_k w_k (Table 1: NLL c = 1, NCLL and hinge c = 0);
//   3. the family accumulates delta = sum_k w_k E_z[s(k, z, x)] (Table 2);
//   4. the engine applies, per block of statistics with prior (nu, abar),
//        mu <- (1 - rho_t (c + nu/n)) mu + rho_t (delta + abar/n)        (eq. 15)
//      in O(|delta| + blocks) through the lazy scale/shift of each block;
//   5. the family's check-step projects touched entries back into the
//      feasible set and updates its caches of theta(mu).
// A document's weight (Document.weight) scales w for a gradient step
// (c = 0); for c > 0 (NLL) it sets the step size rho' so that the step moves
// the statistics as that many copies of the document learned in a row would
// (exact for NLL; sdem_learner.cc WeightedRho): the decay 1 - rho' c never
// turns negative.
// Steps 1-3 do not touch the model, so a document refused there (bad
// scores, NaN in the delta) leaves the model exactly as it was; a failure in
// step 5 (the family's commit or rebuild) is undone: the statistics and block
// maps are restored bit for bit and the family's caches rebuilt.
//
// Thread safety: one SdemLearner per model, used from one thread.
#ifndef TRIBUTARY_SDEM_LEARNER_H_
#define TRIBUTARY_SDEM_LEARNER_H_

#include <memory>
#include <utility>
#include <vector>

#include "tributary/model.h"

namespace tributary {

/// What one successful SdemLearner::Learn step did (unset when it fails).
struct LearnOutcome {
  double loss_value = 0;     ///< the training loss of the document before the step
  uint32_t predicted = 0;    ///< argmax_k log p(k, x) before the step
  double rho = 0;            ///< the step size used
  size_t delta_entries = 0;  ///< statistics touched
};

/// Trains a Model with sdEM, one document per Learn call (the step is described in the file comment).
class SdemLearner {
 public:
  /// REQUIRES: model->loss_plugin() is set; `model` outlives the learner.
  static Result<std::unique_ptr<SdemLearner>> Create(Model* model, uint64_t seed = 1);

  /// One sdEM step on `doc`. On error nothing in the model has changed (the
  /// step counter included) and the message names the document.
  /// `outcome` (optional) receives what the step did; last_scores() holds log p(k, x) before the update.
  Status Learn(const trib_document& doc, LearnOutcome* outcome = nullptr);

  /// log p(k, x) of every output as the last Learn scored them before its step (Model::num_outputs() values);
  /// overwritten by the next Learn. After a Learn that failed before scoring, an earlier call's scores.
  const std::vector<double>& last_scores() const { return scores_; }
  /// Records every successful step's block maps in `trace` (model.h; null:
  /// none). REQUIRES: trace sized for the model's blocks (BlockTrace::Reset).
  void set_trace(BlockTrace* trace) { trace_ = trace; }
  /// The model this learner steps (not owned).
  Model* model() { return model_; }
  /// Whether a family's fused_step (ABI 1.7) replaces accumulate + apply +
  /// commit (default true; its result is the same bit for bit). plugin-check
  /// turns it off to compare the two.
  void set_use_fused_step(bool on) { use_fused_ = on; }
  /// Steps taken by the family's fused step so far.
  uint64_t fused_steps() const { return fused_steps_; }

 private:
  SdemLearner() = default;
  Status Fail(const trib_document& doc, const Status& st) const;
  /// Restores the statistics and block maps saved before step 4 and rebuilds
  /// the family's caches; returns `cause` (or an internal error if even that
  /// fails).
  Status Undo(const trib_delta& delta, const Status& cause);
  /// The same for a fused step: its log holds what it wrote.
  Status UndoLog(const trib_step_log& log, const Status& cause);
  Status RestoreBlocksAndRebuild(const Status& cause);
  /// Counts the step and records it in the trace.
  void FinishStep(const std::vector<double>& factors, double c, double rho);
  static int GrowDelta(trib_delta* d, size_t min_capacity);
  static int GrowLog(trib_step_log* log, size_t min_runs, size_t min_values);

  Model* model_ = nullptr;
  BlockTrace* trace_ = nullptr;
  std::unique_ptr<ScoringState> state_;
  bool use_fused_ = true;
  uint64_t fused_steps_ = 0;
  std::vector<double> scores_, weights_, factors_, old_raw_, block_mult_;
  std::vector<uint64_t> log_start_, log_length_;  ///< a fused step's runs (old values in old_raw_)
  std::vector<uint64_t> delta_index_;
  std::vector<double> delta_value_;
  std::vector<char> materialize_;
  std::vector<trib_block> saved_blocks_;                                 ///< block maps before the step
  std::vector<std::pair<uint32_t, std::vector<double>>> restarted_raw_;  ///< raw of restarted blocks
};

}  // namespace tributary

#endif  // TRIBUTARY_SDEM_LEARNER_H_
