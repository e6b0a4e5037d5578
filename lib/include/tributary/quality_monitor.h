// QualityMonitor: what a live learner knows about its own predictions —
// prequential (test-then-train) accuracy and log-loss, cumulative and over
// a recent window, per class too, the classes confused most, and drift
// alarms (drift.h ADWIN on the 0/1 errors). The server's /metrics and
// /v1/status show one for the model it serves.
//
// The recent window is exponential: a document's weight halves every
// `half_life` later documents (every `class_half_life` later documents of
// its class for the per-class recall), so the figures need O(classes)
// memory and O(1) time per document (the confusions: one hash entry per
// pair of classes ever confused).
//
// The history (history()) is the recent figures sampled every
// `history_every` documents into at most `history_capacity` points: when it
// is full, every other point is dropped and the interval doubles, so it
// spans the whole stream in bounded memory (the server's status page draws
// it, docs/http-api.md).
//
// Thread safety: none (one owner; the server guards it with a mutex).
#ifndef TRIBUTARY_QUALITY_MONITOR_H_
#define TRIBUTARY_QUALITY_MONITOR_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tributary/drift.h"

namespace tributary {

/// How a QualityMonitor weighs and watches.
struct QualityMonitorOptions {
  uint32_t half_life = 500;         ///< documents: the recent window's half-life (>= 1)
  uint32_t class_half_life = 50;    ///< documents of one class: its recent recall's half-life (>= 1)
  bool detect_drift = true;         ///< run ADWIN on the 0/1 errors
  AdwinOptions detector;            ///< its settings
  uint32_t history_capacity = 720;  ///< most points history() keeps (0: no history; else >= 2)
  uint32_t history_every = 10;      ///< documents between points at first (>= 1; doubles as it fills)
};

/// One point of the history: the recent figures after `documents`.
struct QualityPoint {
  uint64_t documents = 0;      ///< labelled documents counted (documents())
  double time = 0;             ///< when: seconds since the Unix epoch (system clock)
  double window_accuracy = 0;  ///< window_accuracy() then
  double window_log_loss = 0;  ///< window_log_loss() then
};

/// One class's figures.
struct ClassQuality {
  uint64_t documents = 0;    ///< labelled documents of this class scored
  uint64_t correct = 0;      ///< of them predicted right
  double window_recall = 0;  ///< recall over the class's recent documents (0 before any)
};

/// A pair of classes confused.
struct Confusion {
  uint32_t truth = 0;      ///< the documents' class
  uint32_t predicted = 0;  ///< the class predicted for them
  uint64_t documents = 0;  ///< how many
};

/// Prequential quality of one model (see the file comment).
class QualityMonitor {
 public:
  /// REQUIRES: options' half-lives >= 1 and detector.Validate() OK.
  explicit QualityMonitor(const QualityMonitorOptions& options = QualityMonitorOptions());

  /// Adds one labelled document scored before it was learned: `scores` are
  /// log p(k, x) for k < `outputs`, `label` its class. A label >= outputs,
  /// or scores with a NaN, are not counted. Returns true when the detector
  /// raised an alarm after this document.
  bool Add(const double* scores, uint32_t outputs, uint32_t label);

  uint64_t documents() const { return documents_; }  ///< labelled documents counted
  double accuracy() const;                           ///< cumulative; NaN before any document
  double log_loss() const;         ///< cumulative mean -log p(y | x) (each capped at 50); NaN before any
  double window_accuracy() const;  ///< recent; NaN before any document
  double window_log_loss() const;  ///< recent; NaN before any document
  const std::vector<ClassQuality>& classes() const { return classes_; }  ///< per class index (grown as labels come)
  /// The `n` pairs confused most (cumulative), most documents first (ties:
  /// lower truth, then lower predicted).
  std::vector<Confusion> MostConfused(size_t n) const;
  /// 1-based document counts (documents()) after which the detector raised
  /// an alarm, oldest first.
  const std::vector<uint64_t>& alarms() const { return alarms_; }
  /// The sampled recent figures, oldest first (see the file comment): a
  /// point after every history_every()-th document, at most
  /// history_capacity points.
  const std::vector<QualityPoint>& history() const { return history_; }
  /// Documents between the history's points now.
  uint64_t history_every() const { return history_every_; }

 private:
  QualityMonitorOptions options_;
  double decay_, class_decay_;
  uint64_t documents_ = 0, correct_ = 0;
  double log_loss_sum_ = 0;
  double w_right_ = 0, w_loss_ = 0, w_norm_ = 0;
  std::vector<ClassQuality> classes_;
  std::vector<double> class_right_, class_norm_;       ///< exponentially weighted, per class
  std::unordered_map<uint64_t, uint64_t> confusions_;  ///< (truth << 32 | predicted) -> documents
  Adwin detector_;
  std::vector<uint64_t> alarms_;
  std::vector<QualityPoint> history_;
  uint64_t history_every_;
};

}  // namespace tributary

#endif  // TRIBUTARY_QUALITY_MONITOR_H_
