// ADWIN (drift.h): an exponential histogram of buckets and the cut test of
// Bifet & Gavaldà 2007.
#include "tributary/drift.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tributary {

Status AdwinOptions::Validate() const {
  if (!(delta > 0 && delta < 1)) {
    return Status::InvalidArgument("ADWIN delta: expected a number in (0, 1), found " + std::to_string(delta));
  }
  if (clock < 1) return Status::InvalidArgument("ADWIN clock: expected at least 1, found 0");
  if (max_buckets < 2) {
    return Status::InvalidArgument("ADWIN max_buckets: expected at least 2, found " + std::to_string(max_buckets));
  }
  if (min_side < 1) return Status::InvalidArgument("ADWIN min_side: expected at least 1, found 0");
  return Status::OK();
}

Adwin::Adwin(const AdwinOptions& options) : options_(options) {}

double Adwin::mean() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }

void Adwin::Reset() {
  levels_.clear();
  n_ = 0;
  sum_ = m2_ = 0;
}

Adwin::State Adwin::state() const { return State{levels_, n_, sum_, m2_, alarms_, added_}; }

Status Adwin::Restore(const State& s) {
  uint64_t total = 0;
  for (size_t i = 0; i < s.levels.size(); ++i) {
    if (s.levels[i].size() > options_.max_buckets || i >= 63) {
      return Status::Corruption("ADWIN state: level " + std::to_string(i) + " holds " +
                                std::to_string(s.levels[i].size()) + " buckets, expected at most " +
                                std::to_string(options_.max_buckets));
    }
    for (const Bucket& b : s.levels[i]) {
      if (!std::isfinite(b.sum) || !std::isfinite(b.m2)) {
        return Status::Corruption("ADWIN state: a bucket of level " + std::to_string(i) + " is not finite");
      }
    }
    total += static_cast<uint64_t>(s.levels[i].size()) << i;
  }
  if (total != s.width || !std::isfinite(s.sum) || !std::isfinite(s.m2)) {
    return Status::Corruption("ADWIN state: the window holds " + std::to_string(s.width) +
                              " values but its buckets hold " + std::to_string(total) + " (or a sum is not finite)");
  }
  levels_ = s.levels;
  n_ = s.width;
  sum_ = s.sum;
  m2_ = s.m2;
  alarms_ = s.alarms;
  added_ = s.added;
  return Status::OK();
}

bool Adwin::Add(double x) {
  if (!std::isfinite(x)) return false;
  ++added_;
  // Welford's update of the window's mean and squared deviations.
  const double old_mean = mean();
  ++n_;
  sum_ += x;
  m2_ += (x - old_mean) * (x - mean());
  if (levels_.empty()) levels_.emplace_back();
  levels_[0].push_back(Bucket{x, 0.0});
  Compress();
  if (added_ % options_.clock != 0) return false;
  bool alarm = false, rise = false;
  while (CheckCut(&rise)) {
    alarm |= rise;
    DropOldest();
  }
  if (alarm) ++alarms_;
  return alarm;
}

// At most max_buckets buckets of each size: the two oldest of a full level
// merge into one bucket of the next (Lemma 4.1's invariant). Variances
// combine as Chan et al.'s parallel formula says.
void Adwin::Compress() {
  for (size_t i = 0; i < levels_.size(); ++i) {
    if (levels_[i].size() <= options_.max_buckets) break;
    const Bucket a = levels_[i][0], b = levels_[i][1];
    levels_[i].erase(levels_[i].begin(), levels_[i].begin() + 2);
    const double size = std::ldexp(1.0, static_cast<int>(i));
    const double d = a.sum / size - b.sum / size;
    Bucket merged{a.sum + b.sum, a.m2 + b.m2 + size / 2 * d * d};
    if (i + 1 == levels_.size()) levels_.emplace_back();
    levels_[i + 1].push_back(merged);  // newer than every bucket of the next level
  }
}

// Looks for a split W = W0 W1 at a bucket boundary whose means differ by more
// than eps_cut (drift.h); *rise: W1's mean is the higher.
bool Adwin::CheckCut(bool* rise) {
  if (n_ < 2 * static_cast<uint64_t>(options_.min_side)) return false;
  const double n = static_cast<double>(n_);
  const double var = std::max(0.0, m2_ / n);
  const double log_term = std::log(2.0 * std::max(1.0, std::log(n)) / options_.delta);
  double n0 = 0, s0 = 0;
  for (size_t i = levels_.size(); i-- > 0;) {
    const double size = std::ldexp(1.0, static_cast<int>(i));
    for (const Bucket& b : levels_[i]) {
      n0 += size;
      s0 += b.sum;
      const double n1 = n - n0;
      if (n1 < options_.min_side) return false;
      if (n0 < options_.min_side) continue;
      const double mean0 = s0 / n0, mean1 = (sum_ - s0) / n1;
      const double m = 1.0 / (1.0 / n0 + 1.0 / n1);
      const double eps = std::sqrt(2.0 / m * var * log_term) + 2.0 / (3.0 * m) * log_term;
      if (std::fabs(mean0 - mean1) > eps) {
        *rise = mean1 > mean0;
        return true;
      }
    }
  }
  return false;
}

// Removes the oldest bucket (the highest level's first) from the window.
void Adwin::DropOldest() {
  while (!levels_.empty() && levels_.back().empty()) levels_.pop_back();
  if (levels_.empty()) return;
  const size_t i = levels_.size() - 1;
  const Bucket b = levels_[i].front();
  levels_[i].erase(levels_[i].begin());
  const double nb = std::ldexp(1.0, static_cast<int>(i));
  const double n = static_cast<double>(n_);
  const double rest = n - nb;
  if (rest <= 0) {
    Reset();
    return;
  }
  const double mean_b = b.sum / nb, mean_rest = (sum_ - b.sum) / rest;
  const double d = mean_b - mean_rest;
  m2_ = std::max(0.0, m2_ - b.m2 - nb * rest / n * d * d);
  sum_ -= b.sum;
  n_ -= static_cast<uint64_t>(nb);
  while (!levels_.empty() && levels_.back().empty()) levels_.pop_back();
}

}  // namespace tributary
