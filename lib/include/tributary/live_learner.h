// LiveLearner: several learners on one live stream, the best of them served,
// and a change detector that makes the long memories forget.
//
// A live stream is seen once, in arrival order, and may change. One sdEM
// learner cannot be right for every stream: a discriminative loss (NCLL,
// hinge) is the most accurate on a stream in random order but forgets a
// class it has not seen for a while (a class-grouped backfill), the
// generative NLL learner never forgets but is less accurate, and a decaying
// step (rho_t = (1 + lambda t)^-1, sdEM §3.2) averages its noise away but
// adapts ever more slowly after a change. So the LiveLearner runs
// *candidates* (a loss, its options, and a memory) on the same documents:
//
//  - Test, then train. Every labelled document is scored by every candidate
//    before that candidate learns it (the scores sdEM computes for its own
//    step, learner.h LearnResult: no second scoring). The prediction
//    reported for the document is the served candidate's.
//  - Memory. A candidate with `memory` M never lets its step counter t pass
//    M, so its step never falls below rho_M: it keeps adapting at the rate
//    it had after M documents (a step-size floor). memory 0 is the
//    schedule's own decay.
//  - Selection. Each candidate's prequential 0/1 error is averaged with an
//    exponential window (`half_life` documents). Every `check_every`
//    labelled documents the candidate with the lowest windowed error is
//    noted; it replaces the served one when it has been lower by more than
//    `switch_margin` at `switch_checks` checks in a row (hysteresis:
//    predictions do not flap between candidates that are equally good).
//  - Every class. The prequential error of a class-grouped stream rewards
//    a learner that predicts the current block's class, and a model scored
//    on documents it learned rewards memorising. So one labelled document
//    in `hold_every` is held out: tested like the others, kept in a
//    per-class sample of the `sample_per_class` most recent held-out
//    documents of its class, and learned (by every candidate) only when a
//    newer one replaces it. One sample document is scored by every
//    candidate every `sample_every` labelled documents (round robin). A
//    candidate whose class-balanced accuracy on the sample is below the
//    best candidate's by more than `sample_tolerance` may not be served
//    while the stream is grouped by class and for 2 x half_life documents
//    after (see Drift for how that is told): a learner that forgot the
//    early classes is not chosen, whatever its recent error. (On a mixed
//    stream the windowed error measures every class as it comes.)
//  - Drift. ADWIN (drift.h) watches the served candidate's 0/1 errors (its
//    window restarts when another candidate is served: a change of
//    candidate is no drift). On an
//    alarm every candidate's step counter is lowered to at most
//    `restart_memory` (its step raised: sdEM's statistics then move towards
//    the new documents at rate about 1 / restart_memory for NLL, eq. 15's
//    decay factor 1 - rho (c + nu / n)), and each class's sample, which
//    holds the old concept, is emptied when the class's first document
//    after the alarm comes (a class that does not come back keeps its
//    sample). The served model then recovers in about the short memory's
//    length, not the length of all that came before. The detector watches
//    only documents of classes seen 20 times before (the first documents of
//    a new class are errors whatever the model), and none while the stream
//    is grouped by class (one class holds more than a quarter of the last 200
//    labels and more than twice its share of the stream, or more than half
//    of them and twice an even share of the classes seen): a class-grouped
//    backfill is not a drift. A class that first appears in a mixed stream
//    after `restart_memory` documents raises the steps the same way (an
//    alarm marked new_class): the detector does not watch a class's first
//    documents, and NLL's counts would take the whole stream's length to
//    give the new class its prior. After a restart the windowed errors start
//    again, so the candidate that adapts first is served first.
//
// Every candidate learns every labelled document once (a held-out one when
// it leaves the sample, or at Flush): the cost per document is the
// candidates' sdEM steps plus one sample scoring per candidate every
// `sample_every` documents. Deterministic: the same documents in the same
// order give the same models, choices and alarms.
//
// Thread safety: one thread at a time; the LiveLearner owns its models.
#ifndef TRIBUTARY_LIVE_LEARNER_H_
#define TRIBUTARY_LIVE_LEARNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tributary/document.h"
#include "tributary/drift.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/status.h"
#include "tributary/trainer.h"

namespace tributary {

/// One candidate of a LiveLearner: a setting (trainer.h CandidateSpec) and
/// its memory.
struct LiveCandidate {
  CandidateSpec spec;  ///< loss and options (its label names the candidate, with the memory)
  /// 0: the schedule's own decay (long memory); M > 0: the step counter t is
  /// held at M at most, so rho_t >= rho_M (a step-size floor).
  uint64_t memory = 0;
};

/// The LiveLearner's settings (the file comment says what each does).
struct LiveLearnerOptions {
  std::vector<LiveCandidate> candidates;  ///< REQUIRES: non-empty; candidate 0's model decodes the stream
  uint32_t half_life = 500;               ///< documents: the windowed error's half-life (>= 1)
  double switch_margin = 0.02;            ///< a challenger must be better by this windowed error, in [0, 1)
  uint32_t check_every = 100;             ///< labelled documents between selections (>= 1)
  /// A challenger replaces the served candidate after leading (by
  /// switch_margin) at this many checks in a row (>= 1).
  uint32_t switch_checks = 3;
  /// One labelled document in this many is held in the per-class sample
  /// instead of being learned at once (>= 1); it is learned when it leaves.
  uint32_t hold_every = 10;
  uint32_t sample_per_class = 8;   ///< recent documents kept per class (0: no sample, no class check)
  uint32_t sample_every = 8;       ///< one sample document scored per this many labelled documents (>= 1)
  double sample_tolerance = 0.1;   ///< class-balanced sample accuracy a served candidate may lose, in [0, 1]
  bool detect_drift = true;        ///< run ADWIN on the served candidate's errors
  AdwinOptions detector;           ///< ADWIN's settings
  uint64_t restart_memory = 1000;  ///< on an alarm, every step counter is lowered to at most this (>= 1)
  uint64_t seed = 1;               ///< the learners' seed
  /// Checks the values are in range; the message names the bad one.
  Status Validate() const;
};

/// The default candidates for a live stream with `base`'s settings: the
/// base loss with the schedule's decay, the same loss with memory
/// `memory` (its step held from then on), and the generative NLL learner
/// (long memory); for a generative base (NLL), NLL long and NLL with
/// memory. Three learners at most (the cost bound of docs/design.md).
std::vector<LiveCandidate> DefaultLiveCandidates(const ModelConfig& base, uint64_t memory = 1000);

class LiveLearner;

/// Whether a front end runs the defaults' choice among settings (kAuto: the
/// live learner, the Trainer) or the user's one setting alone (kOff).
enum class Selection { kAuto, kOff };

/// The selection `name` names ("auto" or "off": --select, Python's select=).
/// Errors (InvalidArgument): "select: expected 'auto' or 'off', found 'x'".
Result<Selection> ParseSelection(std::string_view name);

/// The one rule every front end that sees a stream once (serve, train from
/// standard input or with one pass, Python's classifiers) applies: a model
/// `single` built from the user's settings is learned by the default live
/// learner when `select` is kAuto, the engine is sdEM (kSdem, or kAuto
/// for a family without SEP hooks), the outputs are classes (not latent
/// components) and the loss needs a label (a live learner learns labelled
/// documents only: under nll, which learns unlabelled ones too, one learner
/// with the user's settings runs). Otherwise `single` is learned alone.
bool LiveLearnerApplies(Selection select, Engine engine, const Model& single);

/// The default live learner for a stream whose user's settings are `base`:
/// DefaultLiveCandidates(base), seeded with base.seed, each candidate's
/// model made by `build` from CandidateConfig(base, candidate) (the front
/// end's model builder: its registry, the stream's schema and length).
/// Errors: `build`'s, or LiveLearner::Create's.
Result<std::unique_ptr<LiveLearner>> NewDefaultLiveLearner(
    const ModelConfig& base, const std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>& build);

/// What one labelled or unlabelled document did.
struct LiveStep {
  bool labelled = false;   ///< the document was learned (or held in the sample, to be learned)
  uint32_t predicted = 0;  ///< the served candidate's argmax before learning the document
  bool correct = false;    ///< labelled and predicted == label
  /// The served candidate's log p(k, x) before learning (valid until the next call).
  const std::vector<double>* scores = nullptr;
  bool alarm = false;     ///< the detector raised an alarm after this document
  bool switched = false;  ///< the served candidate changed after this document
};

/// How one candidate is doing.
struct LiveCandidateStats {
  std::string label;            ///< the candidate's label
  uint64_t memory = 0;          ///< LiveCandidate::memory
  uint64_t labelled = 0;        ///< labelled documents it scored
  double accuracy = 0;          ///< cumulative prequential accuracy
  double ncll = 0;              ///< cumulative mean -log p(y | x) (each capped at 50)
  double window_accuracy = 0;   ///< 1 - the windowed error (half_life)
  double window_ncll = 0;       ///< the windowed mean -log p(y | x)
  double sample_accuracy = -1;  ///< class-balanced accuracy on the per-class sample (-1: not measured yet)
  bool eligible = true;         ///< may be served (the sample check)
  bool served = false;          ///< the candidate served now
};

/// A detector alarm.
struct LiveAlarm {
  uint64_t document = 0;  ///< 1-based index of the labelled document after which it fired
  std::string served;     ///< the candidate served then
  /// Not the detector's: a class appeared in a mixed stream after the first
  /// restart_memory documents (the steps are raised the same way).
  bool new_class = false;
};

/// Several candidates learning one stream, the best one served (see the file
/// comment).
class LiveLearner {
 public:
  /// Builds every candidate's model with `factory` (trainer.h ModelFactory:
  /// fresh statistics, schedule and n set) and an sdEM learner for it.
  /// Errors: options out of range; the factory's or the learner's, naming
  /// the candidate.
  static Result<std::unique_ptr<LiveLearner>> Create(const ModelFactory& factory, const LiveLearnerOptions& options);

  /// The model whose schema decodes the stream (candidate 0's). Classes and
  /// terms added to it must be announced with SyncClasses() before the next
  /// Learn().
  Model* schema_model() { return candidates_[0].model.get(); }
  /// Grows every other candidate's model to schema_model()'s schema.
  Status SyncClasses();

  /// Test-then-train on one labelled document (in schema_model()'s id
  /// space): scored and learned by every candidate. Errors: an unlabelled
  /// document (InvalidDocument: the live learner learns labelled documents
  /// only); a candidate's refusal of the document (learner.h; the first
  /// candidate's refusal leaves every model unchanged), naming the candidate
  /// when there are several.
  Status Learn(const DocumentBuffer& doc, LiveStep* step = nullptr);

  /// The model served now (borrowed; valid until the next Learn).
  const Model& served() const { return *candidates_[served_].model; }
  /// The same, to annotate before saving (Model::set_training_report).
  Model& served() { return *candidates_[served_].model; }
  size_t served_index() const { return served_; }  ///< which candidate is served
  /// Learns every document still held in the per-class sample (every
  /// candidate, in the order they came; at the end of a stream) and empties
  /// the sample. Errors: a candidate's, other than a refusal of one
  /// document (counted in dropped()).
  Status Flush();
  /// Documents held in the per-class sample now (tested, not yet learned).
  size_t held() const {
    size_t n = 0;
    for (const auto& ring : sample_) n += ring.size();
    return n;
  }
  uint64_t dropped() const { return dropped_; }  ///< held documents refused when they left the sample
  /// Gives up the served model (the LiveLearner must not be used after).
  std::unique_ptr<Model> TakeServed() { return std::move(candidates_[served_].model); }

  // ---- Saving and resuming: everything, bit for bit ----
  //
  // A live learner is saved as one model snapshot: the served model, whose
  // Model::live_state holds the rest (LiveLearnerState in tributary.proto:
  // the settings, every other candidate's model as Model::Serialize writes
  // it, the windows, the detector, the per-class sample with its held
  // documents, the recent labels and the alarms). Tools that read a model
  // (predict, eval, inspect) read the served model and ignore the rest; a
  // learner resumed from it (FromModel) continues exactly as the one that
  // was saved: the same documents after it give the same bytes.

  /// Saves the learner as a snapshot at `path` (Model::Save: atomic
  /// replace). Size: about the candidates' models together. Errors: I/O, a
  /// candidate's serialisation.
  Status Save(const std::string& path, const SnapshotOptions& options = {});
  /// The bytes Save writes (Model::Serialize).
  Result<std::string> Serialize(const SnapshotOptions& options = {});
  /// Gives up the learner as one model: the served model with the state in
  /// its live_state (what Save writes). Errors: a candidate's serialisation.
  static Result<std::unique_ptr<Model>> ToModel(std::unique_ptr<LiveLearner> learner);
  /// Resumes the learner `model` holds (a model Save wrote, loaded, or
  /// ToModel's), finding the candidates' plugins in `registry`. The model
  /// becomes the served candidate's (its live_state cleared). Errors:
  /// InvalidArgument when the model holds no live learner; Corruption naming
  /// what is wrong in the state; a candidate model's Parse errors.
  static Result<std::unique_ptr<LiveLearner>> FromModel(std::unique_ptr<Model> model, const PluginRegistry& registry);
  /// True when `model` holds a live learner (Model::live_state is set).
  static bool Holds(const Model& model) { return !model.live_state().empty(); }

  /// Growth limits for every candidate (Model::SetGrowthLimits: not saved,
  /// set again after FromModel); each candidate's statistics get
  /// max_statistics_bytes / candidates (0: no budget), so the learner's
  /// statistics together stay within max_statistics_bytes.
  void SetGrowthLimits(const GrowthLimits& limits, uint64_t max_statistics_bytes);
  size_t num_candidates() const { return candidates_.size(); }  ///< the candidates
  /// Candidate i's model (REQUIRES: i < num_candidates()).
  const Model& candidate_model(size_t i) const { return *candidates_[i].model; }
  const LiveLearnerOptions& options() const { return options_; }  ///< the settings (saved with the learner)
  /// The candidates' statistics bytes together (Model::statistics_bytes),
  /// plus the documents held in the sample (their term arrays): what the
  /// learner's memory grows with.
  uint64_t memory_bytes() const;

  /// Labelled documents learned (or held in the sample, to be learned) since
  /// the learner was made; saved with it (a live model's version).
  uint64_t labelled() const { return labelled_; }
  uint64_t switches() const { return switches_; }                   ///< times the served candidate changed
  const std::vector<LiveAlarm>& alarms() const { return alarms_; }  ///< the detector's alarms, oldest first
  /// Every candidate's statistics, in LiveLearnerOptions order.
  std::vector<LiveCandidateStats> candidate_stats() const;
  /// A JSON object: candidates, the served one, alarms, switches (for
  /// reports and snapshots' training report).
  std::string ToJson() const;

 private:
  struct Candidate {
    LiveCandidate setting;
    std::unique_ptr<Model> model;
    std::unique_ptr<Learner> learner;
    std::unique_ptr<ScoringState> state;  ///< for the sample and unlabelled documents
    uint64_t state_layout = ~uint64_t{0};
    uint64_t labelled = 0, correct = 0;
    double ncll_sum = 0;
    double w_err = 0, w_ncll = 0, w_norm = 0;  ///< exponentially weighted sums and their weight
    double sample_accuracy = -1;
    bool eligible = true;
  };
  struct SampleSlot {
    DocumentBuffer doc;
    std::vector<int8_t> correct;  ///< per candidate: -1 not scored yet, 0, 1
    size_t epoch = 0;             ///< alarms raised before it was kept
    uint64_t order = 0;           ///< labelled documents before it (its place in the stream)
  };
  /// Documents of a class seen before the detector watches that class.
  static constexpr uint64_t kSettled = 20;
  /// Recent labels kept to tell a class-grouped stream (Grouped).
  static constexpr size_t kRecent = 200;
  LiveLearner() = default;
  Status ScoreWith(Candidate* c, const trib_document& doc, std::vector<double>* scores);
  Status ScoreSample();
  void Select();
  void Restart();
  bool Grouped(uint32_t y);
  void HoldMemory(Candidate* c);
  Status LearnHeld(const DocumentBuffer& doc);
  Result<std::string> EncodeState() const;

  LiveLearnerOptions options_;
  std::vector<Candidate> candidates_;
  size_t served_ = 0;
  double decay_ = 1;  ///< the window's per-document decay, 2^(-1 / half_life)
  Adwin detector_;
  std::vector<std::vector<SampleSlot>> sample_;  ///< per class, a ring of recent documents
  std::vector<size_t> sample_next_;              ///< per class: the ring's next slot to overwrite
  std::vector<uint64_t> seen_;                   ///< per class: labelled documents learned
  size_t classes_seen_ = 0;                      ///< classes with seen_ > 0
  std::vector<uint32_t> recent_;                 ///< the last kRecent labels (a ring)
  size_t recent_pos_ = 0;                        ///< recent_'s oldest entry once full
  std::vector<uint32_t> recent_count_;           ///< per class: its labels in recent_
  size_t cursor_class_ = 0, cursor_slot_ = 0;    ///< the next sample document to score
  uint64_t labelled_ = 0, switches_ = 0;
  uint64_t dropped_ = 0;           ///< held documents a candidate refused when they left the sample
  size_t leader_ = 0, leads_ = 0;  ///< the challenger leading at the last checks, and how many in a row
  uint64_t last_grouped_ = 0;      ///< labelled_ when the stream last looked grouped by class (0: never)
  std::vector<LiveAlarm> alarms_;
  std::vector<double> scratch_, served_scores_, exp_scratch_;
};

}  // namespace tributary

#endif  // TRIBUTARY_LIVE_LEARNER_H_
