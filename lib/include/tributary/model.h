// A model: a family plugin instance, the loss it is trained with, its schema
// and the engine-owned global sufficient statistics.
//
// Thread safety: const methods (Score, Posterior, Save) may run concurrently
// with each other, each caller using its own ScoringState. Non-const methods
// require exclusive access. To predict while learning, learn on one Model
// and publish Clone()s to readers.
#ifndef TRIBUTARY_MODEL_H_
#define TRIBUTARY_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tributary/huge_pages.h"
#include "tributary/plugin_abi.h"
#include "tributary/plugin_registry.h"
#include "tributary/schema.h"
#include "tributary/status.h"
#include "tributary/step_schedule.h"

namespace tributary {

/// Plugin options as (key, value) pairs, in the order given; keys may repeat and are interpreted by the plugin.
using Options = std::vector<std::pair<std::string, std::string>>;
/// True if `options` sets `key`.
inline bool HasOption(const Options& options, const std::string& key) {
  for (const auto& kv : options) {
    if (kv.first == key) return true;
  }
  return false;
}

/// The global statistics mu, stored per block in the lazy affine form
/// mu[i] = scale * raw[i] + shift * alpha_bar, so that the decay
/// (1 - rho (c + nu/n)) and the prior term rho abar / n of every sdEM step
/// cost O(blocks) instead of O(model) (docs/design.md, "The lazy affine map").
///
/// Invariant kept by Init, the learner's steps and Restart: shift - scale is
/// the paper's gamma, the prior mass the steps have added so far (sdEM
/// Algorithm 2 line 8, gamma <- gamma + rho/n, decayed by the NLL factor like
/// everything else), in units of alpha_bar. Then the data part of a statistic
/// (Algorithm 2's N, which starts at the prior alpha_bar and is clamped at 0 by
/// the check-step) is
///     N[i] = mu[i] - gamma * alpha_bar = scale * (raw[i] + alpha_bar),
/// so the paper's check-step N >= 0 is raw[i] >= -alpha_bar in raw space,
/// whatever the block's scale and shift.
class SufficientStats {
 public:
  /// The raw values' array: large ones in huge pages (tributary/huge_pages.h), since a model of a few MB
  /// otherwise costs a page fault per 4 KiB when it is created, copied or loaded.
  using RawValues = std::vector<double, huge_pages::Allocator<double>>;
  /// Takes a family's layout: `blocks` must be contiguous and ordered from offset 0, each with a finite
  /// nu >= 0 and a finite alpha_bar (else Internal, naming the block). Sets every scale and shift to 1 and
  /// raw to zeros (mu_0 = alpha_bar).
  Status Init(std::vector<trib_block> blocks);
  /// The number of statistics (entries of raw()).
  uint64_t size() const { return raw_.size(); }
  /// The blocks, ordered by offset, covering [0, size()).
  const std::vector<trib_block>& blocks() const { return blocks_; }
  /// The blocks, for engines and Load, which set scale and shift; offsets and sizes must not change.
  std::vector<trib_block>& mutable_blocks() { return blocks_; }
  /// The raw values, size() of them; whoever writes them notes it (NoteWritten, below).
  RawValues& raw() { return raw_; }
  /// The raw values, size() of them.
  const RawValues& raw() const { return raw_; }
  /// Block index of entry i.
  uint32_t BlockOf(uint64_t i) const {
    uint32_t b = 0;
    while (b + 1 < blocks_.size() && i >= blocks_[b + 1].offset) ++b;
    return b;
  }
  /// The statistic mu[i] (i < size()) through its block's affine map. O(blocks): BlockOf scans.
  double Mu(uint64_t i) const {
    const trib_block& b = blocks_[BlockOf(i)];
    return b.scale * raw_[i] + b.shift * b.alpha_bar;
  }
  /// Rewrites block b so that scale = 1, shift = 0 (raw = mu). O(block size).
  /// Breaks the gamma invariant above: for export and tests only.
  void Materialize(uint32_t b);
  /// One step's map mu <- f mu + prior_step * alpha_bar applied to every raw
  /// entry of block b (O(block size)), leaving scale = 1 and the gamma
  /// invariant intact. Used when f <= 0 or the scale would underflow.
  void Restart(uint32_t b, double f, double prior_step);
  /// The C view handed to family calls that may write raw (init_stats, commit, rebuild, growth); it points into
  /// this object and is valid until Init, assignment or a move.
  trib_stats View();
  /// The same view for read-only family calls (score, completion, ...): nothing may be written through it.
  trib_stats ConstView() const;

  /// Write tracking, so that a copy can be brought up to date by copying only
  /// what changed (CopyWrittenSince; Model::RefreshFrom, the server's
  /// publications). The statistics are cut into pages of 2^kPageShift
  /// entries; a writer of raw notes the range it wrote (NoteWritten) or that
  /// it may have written anywhere (NoteAllWritten), stamped with the current
  /// epoch. The engines (sdem_learner.cc, sep_engine.cc), Materialize,
  /// Restart and Model's Rebuild and growth do; code that writes raw() by
  /// hand must too. Cost: one store per page of a run.
  static constexpr uint32_t kPageShift = 9;
  void NoteWritten(uint64_t first, uint64_t end) {  ///< [first, end)
    if (first >= end) return;
    const uint64_t last = (end - 1) >> kPageShift;
    for (uint64_t p = first >> kPageShift; p <= last; ++p) page_epoch_[p] = epoch_;
  }
  /// The same for a run of at most 2^kPageShift entries (it spans one or two
  /// pages): two stores, no loop. REQUIRES: first < end <= first + 2^kPageShift.
  void NoteWrittenShort(uint64_t first, uint64_t end) {
    page_epoch_[first >> kPageShift] = epoch_;
    page_epoch_[(end - 1) >> kPageShift] = epoch_;
  }
  /// Notes a write that may have touched any entry: CopyWrittenSince then copies all of raw.
  void NoteAllWritten() { all_epoch_ = epoch_; }
  /// The epoch writes are stamped with now; NextEpoch starts a new one (a copy
  /// made now holds every write stamped <= epoch()).
  uint64_t epoch() const { return epoch_; }
  /// Starts a new epoch: called right after taking epoch() for a copy, so that later writes are newer than it.
  void NextEpoch() { ++epoch_; }
  /// Makes these statistics equal to `src`'s, given that they were equal to
  /// src's as of epoch `since` (src's epoch then), copying only the pages src
  /// wrote after it (all of raw when src noted an arbitrary write since).
  /// REQUIRES: the same layout (block offsets and sizes).
  void CopyWrittenSince(const SufficientStats& src, uint64_t since);
  /// Pages CopyWrittenSince would copy (for reports and tests).
  uint64_t PagesWrittenSince(uint64_t since) const;

 private:
  std::vector<trib_block> blocks_;
  RawValues raw_;
  std::vector<uint64_t> page_epoch_;  ///< per page: the epoch of its last noted write
  uint64_t epoch_ = 1;
  uint64_t all_epoch_ = 1;  ///< the epoch of the last NoteAllWritten
};

/// What a learner did to every statistic of each block that no document
/// touched, since Reset: mu <- decay[b] * mu + offset[b] * alpha_bar[b] (the
/// product of its steps' decays and the prior mass they added, in units of
/// alpha_bar). sdEM: decay (1 - rho (c + nu/n)), offset rho/n per step
/// (eq. 15); SEP: decay (1 - eps) and eps times the block site (eq. 11).
/// The data-parallel learners (parallel.h) need it to compose shards learned
/// from the same statistics. A learner with a trace attached keeps it up to
/// date after every successful step (O(blocks) per document).
/// `steps` counts the steps and `gradient` says whether any was a gradient
/// step (sdEM with loss self-weight c = 0: NCLL, hinge), which parallel.h
/// averages instead of composing.
struct BlockTrace {
  /// Per block: the product of the decays of the steps since Reset (1 after Reset).
  std::vector<double> decay, offset;
  /// \var offset
  /// Per block: the prior mass the steps since Reset added, in units of the block's alpha_bar (0 after Reset).
  uint64_t steps = 0;     ///< the successful steps since Reset
  bool gradient = false;  ///< true if any of them was a gradient step (loss self-weight c = 0)
  /// Starts a new trace for a model with `blocks` statistics blocks: the identity map, no steps.
  void Reset(size_t blocks) {
    decay.assign(blocks, 1.0);
    offset.assign(blocks, 0.0);
    steps = 0;
    gradient = false;
  }
};

/// Where the learner is: t, n, the step schedule and counters. Saved in
/// snapshots so that training can resume.
struct LearnerState {
  uint64_t updates = 0;            ///< t
  double effective_size = 1.0;     ///< n
  StepSchedule schedule;           ///< rho_t; NewModel sets it from ModelConfig
  uint64_t skipped_documents = 0;  ///< documents refused while learning (counted by the front ends, not the library)
  uint64_t materializations = 0;   ///< sdEM steps that re-materialised a block and rebuilt instead of committing
};

class Env;

/// How a snapshot is written.
struct SnapshotOptions {
  Env* env = nullptr;  ///< nullptr: Env::Default()
  /// A position in the embedding application's own log (the server's last
  /// applied write-ahead-log sequence), stored verbatim and returned by Load.
  /// The model itself never reads it.
  uint64_t log_sequence = 0;
};

class Model;

/// Per-thread scratch for scoring (the family's trib_family_state).
class ScoringState {
 public:
  ~ScoringState();
  ScoringState(const ScoringState&) = delete;
  ScoringState& operator=(const ScoringState&) = delete;
  /// The family's state, for passing to its calls; owned by this object.
  trib_family_state* get() { return state_; }

 private:
  friend class Model;
  ScoringState(std::shared_ptr<const Plugin> plugin, trib_family_state* state)
      : plugin_(std::move(plugin)), state_(state) {}
  std::shared_ptr<const Plugin> plugin_;
  trib_family_state* state_;
};

/// A model: a family plugin instance with its statistics, schema, loss and learner state (see the file comment
/// for thread safety). Made by Create (or NewModel, model_config.h), Load, Parse or Clone; never copied.
class Model {
 public:
  /// Creates a model with statistics at the prior (mu_0 = abar). `loss` may be
  /// null for a model that is only used for prediction. `n` is the effective
  /// corpus size the family's first rebuild sees (trib_step.n; families such
  /// as LDA derive their parameters from it); the learner state's
  /// effective_size is left for the caller to set (NewModel sets both alike).
  /// Errors: the family refuses the options or the schema (message names the
  /// option), or the family's layout is inconsistent.
  static Result<std::unique_ptr<Model>> Create(std::shared_ptr<const Plugin> family, std::shared_ptr<const Plugin> loss,
                                               ModelSchema schema, Options family_options, uint64_t seed = 1,
                                               double n = 1.0);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// A deep copy (family caches included) for publishing to readers.
  Result<std::unique_ptr<Model>> Clone() const;
  /// Makes this model (a Clone of `src`, or a model refreshed from it, that
  /// nobody else uses) equal to `src` again, given that it was equal to src
  /// as of src's statistics epoch `since` (SufficientStats::epoch): copies
  /// the statistics pages src wrote since, src's schema (sharing its
  /// vocabulary), learner state and report, and a fresh clone of src's family
  /// caches. O(pages written + family caches + classes) instead of Clone's
  /// O(model): the server publishes this way. Errors: a different family or
  /// statistics layout (src grew: Clone instead); on error this model is
  /// unchanged.
  Status RefreshFrom(const Model& src, uint64_t since);

  /// Saves a snapshot atomically (Env::WriteFileAtomically: temporary file,
  /// fsync, rename, directory fsync). On error the file at `path`, if any, is
  /// the previous snapshot, untouched.
  Status Save(const std::string& path, const SnapshotOptions& options = {}) const;
  /// Loads a snapshot through `env` (nullptr: Env::Default()), finding the
  /// plugins in `registry` by name and refusing a version different from the
  /// one recorded (both versions named). A truncated, corrupt or foreign file
  /// is Corruption with the reason; a missing one NotFound. `log_sequence`,
  /// when given, receives SnapshotOptions::log_sequence as saved.
  static Result<std::unique_ptr<Model>> Load(const std::string& path, const PluginRegistry& registry,
                                             Env* env = nullptr, uint64_t* log_sequence = nullptr);
  /// The bytes Save writes (options.env unused), and the model they hold
  /// (Load's checks and errors); `name` stands for the path in messages
  /// ("snapshot '<name>': ..."). Pickling and in-memory copies use these.
  Result<std::string> Serialize(const SnapshotOptions& options = {}, const std::string& name = "<memory>") const;
  /// Parses the bytes Serialize or Save wrote, with Load's checks and errors; `name` stands for the path in
  /// messages.
  static Result<std::unique_ptr<Model>> Parse(const std::string& bytes, const std::string& name,
                                              const PluginRegistry& registry, uint64_t* log_sequence = nullptr);
  /// A digest of the statistics (raw values and each block's scale and
  /// shift), 8 hex digits (CRC-32): equal digests mean bit-identical
  /// statistics. `tributary inspect` prints it as stats_digest.
  std::string StatsDigest() const;

  /// A scoring state for this model (the family's state_create), seeding the random generator of a family that
  /// samples. May be called while other threads score. A state is used by one thread at a time, with this model
  /// only, and is invalid once layout_version() changes.
  Result<std::unique_ptr<ScoringState>> NewScoringState(uint64_t seed = 1) const;

  /// log p(k, x | theta) for all classes; `log_joint` gets num_classes() values.
  Status Score(const trib_document& doc, ScoringState* state, double* log_joint) const;

  /// Document completion (ABI 1.2 `completion`): log p(heldout | observed)
  /// summed over the held-out tokens. has_completion() is false when the
  /// family does not provide it.
  bool has_completion() const { return family_->family().completion != nullptr; }
  /// Sets *log_prob to log p(heldout | observed) (split by SplitForCompletion, document.h). Errors: InvalidArgument
  /// without has_completion(); Numeric when the family returns a value that is not finite or is > 0.
  Status Completion(const trib_document& observed, const trib_document& heldout, ScoringState* state,
                    double* log_prob) const;
  /// p(term | component k) over the vocabulary (ABI 1.2 `component_terms`),
  /// k < num_components(); an error when the family does not provide it.
  Status ComponentTerms(uint32_t k, std::vector<double>* out) const;
  /// The number of latent components or topics: a latent family's outputs, or
  /// what a classifier with components reports (ABI 1.8 `components`: slda's
  /// topics); 0 for a classifier without.
  uint32_t num_components() const;
  /// The document's proportions over the components (num_components() values
  /// summing to 1): a latent family's posterior over its outputs (the softmax
  /// of Score), or a classifier's ABI 1.8 `proportions` (slda's topic
  /// proportions). Errors: InvalidArgument when the model has no components
  /// or its family no proportions; Numeric when they are not a distribution.
  Status Proportions(const trib_document& doc, ScoringState* state, double* out) const;

  /// Adds a class (schema with open classes; the family must support growth).
  /// Every scoring state made before is invalid afterwards, and
  /// layout_version() changes (a Learner, learner.h, rebuilds itself when it
  /// sees that). Cost: for a family with add_class (ABI 1.4: multinomial,
  /// gaussian, lda-classifier) O(one class's statistics) while there is room
  /// (class_capacity()), and O(model) when the room is exhausted and the model
  /// is re-created with 1.5 times as much (amortised O(classes + vocabulary)
  /// per class); for other families O(model) every time (grow_classes).
  /// On error the model is unchanged.
  Status AddClass(const std::string& name);
  /// Adds the terms of `names` the vocabulary lacks, in order (schema with an
  /// open vocabulary; the family must provide ABI 1.5 add_terms, as
  /// multinomial does). Their statistics start where a term present from the
  /// start and never seen would be (tests/open_vocabulary_test.cc: bit for
  /// bit, under NLL whose first step moves every entry). While there
  /// is room (vocab_capacity()) the terms come into use in place, O(terms x
  /// classes), scoring states stay valid and layout_version() does not change;
  /// when the room is exhausted the model is re-created with 1.5 times as much
  /// (O(model), amortised O(classes) per term) and layout_version() changes.
  /// On error the model is unchanged.
  Status AddTerms(const std::vector<std::string>& names);
  /// Adds the classes of `reference` this model lacks and, with an open
  /// vocabulary, its terms, each in `reference`'s order: a model that started
  /// from the same schema then gives a class index and a term id the same
  /// meaning as `reference` (a decoder made for one serves both). On error
  /// some may have been added.
  Status GrowTo(const ModelSchema& reference);
  /// How far this model may grow (an open vocabulary, open classes): the
  /// caller's `limits`, and a budget for the statistics' bytes
  /// (`max_statistics_bytes`, 0: none) folded into the schema's effective
  /// max_classes and max_terms from what a class and a term cost now; kept
  /// up to date as the model grows (schema().limits()). Decode refuses a
  /// label past them and leaves new terms out; AddClass and AddTerms refuse
  /// (kInvalidDocument), and the room made when the model is re-created never
  /// passes them. Not saved with the model: set again after every load.
  void SetGrowthLimits(const GrowthLimits& limits, uint64_t max_statistics_bytes);
  /// SetGrowthLimits's `limits` as given (before the budget is folded in).
  const GrowthLimits& growth_limits() const { return user_limits_; }
  /// SetGrowthLimits's `max_statistics_bytes` (0: none).
  uint64_t statistics_budget() const { return stats_budget_; }
  /// The statistics' bytes (what SetGrowthLimits's budget bounds).
  uint64_t statistics_bytes() const { return stats_.size() * sizeof(double); }
  /// Changes whenever the statistics' layout changes (a class added, the model re-created to grow): scoring
  /// states and learners made before must then be made again. Starts at 0.
  uint64_t layout_version() const { return layout_version_; }
  /// Terms the statistics have room for (>= the vocabulary size); equal to the
  /// vocabulary size for a model without an open vocabulary.
  uint64_t vocab_capacity() const { return std::max(vocab_capacity_, schema_.vocab_size()); }
  /// Classes the statistics have room for (>= num_classes()); equal to
  /// num_classes() for a model created or loaded with a fixed set of classes.
  uint32_t class_capacity() const { return std::max(class_capacity_, num_classes()); }

  /// The model's schema: vocabulary, classes and features.
  const ModelSchema& schema() const { return schema_; }
  /// The schema, for changes that leave the statistics' layout alone; classes and terms are added with
  /// AddClass and AddTerms, which grow the statistics too.
  ModelSchema* mutable_schema() { return &schema_; }
  /// The number of classes in the schema (labels; for a latent family they only name documents).
  uint32_t num_classes() const { return static_cast<uint32_t>(schema_.classes().size()); }
  /// What score() ranks (ABI 1.2 `outputs`): the schema's classes, or K latent
  /// components / topics of the family (labels then ignored in training).
  uint32_t num_outputs() const { return num_outputs_; }
  /// True if the outputs are the family's latent components or topics (LDA, mixtures), not the classes.
  bool latent_outputs() const { return output_kind_ == TRIB_OUTPUTS_LATENT; }
  /// The name of output k: the class name, or the component number.
  std::string OutputName(uint32_t k) const;
  /// The family plugin (never null).
  const Plugin& family() const { return *family_; }
  /// The family plugin, shared: an object that holds it keeps the plugin loaded.
  const std::shared_ptr<const Plugin>& family_plugin() const { return family_; }
  /// The loss plugin; null for a model without a loss (prediction only).
  const std::shared_ptr<const Plugin>& loss_plugin() const { return loss_; }
  /// Sets the loss and its options (ABI 1.2 loss create). Errors: the loss
  /// refuses an option (named), or takes no options and some were given.
  Status SetLoss(std::shared_ptr<const Plugin> loss, Options loss_options = {});
  /// The options the loss was set with (SetLoss); saved in snapshots.
  const Options& loss_options() const { return loss_options_; }
  /// The loss's class weights w[num_outputs], self-weight c and loss value for
  /// `scores` (log p(k, x)) and `label` (-1: unlabelled). REQUIRES: a loss.
  Status LossWeights(const double* scores, int64_t label, double* w, double* c, double* loss_value) const;
  /// The options the family was created with (including any NewModel added); saved in snapshots.
  const Options& family_options() const { return options_; }
  /// The statistics, for the learners: writers need exclusive access and must note their writes.
  SufficientStats& stats() { return stats_; }
  /// The statistics.
  const SufficientStats& stats() const { return stats_; }
  /// The family's own model object (its configuration and caches), for calling the family's functions directly.
  trib_family_model* family_model() { return fmodel_; }
  /// The family's own model object, for the family's read-only functions (score, ...).
  const trib_family_model* family_model() const { return fmodel_; }
  /// t, n, the step schedule and counters; learners update it, snapshots save it.
  LearnerState& learner_state() { return learner_; }
  /// t, n, the step schedule and counters.
  const LearnerState& learner_state() const { return learner_; }

  /// JSON text saying how train's defaults chose this model (see trainer.h);
  /// empty when the model was trained with one fixed setting. Kept in snapshots.
  const std::string& training_report() const { return training_report_; }
  /// Sets training_report(); `json` is stored as given, not checked.
  void set_training_report(std::string json) { training_report_ = std::move(json); }
  /// A live learner's state (LiveLearnerState bytes, live_learner.h) when this
  /// model is the one a live learner served and saved: the other candidates,
  /// windows, detector and sample. Empty for a single model. Saved and loaded
  /// with the model, copied by Clone; the library's scoring never reads it.
  const std::string& live_state() const { return live_state_; }
  /// Sets live_state(); LiveLearner::ToModel and FromModel use it.
  void set_live_state(std::string bytes) { live_state_ = std::move(bytes); }

  /// Re-runs the family's rebuild (check-step over everything, caches).
  Status Rebuild(const trib_step& step);
  /// Number of tokens the document adds to per-word perplexity.
  double PerplexityTokens(const trib_document& doc) const;

 private:
  Model() = default;
  Status QueryOutputs();
  /// A snapshot file as three pieces, in order (snapshot.cc).
  struct SnapshotPieces;
  /// Serialize's bytes as pieces, for Save (which writes them where they
  /// lie) and Serialize (which joins them).
  Status SerializePieces(const SnapshotOptions& options, const std::string& path, SnapshotPieces* out) const;
  /// `class_capacity` (0: the schema's classes) is passed to families with
  /// add_class only (trib_schema.class_capacity).
  /// `vocab_capacity` (0: the default room, TermRoom) is passed to families
  /// with add_terms, for a schema with an open vocabulary only.
  static Result<std::unique_ptr<Model>> CreateInternal(std::shared_ptr<const Plugin> family,
                                                       std::shared_ptr<const Plugin> loss, ModelSchema schema,
                                                       Options family_options, uint32_t class_capacity = 0,
                                                       uint64_t vocab_capacity = 0);
  Status GrowClasses(const std::string& name);
  Status GrowTerms(const std::vector<std::string>& names);
  using GrowFn = int (*)(const trib_family_model*, const trib_stats*, trib_family_model*, trib_stats*, trib_error*);
  Status TakeGrown(std::unique_ptr<Model> nm, GrowFn grow, const char* call, const char* what);
  /// trib_schema.vocab_capacity for `schema` and `family`: 0 without an open
  /// vocabulary or add_terms; else `requested` (0: kFirstTermRoom), at least
  /// the vocabulary size. One rule for CreateInternal and Load's layout check.
  static uint64_t TermRoom(const Plugin& family, const ModelSchema& schema, uint64_t requested);
  /// The most room for terms Create or GrowTerms gives a vocabulary of
  /// `terms`: Load refuses a snapshot declaring more.
  static uint64_t MaxTermRoom(uint64_t terms);
  /// The most room a model with `classes` classes can have been given by
  /// Create (kFirstClassRoom for an open schema with none) or GrowClasses
  /// (classes + classes / 2): Load refuses a snapshot declaring more, before
  /// the family allocates for it.
  static uint32_t MaxClassRoom(uint32_t classes);
  std::shared_ptr<const Plugin> family_;
  std::shared_ptr<const Plugin> loss_;
  uint64_t layout_version_ = 0;
  ModelSchema schema_;
  Options options_;
  Options loss_options_;
  std::shared_ptr<trib_loss_model> loss_model_;  ///< the loss's instance (NULL: no options support)
  uint32_t output_kind_ = TRIB_OUTPUTS_CLASSES;
  uint32_t num_outputs_ = 0;
  uint32_t class_capacity_ = 0;  ///< 0: num_classes()
  uint64_t vocab_capacity_ = 0;  ///< 0: the vocabulary size
  GrowthLimits user_limits_;     ///< SetGrowthLimits's, before the budget
  uint64_t stats_budget_ = 0;    ///< SetGrowthLimits's statistics budget (0: none)
  /// schema_'s limits: user_limits_ with the budget folded in.
  void FoldGrowthBudget();
  trib_family_model* fmodel_ = nullptr;
  SufficientStats stats_;
  LearnerState learner_;
  std::string training_report_;
  std::string live_state_;
};

/// Error text from a plugin call, naming the plugin and the call.
Status PluginStatus(int code, const trib_error& err, const Plugin& plugin, const char* call);

}  // namespace tributary

#endif  // TRIBUTARY_MODEL_H_
