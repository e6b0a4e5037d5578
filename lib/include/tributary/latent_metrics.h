// Clustering quality, document-completion perplexity and (SEP families)
// approximate log evidence of a model whose outputs are latent components or
// topics: what `tributary eval` reports for them, and the Python module's
// TopicModel.perplexity / Mixture.evaluate.
#ifndef TRIBUTARY_LATENT_METRICS_H_
#define TRIBUTARY_LATENT_METRICS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "tributary/document.h"
#include "tributary/metrics.h"
#include "tributary/model.h"
#include "tributary/status.h"

namespace tributary {

// True when the model's family has SEP hooks (log evidence is estimated).
bool SupportsSep(const Model& m);

struct LatentMetrics {
  explicit LatentMetrics(const Model& m)
      : clusters(m.num_outputs(), static_cast<uint32_t>(m.schema().classes().size())),
        probs(m.num_outputs()),
        mass(m.num_outputs(), 0.0),
        sep(SupportsSep(m)) {}
  // Adds document `v` with its scores (Model::Score) under `state`.
  // Perplexity: document completion (the even-position tokens predict the
  // odd ones, SplitForCompletion) for families that provide it, else
  // per-word exp(-log p(x) / tokens).
  Status Add(const Model& m, const trib_document& v, const double* scores, ScoringState* state);
  double perplexity() const {
    if (completion_tokens > 0) return std::exp(-completion_log_prob / completion_tokens);
    return tokens > 0 ? std::exp(-log_px / tokens) : std::nan("");
  }
  ClusteringMetrics clusters;
  std::vector<double> probs, mass;
  double log_px = 0, tokens = 0, completion_log_prob = 0, completion_tokens = 0;
  const bool sep;  // the family has SEP hooks: approximate log evidence
  double log_evidence = 0;
  uint64_t evidence_documents = 0;  // documents whose log Z the family could estimate
  DocumentBuffer observed, heldout;
};

}  // namespace tributary

#endif  // TRIBUTARY_LATENT_METRICS_H_
