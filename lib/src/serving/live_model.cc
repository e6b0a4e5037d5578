// LiveModel (live_model.h): the handle and its writer side: made over a
// single model (its Learner) or a live learner (LiveLearner), documents
// checked, learned and published every publish_every; Restore, and the
// calls that run under the writer mutex. Durable mode is in
// live_model_durable.cc, publications and readers in
// live_model_publication.cc.
#include "tributary/live_model.h"

#include <utility>

#include "live_model_publication.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

namespace {
constexpr uint32_t kMaxReaders = 4096;
}  // namespace

namespace live_model {

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

}  // namespace live_model

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

Status LiveModel::AdoptLocked(std::unique_ptr<Model> model) {
  if (LiveLearner::Holds(*model)) {
    // A live learner (live_learner.h): its candidates are in the model's
    // live_state, their plugins found in the registry.
    if (options_.registry == nullptr) {
      return Status::InvalidArgument(
          "LiveModel: the model holds a live learner; LiveModelOptions::registry must be set to load its candidates");
    }
    if (options_.learner.engine != Engine::kAuto && options_.learner.engine != Engine::kSdem) {
      return Status::InvalidArgument(
          std::string("LiveModel: the model holds a live learner, which learns with sdEM, not engine '") +
          EngineName(options_.learner.engine) + "'");
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

Status LiveModel::Learn(const trib_document& doc, LearnResult* result) {
  std::lock_guard<std::mutex> l(writer_mu_);
  if (wal_ != nullptr) {
    ToModelProto(model_->schema(), doc, proto_.get());
    TRIB_RETURN_IF_ERROR(LogLocked(*proto_, doc.index));
  }
  if (live_ != nullptr) {
    TRIB_RETURN_IF_ERROR(live_model::CheckDocument(model_->schema(), doc));
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

}  // namespace tributary
