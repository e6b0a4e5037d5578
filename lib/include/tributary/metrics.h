// Evaluation metrics computed from per-class joint scores log p(k, x).
#ifndef TRIBUTARY_METRICS_H_
#define TRIBUTARY_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tributary {

/// p(k | x) from log p(k, x), stably. Returns log p(x) (log-sum-exp).
double Posterior(const double* log_joint, uint32_t num_classes, double* probs);

/// log p(x) = log sum_k p(k, x) from log p(k, x), stably: Posterior's return
/// value, bit for bit, without normalising the probabilities (`scratch`:
/// room for num_classes values).
double LogEvidence(const double* log_joint, uint32_t num_classes, double* scratch);

/// max(0, 1 - (log p(y, x) - max_{k != y} log p(k, x))): sdEM eq. 17.
double HingeLoss(const double* log_joint, uint32_t num_classes, uint32_t label);

/// Running classification metrics over scored documents: accuracy, macro F1,
/// mean NCLL and hinge loss (labelled documents) and per-word perplexity (all).
/// Not thread-safe.
class ClassificationMetrics {
 public:
  /// Starts empty, with a num_classes x num_classes confusion matrix.
  explicit ClassificationMetrics(uint32_t num_classes);

  /// Adds one scored document (log_joint: num_classes scores); a label < 0 or
  /// >= num_classes counts towards perplexity only. `tokens`: the document's
  /// contribution to per-word perplexity (<= 0, or a non-finite log p(x): none).
  void Add(const double* log_joint, int64_t label, double tokens);
  /// Grows the confusion matrix when a class is added mid-stream.
  void Resize(uint32_t num_classes);

  uint64_t documents() const { return documents_; }  ///< documents added, labelled or not
  /// Documents added with a label in [0, num_classes): the ones scored for
  /// accuracy, F1, NCLL and hinge loss.
  uint64_t labelled() const { return labelled_; }
  double accuracy() const;  ///< correct() / labelled(); NaN without labelled documents
  /// Mean over classes of F1 = 2 TP / (2 TP + FP + FN), leaving out classes
  /// absent from both labels and predictions; NaN without labelled documents.
  double macro_f1() const;
  double mean_ncll() const;   ///< mean of -log p(y | x)
  double mean_hinge() const;  ///< mean of eq. 17
  /// exp(-sum log p(x) / sum tokens); NaN when no tokens were seen.
  double perplexity() const;
  /// Labelled documents whose argmax of log p(k, x) is their label (ties:
  /// the lowest class).
  uint64_t correct() const { return correct_; }
  uint32_t num_classes() const { return k_; }  ///< the confusion matrix's side
  /// Labelled documents of class `truth` predicted as `predicted`.
  /// REQUIRES: both < num_classes().
  uint64_t confusion(uint32_t truth, uint32_t predicted) const {
    return confusion_[static_cast<std::size_t>(truth) * k_ + predicted];
  }

 private:
  uint32_t k_;
  uint64_t documents_ = 0, labelled_ = 0, correct_ = 0;
  double ncll_sum_ = 0, hinge_sum_ = 0, log_px_sum_ = 0, tokens_ = 0;
  std::vector<uint64_t> confusion_;  ///< [truth * k + predicted]
  std::vector<double> probs_;
};

/// Minimum-cost assignment of rows to columns (the Hungarian method, O(n^3)):
/// cost is rows x cols, row-major. Every row gets a distinct column when
/// rows <= cols; when rows > cols, only cols rows are assigned. Returns the
/// column of each row, or -1 for an unassigned row.
std::vector<int64_t> HungarianAssign(const std::vector<double>& cost, uint32_t rows, uint32_t cols);

/// Clustering quality against labels: clusters are mapped one-to-one to
/// classes by the Hungarian method so as to maximise the documents whose
/// cluster maps to their label (extra clusters, or extra classes, stay
/// unmapped and count as errors).
class ClusteringMetrics {
 public:
  /// Starts empty, with counts for `clusters` clusters and `classes` classes.
  ClusteringMetrics(uint32_t clusters, uint32_t classes);
  /// Adds one document assigned to `cluster`. label < 0: counted, not scored;
  /// a label >= the classes known grows them (Resize). A cluster out of range
  /// is counted in documents() only.
  void Add(uint32_t cluster, int64_t label);
  /// Grows the classes to `classes` (never shrinks): a class added mid-stream.
  void Resize(uint32_t classes);

  uint64_t documents() const { return documents_; }  ///< documents added, labelled or not
  /// Documents scored: a label >= 0 and a cluster in range.
  uint64_t labelled() const { return labelled_; }
  /// Documents added to cluster k (labelled or not). REQUIRES: k < clusters.
  uint64_t cluster_size(uint32_t k) const { return sizes_[k]; }
  /// Cluster -> class (-1: unmapped), computed from the counts so far.
  std::vector<int64_t> Mapping() const;
  /// Fraction of labelled documents whose cluster maps to their label.
  double accuracy() const;
  /// Macro averages over classes of precision n(k, c) / n(k) and recall
  /// n(k, c) / n(c) for the cluster k mapped to class c (0 for a class with no
  /// cluster). NaN without labelled documents.
  double precision() const;
  /// The macro-averaged recall described at precision(); classes with no
  /// labelled document are left out of both averages.
  double recall() const;

 private:
  void Scores(double* acc, double* prec, double* rec) const;
  uint32_t clusters_, classes_;
  uint64_t documents_ = 0, labelled_ = 0;
  std::vector<uint64_t> sizes_;   ///< documents per cluster (labelled or not)
  std::vector<uint64_t> counts_;  ///< [cluster * classes + class]
};

}  // namespace tributary

#endif  // TRIBUTARY_METRICS_H_
