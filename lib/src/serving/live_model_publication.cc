// LiveModel's publications and readers (live_model.h, "How it works"): the
// writer publishes a read-only copy (a retired copy no reader holds is
// refreshed in place, Model::RefreshFrom, else a Clone), readers find the
// newest through one atomic pointer and hold it with a hazard slot of their
// own; SaveSnapshot reads the same way.
#include <algorithm>

#include "live_model_publication.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct LiveModel::Reader::Cached {
  uint64_t serial = 0;
  std::unique_ptr<ScoringState> state;
  std::unique_ptr<DocumentDecoder> decoder;  // made on first use (Predict(InputDocument))
};

namespace {
constexpr size_t kMaxSpares = 2;  // copies kept for refreshing; more are freed
}  // namespace

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

Result<uint64_t> LiveModel::Publish() {
  std::lock_guard<std::mutex> l(writer_mu_);
  return PublishLocked();
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
  TRIB_RETURN_IF_ERROR(live_model::CheckDocument(m.schema(), doc));
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
