// LiveModel: one model learned and served at once inside a process — what
// `tributary serve` does, as a library handle for a C++ program that embeds
// the learner (docs/embedding.md).
//
//   auto live = LiveModel::Create(std::move(model), LiveModelOptions{});
//   // learning thread(s):             // any number of predicting threads:
//   live->Learn(doc);                  auto reader = live->NewReader();
//                                      LivePrediction p;
//                                      reader->Predict(doc, &p);  // p.version
//
// How it works. The learner's model is private to the writer side. Every
// `publish_every` documents (and on Publish()) the writer makes a
// *publication*: a read-only copy of the model at that step, named by its
// version (the number of steps learned, LearnerState::updates). A copy no
// reader holds any more is brought up to date in place by copying only the
// statistics pages written since it was made (Model::RefreshFrom), so a
// publication costs O(what changed), not O(model), once the first two exist.
// Readers find the newest publication through one atomic pointer and protect
// it with a hazard slot of their own (a store and a re-check; Michael's hazard
// pointers): the read path takes no lock and never waits for learning, and
// the writer never frees or refreshes a publication a reader holds (it makes
// another instead).
//
// A live learner. A model that holds a live learner (LiveLearner::ToModel,
// or a snapshot LiveLearner::Save wrote: Model::live_state set) is learned
// by that learner: every labelled document tested, then learned, by each
// candidate; the served candidate is what readers see, and publications
// follow it when it changes. Checkpoint and SaveState keep the whole learner
// (a restart resumes it bit for bit); SaveSnapshot saves the served model
// alone. A live learner learns labelled documents only: an unlabelled one is
// refused (InvalidDocument, as sdEM refuses it under a loss that needs a
// label). Versions count the labelled documents learned.
//
// Thread safety:
//  - The writer side (Learn, Publish, Restore, WithModel) is serialised by
//    the handle's writer mutex: any thread may call it, one call runs at a
//    time.
//  - NewReader() may be called from any thread; a Reader is used by one
//    thread at a time (it owns scratch: a scoring state per publication).
//    Readers take no lock.
//  - SaveSnapshot() writes the newest publication while learning and
//    predicting go on (it holds the publication like a reader).
//  - Every Reader must be destroyed before the LiveModel.
//
// Errors are Status values (status.h); nothing here prints or exits.
#ifndef TRIBUTARY_LIVE_MODEL_H_
#define TRIBUTARY_LIVE_MODEL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tributary/data_dir.h"
#include "tributary/document.h"
#include "tributary/input_document.h"
#include "tributary/learner.h"
#include "tributary/live_learner.h"
#include "tributary/model.h"
#include "tributary/status.h"
#include "tributary/wal.h"

namespace tributary {

/// How a LiveModel learns and publishes.
struct LiveModelOptions {
  LearnerOptions learner;  ///< the engine and its settings (learner.h), used again by Restore
  /// A publication after every `publish_every` documents learned (0: only when
  /// Publish() is called). Smaller: readers see learning sooner; each
  /// publication costs the pages written since the last one.
  uint64_t publish_every = 256;
  /// Readers that may exist at once (each holds one hazard slot); NewReader
  /// refuses more. At most 4096.
  uint32_t max_readers = 64;
  /// Durable mode (empty: off). A data directory (data_dir.h, the server's
  /// layout and rules: locked while open, snapshots, the write-ahead log and
  /// its acknowledgement mark, damage moved aside and reported). Each Learn
  /// (each LearnBatch: one fsync for the batch) is in the fsynced log before
  /// it returns OK: a document acknowledged so is never lost, whatever
  /// happens to the process. Create loads the directory's snapshot (the
  /// `model` it is given is the initial model of a new directory only) and
  /// replays the log after it (recovery() says what it found); Checkpoint
  /// writes a snapshot and drops the log it covers.
  std::string data_dir;
  /// Durable mode: all file I/O (nullptr: Env::Default()).
  Env* env = nullptr;
  /// Durable mode: what damage to acknowledged log records does at Create
  /// (wal.h): kRefuse fails Create naming it; kSkip goes on and reports it.
  CorruptionPolicy on_corruption = CorruptionPolicy::kRefuse;
  /// Durable mode: the acknowledgement mark (wal.h) is rewritten after a
  /// learn at most this often (and at Checkpoint and destruction); 0: after
  /// every learn. Damage to records acknowledged before the mark is
  /// reported at the next Create; records after it read as a torn tail.
  uint32_t ack_mark_interval_ms = 100;
  /// Durable mode, and a model that holds a live learner: where the plugins
  /// of a saved model (the learner's candidates) are found (required then).
  const PluginRegistry* registry = nullptr;
};

/// One prediction: the scores log p(k, x) of every output (class or
/// component), the argmax, and the version of the publication that scored
/// them (the model after that many learning steps).
struct LivePrediction {
  uint64_t version = 0;        ///< the publication's version: the learning steps it includes
  uint32_t predicted = 0;      ///< the output with the highest score (the first one on ties)
  std::string label;           ///< the predicted class's name ("" for latent components)
  std::vector<double> scores;  ///< log p(k, x) for each output k of the publication (Model::num_outputs())
};

/// What a Reader holds while the function given to Reader::Read runs: one
/// publication, and the reader's scratch for it. Valid only during that call.
struct LiveView {
  const Model* model = nullptr;              ///< the publication (read-only)
  uint64_t version = 0;                      ///< its version: the learning steps it includes
  const DocumentDecoder* decoder = nullptr;  ///< wire documents into its id space (DocumentDecoder::ForModel)
  ScoringState* state = nullptr;             ///< the reader's scoring state for `model` (Model::Score)
};

/// A model that learns on the writer side and predicts through lock-free Readers at the same time (see the file
/// comment for how, and for thread safety).
class LiveModel {
  struct Publication;

 public:
  class Reader;

  /// Takes the model (its loss must be set for sdEM). Publishes version
  /// `model->learner_state().updates` at once, so readers can predict before
  /// anything is learned. Errors: the learner's (learner.h Learner::Create),
  /// options out of range (max_readers 0 or above 4096).
  static Result<std::unique_ptr<LiveModel>> Create(std::unique_ptr<Model> model, const LiveModelOptions& options);
  /// REQUIRES: every Reader is destroyed.
  ~LiveModel();
  LiveModel(const LiveModel&) = delete;
  LiveModel& operator=(const LiveModel&) = delete;

  // ---- Writer side (serialised) ----

  /// One step on `doc` (in the model's id space: DocumentDecoder or
  /// DocumentBuffer). On error the model is unchanged (learner.h) and the
  /// message names the document. Publishes when `publish_every` is reached.
  Status Learn(const trib_document& doc, LearnResult* result = nullptr);
  /// The same for a document as the program holds it (input_document.h):
  /// decoded into the model's id space, the model grown first when its schema
  /// has an open vocabulary or open classes and the document brings new terms
  /// or a new class (learner.h DecodeGrowing). Errors name the document
  /// (`id`, and its position among the documents given to Learn) and say
  /// expected vs found; the model is unchanged.
  Status Learn(const InputDocument& doc, LearnResult* result = nullptr);
  /// The same for a document in the wire format (tributary.proto), in the
  /// model's id space (term ids, or terms by name, as DocumentDecoder::ForModel
  /// reads them; a server's write-ahead log holds such documents); `index`
  /// names it in errors. Grows the model as its schema allows, like
  /// Learn(InputDocument).
  Status Learn(const v1::Document& doc, uint64_t index, LearnResult* result = nullptr);
  /// Group commit: the documents (as Learn(InputDocument) takes them) each
  /// checked, then in durable mode all in the log with one fsync, then
  /// learned in order. A document refused by the check (wrong schema, no
  /// label, ...) fails the whole batch, naming it by its position in the
  /// batch and its id: nothing is logged or learned. One refused while learning (a growth limit) is skipped:
  /// (*results)[i].skipped and skip_reason say so, and the others are
  /// learned. `results` (optional) gets one LearnResult per document.
  Status LearnBatch(std::span<const InputDocument> docs, std::vector<LearnResult>* results = nullptr);
  /// Durable mode: saves the learner's model as the directory's snapshot
  /// (the previous one kept as `model.prev.trib`) and drops the log segments
  /// the previous snapshot covered. Learning waits meanwhile (O(model)).
  /// Errors: the snapshot's or the log's I/O; InvalidArgument when not durable.
  Status Checkpoint();
  /// Durable mode: the sequence number of the last document in the log (0:
  /// none), i.e. the documents acknowledged since the directory was made.
  uint64_t acknowledged() const;
  /// Durable mode: what Create's recovery found (the snapshot read, records
  /// replayed, damage moved aside with its .report files); empty otherwise.
  const DataDirRecovery& recovery() const { return recovery_; }
  /// Makes everything learned so far visible to readers (their next Predict).
  /// Returns the version published. Errors: out of memory for a copy.
  Result<uint64_t> Publish();
  /// Replaces the model with `model` (e.g. Model::Load of a snapshot) and
  /// publishes it; readers move to it with their next Predict. Errors: the
  /// learner's for the new model (the old one stays); a durable handle
  /// (InvalidArgument: it serves its data directory).
  Status Restore(std::unique_ptr<Model> model);
  /// Runs `fn` on the writer's model under the writer mutex (to grow it,
  /// read its learner state, ...); a live learner's served model, the other
  /// candidates grown as it grew. Readers see what it changed from the next
  /// publication; `fn` must not keep the pointer.
  Status WithModel(const std::function<Status(Model*)>& fn);
  /// Saves everything the writer holds as a snapshot at `path`: the model,
  /// or a live learner whole (LiveLearner::Save). Learning waits meanwhile
  /// (O(model)). Errors: I/O.
  Status SaveState(const std::string& path, const SnapshotOptions& options = {});
  /// Documents learned: a live learner's labelled documents, else the
  /// model's steps (LearnerState::updates).
  uint64_t learned() const;
  /// True when a live learner learns (the model given held one).
  bool is_live() const;
  /// Runs `fn` on the live learner under the writer mutex (its options,
  /// candidates, statistics). Errors: InvalidArgument for a single model;
  /// `fn`'s. `fn` must not keep the pointer.
  Status WithLiveLearner(const std::function<Status(LiveLearner*)>& fn);
  /// A live learner's report (LiveLearner::ToJson: candidates, the served
  /// one, alarms); empty for a single model.
  std::string live_report() const;

  // ---- Any thread ----

  /// The newest published version.
  uint64_t version() const;
  /// Saves the newest publication as a snapshot (Model::Save: atomic
  /// replace) while learning and predicting go on; *version (optional) gets
  /// the version saved. Errors: Save's (I/O), no free hazard slot.
  Status SaveSnapshot(const std::string& path, uint64_t* version = nullptr) const;
  /// A reader for one thread. Errors: max_readers readers exist.
  Result<std::unique_ptr<Reader>> NewReader();

  /// Counters, for reports and tests.
  struct Stats {
    uint64_t publications = 0;  ///< made, the first included
    uint64_t refreshed = 0;     ///< of them brought up to date in place (pages written)
    uint64_t copies = 0;        ///< live publication copies (current, spare and held ones)
  };
  /// The counters now (lock-free: never waits for learning).
  Stats stats() const;

  /// Predicts for one thread with the newest publication, without locks. Made by NewReader; holds one of the
  /// max_readers slots until destroyed, which must happen before the LiveModel is destroyed.
  class Reader {
   public:
    ~Reader();
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    /// Scores `doc` with the newest publication. `doc` must be in the id
    /// space of the model's schema (a model that grew accepts more ids).
    /// Errors: the family's scoring errors, naming the document; a document
    /// with ids the published model does not know.
    Status Predict(const trib_document& doc, LivePrediction* out);
    /// The same for a document as the program holds it, decoded against the
    /// publication's schema (its label, if any, is ignored; terms the model
    /// does not know are dropped, as `eval` drops them).
    Status Predict(const InputDocument& doc, LivePrediction* out);
    /// Runs `fn` with the newest publication held: everything `fn` does
    /// sees one version (a batch of documents predicted at one version, a
    /// request validated against one schema). Takes no lock; learning goes
    /// on meanwhile. `fn` must not keep the view's pointers, nor call
    /// another method of this reader. Errors: `fn`'s; making the scratch
    /// for a new publication (out of memory).
    Status Read(const std::function<Status(const LiveView&)>& fn);

   private:
    friend class LiveModel;
    struct Cached;
    Reader(LiveModel* owner, uint32_t slot);
    Status Score(const Publication& p, const trib_document& doc, LivePrediction* out);
    /// This reader's scratch for publication `p` (made again when `p` is another).
    Result<Cached*> For(const Publication& p);
    /// For(p) with its decoder made.
    Result<Cached*> WithDecoder(const Publication& p);
    LiveModel* owner_;
    uint32_t slot_;
    std::unique_ptr<v1::Document> proto_;  ///< Predict(InputDocument)'s scratch (made at construction)
    DocumentBuffer buffer_;
    std::unique_ptr<Cached> cache_;  ///< the scoring state and decoder of the last publication read
  };

 private:
  struct Slot;
  LiveModel();
  /// Durable mode: the directory's snapshot (or `initial`'s, saved), the log
  /// replayed after it. Writer state not yet shared.
  Status OpenDurable(std::unique_ptr<Model> initial);
  /// Makes `model` the learner's, with its learner and decoder. Writer mutex held.
  Status AdoptLocked(std::unique_ptr<Model> model);
  /// Durable mode: `doc` (document `index`) validated for learning, then in
  /// the fsynced log. Writer mutex held.
  Status LogLocked(const v1::Document& doc, uint64_t index);
  /// `doc` (document `index`) validated for learning, by the rule the log's
  /// reader decodes with. Writer mutex held.
  Status CheckLocked(const v1::Document& doc, uint64_t index);
  /// Durable mode: `doc` appended to the log (not yet synced). Writer mutex held.
  Status AppendLocked(const v1::Document& doc);
  /// Durable mode: the appended records fsynced; the acknowledgement mark
  /// rewritten when ack_mark_interval_ms has passed since the last one.
  Status SyncLocked();
  /// Durable mode: the acknowledgement mark moved to the last synced record
  /// (nothing when it is there already). Writer mutex held (or destruction).
  Status MarkLocked();
  /// Durable mode: Checkpoint with the writer mutex held.
  Status CheckpointLocked();
  /// Decodes (growing the model) and learns a logged or given document. Writer mutex held.
  Status LearnProtoLocked(const v1::Document& doc, uint64_t index, LearnResult* result);
  /// The live learner's step on `doc`, as a LearnResult. Writer mutex held.
  Status LiveLearnLocked(const DocumentBuffer& doc, LearnResult* result);
  /// A wire document (durable: logged first) learned, then published when
  /// publish_every is reached. Writer mutex held.
  Status LearnWireLocked(const v1::Document& doc, uint64_t index, LearnResult* result);
  Result<uint64_t> PublishLocked();
  /// A free spare (no hazard on it) or null; moves retired copies no reader
  /// holds to the spares. Writer mutex held.
  std::unique_ptr<Publication> TakeSpareLocked();
  Publication* Acquire(uint32_t slot) const;
  void Release(uint32_t slot) const;
  /// A free slot among the first `end` (readers: max_readers; SaveSnapshot:
  /// all, the last one being never a reader's). Errors: none free.
  Result<uint32_t> ClaimSlot(uint32_t end) const;
  void FreeSlot(uint32_t slot) const;

  LiveModelOptions options_;
  mutable std::mutex writer_mu_;
  /// The model documents are decoded against (a live learner's schema
  /// model) and, for a single model, learned (writer mutex).
  Model* model_ = nullptr;
  std::unique_ptr<Model> owned_;       ///< a single model (writer mutex)
  std::unique_ptr<Learner> learner_;   ///< its learner (writer mutex)
  std::unique_ptr<LiveLearner> live_;  ///< or a live learner (writer mutex)
  size_t published_served_ = 0;        ///< the live candidate the publications copy (writer mutex)
  /// The model publications copy: the single model, or the served candidate's.
  Model& SourceLocked() { return live_ ? live_->served() : *model_; }
  uint64_t since_publish_ = 0;                ///< documents learned since the last publication (writer mutex)
  uint64_t generation_ = 0;                   ///< Restore() count (writer mutex)
  uint64_t inputs_ = 0;                       ///< InputDocuments given to Learn (their index in messages; writer mutex)
  std::unique_ptr<DocumentDecoder> decoder_;  ///< the model's own id space (writer mutex)
  std::unique_ptr<v1::Document> proto_;       ///< Learn(InputDocument)'s scratch (made at construction; writer mutex)
  DocumentBuffer buffer_;
  std::unique_ptr<DataDir> dir_;     ///< durable mode's data directory (writer mutex)
  WriteAheadLog* wal_ = nullptr;     ///< its log (writer mutex)
  DataDirRecovery recovery_;         ///< what Create's recovery found (fixed after Create)
  std::atomic<uint64_t> logged_{0};  ///< durable: the last sequence in the fsynced log
  uint64_t appended_ = 0;            ///< durable: the last sequence appended, synced or not (writer mutex)
  uint64_t marked_ = 0;              ///< durable: the sequence the acknowledgement mark holds (writer mutex)
  std::chrono::steady_clock::time_point marked_at_{};  ///< when it was written (writer mutex)
  std::atomic<Publication*> current_{nullptr};
  /// Publications replaced but perhaps still held by a reader, and spares no
  /// reader can reach (writer mutex).
  std::vector<std::unique_ptr<Publication>> retired_, spares_;
  std::unique_ptr<Publication> current_owner_;  ///< owns *current_ (writer mutex)
  std::unique_ptr<Slot[]> slots_;  ///< max_readers + 1: readers get max_readers, one stays for SaveSnapshot
  std::atomic<uint64_t> publications_{0}, refreshed_{0};
  std::atomic<uint64_t> copies_{0};   ///< Stats::copies, set by the writer after each publication
  std::atomic<uint64_t> version_{0};  ///< the newest publication's version (version())
};

}  // namespace tributary

#endif  // TRIBUTARY_LIVE_MODEL_H_
