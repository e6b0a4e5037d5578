#include "tributary/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tributary {

double Posterior(const double* log_joint, uint32_t k, double* probs) {
  double m = -std::numeric_limits<double>::infinity();
  for (uint32_t i = 0; i < k; ++i) m = std::max(m, log_joint[i]);
  if (!std::isfinite(m)) {
    for (uint32_t i = 0; i < k; ++i) probs[i] = 1.0 / k;
    return m;
  }
  double s = 0;
  for (uint32_t i = 0; i < k; ++i) {
    probs[i] = std::exp(log_joint[i] - m);
    s += probs[i];
  }
  for (uint32_t i = 0; i < k; ++i) probs[i] /= s;
  return m + std::log(s);
}

double HingeLoss(const double* log_joint, uint32_t k, uint32_t label) {
  if (k < 2) return 0.0;
  double other = -std::numeric_limits<double>::infinity();
  for (uint32_t i = 0; i < k; ++i) {
    if (i != label) other = std::max(other, log_joint[i]);
  }
  return std::max(0.0, 1.0 - (log_joint[label] - other));
}

ClassificationMetrics::ClassificationMetrics(uint32_t k) : k_(k), confusion_(size_t{k} * k, 0), probs_(k) {}

void ClassificationMetrics::Resize(uint32_t k) {
  if (k <= k_) return;
  std::vector<uint64_t> c(size_t{k} * k, 0);
  for (uint32_t i = 0; i < k_; ++i)
    for (uint32_t j = 0; j < k_; ++j) c[size_t{i} * k + j] = confusion_[size_t{i} * k_ + j];
  confusion_.swap(c);
  k_ = k;
  probs_.resize(k);
}

void ClassificationMetrics::Add(const double* log_joint, int64_t label, double tokens) {
  ++documents_;
  double log_px = Posterior(log_joint, k_, probs_.data());
  if (tokens > 0 && std::isfinite(log_px)) {
    log_px_sum_ += log_px;
    tokens_ += tokens;
  }
  if (label < 0 || label >= static_cast<int64_t>(k_)) return;
  ++labelled_;
  uint32_t pred = static_cast<uint32_t>(std::max_element(log_joint, log_joint + k_) - log_joint);
  if (pred == static_cast<uint32_t>(label)) ++correct_;
  confusion_[static_cast<size_t>(label) * k_ + pred]++;
  ncll_sum_ += -(log_joint[label] - log_px);
  hinge_sum_ += HingeLoss(log_joint, k_, static_cast<uint32_t>(label));
}

double ClassificationMetrics::accuracy() const {
  return labelled_ ? static_cast<double>(correct_) / static_cast<double>(labelled_) : std::nan("");
}

double ClassificationMetrics::macro_f1() const {
  if (!labelled_) return std::nan("");
  double sum = 0;
  uint32_t counted = 0;
  for (uint32_t c = 0; c < k_; ++c) {
    uint64_t tp = confusion_[size_t{c} * k_ + c], fp = 0, fn = 0;
    for (uint32_t o = 0; o < k_; ++o) {
      if (o == c) continue;
      fp += confusion_[size_t{o} * k_ + c];
      fn += confusion_[size_t{c} * k_ + o];
    }
    if (tp + fp + fn == 0) continue;  // class absent from truth and predictions
    ++counted;
    sum += 2.0 * static_cast<double>(tp) / static_cast<double>(2 * tp + fp + fn);
  }
  return counted ? sum / counted : std::nan("");
}

double ClassificationMetrics::mean_ncll() const {
  return labelled_ ? ncll_sum_ / static_cast<double>(labelled_) : std::nan("");
}

double ClassificationMetrics::mean_hinge() const {
  return labelled_ ? hinge_sum_ / static_cast<double>(labelled_) : std::nan("");
}

double ClassificationMetrics::perplexity() const {
  return tokens_ > 0 ? std::exp(-log_px_sum_ / tokens_) : std::nan("");
}

}  // namespace tributary
