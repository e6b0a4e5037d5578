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

/// True when the model's family has SEP hooks (log evidence is estimated).
bool SupportsSep(const Model& m);

/// Running evaluation of a model whose outputs are latent components or topics
/// (Model::latent_outputs), over scored documents: the fields are the running
/// sums and the scratch Add() uses. `m` must stay the same model (same
/// outputs) for every Add(). Not thread-safe.
struct LatentMetrics {
  /// Empty sums for `m`: a cluster per output, the schema's classes as the
  /// labels; `sep` from SupportsSep(m).
  explicit LatentMetrics(const Model& m)
      : clusters(m.num_outputs(), static_cast<uint32_t>(m.schema().classes().size())),
        probs(m.num_outputs()),
        mass(m.num_outputs(), 0.0),
        sep(SupportsSep(m)) {}
  /// Adds document `v` with its scores (Model::Score) under `state`.
  /// Perplexity: document completion (the even-position tokens predict the
  /// odd ones, SplitForCompletion) for families that provide it, else
  /// per-word exp(-log p(x) / tokens). Errors: SepLearner::LogPredictive's
  /// (SEP families), Model::Completion's; the sums may then hold part of `v`.
  Status Add(const Model& m, const trib_document& v, const double* scores, ScoringState* state);
  /// Document-completion perplexity exp(-completion_log_prob /
  /// completion_tokens) when any token was completed, else per-word
  /// exp(-log_px / tokens); NaN when neither has tokens.
  double perplexity() const {
    if (completion_tokens > 0) return std::exp(-completion_log_prob / completion_tokens);
    return tokens > 0 ? std::exp(-log_px / tokens) : std::nan("");
  }
  /// Each document's most probable output (argmax p(k | x)) against its label.
  ClusteringMetrics clusters;
  /// Scratch: p(k | x) of the last document added, one per output.
  std::vector<double> probs, mass;  ///< per output: sum of p(k | x) over the documents (expected document counts)
  /// \var log_px
  /// Sum over the documents of log p(x), the log-sum-exp of their scores.
  /// \var tokens
  /// Sum of Model::PerplexityTokens over the documents.
  /// \var completion_log_prob
  /// Sum of log p(held-out tokens | observed tokens) (Model::Completion) over
  /// the documents split for completion.
  /// \var completion_tokens
  /// Held-out tokens those documents scored (the held-out halves' total count).
  double log_px = 0, tokens = 0, completion_log_prob = 0, completion_tokens = 0;
  const bool sep;                   ///< the family has SEP hooks: approximate log evidence
  double log_evidence = 0;          ///< sum of the finite log E_q[p(x | theta)] (SepLearner::LogPredictive); sep only
  uint64_t evidence_documents = 0;  ///< documents whose log Z the family could estimate
  /// Scratch: the observed half of the last document split for completion.
  DocumentBuffer observed, heldout;  ///< scratch: the held-out half of that document
};

}  // namespace tributary

#endif  // TRIBUTARY_LATENT_METRICS_H_
