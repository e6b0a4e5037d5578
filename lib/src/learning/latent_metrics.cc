#include "tributary/latent_metrics.h"

#include <cmath>

#include "tributary/sep_engine.h"

namespace tributary {

bool SupportsSep(const Model& m) { return SepLearner::Supports(m.family()); }

Status LatentMetrics::Add(const Model& m, const trib_document& v, const double* scores, ScoringState* state) {
  log_px += Posterior(scores, m.num_outputs(), probs.data());
  for (uint32_t k = 0; k < m.num_outputs(); ++k) mass[k] += probs[k];
  clusters.Add(static_cast<uint32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin()), v.label);
  tokens += m.PerplexityTokens(v);
  if (sep) {
    // The approximate log evidence of the evaluated documents under the
    // posterior (SepLearner::LogPredictive: log E_q[p(x | theta)]).
    auto lz = SepLearner::LogPredictive(m, state, v);
    if (!lz.ok()) return lz.status();
    if (std::isfinite(lz.value())) {
      log_evidence += lz.value();
      ++evidence_documents;
    }
  }
  if (!m.has_completion()) return Status::OK();
  SplitForCompletion(v, &observed, &heldout);
  if (heldout.term_ids.empty() || observed.term_ids.empty()) return Status::OK();  // nothing to score
  double lp = 0;
  TRIB_RETURN_IF_ERROR(m.Completion(observed.View(), heldout.View(), state, &lp));
  completion_log_prob += lp;
  completion_tokens += heldout.TotalCount();
  return Status::OK();
}

}  // namespace tributary
