// QualityMonitor (quality_monitor.h): prequential figures, per class, and
// drift alarms.
#include "tributary/quality_monitor.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tributary {

QualityMonitor::QualityMonitor(const QualityMonitorOptions& options)
    : options_(options),
      decay_(std::exp2(-1.0 / std::max<uint32_t>(1, options.half_life))),
      class_decay_(std::exp2(-1.0 / std::max<uint32_t>(1, options.class_half_life))),
      detector_(options.detector),
      history_every_(std::max<uint32_t>(1, options.history_every)) {}

bool QualityMonitor::Add(const double* scores, uint32_t outputs, uint32_t label) {
  if (label >= outputs) return false;
  uint32_t best = 0;
  double mx = scores[0];
  for (uint32_t k = 0; k < outputs; ++k) {
    if (std::isnan(scores[k])) return false;
    if (scores[k] > mx) {
      mx = scores[k];
      best = k;
    }
  }
  double z = 0;
  for (uint32_t k = 0; k < outputs; ++k) z += std::exp(scores[k] - mx);
  // -log p(y | x) = log sum_k p(k, x) - log p(y, x), capped as trainer.cc does.
  double loss = mx + std::log(z) - scores[label];
  if (!(loss < 50.0)) loss = 50.0;
  const bool right = best == label;
  ++documents_;
  correct_ += right;
  log_loss_sum_ += loss;
  w_right_ = decay_ * w_right_ + (right ? 1.0 : 0.0);
  w_loss_ = decay_ * w_loss_ + loss;
  w_norm_ = decay_ * w_norm_ + 1.0;
  if (classes_.size() <= label) {
    classes_.resize(label + 1);
    class_right_.resize(label + 1, 0.0);
    class_norm_.resize(label + 1, 0.0);
  }
  ClassQuality& c = classes_[label];
  ++c.documents;
  c.correct += right;
  class_right_[label] = class_decay_ * class_right_[label] + (right ? 1.0 : 0.0);
  class_norm_[label] = class_decay_ * class_norm_[label] + 1.0;
  c.window_recall = class_right_[label] / class_norm_[label];
  if (!right) ++confusions_[(static_cast<uint64_t>(label) << 32) | best];
  if (options_.history_capacity > 0 && documents_ % history_every_ == 0) {
    if (history_.size() >= std::max<uint32_t>(2, options_.history_capacity)) {
      // Full: keep the points at multiples of twice the interval.
      const uint64_t every = 2 * history_every_;
      history_.erase(std::remove_if(history_.begin(), history_.end(),
                                    [&](const QualityPoint& p) { return p.documents % every != 0; }),
                     history_.end());
      history_every_ = every;
    }
    if (documents_ % history_every_ == 0) {
      const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      history_.push_back(QualityPoint{documents_, now, window_accuracy(), window_log_loss()});
    }
  }
  if (options_.detect_drift && detector_.Add(right ? 0.0 : 1.0)) {
    alarms_.push_back(documents_);
    return true;
  }
  return false;
}

double QualityMonitor::accuracy() const {
  return documents_ ? static_cast<double>(correct_) / static_cast<double>(documents_) : std::nan("");
}

double QualityMonitor::log_loss() const {
  return documents_ ? log_loss_sum_ / static_cast<double>(documents_) : std::nan("");
}

double QualityMonitor::window_accuracy() const { return w_norm_ > 0 ? w_right_ / w_norm_ : std::nan(""); }

double QualityMonitor::window_log_loss() const { return w_norm_ > 0 ? w_loss_ / w_norm_ : std::nan(""); }

std::vector<Confusion> QualityMonitor::MostConfused(size_t n) const {
  std::vector<Confusion> all;
  all.reserve(confusions_.size());
  for (const auto& [key, count] : confusions_) {
    all.push_back(Confusion{static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key & 0xffffffffu), count});
  }
  auto before = [](const Confusion& a, const Confusion& b) {
    if (a.documents != b.documents) return a.documents > b.documents;
    if (a.truth != b.truth) return a.truth < b.truth;
    return a.predicted < b.predicted;
  };
  const size_t k = std::min(n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), before);
  all.resize(k);
  return all;
}

}  // namespace tributary
