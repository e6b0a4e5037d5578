// Learner: one interface over the engines that learn a model one document at
// a time — sdEM (sdem_learner.h: online EM as natural-gradient descent, any
// loss) and SEP / EP / ADF (sep_engine.h: one damped global site, a site per
// document, or none). `train`, `prequential`, the server's learner thread and
// the Trainer drive a Learner; so do the server, LiveModel, Python and the MPI ranks.
//
// Contracts:
//  - Learn() takes a document in the model's id space (DocumentDecoder, or a
//    DocumentBuffer built by hand). On error nothing in the model has changed
//    (both engines undo a failed step; sdem_learner.h, sep_engine.h).
//  - The model may grow while it is learned (Model::AddClass on a stream with
//    open classes). A grown classifier invalidates every scoring state; the
//    Learner sees Model::layout_version() change and rebuilds its own before
//    the next document, so callers need not.
//  - The model is borrowed: it must outlive the Learner, and nothing else may
//    change it while Learn() runs. One thread at a time per Learner.
#ifndef TRIBUTARY_LEARNER_H_
#define TRIBUTARY_LEARNER_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/document.h"
#include "tributary/model.h"
#include "tributary/sdem_learner.h"
#include "tributary/sep_engine.h"
#include "tributary/status.h"

namespace tributary {

/// The engines a Learner runs.
enum class Engine {
  kAuto,  ///< SEP for a family with SEP hooks (the count mixtures), else sdEM (ResolveEngine)
  kSdem,  ///< sdEM: online EM as natural-gradient descent, any loss (sdem_learner.h)
  kSep,   ///< stochastic expectation propagation: one damped global site (sep_engine.h)
  kEp,    ///< expectation propagation: a site per document
  kAdf,   ///< assumed density filtering: no site memory
};

/// "auto", "sdem", "sep", "ep" or "adf": the name flags and options use.
const char* EngineName(Engine engine);

/// The engine `name` names (a flag's or an option's text). Errors
/// (InvalidArgument): "unknown engine 'x' (expected auto, sdem, sep, ep or adf)".
Result<Engine> ParseEngine(std::string_view name);

/// How Learner::Create sets up its engine.
struct LearnerOptions {
  Engine engine = Engine::kAuto;  ///< kAuto: ResolveEngine's rule
  uint64_t seed = 1;              ///< seeds the engine's random generator (SdemLearner::Create, SepOptions::seed)
  /// SEP / EP / ADF only (sep_engine.h SepOptions): N (0: the model's) and
  /// the damping (0: the engine's default).
  double effective_size = 0;
  double damping = 0;  ///< SEP / EP / ADF only: SepOptions::damping (0: the engine's default)

  /// sdEM with `seed` (what the Trainer's and the live learner's candidates
  /// and train's one learner use: test-then-train needs the scores sdEM
  /// computes for its step).
  static LearnerOptions Sdem(uint64_t seed) {
    LearnerOptions o;
    o.engine = Engine::kSdem;
    o.seed = seed;
    return o;
  }
};

/// What one Learn() call did.
struct LearnResult {
  /// sdEM: the prediction before the step (argmax of log p(k, x)) and its
  /// scores (valid until the next call); SEP: unset (scores null).
  uint32_t predicted = 0;
  const std::vector<double>* scores = nullptr;  ///< sdEM: log p(k, x) before the step (engine-owned); SEP: null
  /// SEP / EP / ADF: the step left the feasible set and was skipped (the
  /// document counted, the model unchanged), and log Z_i before the step (NaN
  /// when not estimated).
  bool skipped = false;
  std::string skip_reason;      ///< when skipped: the family's or the engine's reason
  double log_z = std::nan("");  ///< SEP / EP / ADF: log Z_i before the step (NaN: not estimated)
  /// A live learner (live_model.h): its drift detector raised an alarm after
  /// this document, and the served candidate changed after it.
  bool drift_alarm = false;
  bool switched = false;  ///< a live learner: the served candidate changed after this document
};

/// The engine a model of `family` learns with under `engine`: "auto" is SEP
/// for a family with SEP hooks (the count mixtures), else sdEM. The one rule
/// Learner::Create, the server and the front ends apply; never kAuto. Errors
/// (InvalidArgument): SEP, EP or ADF for a family without SEP hooks; sdEM for
/// a family trained by SEP (no sdEM update: every document would fail).
Result<Engine> ResolveEngine(Engine engine, const Plugin& family);

/// The loss a new model of `family` records when `engine` learns it: SEP, EP
/// and ADF approximate the posterior of the likelihood, so "nll" whatever
/// `loss` says; sdEM learns `loss` itself. An engine that does not resolve
/// for the family (ResolveEngine's error, which the learner reports) leaves
/// `loss`. What train, serve and Python's Classifier record.
std::string RecordedLoss(Engine engine, const Plugin& family, const std::string& loss);

/// The name of `loss` when it learns labelled documents only (NCLL, hinge:
/// DocumentDecoder::DecodeForLearning refuses an unlabelled document naming
/// it), else "" (NLL learns unlabelled ones too; no loss: SEP).
std::string LabelRequiredBy(const Plugin* loss);

/// Learns a model one document at a time with the engine LearnerOptions
/// chooses (the contracts are at the top of this file).
class Learner {
 public:
  /// Errors: unknown engine; an engine the family cannot be trained with
  /// (sdEM for a family with SEP hooks only, SEP for one without); the
  /// model has no loss (sdEM).
  static Result<std::unique_ptr<Learner>> Create(Model* model, const LearnerOptions& options);

  /// Learns one document (rebuilding the engine first if the model's layout
  /// changed); `result` (optional) receives what the step did. Errors: the
  /// engine's (SdemLearner::Learn, SepLearner::Learn), naming the document;
  /// the model is then unchanged. An infeasible SEP step is not an error: it
  /// returns OK with result->skipped set.
  Status Learn(const trib_document& doc, LearnResult* result = nullptr);

  Model* model() const { return model_; }  ///< the model learned (borrowed)
  /// The engine in use (resolved: never kAuto; EngineName gives its name).
  Engine engine() const { return engine_; }
  /// Engine specifics (counters, site memory, last scores); null for the
  /// other engine.
  SdemLearner* sdem() { return sdem_.get(); }
  SepLearner* sep() { return sep_.get(); }              ///< the SEP / EP / ADF engine; null for sdEM
  const SepLearner* sep() const { return sep_.get(); }  ///< the SEP / EP / ADF engine; null for sdEM
  /// Records the block maps of every successful step in `trace` (model.h
  /// BlockTrace; null: none), across rebuilds of the engine. REQUIRES: trace
  /// sized for the model's blocks.
  void set_trace(BlockTrace* trace);

 private:
  Learner() = default;
  Status Build();
  Model* model_ = nullptr;
  LearnerOptions options_;
  Engine engine_ = Engine::kSdem;
  uint64_t layout_ = 0;  ///< model_->layout_version() the engine was built for
  BlockTrace* trace_ = nullptr;
  std::unique_ptr<SdemLearner> sdem_;
  std::unique_ptr<SepLearner> sep_;
};

/// True when `st` is a learner's refusal of one document (invalid for the
/// model, or numerically bad): what --skip-bad and the `on_bad` callbacks
/// leave out while the stream goes on. Anything else ends learning.
inline bool DocumentRefused(const Status& st) { return st.IsInvalidDocument() || st.code() == Status::Code::kNumeric; }

/// Decodes `doc` (document `index` of its stream) for learning into `model`,
/// growing the model first with what the document brings and the model's
/// schema lets it learn (`growth`): new terms (open vocabulary,
/// Model::AddTerms; the document is then decoded again, its new terms now
/// known) and a new class (open classes, Model::AddClass; out->label set).
/// *grew, when given, says whether the model grew. A Learner on `model`
/// adapts by itself (layout_version). Errors: Decode's; the model's refusal to
/// grow, named with the document. New terms stay added when the class that
/// follows is refused (their statistics are at the prior: nothing learned).
Status DecodeGrowing(const DocumentDecoder& decoder, const v1::Document& doc, uint64_t index, Model* model,
                     DecodeGrowth growth, DocumentBuffer* out, DecodeCounters* counters, bool* grew = nullptr);

}  // namespace tributary

#endif  // TRIBUTARY_LEARNER_H_
