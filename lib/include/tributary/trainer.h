// Trainer: what a user who never tunes anything gets from sdEM.
//
// The discriminative losses (NCLL, hinge) are sound but their single-learner
// defaults are not: one pass in arrival order under rho_t = (1 + 1e-4 t)^-1
// never averages its noise away, a stream grouped by class teaches each class
// until the model predicts it and then forgets it in the next block, and the
// prior and margin that work depend on the corpus. The Trainer therefore runs
// several learners ("candidates": the loss under a small grid of priors and
// margins, and the generative NLL learner, which does not depend on the
// order) on the same documents and keeps the one that predicts held-out
// documents of the TRAINING stream best. The test split is never seen.
//
// Two ways to run:
//  - Offline (a file, decoded into memory): a stratified validation split of
//    the training documents (`holdout`); the candidates make shuffled passes
//    over the rest (Algorithm 1, line 0: "D is randomly shuffled"; "repeat
//    ... until convergence") and stop when their validation accuracy has not
//    improved for `patience` passes (at most `max_epochs`); after four passes
//    only the best two discriminative candidates go on. A discriminative
//    winner is kept as it was at its best validation score (the held-out
//    documents chose it; learning them afterwards, or a refit, measurably
//    moved the model away from what was validated); the generative winner
//    learns every document (order-free exact averaging = batch MAP).
//  - Streaming (one pass, arrival order, e.g. standard input): every tenth
//    labelled document goes to a per-class reservoir (uniform reservoir
//    sampling, `reservoir_per_class` documents per class) instead of being
//    learned at once; documents that leave the reservoir are learned by every
//    candidate. At Finish() the candidates are compared on the reservoir,
//    which holds every class seen, old ones included, so a learner that
//    forgot the early classes of a class-grouped stream is seen to; then the
//    winner learns the documents still in the reservoir, in random order.
//    Every document is learned exactly once by the kept model.
// Selection: among the discriminative candidates, the highest validation
// accuracy (ties: the lower mean validation NCLL, -log p(y | x)); it is kept
// over the generative learner only if it is better beyond noise on the same
// held-out documents: with b documents it gets right and NLL gets wrong and
// c the other way round, b - c > sqrt(b + c) (one standard deviation of
// McNemar's paired statistic). Otherwise NLL, which no arrival order can
// hurt, is kept: the defaults never fall below the generative model by
// more than the validation noise.
//
// Thread safety: one Trainer per thread; it owns its models.
#ifndef TRIBUTARY_TRAINER_H_
#define TRIBUTARY_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tributary/document.h"
#include "tributary/learner.h"
#include "tributary/model.h"
#include "tributary/model_config.h"
#include "tributary/status.h"

namespace tributary {

/// One learner setting to try: the loss and the options that differ from the
/// caller's base configuration.
struct CandidateSpec {
  std::string label;        ///< shown in reports, e.g. "ncll prior=3"
  std::string loss;         ///< loss plugin name or path
  Options family_options;   ///< added to (or overriding) the base family options
  Options loss_options;     ///< added to (or overriding) the base loss options
  bool generative = false;  ///< NLL: order-free, one pass is exact averaging
};

/// The candidates the defaults try for `base` (trainer.h's header): the loss
/// under a small grid of priors ("", 3, 10; streaming "", 3) wherever `base`
/// fixes no prior, and of hinge margins (1, 10) wherever it fixes none, then
/// the generative NLL learner. Streaming pairs them (at most three learners)
/// instead of taking the product. `family` (may be null): a family whose
/// option table has no `prior` gets no prior grid (slda, lda-classifier, ...:
/// each candidate would be refused by the family).
std::vector<CandidateSpec> DefaultCandidates(const ModelConfig& base, bool streaming, const Plugin* family = nullptr);

/// `base` as candidate `c` sets it: c's loss, c's options over base's (a key
/// both give takes c's value); the generative candidate uses NLL's own
/// defaults (its lambda, no loss options).
ModelConfig CandidateConfig(const ModelConfig& base, const CandidateSpec& c);

/// Builds a fresh model (statistics at the prior, schedule and n set) for a
/// candidate. Provided by the front end, which knows the stream's schema and
/// the user's flags (usually through CandidateFactory below).
using ModelFactory = std::function<Result<std::unique_ptr<Model>>(const CandidateSpec&)>;

/// Builds a fresh model of a configuration for the documents at hand: the
/// front end's NewModel (model_config.h) with its registry, the stream's
/// schema and length.
using ConfigBuilder = std::function<Result<std::unique_ptr<Model>>(const ModelConfig&)>;

/// The factory every front end gives the Trainer and the live learner:
/// build(CandidateConfig(base, c)), grown to `decoded_by`'s schema when it is
/// given (documents decoded into its class and term ids, open classes and an
/// open vocabulary included, then mean the same in every candidate; borrowed,
/// it must outlive the factory). Errors: build's, GrowTo's.
ModelFactory CandidateFactory(const ModelConfig& base, ConfigBuilder build, const Model* decoded_by = nullptr);

/// Processes that run one offline search together (MPI ranks: distributed.h
/// MpiTrainerGroup). Every member calls TrainOffline with the same documents,
/// configuration and factory; member m learns the candidates c with
/// c % size() == m, the members exchange each pass's validation results (a
/// few numbers per candidate) and, at the end, the kept candidate's model, so
/// that every member returns the model one process would have returned, bit
/// for bit. Every method is collective except rank(), size() and registry():
/// every member calls it, in the same order.
class TrainerGroup {
 public:
  virtual ~TrainerGroup() = default;
  virtual int rank() const = 0;  ///< this member, 0 .. size() - 1
  virtual int size() const = 0;  ///< members, >= 1
  /// Element-wise sum of `values` over the members, in place (every member
  /// gives the same length).
  virtual Status SumAll(std::vector<double>* values) const = 0;
  /// True on every member if `local` is an error on any; *agreed gets the
  /// lowest failing member's error (named by its rank on the others).
  virtual bool AnyFailed(const Status& local, Status* agreed) const = 0;
  /// `*bytes` of member `root` copied to every member.
  virtual Status Broadcast(int root, std::string* bytes) const = 0;
  /// Finds the plugins of a model another member sends (Model::Parse).
  virtual const PluginRegistry& registry() const = 0;
};

/// What the Trainer tries and how long it searches (the two modes are at the
/// top of this file).
struct TrainerConfig {
  std::vector<CandidateSpec> candidates;  ///< REQUIRES: non-empty
  uint32_t epochs = 0;                    ///< offline: 0 = chosen by validation; else fixed
  uint32_t max_epochs = 20;               ///< offline, epochs = 0: at most this many passes per candidate
  uint32_t patience = 4;                  ///< offline, epochs = 0: a candidate stops after this many passes
                                          ///< without a better validation score
  double holdout = 0.1;                   ///< offline validation fraction (stratified by class)
  uint32_t reservoir_every = 10;          ///< streaming: one labelled document in this many is held out
  size_t reservoir_per_class = 100;       ///< streaming: held-out documents kept per class (uniform reservoir)
  bool shuffle = true;                    ///< offline: shuffle before every pass
  uint64_t seed = 1;                      ///< the split, the shuffles, the reservoir sampling and the learners' seed
  /// Offline, epochs = 0: the search's sample of training documents and the
  /// validation split are capped (0 = no cap).
  size_t search_documents = 20000;
  size_t max_validation = 5000;  ///< offline, epochs = 0: at most about this many held-out documents (0: no cap)
  /// Offline: candidates learn in parallel on this many threads (0 = one per
  /// hardware thread). The models do not depend on it.
  uint32_t threads = 0;
  /// Offline: when set, a document a learner refuses as invalid or numerically
  /// bad is reported here once (on any thread, never two calls at once) and
  /// that learner leaves it out of every later pass; a held-out document is
  /// screened before training (the --skip-bad contract). When null such an
  /// error stops training.
  std::function<void(const Status&)> on_bad;
  /// Offline: when set, the search is shared with the group's other members
  /// (TrainerGroup above; borrowed). The model returned does not depend on
  /// it. A bad document is reported by the members whose candidates met it.
  const TrainerGroup* group = nullptr;
};

/// How one candidate did on the held-out documents.
struct CandidateResult {
  std::string label;  ///< CandidateSpec::label
  /// Fraction of the labelled held-out documents predicted right: at the
  /// candidate's best pass (offline; for the kept candidate, the returned
  /// model's when it learned on after the search), or at Finish (streaming).
  double validation_accuracy = 0;
  double validation_ncll = 0;  ///< mean -log p(y | x) over the same documents (each capped at 50)
  uint32_t epochs = 0;         ///< passes at the best validation score (offline)
  bool kept = false;           ///< this candidate's model was returned
};

/// What a training run did: returned by TrainOffline and Finish, stored in
/// the model's snapshot (Model::training_report).
struct TrainReport {
  std::string mode;                         ///< "offline" or "streaming"
  size_t validation_documents = 0;          ///< held-out documents the candidates were compared on
  bool validation_learned = false;          ///< the kept model learned the held-out documents too
  uint32_t final_epochs = 0;                ///< passes of the kept model over every document
  size_t searched_documents = 0;            ///< training documents the candidates learned (offline)
  size_t continued_documents = 0;           ///< documents the kept model learned after the search
  uint64_t document_updates = 0;            ///< sdEM steps over all candidates and the refit
  std::vector<CandidateResult> candidates;  ///< one per candidate, in TrainerConfig order; empty: nothing compared
  std::string kept;                         ///< the kept candidate's label
  /// JSON text of the above (stored in snapshots, printed by inspect).
  std::string ToJson() const;
};

/// Validation accuracy and mean NCLL of `model` on `docs` (labelled ones);
/// `correct` (optional) gets one flag per document of `docs` (0 for unlabelled).
Status EvaluateOn(const Model& model, const std::vector<const DocumentBuffer*>& docs, double* accuracy,
                  double* mean_ncll, std::vector<char>* correct = nullptr);

/// The kept candidate (trainer.h's selection rule): `acc`, `ncll` and
/// `correct` per candidate, `generative` flags.
size_t ChooseCandidate(const std::vector<double>& acc, const std::vector<double>& ncll,
                       const std::vector<std::vector<char>>& correct, const std::vector<bool>& generative);

/// Trains with several candidate settings and keeps the best (the modes and
/// the selection rule are at the top of this file). Create() and Learn() are
/// the streaming mode; TrainOffline the offline one.
class Trainer {
 public:
  /// Offline: learns `docs` (labels as class indices of the models the factory
  /// builds) and returns the kept model. `on_progress` (may be null) is called
  /// on the calling thread, now and then, with the number of sdEM steps taken
  /// so far. The factory is called on the calling thread only. Errors name the
  /// document and the candidate.
  static Result<std::unique_ptr<Model>> TrainOffline(
      const ModelFactory& factory, const TrainerConfig& config, const DocumentSet& docs, TrainReport* report,
      const std::function<void(uint64_t updates)>& on_progress = nullptr);
  /// The defaults over documents in memory, as `train` and Python's fit run
  /// them: `config.candidates`, when empty, become DefaultCandidates(base,
  /// offline, decoded_by's family); the candidates' models come from
  /// CandidateFactory(base, build, &decoded_by) (`docs` hold labels and terms
  /// as decoded_by's ids); the kept model carries `report` as its training
  /// report (Model::training_report). Errors: TrainOffline's.
  static Result<std::unique_ptr<Model>> TrainDefaults(
      const ModelConfig& base, const ConfigBuilder& build, const Model& decoded_by, TrainerConfig config,
      const DocumentSet& docs, TrainReport* report, const std::function<void(uint64_t updates)>& on_progress = nullptr);
  /// The same over DocumentBuffers (copied into a DocumentSet first).
  static Result<std::unique_ptr<Model>> TrainOffline(
      const ModelFactory& factory, const TrainerConfig& config, const std::vector<DocumentBuffer>& docs,
      TrainReport* report, const std::function<void(uint64_t updates)>& on_progress = nullptr);

  /// Streaming: builds every candidate's model with `factory` and an sdEM
  /// learner for it. Errors: no candidates; the factory's or the learner's,
  /// naming the candidate.
  static Result<std::unique_ptr<Trainer>> Create(const ModelFactory& factory, const TrainerConfig& config);
  /// The model whose schema decodes the stream (candidate 0's). Classes and
  /// terms added to it must be announced with SyncClasses() (which adds them
  /// to the other candidates, Model::GrowTo) before the next Learn().
  Model* schema_model() { return candidates_[0].model.get(); }
  /// Grows every other candidate's model to schema_model()'s schema
  /// (Model::GrowTo). Errors: GrowTo's.
  Status SyncClasses();
  /// Learns (or holds out) one document. On error no candidate has changed.
  Status Learn(const DocumentBuffer& doc);
  /// Chooses, lets the kept model learn what is still held out, and returns it.
  Result<std::unique_ptr<Model>> Finish(TrainReport* report);
  uint64_t documents_seen() const { return seen_; }  ///< documents passed to Learn(), held out or not

 private:
  struct Candidate {
    CandidateSpec spec;
    std::unique_ptr<Model> model;
    std::unique_ptr<Learner> learner;
  };
  Trainer() = default;
  Status LearnAll(const DocumentBuffer& doc);
  TrainerConfig config_;
  std::vector<Candidate> candidates_;
  std::vector<std::vector<DocumentBuffer>> reservoir_;  ///< per class
  std::vector<uint64_t> offered_;                       ///< per class: documents offered to the reservoir
  std::mt19937_64 rng_;
  uint64_t seen_ = 0;
  uint64_t updates_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_TRAINER_H_
