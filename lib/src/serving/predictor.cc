#include "tributary/predictor.h"

#include <utility>

namespace tributary {

Result<std::unique_ptr<Predictor>> Predictor::Create(const Model* model, uint64_t seed) {
  if (model == nullptr) return Status::InvalidArgument("Predictor: no model");
  auto st = model->NewScoringState(seed);
  if (!st.ok()) return st.status();
  std::unique_ptr<Predictor> p(new Predictor());
  p->model_ = model;
  p->state_ = std::move(st).value();
  // The table is about as large as the statistics: a model of more than
  // kMaxFrozenValues (1 GiB of doubles) is scored through Model::Score, so
  // that prediction never doubles the memory of a very large model.
  p->can_freeze_ = model->family().family().freeze != nullptr && model->stats().size() <= kMaxFrozenValues;
  return p;
}

Predictor::~Predictor() {
  if (frozen_ != nullptr) model_->family().family().frozen_destroy(frozen_);
}

Status Predictor::Freeze() {
  if (frozen_ != nullptr || !can_freeze_) return Status::OK();
  can_freeze_ = false;  // one attempt: a failed freeze is not retried per document
  trib_error err{};
  trib_stats view = model_->stats().ConstView();
  trib_frozen* f = nullptr;
  int rc = model_->family().family().freeze(model_->family_model(), &view, &f, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, model_->family(), "freeze");
  if (f == nullptr) return Status::PluginError("family '" + model_->family().name + "': freeze returned no table");
  frozen_ = f;
  return Status::OK();
}

Status Predictor::Score(const trib_document& doc, double* log_joint) {
  if (frozen_ == nullptr && can_freeze_) {
    work_ += (static_cast<uint64_t>(doc.num_terms) + 1) * model_->num_outputs();
    if (work_ >= model_->stats().size()) {
      // A family whose freeze fails is scored through Model::Score.
      (void)Freeze();
    }
  }
  if (frozen_ == nullptr) return model_->Score(doc, state_.get(), log_joint);
  trib_error err{};
  int rc =
      model_->family().family().score_frozen(model_->family_model(), frozen_, state_->get(), &doc, log_joint, &err);
  if (rc != TRIB_OK) return PluginStatus(rc, err, model_->family(), "score_frozen");
  return Status::OK();
}

}  // namespace tributary
