#include "tributary/sdem_learner.h"

#include <algorithm>
#include <cmath>

#include "tributary/document.h"

namespace tributary {

namespace {
// Below this a block's scale is folded back into raw (O(block), rare): keeps
// raw = (mu - shift abar) / scale well inside double range.
constexpr double kMinScale = 1e-100;
}  // namespace

Result<std::unique_ptr<SdemLearner>> SdemLearner::Create(Model* model, uint64_t seed) {
  if (model == nullptr) return Status::InvalidArgument("SdemLearner: no model");
  if (!model->loss_plugin()) return Status::InvalidArgument("SdemLearner: the model has no loss");
  TRIB_RETURN_IF_ERROR(model->learner_state().schedule.Validate());
  if (!(model->learner_state().effective_size > 0)) {
    return Status::InvalidArgument("effective data-set size n must be > 0");
  }
  std::unique_ptr<SdemLearner> l(new SdemLearner());
  l->model_ = model;
  auto st = model->NewScoringState(seed);
  if (!st.ok()) return st.status();
  l->state_ = std::move(st).value();
  l->delta_index_.resize(1024);
  l->delta_value_.resize(1024);
  return l;
}

int SdemLearner::GrowDelta(trib_delta* d, size_t min_capacity) {
  auto* self = static_cast<SdemLearner*>(d->host);
  size_t cap = std::max(min_capacity, d->capacity * 2);
  try {
    self->delta_index_.resize(cap);
    self->delta_value_.resize(cap);
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  d->index = self->delta_index_.data();
  d->value = self->delta_value_.data();
  d->capacity = cap;
  return TRIB_OK;
}

Status SdemLearner::Fail(const trib_document& doc, const Status& st) const {
  return st.WithContext(DocumentName(doc.index, doc.id ? doc.id : ""));
}

Status SdemLearner::Learn(const trib_document& doc, LearnOutcome* outcome) {
  Model& m = *model_;
  const uint32_t K = m.num_classes();
  const Plugin& loss = *m.loss_plugin();
  if (loss.loss().requires_label && doc.label < 0) {
    return Fail(doc, Status::InvalidDocument("loss '" + loss.name + "' needs a label, the document has none"));
  }
  if (doc.label >= static_cast<int64_t>(K)) {
    return Fail(doc, Status::InvalidDocument("label index " + std::to_string(doc.label) + " >= number of classes " +
                                             std::to_string(K)));
  }
  scores_.resize(K);
  weights_.resize(K);
  // 1. Scores.
  TRIB_RETURN_IF_ERROR(Fail(doc, m.Score(doc, state_.get(), scores_.data())));
  uint32_t best = 0;
  for (uint32_t k = 0; k < K; ++k) {
    if (std::isnan(scores_[k]) || scores_[k] == INFINITY) {
      return Fail(doc, Status::Numeric("family '" + m.family().name + "' scored class " + std::to_string(k) + " as " +
                                       std::to_string(scores_[k]) + ", expected a finite log-probability"));
    }
    if (scores_[k] > scores_[best]) best = k;
  }
  // 2. Loss: w and c.
  double c = 0, loss_value = 0;
  trib_error err{};
  int rc = loss.loss().weights(scores_.data(), K, doc.label, weights_.data(), &c, &loss_value, &err);
  if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, loss, "weights"));
  const double dw = doc.weight;
  if (dw != 1.0) {
    for (auto& w : weights_) w *= dw;
    c *= dw;
  }
  // 3. Expected statistics.
  trib_delta delta{delta_index_.data(), delta_value_.data(), 0, delta_index_.size(), this, &GrowDelta};
  trib_stats view = m.stats().View();
  rc = m.family().family().accumulate(m.family_model(), &view, state_->get(), &doc, weights_.data(), &delta, &err);
  if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, m.family(), "accumulate"));
  const uint64_t size = m.stats().size();
  for (size_t j = 0; j < delta.size; ++j) {
    if (delta.index[j] >= size) {
      return Fail(doc, Status::PluginError("family '" + m.family().name + "' produced statistic index " +
                                           std::to_string(delta.index[j]) + " >= " + std::to_string(size)));
    }
    if (!std::isfinite(delta.value[j])) {
      return Fail(doc, Status::Numeric("expected statistics are not finite (entry " + std::to_string(delta.index[j]) +
                                       ")"));
    }
  }
  // 4. Apply (eq. 15 / Table 1), lazily per block.
  LearnerState& ls = m.learner_state();
  const double rho = ls.schedule.Rho(ls.updates);
  const double n = ls.effective_size;
  auto& blocks = m.stats().mutable_blocks();
  factors_.resize(blocks.size());
  materialize_.assign(blocks.size(), 0);
  bool any_materialized = false;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const double f = 1.0 - rho * (c + blocks[b].nu / n);
    factors_[b] = f;
    if (f <= 0 || blocks[b].scale * f < kMinScale) {
      // mu_new = f mu_old + rho abar/n: fold mu_old into raw, restart the map.
      m.stats().Materialize(static_cast<uint32_t>(b));
      auto& raw = m.stats().raw();
      for (uint64_t i = blocks[b].offset; i < blocks[b].offset + blocks[b].size; ++i) raw[i] *= f;
      blocks[b].scale = 1.0;
      blocks[b].shift = rho / n;
      materialize_[b] = 1;
      any_materialized = true;
    } else {
      blocks[b].scale *= f;
      blocks[b].shift = blocks[b].shift * f + rho / n;
    }
  }
  old_raw_.resize(delta.size);
  auto& raw = m.stats().raw();
  uint32_t b = 0;
  for (size_t j = 0; j < delta.size; ++j) {
    const uint64_t i = delta.index[j];
    if (i < blocks[b].offset || i >= blocks[b].offset + blocks[b].size) b = m.stats().BlockOf(i);
    old_raw_[j] = raw[i];
    raw[i] += rho * delta.value[j] / blocks[b].scale;
  }
  // 5. Check-step and caches.
  trib_step step{rho, n, c, ls.updates};
  if (any_materialized) {
    ++ls.materializations;
    Status st = m.Rebuild(step);
    if (!st.ok()) return Fail(doc, st);
  } else {
    view = m.stats().View();
    rc = m.family().family().commit(m.family_model(), &view, delta.index, old_raw_.data(), delta.size, &step, &err);
    if (rc != TRIB_OK) return Fail(doc, PluginStatus(rc, err, m.family(), "commit"));
  }
  ++ls.updates;
  if (outcome) {
    outcome->loss_value = loss_value;
    outcome->predicted = best;
    outcome->rho = rho;
    outcome->delta_entries = delta.size;
  }
  return Status::OK();
}

}  // namespace tributary
