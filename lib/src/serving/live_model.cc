#include "tributary/live_model.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct LiveModel::Publication {
  std::unique_ptr<Model> model;
  uint64_t version = 0;
  uint64_t epoch = 0;       // the learner's statistics epoch it was made at (SufficientStats::epoch)
  uint64_t serial = 0;      // unique per publication made (a refreshed copy gets a new one)
  uint64_t generation = 0;  // LiveModel::generation_ when made: a copy of a model Restore replaced is never refreshed
};

// One reader's hazard: the publication it is reading, or null. On its own
// cache line, so that readers on different cores do not share one.
struct alignas(64) LiveModel::Slot {
  std::atomic<Publication*> hazard{nullptr};
  std::atomic<bool> taken{false};
};

struct LiveModel::Reader::Cached {
  uint64_t serial = 0;
  std::unique_ptr<ScoringState> state;
  std::unique_ptr<DocumentDecoder> decoder;  // made on first use (Predict(InputDocument))
};

namespace {
constexpr uint32_t kMaxReaders = 4096;
constexpr size_t kMaxSpares = 2;  // copies kept for refreshing; more are freed

// The checks a DocumentDecoder guarantees, for a document built by hand:
// every id inside the schema (a family reads its statistics by id).
Status CheckDocument(const ModelSchema& schema, const trib_document& doc) {
  const uint64_t V = schema.vocab_size();
  for (uint32_t j = 0; j < doc.num_terms; ++j) {
    if (doc.term_ids[j] >= V) {
      return Status::InvalidDocument("term id " + std::to_string(doc.term_ids[j]) + " is outside the vocabulary (" +
                                     std::to_string(V) + " terms)");
    }
  }
  if (doc.num_reals != schema.real_kinds().size()) {
    return Status::InvalidDocument("expected " + std::to_string(schema.real_kinds().size()) + " real features, found " +
                                   std::to_string(doc.num_reals));
  }
  const auto& cards = schema.categorical_cardinalities();
  if (doc.num_categoricals != cards.size()) {
    return Status::InvalidDocument("expected " + std::to_string(cards.size()) + " categorical features, found " +
                                   std::to_string(doc.num_categoricals));
  }
  for (uint32_t j = 0; j < doc.num_categoricals; ++j) {
    if (doc.categoricals[j] >= cards[j]) {
      return Status::InvalidDocument("categorical feature " + std::to_string(j) + ": value " +
                                     std::to_string(doc.categoricals[j]) + " >= its " + std::to_string(cards[j]) +
                                     " categories");
    }
  }
  return Status::OK();
}
}  // namespace

namespace {
// A document in the model's id space as the log's wire format (the
// server's log speaks the model's ids too: DocumentDecoder::ForModel).
void ToModelProto(const ModelSchema& schema, const trib_document& d, v1::Document* out) {
  out->Clear();
  if (d.id != nullptr) out->set_id(d.id);
  if (d.label >= 0 && static_cast<size_t>(d.label) < schema.classes().size()) {
    out->set_label(schema.classes()[static_cast<size_t>(d.label)]);
  }
  for (uint32_t j = 0; j < d.num_terms; ++j) {
    out->add_term_ids(d.term_ids[j]);
    out->add_term_counts(d.term_counts[j]);
  }
  // Features in the schema's order: reals and categoricals each in theirs.
  uint32_t r = 0, c = 0;
  const auto& features = schema.features();
  for (uint32_t f = 0; f < features.size(); ++f) {
    if (features[f].kind == TRIB_FEATURE_CATEGORICAL) {
      if (c < d.num_categoricals) {
        out->add_categoricals(d.categoricals[c]);
        if (d.categorical_missing != nullptr && d.categorical_missing[c]) out->add_missing_features(f);
      }
      ++c;
    } else {
      if (r < d.num_reals) {
        out->add_reals(d.reals[r]);
        if (d.real_missing != nullptr && d.real_missing[r]) out->add_missing_features(f);
      }
      ++r;
    }
  }
  if (d.weight != 1.0) out->set_weight(d.weight);
}

// A document built by hand, copied for a live learner (which keeps some in
// its per-class sample).
void CopyDocument(const trib_document& d, DocumentBuffer* out) {
  out->Clear();
  out->index = d.index;
  if (d.id != nullptr) out->id = d.id;
  out->label = d.label;
  out->term_ids.assign(d.term_ids, d.term_ids + d.num_terms);
  out->term_counts.assign(d.term_counts, d.term_counts + d.num_terms);
  out->reals.assign(d.reals, d.reals + d.num_reals);
  out->categoricals.assign(d.categoricals, d.categoricals + d.num_categoricals);
  out->weight = d.weight;
  if (d.real_missing != nullptr) out->real_missing.assign(d.real_missing, d.real_missing + d.num_reals);
  if (d.categorical_missing != nullptr) {
    out->categorical_missing.assign(d.categorical_missing, d.categorical_missing + d.num_categoricals);
  }
}

}  // namespace

Result<std::unique_ptr<LiveModel>> LiveModel::Create(std::unique_ptr<Model> model, const LiveModelOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("LiveModel: no model");
  if (options.max_readers == 0 || options.max_readers > kMaxReaders) {
    return Status::InvalidArgument("LiveModel: max_readers must be in 1.." + std::to_string(kMaxReaders) + ", found " +
                                   std::to_string(options.max_readers));
  }
  std::unique_ptr<LiveModel> live(new LiveModel());
  live->options_ = options;
  if (!options.data_dir.empty()) {
    if (options.registry == nullptr) {
      return Status::InvalidArgument("LiveModel: durable mode (data_dir '" + options.data_dir +
                                     "') needs LiveModelOptions::registry to load its snapshot");
    }
    live->slots_.reset(new Slot[options.max_readers + 1]);
    std::lock_guard<std::mutex> l(live->writer_mu_);
    TRIB_RETURN_IF_ERROR(live->OpenDurable(std::move(model)));
    auto v = live->PublishLocked();
    if (!v.ok()) return v.status();
    return live;
  }
  live->slots_.reset(new Slot[options.max_readers + 1]);
  std::lock_guard<std::mutex> l(live->writer_mu_);
  TRIB_RETURN_IF_ERROR(live->AdoptLocked(std::move(model)));
  auto v = live->PublishLocked();
  if (!v.ok()) return v.status();
  return live;
}

LiveModel::LiveModel() : proto_(std::make_unique<v1::Document>()) {}

LiveModel::~LiveModel() {
  // Durable: the mark says everything logged was acknowledged (wal.h), so
  // damage to the last records is reported at the next Create, not taken
  // for a torn write. (An error here has nobody to go to: the next Create
  // reads the log without the newest mark, as after a crash.)
  if (wal_ != nullptr && !wal_->failed()) (void)MarkLocked();
}

std::unique_ptr<LiveModel::Publication> LiveModel::TakeSpareLocked() {
  if (!retired_.empty()) {
    // Hazards are read after the publications were retired (current_ moved
    // on first, in PublishLocked): a reader that protected one re-checks
    // current_ after its store and retries, or its hazard is seen here.
    std::vector<Publication*> held;
    for (uint32_t i = 0; i <= options_.max_readers; ++i) {
      if (Publication* p = slots_[i].hazard.load(std::memory_order_seq_cst)) held.push_back(p);
    }
    for (size_t i = 0; i < retired_.size();) {
      if (std::find(held.begin(), held.end(), retired_[i].get()) != held.end()) {
        ++i;
        continue;
      }
      if (spares_.size() < kMaxSpares && retired_[i]->generation == generation_) {
        spares_.push_back(std::move(retired_[i]));
      }
      retired_[i] = std::move(retired_.back());
      retired_.pop_back();
    }
  }
  if (spares_.empty()) return nullptr;
  std::unique_ptr<Publication> p = std::move(spares_.back());
  spares_.pop_back();
  return p;
}

Result<uint64_t> LiveModel::PublishLocked() {
  if (live_ != nullptr && live_->served_index() != published_served_) {
    // Another candidate is served: copies of the previous one must not be
    // refreshed from it (its page epochs say nothing of them).
    ++generation_;
    spares_.clear();
    published_served_ = live_->served_index();
  }
  Model& src = SourceLocked();
  std::unique_ptr<Publication> p = TakeSpareLocked();
  // A spare was a copy of the learner's model as of its epoch: bring it up
  // to date by the pages written since (Model::RefreshFrom); a first copy,
  // or one the model outgrew, is a Clone.
  if (p != nullptr && p->model->RefreshFrom(src, p->epoch).ok()) {
    refreshed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    auto clone = src.Clone();
    if (!clone.ok()) return clone.status().WithContext("publishing the model");
    p = std::make_unique<Publication>();
    p->model = std::move(clone).value();
  }
  p->version = live_ ? live_->labelled() : src.learner_state().updates;
  p->generation = generation_;
  p->epoch = src.stats().epoch();
  p->serial = publications_.fetch_add(1, std::memory_order_relaxed) + 1;
  src.stats().NextEpoch();  // later writes are newer than this copy
  // version_ first: a reader that finds this publication through current_
  // then reads version() sees at least its version.
  version_.store(p->version, std::memory_order_release);
  current_.store(p.get(), std::memory_order_seq_cst);
  if (current_owner_ != nullptr) retired_.push_back(std::move(current_owner_));
  current_owner_ = std::move(p);
  since_publish_ = 0;
  copies_.store(1 + retired_.size() + spares_.size(), std::memory_order_relaxed);
  return current_owner_->version;
}

Status LiveModel::OpenDurable(std::unique_ptr<Model> initial) {
  // The data directory's rules (data_dir.h), the server's: locked, the
  // newest readable snapshot (a damaged one moved aside and reported), else
  // the initial model kept as the directory's first; then the log replayed.
  DataDirOptions dopt;
  dopt.env = options_.env;
  dopt.holder = "LiveModel";
  dopt.on_corruption = options_.on_corruption;
  dopt.initial_hint = "pass a model to LiveModel::Create";
  auto dir = DataDir::Open(options_.data_dir, dopt);
  if (!dir.ok()) return dir.status().WithContext("LiveModel");
  dir_ = std::move(dir).value();
  wal_ = dir_->wal();
  auto model = dir_->LoadModel(*options_.registry, std::move(initial), &recovery_);
  if (!model.ok()) return model.status().WithContext("LiveModel");
  TRIB_RETURN_IF_ERROR(AdoptLocked(std::move(model).value()));
  // Everything acknowledged after the snapshot, learned again in log order:
  // the model is the one that learned every acknowledged document.
  uint64_t next = 0;
  TRIB_RETURN_IF_ERROR(dir_->Replay(
      [&](const v1::WalRecord& rec) {
        Status st = LearnProtoLocked(rec.document(), rec.sequence() - 1, nullptr);
        // (A document the learner refused when it was acknowledged is
        // refused again: skipped, as it was then.)
        return st.ok() || DocumentRefused(st) ? Status::OK() : st;
      },
      nullptr, &recovery_, &next));
  if (live_ == nullptr) model_->learner_state().skipped_documents += recovery_.unreadable_sequences.size();
  logged_ = next - 1;
  appended_ = logged_;
  marked_ = logged_;
  marked_at_ = std::chrono::steady_clock::now();
  inputs_ = logged_;
  // A new directory, a replayed log or damage: a snapshot of the recovered
  // state is the next start's starting point (as the server does).
  if (recovery_.replayed > 0 || !recovery_.from_snapshot || !recovery_.damage.empty()) return CheckpointLocked();
  return Status::OK();
}

Status LiveModel::AdoptLocked(std::unique_ptr<Model> model) {
  if (LiveLearner::Holds(*model)) {
    // A live learner (live_learner.h): its candidates are in the model's
    // live_state, their plugins found in the registry.
    if (options_.registry == nullptr) {
      return Status::InvalidArgument(
          "LiveModel: the model holds a live learner; LiveModelOptions::registry must be set to load its candidates");
    }
    if (options_.learner.engine != "auto" && options_.learner.engine != "sdem") {
      return Status::InvalidArgument("LiveModel: the model holds a live learner, which learns with sdEM, not engine '" +
                                     options_.learner.engine + "'");
    }
    const GrowthLimits limits = model->growth_limits();
    const uint64_t budget = model->statistics_budget();
    auto live = LiveLearner::FromModel(std::move(model), *options_.registry);
    if (!live.ok()) return live.status();
    (*live)->SetGrowthLimits(limits, budget);
    auto decoder = DocumentDecoder::ForModel((*live)->schema_model()->schema());
    if (!decoder.ok()) return decoder.status();
    live_ = std::move(live).value();
    learner_.reset();
    owned_.reset();
    model_ = live_->schema_model();
    published_served_ = live_->served_index();
    decoder_ = std::make_unique<DocumentDecoder>(std::move(decoder).value());
    return Status::OK();
  }
  auto learner = Learner::Create(model.get(), options_.learner);
  if (!learner.ok()) return learner.status();
  auto decoder = DocumentDecoder::ForModel(model->schema());
  if (!decoder.ok()) return decoder.status();
  learner_ = std::move(learner).value();
  decoder_ = std::make_unique<DocumentDecoder>(std::move(decoder).value());
  live_.reset();
  owned_ = std::move(model);
  model_ = owned_.get();
  return Status::OK();
}

Status LiveModel::CheckLocked(const v1::Document& doc, uint64_t index) {
  // Refused before it is logged, by the rule the log's reader decodes with
  // (what the log holds is learnable).
  std::string new_class;
  return decoder_->DecodeForLearning(doc, index, model_->schema(), LabelRequiredBy(model_->loss_plugin().get()),
                                     &buffer_, &new_class);
}

Status LiveModel::AppendLocked(const v1::Document& doc) {
  constexpr uint64_t kSegmentBytes = uint64_t{64} << 20;
  const uint64_t next = appended_ + 1;
  TRIB_RETURN_IF_ERROR(wal_->MaybeRoll(next, kSegmentBytes));
  v1::WalRecord rec;
  rec.set_sequence(next);
  *rec.mutable_document() = doc;
  TRIB_RETURN_IF_ERROR(wal_->Append(rec));
  appended_ = next;
  return Status::OK();
}

Status LiveModel::SyncLocked() {
  Status st = wal_->Sync();
  if (!st.ok()) {
    appended_ = logged_.load();  // the log dropped what was not durable (wal.h Sync)
    return st;
  }
  logged_ = appended_;
  if (std::chrono::steady_clock::now() - marked_at_ < std::chrono::milliseconds(options_.ack_mark_interval_ms)) {
    return Status::OK();
  }
  return MarkLocked();
}

Status LiveModel::MarkLocked() {
  if (marked_ >= logged_.load()) return Status::OK();
  TRIB_RETURN_IF_ERROR(wal_->MarkAcknowledged(logged_.load()));
  marked_ = logged_.load();
  marked_at_ = std::chrono::steady_clock::now();
  return Status::OK();
}

Status LiveModel::LogLocked(const v1::Document& doc, uint64_t index) {
  TRIB_RETURN_IF_ERROR(CheckLocked(doc, index));
  TRIB_RETURN_IF_ERROR(AppendLocked(doc));
  return SyncLocked();
}

Status LiveModel::LearnProtoLocked(const v1::Document& doc, uint64_t index, LearnResult* result) {
  const ModelSchema& schema = model_->schema();
  const unsigned growth = (schema.open_classes() ? kGrowClasses : 0u) | (schema.open_vocabulary() ? kGrowTerms : 0u);
  bool grew = false;
  TRIB_RETURN_IF_ERROR(
      DecodeGrowing(*decoder_, doc, index, model_, static_cast<DecodeGrowth>(growth), &buffer_, nullptr, &grew));
  if (live_ == nullptr) return learner_->Learn(buffer_.View(), result);
  if (grew) TRIB_RETURN_IF_ERROR(live_->SyncClasses());
  return LiveLearnLocked(buffer_, result);
}

Status LiveModel::LiveLearnLocked(const DocumentBuffer& doc, LearnResult* result) {
  LiveStep step;
  TRIB_RETURN_IF_ERROR(live_->Learn(doc, &step));
  if (result != nullptr) {
    *result = LearnResult();
    result->predicted = step.predicted;
    result->scores = step.scores;
    result->drift_alarm = step.alarm;
    result->switched = step.switched;
    if (!step.labelled) {
      result->skipped = true;
      result->skip_reason = "a live learner learns labelled documents only (this one was scored, not learned)";
    }
  }
  return Status::OK();
}

Status LiveModel::Checkpoint() {
  if (wal_ == nullptr) return Status::InvalidArgument("LiveModel::Checkpoint: not durable (no data_dir)");
  std::lock_guard<std::mutex> l(writer_mu_);
  return CheckpointLocked();
}

Status LiveModel::CheckpointLocked() {
  // data_dir.h Checkpoint: the new snapshot whole before the renames; the
  // replaced one kept as model.prev.trib, the log after it kept.
  uint64_t replaced = 0;
  TRIB_RETURN_IF_ERROR(dir_->Checkpoint(
      [&](const std::string& path, const SnapshotOptions& so) {
        return live_ ? live_->Save(path, so) : model_->Save(path, so);
      },
      logged_.load(), &replaced));
  TRIB_RETURN_IF_ERROR(MarkLocked());
  // Segments wholly before the replaced snapshot: no snapshot needs them.
  return wal_->DropCovered(replaced);
}

uint64_t LiveModel::acknowledged() const { return logged_.load(); }

Status LiveModel::Learn(const trib_document& doc, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  if (wal_ != nullptr) {
    ToModelProto(model_->schema(), doc, proto_.get());
    TRIB_RETURN_IF_ERROR(LogLocked(*proto_, doc.index));
  }
  if (live_ != nullptr) {
    TRIB_RETURN_IF_ERROR(CheckDocument(model_->schema(), doc));
    CopyDocument(doc, &buffer_);
    TRIB_RETURN_IF_ERROR(LiveLearnLocked(buffer_, result).WithContext(DocumentName(doc.index, doc.id ? doc.id : "")));
  } else {
    TRIB_RETURN_IF_ERROR(learner_->Learn(doc, result));
  }
  if (options_.publish_every > 0 && ++since_publish_ >= options_.publish_every) {
    auto v = PublishLocked();
    if (!v.ok()) return v.status();
  }
  return Status::OK();
}

Status LiveModel::Learn(const InputDocument& doc, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  const uint64_t index = inputs_++;
  Status st = doc.ToProto(model_->schema(), proto_.get());
  if (!st.ok()) return st.WithContext(DocumentName(index, doc.id()));
  return LearnWireLocked(*proto_, index, result);
}

Status LiveModel::Learn(const v1::Document& doc, uint64_t index, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  return LearnWireLocked(doc, index, result);
}

Status LiveModel::LearnBatch(std::span<const InputDocument> docs, std::vector<LearnResult>* results) {
  std::lock_guard<std::mutex> l(writer_mu_);
  if (results != nullptr) results->assign(docs.size(), LearnResult());
  // Every document checked first: one refused fails the batch with nothing
  // logged or learned. Then all in the log, one fsync.
  std::vector<v1::Document> protos(docs.size());
  const uint64_t first = inputs_;
  for (size_t i = 0; i < docs.size(); ++i) {
    // (Named by their position in the batch.)
    Status st = docs[i].ToProto(model_->schema(), &protos[i]);
    if (!st.ok()) return st.WithContext("LearnBatch: " + DocumentName(i, docs[i].id()));
    st = CheckLocked(protos[i], i);
    if (!st.ok()) return st.WithContext("LearnBatch");
  }
  inputs_ += docs.size();
  if (wal_ != nullptr && !docs.empty()) {
    for (const v1::Document& d : protos) TRIB_RETURN_IF_ERROR(AppendLocked(d));
    TRIB_RETURN_IF_ERROR(SyncLocked());
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    LearnResult* r = results != nullptr ? &(*results)[i] : nullptr;
    // (Learned under index first + i = its log sequence - 1, as replay
    // learns it: the same model, bit for bit.)
    Status st = LearnProtoLocked(protos[i], first + i, r);
    if (!st.ok()) {
      if (!DocumentRefused(st)) return st.WithContext("LearnBatch");
      if (r != nullptr) {
        r->skipped = true;
        r->skip_reason = st.message();
      }
      continue;
    }
    if (options_.publish_every > 0 && ++since_publish_ >= options_.publish_every) {
      auto v = PublishLocked();
      if (!v.ok()) return v.status();
    }
  }
  return Status::OK();
}

Status LiveModel::LearnWireLocked(const v1::Document& doc, uint64_t index, LearnResult* result) {
  if (wal_ != nullptr) {
    TRIB_RETURN_IF_ERROR(LogLocked(doc, index));
  }
  TRIB_RETURN_IF_ERROR(LearnProtoLocked(doc, index, result));
  if (options_.publish_every > 0 && ++since_publish_ >= options_.publish_every) {
    auto v = PublishLocked();
    if (!v.ok()) return v.status();
  }
  return Status::OK();
}

Result<uint64_t> LiveModel::Publish() {
  std::lock_guard<std::mutex> l(writer_mu_);
  return PublishLocked();
}

Status LiveModel::Restore(std::unique_ptr<Model> model) {
  if (model == nullptr) return Status::InvalidArgument("LiveModel::Restore: no model");
  std::lock_guard<std::mutex> l(writer_mu_);
  if (wal_ != nullptr) {
    // (The log continues the directory's snapshot, not another model.)
    return Status::InvalidArgument("LiveModel::Restore: a durable handle serves its data directory ('" +
                                   options_.data_dir + "'); open another directory instead");
  }
  TRIB_RETURN_IF_ERROR(AdoptLocked(std::move(model)));
  // The copies of the old model must not be refreshed from the new one
  // (its page epochs say nothing of them): a new generation.
  ++generation_;
  spares_.clear();
  auto v = PublishLocked();
  return v.ok() ? Status::OK() : v.status();
}

Status LiveModel::WithModel(const std::function<Status(Model*)>& fn) {
  std::lock_guard<std::mutex> l(writer_mu_);
  if (live_ == nullptr) return fn(model_);
  Model& served = live_->served();
  Status st = fn(&served);
  // What fn added to the served model's schema, every candidate gets.
  if (&served != model_ && (served.num_outputs() != model_->num_outputs() ||
                            served.schema().vocab_size() != model_->schema().vocab_size())) {
    TRIB_RETURN_IF_ERROR(model_->GrowTo(served.schema()));
  }
  TRIB_RETURN_IF_ERROR(live_->SyncClasses());
  return st;
}

Status LiveModel::SaveState(const std::string& path, const SnapshotOptions& options) {
  std::lock_guard<std::mutex> l(writer_mu_);
  return live_ ? live_->Save(path, options) : model_->Save(path, options);
}

uint64_t LiveModel::learned() const {
  std::lock_guard<std::mutex> l(writer_mu_);
  return live_ ? live_->labelled() : model_->learner_state().updates;
}

bool LiveModel::is_live() const {
  std::lock_guard<std::mutex> l(writer_mu_);
  return live_ != nullptr;
}

Status LiveModel::WithLiveLearner(const std::function<Status(LiveLearner*)>& fn) {
  std::lock_guard<std::mutex> l(writer_mu_);
  if (live_ == nullptr) return Status::InvalidArgument("LiveModel: no live learner (a single model learns)");
  Status st = fn(live_.get());
  // (Classes fn added to the schema model reach the other candidates.)
  TRIB_RETURN_IF_ERROR(live_->SyncClasses());
  return st;
}

std::string LiveModel::live_report() const {
  std::lock_guard<std::mutex> l(writer_mu_);
  return live_ ? live_->ToJson() : std::string();
}

// (Not current_->version: without a hazard slot the publication could be
// retired and refreshed in place while it is read.)
uint64_t LiveModel::version() const { return version_.load(std::memory_order_acquire); }

LiveModel::Stats LiveModel::stats() const {
  Stats s;
  s.publications = publications_.load(std::memory_order_relaxed);
  s.refreshed = refreshed_.load(std::memory_order_relaxed);
  s.copies = copies_.load(std::memory_order_relaxed);
  return s;
}

LiveModel::Publication* LiveModel::Acquire(uint32_t slot) const {
  std::atomic<Publication*>& hazard = slots_[slot].hazard;
  Publication* p = current_.load(std::memory_order_acquire);
  for (;;) {
    hazard.store(p, std::memory_order_seq_cst);
    Publication* q = current_.load(std::memory_order_seq_cst);
    if (q == p) return p;
    p = q;
  }
}

void LiveModel::Release(uint32_t slot) const { slots_[slot].hazard.store(nullptr, std::memory_order_release); }

Result<uint32_t> LiveModel::ClaimSlot(uint32_t end) const {
  for (uint32_t i = 0; i < end; ++i) {
    bool expected = false;
    if (slots_[i].taken.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return i;
  }
  return Status::InvalidArgument("LiveModel: all " + std::to_string(options_.max_readers) +
                                 " reader slots are in use (LiveModelOptions::max_readers)");
}

void LiveModel::FreeSlot(uint32_t slot) const {
  slots_[slot].hazard.store(nullptr, std::memory_order_release);
  slots_[slot].taken.store(false, std::memory_order_release);
}

Status LiveModel::SaveSnapshot(const std::string& path, uint64_t* version) const {
  auto slot = ClaimSlot(options_.max_readers + 1);  // (the last slot is never a reader's)
  if (!slot.ok()) return slot.status();
  const Publication* p = Acquire(*slot);
  Status st = p->model->Save(path);
  if (st.ok() && version != nullptr) *version = p->version;
  FreeSlot(*slot);
  return st;
}

Result<std::unique_ptr<LiveModel::Reader>> LiveModel::NewReader() {
  auto slot = ClaimSlot(options_.max_readers);  // (slot max_readers stays for SaveSnapshot)
  if (!slot.ok()) return slot.status();
  return std::unique_ptr<Reader>(new Reader(this, *slot));
}

LiveModel::Reader::Reader(LiveModel* owner, uint32_t slot)
    : owner_(owner), slot_(slot), proto_(std::make_unique<v1::Document>()) {}

LiveModel::Reader::~Reader() { owner_->FreeSlot(slot_); }

// The scratch for publication `p`: a scoring state per publication (a
// refreshed copy holds a new family model, Model::RefreshFrom, and a state
// is used only with the model it was made for), and its decoder.
Result<LiveModel::Reader::Cached*> LiveModel::Reader::For(const Publication& p) {
  if (cache_ == nullptr || cache_->serial != p.serial) {
    auto state = p.model->NewScoringState();
    if (!state.ok()) return state.status();
    if (cache_ == nullptr) cache_ = std::make_unique<Cached>();
    cache_->serial = p.serial;
    cache_->state = std::move(state).value();
    cache_->decoder.reset();
  }
  return cache_.get();
}

// Scores `doc` with publication `p` (held by this reader's hazard).
Status LiveModel::Reader::Score(const Publication& p, const trib_document& doc, LivePrediction* out) {
  const Model& m = *p.model;
  TRIB_RETURN_IF_ERROR(CheckDocument(m.schema(), doc));
  auto cached = For(p);
  if (!cached.ok()) return cached.status();
  out->scores.resize(m.num_outputs());
  TRIB_RETURN_IF_ERROR(m.Score(doc, (*cached)->state.get(), out->scores.data()));
  out->version = p.version;
  out->predicted =
      static_cast<uint32_t>(std::max_element(out->scores.begin(), out->scores.end()) - out->scores.begin());
  const auto& classes = m.schema().classes();
  if (m.latent_outputs() || out->predicted >= classes.size()) {
    out->label.clear();
  } else {
    out->label = classes[out->predicted];
  }
  return Status::OK();
}

Status LiveModel::Reader::Predict(const trib_document& doc, LivePrediction* out) {
  const Publication* p = owner_->Acquire(slot_);
  Status st = Score(*p, doc, out);
  owner_->Release(slot_);
  return st.ok() ? st : st.WithContext(DocumentName(doc.index, doc.id ? doc.id : ""));
}

Result<LiveModel::Reader::Cached*> LiveModel::Reader::WithDecoder(const Publication& p) {
  auto cached = For(p);
  if (!cached.ok() || (*cached)->decoder != nullptr) return cached;
  auto decoder = DocumentDecoder::ForModel(p.model->schema());
  if (!decoder.ok()) return decoder.status();
  (*cached)->decoder = std::make_unique<DocumentDecoder>(std::move(decoder).value());
  return cached;
}

Status LiveModel::Reader::Predict(const InputDocument& doc, LivePrediction* out) {
  const Publication* p = owner_->Acquire(slot_);
  const ModelSchema& schema = p->model->schema();
  // (The decoder names the document in its errors; the others get the name
  // here. A prediction needs no label: an unknown one is no error.)
  Status st = doc.ToProto(schema, proto_.get());
  bool named = false;
  auto cached = WithDecoder(*p);
  if (st.ok() && !cached.ok()) st = cached.status();
  if (st.ok()) {
    proto_->clear_label();
    st = (*cached)->decoder->Decode(*proto_, 0, schema, kGrowNothing, &buffer_, nullptr, nullptr);
    named = !st.ok();
  }
  if (st.ok()) st = Score(*p, buffer_.View(), out);
  owner_->Release(slot_);
  return st.ok() || named ? st : st.WithContext(DocumentName(0, doc.id()));
}

Status LiveModel::Reader::Read(const std::function<Status(const LiveView&)>& fn) {
  const Publication* p = owner_->Acquire(slot_);
  auto cached = WithDecoder(*p);
  Status st;
  if (cached.ok()) {
    LiveView view;
    view.model = p->model.get();
    view.version = p->version;
    view.decoder = (*cached)->decoder.get();
    view.state = (*cached)->state.get();
    st = fn(view);
  } else {
    st = cached.status();
  }
  owner_->Release(slot_);
  return st;
}

}  // namespace tributary
