// Evaluation metrics computed from per-class joint scores log p(k, x).
#ifndef TRIBUTARY_METRICS_H_
#define TRIBUTARY_METRICS_H_

#include <cstdint>
#include <vector>

namespace tributary {

// p(k | x) from log p(k, x), stably. Returns log p(x) (log-sum-exp).
double Posterior(const double* log_joint, uint32_t num_classes, double* probs);

// max(0, 1 - (log p(y, x) - max_{k != y} log p(k, x))): sdEM eq. 17.
double HingeLoss(const double* log_joint, uint32_t num_classes, uint32_t label);

class ClassificationMetrics {
 public:
  explicit ClassificationMetrics(uint32_t num_classes);

  // Adds one scored document; label < 0 counts towards perplexity only.
  // `tokens`: the document's contribution to per-word perplexity.
  void Add(const double* log_joint, int64_t label, double tokens);
  // Grows the confusion matrix when a class is added mid-stream.
  void Resize(uint32_t num_classes);

  uint64_t documents() const { return documents_; }
  uint64_t labelled() const { return labelled_; }
  double accuracy() const;
  double macro_f1() const;
  double mean_ncll() const;   // mean of -log p(y | x)
  double mean_hinge() const;  // mean of eq. 17
  // exp(-sum log p(x) / sum tokens); NaN when no tokens were seen.
  double perplexity() const;
  uint64_t correct() const { return correct_; }

 private:
  uint32_t k_;
  uint64_t documents_ = 0, labelled_ = 0, correct_ = 0;
  double ncll_sum_ = 0, hinge_sum_ = 0, log_px_sum_ = 0, tokens_ = 0;
  std::vector<uint64_t> confusion_;  // [truth * k + predicted]
  std::vector<double> probs_;
};

}  // namespace tributary

#endif  // TRIBUTARY_METRICS_H_
