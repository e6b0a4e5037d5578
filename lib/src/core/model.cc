// Model (model.h): made from a family and a loss (the family's layout sized
// against the machine's memory first), its loss, copies (Clone, and
// RefreshFrom's copy of the pages written since), scoring and what the family
// reports about documents and components, and the statistics' digest.
// Growth is in model_growth.cc, the statistics in sufficient_stats.cc,
// snapshots in snapshot.cc.
#include "tributary/model.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tributary/checksum.h"
#include "tributary/metrics.h"

namespace tributary {

Status PluginStatus(int code, const trib_error& err, const Plugin& plugin, const char* call) {
  std::string msg = std::string(KindName(plugin.kind)) + " plugin '" + plugin.name + "' " + call + " failed";
  std::string text(err.message, strnlen(err.message, sizeof(err.message)));
  if (!text.empty()) msg += ": " + text;
  switch (code) {
    case TRIB_ERR_INVALID_ARGUMENT:
      return Status::InvalidArgument(msg);
    case TRIB_ERR_INVALID_DOCUMENT:
      return Status::InvalidDocument(msg);
    case TRIB_ERR_NUMERIC:
      return Status::Numeric(msg);
    default:
      return Status::PluginError(msg + " (code " + std::to_string(code) + ")");
  }
}

// ---- ScoringState -------------------------------------------------------------

ScoringState::~ScoringState() {
  if (state_) plugin_->family().state_destroy(state_);
}

// ---- Model --------------------------------------------------------------------

Model::~Model() {
  if (fmodel_) family_->family().destroy(fmodel_);
}

namespace {
constexpr uint32_t kFirstClassRoom = 4;
// Room for terms of an open vocabulary created empty (a live stream): 1,024
// terms, 8 KiB per class for multinomial.
constexpr uint64_t kFirstTermRoom = 1024;

// Installed memory (0: unknown).
uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}
}  // namespace

uint64_t Model::TermRoom(const Plugin& family, const ModelSchema& schema, uint64_t requested) {
  if (!schema.open_vocabulary() || !family.family().add_terms) return 0;
  return std::max(requested == 0 ? kFirstTermRoom : requested, schema.vocab_size());
}

uint64_t Model::MaxTermRoom(uint64_t terms) { return std::max(kFirstTermRoom, terms + terms / 2); }

uint32_t Model::MaxClassRoom(uint32_t classes) {
  const uint64_t grown = uint64_t{classes} + classes / 2;
  return static_cast<uint32_t>(std::max<uint64_t>(kFirstClassRoom, std::min<uint64_t>(grown, UINT32_MAX)));
}

Result<std::unique_ptr<Model>> Model::CreateInternal(std::shared_ptr<const Plugin> family,
                                                     std::shared_ptr<const Plugin> loss, ModelSchema schema,
                                                     Options family_options, uint32_t class_capacity,
                                                     uint64_t vocab_capacity) {
  if (!family || family->kind != TRIB_KIND_FAMILY) return Status::InvalidArgument("not a family plugin");
  if (loss && loss->kind != TRIB_KIND_LOSS) return Status::InvalidArgument("not a loss plugin");
  std::unique_ptr<Model> m(new Model());
  m->family_ = std::move(family);
  m->loss_ = std::move(loss);
  m->schema_ = std::move(schema);
  m->options_ = std::move(family_options);
  const auto& fv = m->family_->family();
  std::vector<trib_option> opts;
  for (const auto& [k, v] : m->options_) opts.push_back({k.c_str(), v.c_str()});
  trib_schema cs = m->schema_.CView();
  if (fv.add_class) {
    // An open-class schema with no class yet (a live stream: its labels come
    // with its documents) starts with room for a few.
    if (cs.num_classes == 0 && m->schema_.open_classes()) class_capacity = std::max(class_capacity, kFirstClassRoom);
    m->class_capacity_ = std::max(class_capacity, cs.num_classes);
    cs.class_capacity = m->class_capacity_;
  }
  if (m->schema_.open_vocabulary()) {
    if (!fv.add_terms) {
      return Status::InvalidArgument("family '" + m->family_->name +
                                     "' cannot learn an open vocabulary (it cannot add terms to its statistics): "
                                     "convert the text with --hashed-dim instead of --open-vocabulary, or use "
                                     "family multinomial");
    }
    m->vocab_capacity_ = TermRoom(*m->family_, m->schema_, vocab_capacity);
    cs.vocab_capacity = m->vocab_capacity_;
  }
  trib_error err{};
  int rc = fv.create(&cs, opts.data(), opts.size(), &m->fmodel_, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *m->family_, "create");
  if (m->fmodel_ == nullptr) return Status::PluginError("family '" + m->family_->name + "' create returned no model");
  uint32_t nb = 0;
  rc = fv.layout(m->fmodel_, nullptr, &nb, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *m->family_, "layout");
  std::vector<trib_block> blocks(nb);
  rc = fv.layout(m->fmodel_, blocks.data(), &nb, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *m->family_, "layout");
  blocks.resize(nb);
  // Refuse a model that cannot fit before allocating it (a schema from a
  // file sizes it: vocabulary or hashed_dim x classes x topics...), with the
  // sizes that make it up, instead of std::bad_alloc or the OOM killer.
  uint64_t values = 0;
  for (const auto& b : blocks) values += b.size;
  const uint64_t limit = PhysicalMemoryBytes();
  if (limit > 0 && values > limit / sizeof(double)) {
    auto gib = [](double bytes) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", bytes / (1u << 30));
      return std::string(buf);
    };
    return Status::InvalidArgument(
        "family '" + m->family_->name + "' needs " + std::to_string(values) + " statistics (" +
        gib(static_cast<double>(values) * sizeof(double)) + " GiB) for this schema (" +
        (m->schema_.hashed() ? "hashed_dim " : "vocabulary of ") + std::to_string(m->schema_.vocab_size()) +
        (m->schema_.hashed() ? "" : " terms") + ", " + std::to_string(m->schema_.classes().size()) +
        " classes), more than this machine's memory (" + gib(static_cast<double>(limit)) + " GiB)");
  }
  TRIB_RETURN_IF_ERROR(m->stats_.Init(std::move(blocks)).WithContext("family '" + m->family_->name + "'"));
  TRIB_RETURN_IF_ERROR(m->QueryOutputs());
  if (m->loss_) TRIB_RETURN_IF_ERROR(m->SetLoss(m->loss_, m->loss_options_));
  return m;
}

Status Model::QueryOutputs() {
  const auto& fv = family_->family();
  output_kind_ = TRIB_OUTPUTS_CLASSES;
  num_outputs_ = static_cast<uint32_t>(schema_.classes().size());
  if (!fv.outputs) return Status::OK();
  trib_error err{};
  uint32_t kind = TRIB_OUTPUTS_CLASSES, count = 0;
  int rc = fv.outputs(fmodel_, &kind, &count, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "outputs");
  if (kind == TRIB_OUTPUTS_CLASSES) {
    if (count != num_outputs_) {
      return Status::PluginError("family '" + family_->name + "' reports " + std::to_string(count) +
                                 " class outputs, but the schema has " + std::to_string(num_outputs_) + " classes");
    }
  } else if (kind == TRIB_OUTPUTS_LATENT) {
    if (count == 0) return Status::PluginError("family '" + family_->name + "' reports 0 latent outputs");
    output_kind_ = kind;
    num_outputs_ = count;
    // Labels only name documents for evaluation: any label is welcome.
    schema_.set_open_classes(true);
  } else {
    return Status::PluginError("family '" + family_->name + "' reports an unknown output kind " + std::to_string(kind));
  }
  return Status::OK();
}

std::string Model::OutputName(uint32_t k) const {
  if (!latent_outputs() && k < schema_.classes().size()) return schema_.classes()[k];
  return std::to_string(k);
}

Status Model::SetLoss(std::shared_ptr<const Plugin> loss, Options loss_options) {
  if (!loss || loss->kind != TRIB_KIND_LOSS) return Status::InvalidArgument("not a loss plugin");
  const auto& lv = loss->loss();
  std::shared_ptr<trib_loss_model> instance;
  if (lv.create) {
    std::vector<trib_option> opts;
    for (const auto& [k, v] : loss_options) opts.push_back({k.c_str(), v.c_str()});
    trib_error err{};
    trib_loss_model* lm = nullptr;
    int rc = lv.create(opts.data(), opts.size(), &lm, &err);
    if (rc != TRIB_OK) return PluginStatus(rc, err, *loss, "create");
    if (lm == nullptr) return Status::PluginError("loss '" + loss->name + "' create returned no instance");
    instance = std::shared_ptr<trib_loss_model>(lm, [plugin = loss](trib_loss_model* p) { plugin->loss().destroy(p); });
  } else if (!loss_options.empty()) {
    return Status::InvalidArgument("loss '" + loss->name + "' takes no options, got '" + loss_options[0].first + "'");
  }
  loss_ = std::move(loss);
  loss_options_ = std::move(loss_options);
  loss_model_ = std::move(instance);
  return Status::OK();
}

Status Model::LossWeights(const double* scores, int64_t label, double* w, double* c, double* loss_value) const {
  trib_error err;  // (not zero-filled: per document; plugins write a NUL-terminated message)
  err.code = TRIB_OK;
  err.message[0] = '\0';
  const auto& lv = loss_->loss();
  int rc = loss_model_ ? lv.weights_with(loss_model_.get(), scores, num_outputs_, label, w, c, loss_value, &err)
                       : lv.weights(scores, num_outputs_, label, w, c, loss_value, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *loss_, "weights");
  return Status::OK();
}

Result<std::unique_ptr<Model>> Model::Create(std::shared_ptr<const Plugin> family, std::shared_ptr<const Plugin> loss,
                                             ModelSchema schema, Options family_options, uint64_t seed, double n) {
  // Open classes: room for more classes than declared, one always kept spare
  // (see AddClass), so the first new class already has a never-seen class to
  // start from.
  const uint32_t room = schema.open_classes() && family && family->family().add_class
                            ? std::max(static_cast<uint32_t>(schema.classes().size()) + 1, kFirstClassRoom)
                            : 0;
  auto r = CreateInternal(std::move(family), std::move(loss), std::move(schema), std::move(family_options), room);
  if (!r.ok()) return r.status();
  auto m = std::move(r).value();
  const auto& fv = m->family_->family();
  trib_error err{};
  trib_stats view = m->stats_.View();
  if (fv.init_stats) {
    int rc = fv.init_stats(m->fmodel_, &view, seed, &err);
    if (rc != TRIB_OK) return PluginStatus(rc, err, *m->family_, "init_stats");
  }
  if (m->loss_) m->learner_.schedule.lambda = m->loss_->loss().default_lambda;
  trib_step step{0.0, n, 0.0, 0};
  TRIB_RETURN_IF_ERROR(m->Rebuild(step));
  return m;
}

Status Model::Rebuild(const trib_step& step) {
  stats_.NoteAllWritten();  // the check-step may write any entry
  trib_error err{};
  trib_stats view = stats_.View();
  int rc = family_->family().rebuild(fmodel_, &view, &step, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "rebuild");
  return Status::OK();
}

Result<std::unique_ptr<Model>> Model::Clone() const {
  std::unique_ptr<Model> m(new Model());
  m->family_ = family_;
  m->loss_ = loss_;
  m->schema_ = schema_;
  m->options_ = options_;
  m->loss_options_ = loss_options_;
  m->loss_model_ = loss_model_;  // immutable after create: shared by clones
  m->output_kind_ = output_kind_;
  m->num_outputs_ = num_outputs_;
  m->class_capacity_ = class_capacity_;
  m->vocab_capacity_ = vocab_capacity_;
  m->user_limits_ = user_limits_;
  m->stats_budget_ = stats_budget_;
  m->stats_ = stats_;
  m->learner_ = learner_;
  m->training_report_ = training_report_;
  m->live_state_ = live_state_;
  trib_error err{};
  int rc = family_->family().clone(fmodel_, &m->fmodel_, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "clone");
  return m;
}

Status Model::RefreshFrom(const Model& src, uint64_t since) {
  if (src.family_ != family_) return Status::InvalidArgument("RefreshFrom: a model of another family");
  const auto& a = stats_.blocks();
  const auto& b = src.stats_.blocks();
  bool same = a.size() == b.size() && stats_.size() == src.stats_.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = a[i].offset == b[i].offset && a[i].size == b[i].size;
  if (!same) return Status::InvalidArgument("RefreshFrom: the statistics' layout differs (the model grew)");
  trib_family_model* fm = nullptr;
  trib_error err{};
  const int rc = family_->family().clone(src.fmodel_, &fm, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "clone");
  family_->family().destroy(fmodel_);
  fmodel_ = fm;
  loss_ = src.loss_;
  schema_ = src.schema_;  // the vocabulary shared (schema.h)
  options_ = src.options_;
  loss_options_ = src.loss_options_;
  loss_model_ = src.loss_model_;
  output_kind_ = src.output_kind_;
  num_outputs_ = src.num_outputs_;
  class_capacity_ = src.class_capacity_;
  vocab_capacity_ = src.vocab_capacity_;
  stats_.CopyWrittenSince(src.stats_, since);
  learner_ = src.learner_;
  training_report_ = src.training_report_;
  live_state_ = src.live_state_;
  return Status::OK();
}

Result<std::unique_ptr<ScoringState>> Model::NewScoringState(uint64_t seed) const {
  trib_family_state* st = nullptr;
  trib_error err{};
  int rc = family_->family().state_create(fmodel_, seed, &st, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "state_create");
  return std::unique_ptr<ScoringState>(new ScoringState(family_, st));
}

Status Model::Score(const trib_document& doc, ScoringState* state, double* log_joint) const {
  if ((doc.real_missing || doc.categorical_missing) && family_->abi_minor < 2) {
    return Status::InvalidDocument("family '" + family_->name + "' (built against ABI 1." +
                                   std::to_string(family_->abi_minor) + ") cannot handle missing features");
  }
  trib_error err{};
  trib_stats view = stats_.ConstView();
  int rc = family_->family().score(fmodel_, &view, state->get(), &doc, log_joint, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "score");
  return Status::OK();
}

Status Model::Completion(const trib_document& observed, const trib_document& heldout, ScoringState* state,
                         double* log_prob) const {
  if (!has_completion()) {
    return Status::InvalidArgument("family '" + family_->name + "' does not support document completion");
  }
  trib_error err{};
  trib_stats view = stats_.ConstView();
  int rc = family_->family().completion(fmodel_, &view, state->get(), &observed, &heldout, log_prob, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "completion");
  if (!std::isfinite(*log_prob) || *log_prob > 0) {
    return Status::Numeric("family '" + family_->name + "' returned completion log-probability " +
                           std::to_string(*log_prob) + ", expected a finite value <= 0");
  }
  return Status::OK();
}

Status Model::ComponentTerms(uint32_t k, std::vector<double>* out) const {
  if (!family_->family().component_terms) {
    return Status::InvalidArgument("family '" + family_->name + "' does not describe its components by terms");
  }
  if (k >= num_components()) {
    return Status::InvalidArgument("component " + std::to_string(k) + " out of range (the model has " +
                                   std::to_string(num_components()) + ")");
  }
  out->assign(schema_.vocab_size(), 0.0);
  trib_error err{};
  trib_stats view = stats_.ConstView();
  int rc = family_->family().component_terms(fmodel_, &view, k, out->data(), &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "component_terms");
  return Status::OK();
}

uint32_t Model::num_components() const {
  if (latent_outputs()) return num_outputs_;
  if (family_->family().components == nullptr) return 0;
  uint32_t count = 0;
  trib_error err{};
  if (family_->family().components(fmodel_, &count, &err) != TRIB_OK) return 0;
  return count;
}

Status Model::Proportions(const trib_document& doc, ScoringState* state, double* out) const {
  const uint32_t K = num_components();
  if (latent_outputs()) {
    std::vector<double> scores(K);
    TRIB_RETURN_IF_ERROR(Score(doc, state, scores.data()));
    Posterior(scores.data(), K, out);
  } else {
    if (K == 0 || family_->family().proportions == nullptr) {
      return Status::InvalidArgument("family '" + family_->name + "' has no latent components or topics (its outputs " +
                                     "are the classes)");
    }
    trib_error err{};
    trib_stats view = stats_.ConstView();
    int rc = family_->family().proportions(fmodel_, &view, state->get(), &doc, out, &err);
    if (rc != TRIB_OK) return PluginStatus(rc, err, *family_, "proportions");
  }
  double sum = 0;
  for (uint32_t k = 0; k < K; ++k) {
    if (!(out[k] >= 0) || !std::isfinite(out[k])) {
      return Status::Numeric("family '" + family_->name + "' returned proportion " + std::to_string(out[k]) +
                             " for component " + std::to_string(k) + ", expected a finite value >= 0");
    }
    sum += out[k];
  }
  if (std::fabs(sum - 1) > 1e-6) {
    return Status::Numeric("family '" + family_->name + "' returned proportions summing to " + std::to_string(sum) +
                           ", expected 1");
  }
  return Status::OK();
}

double Model::PerplexityTokens(const trib_document& doc) const {
  if (family_->family().perplexity_tokens) return family_->family().perplexity_tokens(fmodel_, &doc);
  return doc.total_count;
}

std::string Model::StatsDigest() const {
  // As boost::crc_32_type over the same bytes (checksum.h), which 0.1's
  // inspect used: digests printed before stay comparable.
  uint32_t crc = Crc32(stats_.raw().data(), stats_.raw().size() * sizeof(double));
  for (const auto& b : stats_.blocks()) {
    crc = Crc32(&b.scale, sizeof b.scale, crc);
    crc = Crc32(&b.shift, sizeof b.shift, crc);
  }
  char digest[16];
  std::snprintf(digest, sizeof digest, "%08x", crc);
  return digest;
}

}  // namespace tributary
