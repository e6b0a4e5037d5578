// Change detection on a stream of losses: ADWIN (Bifet & Gavaldà 2007,
// "Learning from Time-Changing Data with Adaptive Windowing", SIAM SDM; the
// ADWIN2 variant with an exponential histogram).
//
// ADWIN keeps a window W of the most recent values (here: a learner's 0/1
// errors, one per labelled document) and drops its older part W0 whenever
// W0's mean and the newer part W1's mean differ by more than
//
//   eps_cut = sqrt(2 / m * var(W) * ln(2 / delta')) + 2 / (3 m) * ln(2 / delta')
//
// for some split W = W0 W1, where m = 1 / (1 / |W0| + 1 / |W1|) (the paper's
// harmonic mean, eq. in §4 with the Bernstein refinement of §4.1) and
// delta' = delta / ln |W| (a union bound over the splits checked). With
// probability at least 1 - delta no cut happens while the mean is constant
// (Theorem 3.1, part 1). The histogram keeps at most `max_buckets` buckets
// of each size 2^i, so memory and time per value are O(log |W|) (Lemma 4.1).
//
// Only a rise of the mean is an *alarm* (a learner getting worse); a fall (it
// learns) shrinks the window the same way but is not reported. Splits are
// checked every `clock` values (as River's ADWIN does: cheaper, and fewer
// false alarms, for a delay of at most `clock` values).
//
// Thread safety: none (one owner). Deterministic: the same values give the
// same alarms.
#ifndef TRIBUTARY_DRIFT_H_
#define TRIBUTARY_DRIFT_H_

#include <cstdint>
#include <vector>

#include "tributary/status.h"

namespace tributary {

/// ADWIN's settings.
struct AdwinOptions {
  double delta = 0.002;      ///< confidence: P(a cut while the mean is constant) <= delta; in (0, 1)
  uint32_t clock = 32;       ///< splits are checked every `clock` values (>= 1)
  uint32_t max_buckets = 5;  ///< buckets kept per size (the paper's M; >= 2)
  uint32_t min_side = 16;    ///< a split leaves at least this many values on each side (>= 1)
  /// Checks the values are in range; the message names the bad one.
  Status Validate() const;
};

/// An adaptive window over a stream of values in [0, 1] (the file comment
/// says how it works).
class Adwin {
 public:
  /// REQUIRES: options.Validate() is OK.
  explicit Adwin(const AdwinOptions& options = AdwinOptions());

  /// Adds one value (a non-finite value is ignored). Returns true when the
  /// window was cut and the newer part's mean is higher: an alarm.
  bool Add(double x);

  uint64_t width() const { return n_; }        ///< values in the window now
  double mean() const;                         ///< the window's mean (0 when empty)
  uint64_t alarms() const { return alarms_; }  ///< alarms so far
  uint64_t added() const { return added_; }    ///< values added so far (non-finite ones not counted)
  /// Forgets the window (the counters stay).
  void Reset();

  /// One bucket of the exponential histogram.
  struct Bucket {
    double sum = 0;  ///< sum of the values
    double m2 = 0;   ///< sum of squared deviations from their mean
  };
  /// Everything the detector holds besides its options (to save a learner
  /// and resume it exactly: LiveLearner::ToModel).
  struct State {
    std::vector<std::vector<Bucket>> levels;  ///< levels[i]: buckets of 2^i values, oldest first
    uint64_t width = 0;                       ///< values in the window
    double sum = 0;                           ///< the window's sum
    double m2 = 0;                            ///< the window's sum of squared deviations from its mean
    uint64_t alarms = 0;                      ///< alarms so far
    uint64_t added = 0;                       ///< values added so far
  };
  State state() const;  ///< the detector's state now
  /// Makes the detector's state `s` (as state() gave it). Errors: a state
  /// no detector with these options holds (a level over max_buckets + 1
  /// buckets, a width that is not the buckets' total, non-finite sums).
  Status Restore(const State& s);

 private:
  void Compress();
  bool CheckCut(bool* rise);
  void DropOldest();

  AdwinOptions options_;
  /// levels_[i]: buckets of 2^i values each, oldest first.
  std::vector<std::vector<Bucket>> levels_;
  uint64_t n_ = 0;
  double sum_ = 0, m2_ = 0;
  uint64_t alarms_ = 0, added_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_DRIFT_H_
