// Predictor: scores a run of documents with a model that does not change
// while the Predictor lives (`tributary eval` and `predict` of a saved
// model; any read-only use of a loaded model).
//
// It scores through Model::Score until the documents scored have cost about
// as much as the family's frozen table (ABI 1.6 `freeze`, plugin_abi.h)
// costs to build, then builds the table and scores through it: the table is
// O(model) to build and makes a document cost one addition per (term,
// class) for multinomial instead of products and logs. A short run (a few
// documents, a large model) never pays for a table; a long one pays at most
// about twice what the run would have cost without it, once. Families
// without frozen scoring, and models larger than kMaxFrozenValues
// statistics, are scored through Model::Score throughout. The
// scores are Model::Score's up to rounding (the family's contract: 1e-9
// relative to the largest magnitude among a document's scores; multinomial
// agrees to ~1e-15, tests/predictor_test.cc), so a prediction may differ
// from Model::Score's only between classes tied to rounding.
//
// Contracts:
//  - The model is borrowed: it must outlive the Predictor, and nothing may
//    change it (learning, AddClass, AddTerms, RefreshFrom) while the
//    Predictor lives; a model that must change gets a new Predictor after.
//  - One thread at a time per Predictor (it holds a scoring state); several
//    Predictors of one model may score concurrently (each builds its own
//    table).
#ifndef TRIBUTARY_PREDICTOR_H_
#define TRIBUTARY_PREDICTOR_H_

#include <cstdint>
#include <memory>

#include "tributary/model.h"
#include "tributary/plugin_abi.h"
#include "tributary/status.h"

namespace tributary {

/// Scores a run of documents with a model that does not change meanwhile, through the family's frozen table
/// once that pays (see the file comment). One thread at a time.
class Predictor {
 public:
  /// Models with more statistics than this are never frozen (the table would
  /// add as much memory again): 2^27 values, 1 GiB.
  static constexpr uint64_t kMaxFrozenValues = uint64_t{1} << 27;

  /// A Predictor of `model` (borrowed: see the file comment) whose scoring state is seeded from `seed`.
  /// Errors: `model` is null (InvalidArgument); the family cannot make a scoring state.
  static Result<std::unique_ptr<Predictor>> Create(const Model* model, uint64_t seed = 1);
  /// Destroys the frozen table, if one was built, and the scoring state.
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  /// log p(k, x | theta) for every output into log_joint[model.num_outputs()],
  /// as Model::Score (same errors).
  Status Score(const trib_document& doc, double* log_joint);
  /// Builds the frozen table now instead of when the work pays for it (a
  /// server about to answer many requests; tests). OK and nothing built for a
  /// family without frozen scoring. Errors: the family's freeze failed (the
  /// Predictor goes on without a table).
  Status Freeze();
  /// True once the table is built.
  bool frozen() const { return frozen_ != nullptr; }
  /// The scoring state (for calls that follow Score on the same document,
  /// e.g. LatentMetrics::Add).
  ScoringState* state() { return state_.get(); }

 private:
  Predictor() = default;
  const Model* model_ = nullptr;
  std::unique_ptr<ScoringState> state_;
  trib_frozen* frozen_ = nullptr;
  bool can_freeze_ = false;
  /// Work done through Model::Score so far (terms x outputs per document);
  /// the table is built when it reaches the statistics' size (building costs
  /// a log per statistic, scoring a product per term and output plus a log
  /// per output).
  uint64_t work_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_PREDICTOR_H_
