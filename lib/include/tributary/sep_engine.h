// SEP, EP and ADF: expectation-propagation engines over a family's
// trib_sep_hooks (sep_abi.h; thesis §1.4-1.5, docs/design.md §5).
//
// All three keep the posterior as lambda = lambda0 + N mu, with mu in the
// model's statistics entries [0, P), so Model::Save / Load / Clone work
// unchanged and the family scores from the same numbers whichever engine
// trained it. Per document (Learn):
//   1. the family lists the document's support and the prior there;
//   2. the engine forms the cavity at the support:
//        SEP  lambda - f_bar = lambda0 + (N - 1) mu                (eq. 9)
//        EP   lambda - f_i, f_i the document's stored site           (eq. 6)
//        ADF  lambda
//   3. the family moment-matches the tilted distribution -> lambda_new;
//   4. the engine forms the new posterior at the support:
//        SEP  f_i = lambda_new - cavity; f_bar <- (1 - eps) f_bar + eps f_i,
//             eps = damping (default 1/N); untouched entries decay by
//             (1 - eps) through the blocks' lazy scale               (eq. 11)
//        EP   f_i <- (1 - delta) f_i + delta (lambda_new - cavity),
//             delta = damping (default 1); mu += (f_i - f_i_old) / N
//        ADF  lambda <- lambda_new
//      and applies it only if the family finds it feasible and every number
//      is finite. Otherwise the document is skipped and counted
//      (counters().skipped_infeasible): the model is left exactly as it was.
// Cost per document: O(support) plus the family's moment matching (for the
// count mixtures: distinct terms x K x samples), never O(model), except
// for a rare re-materialisation when a block's scale would underflow.
//
// Memory: SEP and ADF hold nothing per document; EP holds one sparse site
// per distinct document index (SiteBytes()).
//
// Thread safety: one SepLearner per model, used from one thread; the model
// must not be used by anyone else while Learn runs (publish Clone()s).
#ifndef TRIBUTARY_SEP_ENGINE_H_
#define TRIBUTARY_SEP_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tributary/model.h"
#include "tributary/sep_abi.h"

namespace tributary {

/// Which expectation-propagation engine a SepLearner runs (the steps at the
/// top of this file): kSep, stochastic EP (one damped global site); kEp, EP
/// (a site per distinct document index); kAdf, assumed density filtering (no
/// site: the posterior is replaced).
enum class SepEngine { kSep = 0, kEp = 1, kAdf = 2 };

/// "sep", "ep", "adf".
const char* SepEngineName(SepEngine engine);
/// Parses "sep" / "ep" / "adf"; InvalidArgument otherwise.
Result<SepEngine> ParseSepEngine(const std::string& name);

/// How SepLearner::Create sets up the engine.
struct SepOptions {
  SepEngine engine = SepEngine::kSep;  ///< the update rule (Learn's step 4)
  /// N, the effective data-set size (lambda = lambda0 + N mu). > 0: sets the
  /// model's learner_state().effective_size; 0: keeps the model's value (a
  /// resumed snapshot's). For EP use the number of documents; for SEP on an
  /// unbounded stream it is a configuration value.
  /// Changing N of a trained model rescales its posterior: keep it fixed.
  double effective_size = 0;
  /// SEP: eps in (0, 1], 0 means 1/N. EP: site damping delta in (0, 1], 0
  /// means 1 (no damping). ADF: ignored.
  double damping = 0;
  /// Seeds the family state's random generator (Monte Carlo moment matching).
  uint64_t seed = 1;
};

/// Running totals of a SepLearner.
struct SepCounters {
  uint64_t documents = 0;           ///< Learn calls that returned OK
  uint64_t updates = 0;             ///< updates applied
  uint64_t skipped_infeasible = 0;  ///< skipped: improper cavity, infeasible or non-finite update
  uint64_t materializations = 0;    ///< O(model) re-materialisations of a block (SEP)
  uint64_t moves = 0;               ///< structural moves the family made (sep_abi.h, move; SEP)
  double log_evidence = 0;          ///< sum of log Z_i over applied updates (ADF: approximate log p(X))
};

/// What one SepLearner::Learn call did.
struct SepOutcome {
  bool skipped = false;     ///< the update was not applied (counted; the model is unchanged)
  std::string skip_reason;  ///< when skipped: the family's or the engine's reason
  double log_z = 0;         ///< the family's log Z_i (NaN if not estimated)
  size_t support = 0;       ///< entries in the document's support
};

/// Learns a model with the SEP, EP or ADF engine, one document at a time
/// (the steps, memory and thread safety are at the top of this file).
class SepLearner {
 public:
  /// True if the family provides the SEP hooks (trib_family_vtable.sep).
  static bool Supports(const Plugin& family);

  /// REQUIRES: `model` outlives the learner. Sets N (see SepOptions) and
  /// re-runs the family's rebuild so that its caches use it.
  /// Errors: the family has no SEP hooks (the message says which engines it
  /// is trained with instead), N <= 0, damping outside (0, 1], statistics
  /// entries [0, P) are not whole blocks of the family's layout.
  static Result<std::unique_ptr<SepLearner>> Create(Model* model, const SepOptions& options);

  /// One SEP / EP / ADF update with `doc`. EP: a document is identified by
  /// doc.index; learning the same index again (the next sweep) replaces its
  /// site, and its support must be the same as before.
  /// A document whose update would be infeasible or non-finite is skipped
  /// and counted, and Learn returns OK with outcome->skipped set. Errors
  /// (INVALID_DOCUMENT from the family, a plugin failure) name the document;
  /// on error and on skip the model is unchanged.
  Status Learn(const trib_document& doc, SepOutcome* outcome = nullptr);

  /// Bytes held by per-document EP sites (index and value arrays plus the
  /// table's bookkeeping); 0 for SEP and ADF. Grows linearly with the number
  /// of distinct documents learned by EP.
  size_t SiteBytes() const;
  /// Number of stored EP sites.
  size_t NumSites() const { return sites_.size(); }

  const SepCounters& counters() const { return counters_; }  ///< totals since Create
  /// Records every applied update's block maps in `trace` (model.h; null:
  /// none). REQUIRES: trace sized for the model's blocks (BlockTrace::Reset).
  void set_trace(BlockTrace* trace) { trace_ = trace; }
  const SepOptions& options() const { return options_; }  ///< as given to Create
  double effective_size() const { return n_; }            ///< N in use (the model's learner_state().effective_size)
  /// The damping actually used (eps for SEP, delta for EP).
  double damping() const { return damping_; }
  /// P, the number of natural parameters: the leading statistics entries
  /// [0, P) the engine owns (trib_sep_hooks::num_params).
  uint64_t num_params() const { return num_params_; }
  Model* model() { return model_; }  ///< the model learned (borrowed)

  /// The family's log Z of `doc` with the posterior q itself as the cavity:
  /// log E_q[p(doc | theta)], the document's approximate log predictive
  /// density under the current posterior (thesis eq. 27-29 with nothing
  /// removed). Summed over a set of documents it is the approximate log
  /// evidence of that set given what the model has learned, the number
  /// `tributary eval` reports as log_evidence. Calls only the family's
  /// support and moment_match hooks, so the model is not modified and
  /// concurrent scorers are safe (sep_abi.h). `state` comes from
  /// model.NewScoringState(). Returns NaN if the family does not estimate
  /// log Z, or if it cannot compute this document's site (its skip reason is
  /// dropped; `tributary eval` counts the documents that have one:
  /// LatentMetrics::evidence_documents).
  /// Errors: the family has no SEP hooks; INVALID_DOCUMENT from the family,
  /// naming the document.
  static Result<double> LogPredictive(const Model& model, ScoringState* state, const trib_document& doc);

  /// Receives one vector of a summary: `ctx` as given to Summary, its `name`
  /// (the family's, e.g. "mixing_weights"), `component` the component index
  /// or UINT32_MAX for a model-wide vector, and values[0, count)
  /// (trib_sep_summary_sink).
  using SummaryVisitor = void (*)(void* ctx, const char* name, uint32_t component, const double* values, size_t count);
  /// Calls the family's optional summary hook (the posterior summary
  /// `tributary inspect` prints), which visits (name, component or
  /// UINT32_MAX, values); false if it has none. O(model); exclusive with any
  /// other use of `model` (sep_abi.h). Errors: the hook's failure, naming the family.
  static Result<bool> Summary(const Model& model, SummaryVisitor visit, void* ctx);

 private:
  struct Site {
    std::vector<uint64_t> index;
    std::vector<double> value;
    std::vector<std::pair<uint32_t, double>> blocks;  ///< block-uniform sites (sep_abi.h)
  };

  SepLearner() = default;
  Status Fail(const trib_document& doc, const Status& st) const;
  Status Skip(const std::string& reason, SepOutcome* outcome);
  /// Where a family's support() writes (index, prior) pairs: a trib_delta
  /// over two vectors that grow on request. Learn and LogPredictive use it.
  struct SupportBuffer {
    std::vector<uint64_t> index = std::vector<uint64_t>(256);
    std::vector<double> prior = std::vector<double>(256);
    trib_delta Delta() { return trib_delta{index.data(), prior.data(), 0, index.size(), this, &Grow}; }
    static int Grow(trib_delta* d, size_t min_capacity);
  };

  Model* model_ = nullptr;
  BlockTrace* trace_ = nullptr;
  const trib_sep_hooks* hooks_ = nullptr;
  SepOptions options_;
  double n_ = 1;
  double damping_ = 1;
  uint64_t num_params_ = 0;
  uint32_t num_param_blocks_ = 0;
  std::unique_ptr<ScoringState> state_;
  SepCounters counters_;
  std::unordered_map<uint64_t, Site> sites_;  ///< EP only, keyed by doc.index

  /// Scratch, reused across documents.
  SupportBuffer support_;
  std::vector<double> cavity_, lambda_new_, mu_old_, mu_new_, site_new_, posterior_;
  std::vector<uint32_t> block_of_;
  std::vector<trib_block> saved_blocks_;  ///< the natural-parameter block maps before an update (undo)
  std::vector<double> raw_old_;           ///< the support's raw values before an update (undo)
  std::vector<double> block_site_, block_delta_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SEP_ENGINE_H_
