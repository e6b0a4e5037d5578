#include "tributary/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tributary/vector_exp.h"

namespace tributary {

namespace {

// log sum_i exp(log_joint[i]) given their maximum m (finite), summed in order.
double LogSumExp(const double* log_joint, uint32_t k, double m, double* scratch) {
  vector_exp::ExpShiftedBest(log_joint, m, k, scratch);
  double s = 0;
  for (uint32_t i = 0; i < k; ++i) s += scratch[i];
  return m + std::log(s);
}

// The largest of x[0 .. k), NaNs skipped (-inf if none): std::max(m, x[i])
// from m = -inf, two lanes at a time (a maximum does not depend on the order,
// but for the sign of a zero, which no caller's result depends on).
double Max(const double* x, uint32_t k) {
  typedef double v2d __attribute__((vector_size(16)));
  const double inf = std::numeric_limits<double>::infinity();
  v2d a = {-inf, -inf}, b = a;
  uint32_t i = 0;
  for (; i + 4 <= k; i += 4) {  // two accumulators: two short dependency chains
    v2d u, v;
    std::memcpy(&u, x + i, sizeof u);
    std::memcpy(&v, x + i + 2, sizeof v);
    a = u > a ? u : a;  // (a NaN compares false: skipped)
    b = v > b ? v : b;
  }
  double m = std::max(std::max(a[0], a[1]), std::max(b[0], b[1]));
  for (; i < k; ++i) m = std::max(m, x[i]);
  return m;
}

}  // namespace

double Posterior(const double* log_joint, uint32_t k, double* probs) {
  const double m = Max(log_joint, k);
  if (!std::isfinite(m)) {
    for (uint32_t i = 0; i < k; ++i) probs[i] = 1.0 / k;
    return m;
  }
  vector_exp::ExpShiftedBest(log_joint, m, k, probs);
  double s = 0;
  for (uint32_t i = 0; i < k; ++i) s += probs[i];
  for (uint32_t i = 0; i < k; ++i) probs[i] /= s;
  return m + std::log(s);
}

double LogEvidence(const double* log_joint, uint32_t k, double* scratch) {
  const double m = Max(log_joint, k);
  if (!std::isfinite(m)) return m;
  return LogSumExp(log_joint, k, m, scratch);  // as Posterior, so the sum is the same
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
  const bool labelled = label >= 0 && label < static_cast<int64_t>(k_);
  // What LogEvidence, std::max_element and HingeLoss found, each in a pass of
  // its own, with their answers (NaNs included): m, the largest score (NaNs
  // skipped); pred, max_element's first index of the largest (0 when the
  // first score is NaN: nothing compares above it); and `other`, the largest
  // among the classes other than the label, which is m unless the label's
  // score is m itself.
  const double m = Max(log_joint, k_);
  // (Only log p(x) is needed here: the probabilities are not normalised.)
  const double log_px = std::isfinite(m) ? LogSumExp(log_joint, k_, m, probs_.data()) : m;
  if (tokens > 0 && std::isfinite(log_px)) {
    log_px_sum_ += log_px;
    tokens_ += tokens;
  }
  if (!labelled) return;
  ++labelled_;
  uint32_t pred = 0;
  if (!std::isnan(log_joint[0])) {
    while (pred < k_ && !(log_joint[pred] == m)) ++pred;
  }
  if (pred == static_cast<uint32_t>(label)) ++correct_;
  confusion_[static_cast<size_t>(label) * k_ + pred]++;
  ncll_sum_ += -(log_joint[label] - log_px);
  if (k_ >= 2) {  // HingeLoss
    const uint32_t l = static_cast<uint32_t>(label);
    const double other = log_joint[l] == m ? std::max(Max(log_joint, l), Max(log_joint + l + 1, k_ - l - 1)) : m;
    hinge_sum_ += std::max(0.0, 1.0 - (log_joint[l] - other));
  }
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

// Kuhn-Munkres with potentials (shortest augmenting paths) for n <= m rows;
// the transpose otherwise.
std::vector<int64_t> HungarianAssign(const std::vector<double>& cost, uint32_t rows, uint32_t cols) {
  if (rows == 0 || cols == 0) return std::vector<int64_t>(rows, -1);
  const bool transpose = rows > cols;
  const uint32_t n = transpose ? cols : rows, m = transpose ? rows : cols;
  auto a = [&](uint32_t i, uint32_t j) {  // 1-based
    return transpose ? cost[size_t{j - 1} * cols + (i - 1)] : cost[size_t{i - 1} * cols + (j - 1)];
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(n + 1, 0), v(m + 1, 0), minv(m + 1);
  std::vector<uint32_t> p(m + 1, 0), way(m + 1, 0);
  std::vector<char> used(m + 1);
  for (uint32_t i = 1; i <= n; ++i) {
    p[0] = i;
    uint32_t j0 = 0;
    std::fill(minv.begin(), minv.end(), inf);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[j0] = 1;
      const uint32_t i0 = p[j0];
      double delta = inf;
      uint32_t j1 = 0;
      for (uint32_t j = 1; j <= m; ++j) {
        if (used[j]) continue;
        const double cur = a(i0, j) - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (uint32_t j = 0; j <= m; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const uint32_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int64_t> out(rows, -1);
  for (uint32_t j = 1; j <= m; ++j) {
    if (p[j] == 0) continue;
    if (transpose) {
      out[j - 1] = static_cast<int64_t>(p[j] - 1);
    } else {
      out[p[j] - 1] = static_cast<int64_t>(j - 1);
    }
  }
  return out;
}

ClusteringMetrics::ClusteringMetrics(uint32_t clusters, uint32_t classes)
    : clusters_(clusters), classes_(classes), sizes_(clusters, 0), counts_(size_t{clusters} * classes, 0) {}

void ClusteringMetrics::Resize(uint32_t classes) {
  if (classes <= classes_) return;
  std::vector<uint64_t> c(size_t{clusters_} * classes, 0);
  for (uint32_t k = 0; k < clusters_; ++k)
    for (uint32_t j = 0; j < classes_; ++j) c[size_t{k} * classes + j] = counts_[size_t{k} * classes_ + j];
  counts_.swap(c);
  classes_ = classes;
}

void ClusteringMetrics::Add(uint32_t cluster, int64_t label) {
  ++documents_;
  if (cluster < clusters_) ++sizes_[cluster];
  if (label < 0 || cluster >= clusters_) return;
  if (static_cast<uint64_t>(label) >= classes_) Resize(static_cast<uint32_t>(label) + 1);
  ++labelled_;
  ++counts_[size_t{cluster} * classes_ + static_cast<uint64_t>(label)];
}

std::vector<int64_t> ClusteringMetrics::Mapping() const {
  std::vector<double> cost(counts_.size());
  for (size_t i = 0; i < counts_.size(); ++i) cost[i] = -static_cast<double>(counts_[i]);
  return HungarianAssign(cost, clusters_, classes_);
}

void ClusteringMetrics::Scores(double* acc, double* prec, double* rec) const {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  *acc = *prec = *rec = nan;
  if (labelled_ == 0 || classes_ == 0) return;
  const auto map = Mapping();
  std::vector<uint64_t> per_class(classes_, 0), per_cluster(clusters_, 0);
  for (uint32_t k = 0; k < clusters_; ++k)
    for (uint32_t c = 0; c < classes_; ++c) {
      per_class[c] += counts_[size_t{k} * classes_ + c];
      per_cluster[k] += counts_[size_t{k} * classes_ + c];
    }
  uint64_t hit = 0;
  double p = 0, r = 0;
  uint32_t present = 0;
  for (uint32_t c = 0; c < classes_; ++c) {
    if (per_class[c] == 0) continue;  // a class absent from this stream
    ++present;
    for (uint32_t k = 0; k < clusters_; ++k) {
      if (map[k] != static_cast<int64_t>(c)) continue;
      const uint64_t n = counts_[size_t{k} * classes_ + c];
      hit += n;
      if (per_cluster[k] > 0) p += static_cast<double>(n) / static_cast<double>(per_cluster[k]);
      r += static_cast<double>(n) / static_cast<double>(per_class[c]);
    }
  }
  *acc = static_cast<double>(hit) / static_cast<double>(labelled_);
  *prec = p / present;
  *rec = r / present;
}

double ClusteringMetrics::accuracy() const {
  double a, p, r;
  Scores(&a, &p, &r);
  return a;
}
double ClusteringMetrics::precision() const {
  double a, p, r;
  Scores(&a, &p, &r);
  return p;
}
double ClusteringMetrics::recall() const {
  double a, p, r;
  Scores(&a, &p, &r);
  return r;
}

}  // namespace tributary
