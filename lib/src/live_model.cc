#include "tributary/live_model.h"

#include <algorithm>
#include <utility>

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

Result<std::unique_ptr<LiveModel>> LiveModel::Create(std::unique_ptr<Model> model, const LiveModelOptions& options) {
  if (model == nullptr) return Status::InvalidArgument("LiveModel: no model");
  if (options.max_readers == 0 || options.max_readers > kMaxReaders) {
    return Status::InvalidArgument("LiveModel: max_readers must be in 1.." + std::to_string(kMaxReaders) + ", found " +
                                   std::to_string(options.max_readers));
  }
  std::unique_ptr<LiveModel> live(new LiveModel());
  live->options_ = options;
  auto learner = Learner::Create(model.get(), options.learner);
  if (!learner.ok()) return learner.status();
  live->learner_ = std::move(learner).value();
  auto decoder = DocumentDecoder::ForModel(model->schema());
  if (!decoder.ok()) return decoder.status();
  live->decoder_ = std::make_unique<DocumentDecoder>(std::move(decoder).value());
  live->model_ = std::move(model);
  live->slots_.reset(new Slot[options.max_readers + 1]);
  std::lock_guard<std::mutex> l(live->writer_mu_);
  auto v = live->PublishLocked();
  if (!v.ok()) return v.status();
  return live;
}

LiveModel::~LiveModel() = default;

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
  std::unique_ptr<Publication> p = TakeSpareLocked();
  // A spare was a copy of the learner's model as of its epoch: bring it up
  // to date by the pages written since (Model::RefreshFrom); a first copy,
  // or one the model outgrew, is a Clone.
  if (p != nullptr && p->model->RefreshFrom(*model_, p->epoch).ok()) {
    refreshed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    auto clone = model_->Clone();
    if (!clone.ok()) return clone.status().WithContext("publishing the model");
    p = std::make_unique<Publication>();
    p->model = std::move(clone).value();
  }
  p->version = model_->learner_state().updates;
  p->generation = generation_;
  p->epoch = model_->stats().epoch();
  p->serial = publications_.fetch_add(1, std::memory_order_relaxed) + 1;
  model_->stats().NextEpoch();  // later writes are newer than this copy
  current_.store(p.get(), std::memory_order_seq_cst);
  if (current_owner_ != nullptr) retired_.push_back(std::move(current_owner_));
  current_owner_ = std::move(p);
  since_publish_ = 0;
  return current_owner_->version;
}

Status LiveModel::Learn(const trib_document& doc, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  TRIB_RETURN_IF_ERROR(learner_->Learn(doc, result));
  if (options_.publish_every > 0 && ++since_publish_ >= options_.publish_every) {
    auto v = PublishLocked();
    if (!v.ok()) return v.status();
  }
  return Status::OK();
}

Status LiveModel::Learn(const InputDocument& doc, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  const uint64_t index = inputs_++;
  Status st = doc.ToProto(model_->schema(), &proto_);
  if (!st.ok()) return st.WithContext(DocumentName(index, doc.id()));
  const Model& m = *model_;
  const unsigned growth =
      (m.schema().open_classes() ? kGrowClasses : 0u) | (m.schema().open_vocabulary() ? kGrowTerms : 0u);
  TRIB_RETURN_IF_ERROR(
      DecodeGrowing(*decoder_, proto_, index, model_.get(), static_cast<DecodeGrowth>(growth), &buffer_, nullptr));
  TRIB_RETURN_IF_ERROR(learner_->Learn(buffer_.View(), result));
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
  auto learner = Learner::Create(model.get(), options_.learner);
  if (!learner.ok()) return learner.status();
  auto decoder = DocumentDecoder::ForModel(model->schema());
  if (!decoder.ok()) return decoder.status();
  learner_ = std::move(learner).value();
  decoder_ = std::make_unique<DocumentDecoder>(std::move(decoder).value());
  model_ = std::move(model);
  // The copies of the old model must not be refreshed from the new one
  // (its page epochs say nothing of them): a new generation.
  ++generation_;
  spares_.clear();
  auto v = PublishLocked();
  return v.ok() ? Status::OK() : v.status();
}

Status LiveModel::WithModel(const std::function<Status(Model*)>& fn) {
  std::lock_guard<std::mutex> l(writer_mu_);
  return fn(model_.get());
}

uint64_t LiveModel::version() const { return current_.load(std::memory_order_acquire)->version; }

LiveModel::Stats LiveModel::stats() const {
  std::lock_guard<std::mutex> l(writer_mu_);
  Stats s;
  s.publications = publications_.load(std::memory_order_relaxed);
  s.refreshed = refreshed_.load(std::memory_order_relaxed);
  s.copies = 1 + retired_.size() + spares_.size();
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

Result<uint32_t> LiveModel::ClaimSlot() const {
  for (uint32_t i = 0; i <= options_.max_readers; ++i) {
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
  auto slot = ClaimSlot();
  if (!slot.ok()) return slot.status();
  const Publication* p = Acquire(*slot);
  Status st = p->model->Save(path);
  if (st.ok() && version != nullptr) *version = p->version;
  FreeSlot(*slot);
  return st;
}

Result<std::unique_ptr<LiveModel::Reader>> LiveModel::NewReader() {
  // (One slot stays for SaveSnapshot: readers get max_readers.)
  uint32_t readers = 0;
  for (uint32_t i = 0; i <= options_.max_readers; ++i) readers += slots_[i].taken.load(std::memory_order_acquire);
  if (readers >= options_.max_readers) {
    return Status::InvalidArgument("LiveModel: all " + std::to_string(options_.max_readers) +
                                   " reader slots are in use (LiveModelOptions::max_readers)");
  }
  auto slot = ClaimSlot();
  if (!slot.ok()) return slot.status();
  return std::unique_ptr<Reader>(new Reader(this, *slot));
}

LiveModel::Reader::Reader(LiveModel* owner, uint32_t slot) : owner_(owner), slot_(slot) {}

LiveModel::Reader::~Reader() { owner_->FreeSlot(slot_); }

// Scores `doc` with publication `p` (held by this reader's hazard).
Status LiveModel::Reader::Score(const Publication& p, const trib_document& doc, LivePrediction* out) {
  const Model& m = *p.model;
  TRIB_RETURN_IF_ERROR(CheckDocument(m.schema(), doc));
  // A scoring state per publication: a refreshed copy holds a new family
  // model (Model::RefreshFrom), and a state is used only with the model it
  // was made for.
  if (cache_.empty() || cache_[0]->serial != p.serial) {
    auto state = m.NewScoringState();
    if (!state.ok()) return state.status();
    if (cache_.empty()) cache_.push_back(std::make_unique<Cached>());
    cache_[0]->serial = p.serial;
    cache_[0]->state = std::move(state).value();
  }
  out->scores.resize(m.num_outputs());
  TRIB_RETURN_IF_ERROR(m.Score(doc, cache_[0]->state.get(), out->scores.data()));
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

Status LiveModel::Reader::Predict(const InputDocument& doc, LivePrediction* out) {
  const Publication* p = owner_->Acquire(slot_);
  const ModelSchema& schema = p->model->schema();
  // (The decoder names the document in its errors; the others get the name
  // here. A prediction needs no label: an unknown one is no error.)
  Status st = doc.ToProto(schema, &proto_);
  bool named = false;
  if (st.ok()) {
    proto_.clear_label();
    auto decoder = DocumentDecoder::ForModel(schema);
    st = decoder.ok() ? decoder->Decode(proto_, 0, schema, kGrowNothing, &buffer_, nullptr, nullptr) : decoder.status();
    named = !st.ok();
  }
  if (st.ok()) st = Score(*p, buffer_.View(), out);
  owner_->Release(slot_);
  return st.ok() || named ? st : st.WithContext(DocumentName(0, doc.id()));
}

}  // namespace tributary
