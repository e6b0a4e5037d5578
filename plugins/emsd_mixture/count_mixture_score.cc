// score() and component_terms(): posterior means of the model (count_mixture.h,
// header comment, "score()").
#include <algorithm>
#include <cmath>

#include "count_mixture.h"
#include "count_mixture_math.h"

namespace tributary::count_mixture {

int CheckDocument(const Model& m, const trib_document* d, trib_error* err) {
  if (d->num_terms == 0) {
    return Fail(err, TRIB_ERR_INVALID_DOCUMENT, "%s models count vectors; the document has no terms", m.name);
  }
  return TRIB_OK;
}

double CountConstant(const Model& m, const trib_document* d) {
  double c = Lgamma(d->total_count + 1.0);
  for (uint32_t t = 0; t < d->num_terms; ++t) {
    c -= m.dcm ? Lgamma(d->term_counts[t] + 1.0) : std::log(d->term_counts[t]);
  }
  return c;
}

int CheckDcmCounts(const Model& m, const trib_document* d, trib_error* err) {
  for (uint32_t t = 0; t < d->num_terms; ++t) {
    const double x = d->term_counts[t];
    if (!(x >= 1) || x > kMaxDcmCount || std::floor(x) != x) {
      return Fail(err, TRIB_ERR_INVALID_DOCUMENT,
                  "%s with likelihood=dcm needs integer counts in [1, %u]; term %u has count %g", m.name, kMaxDcmCount,
                  d->term_ids[t], x);
    }
  }
  return TRIB_OK;
}

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state*, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    if (m.dcm && (rc = CheckDcmCounts(m, d, err)) != TRIB_OK) return rc;
    const double n = d->total_count, c0 = CountConstant(m, d);
    double A = 0, a_max = 0;
    for (uint32_t k = 0; k < m.K; ++k) {
      A += Posterior(m, *s, k) + 1.0;
      a_max = std::max(a_max, Posterior(m, *s, k) + 1.0);
    }
    for (uint32_t k = 0; k < m.K; ++k) {
      const double a = Posterior(m, *s, k) + 1.0;
      // Algorithm 1, line 13: a component with E[pi_k] < prune / K is
      // eliminated (never the most probable one, so a document always has a
      // component).
      if (a < a_max && a < m.prune * A / m.K) {
        out[k] = -INFINITY;
        continue;
      }
      const double tot = std::max(m.total_mean[k], kTiny);
      double acc = std::log(a / A) + c0 + Lgamma(tot) - Lgamma(tot + n);
      for (uint32_t t = 0; t < d->num_terms; ++t) {
        double sa, ra;
        GammaAt(m, *s, m.Gauss(d->term_ids[t], k, 0), &sa, &ra);
        const double mean = std::max(sa / ra, kTiny);
        acc += m.dcm ? Lgamma(mean + d->term_counts[t]) - Lgamma(mean) : std::log(mean);
        if (m.learn_scale) {
          GammaAt(m, *s, m.Gauss(d->term_ids[t], k, 2), &sa, &ra);
          acc -= d->term_counts[t] * std::log(std::max(sa / ra, kTiny));
        }
      }
      if (std::isnan(acc) || acc == INFINITY) {
        return Fail(err, TRIB_ERR_NUMERIC, "log p(z=%u, x) is %g", k, acc);
      }
      out[k] = acc;
    }
    return TRIB_OK;
  });
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_LATENT;
  *count = M(mm)->K;
  return TRIB_OK;
}

// p(term | k) = E[alpha_kw] / T_k (the expected proportions of a DCM with
// those shapes).
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    if (k >= m.K) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "component %u >= %u", k, m.K);
    double tot = 0;
    for (uint64_t w = 0; w < m.V; ++w) {
      double a, b;
      GammaAt(m, *s, m.Gauss(w, k, 0), &a, &b);
      out[w] = std::max(0.0, a / b);
      tot += out[w];
    }
    if (!(tot > 0)) return Fail(err, TRIB_ERR_NUMERIC, "component %u has no positive shape", k);
    for (uint64_t w = 0; w < m.V; ++w) out[w] /= tot;
    return TRIB_OK;
  });
}

}  // namespace tributary::count_mixture
