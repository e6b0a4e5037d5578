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

uint32_t OnlineKMeans::Assign(uint32_t K, uint64_t V, const trib_document* d) {
  if (centroid.empty()) {
    centroid.assign(static_cast<size_t>(K) * V, 0.0);
    norm2.assign(K, 0.0);
    count.assign(K, 0);
  }
  double dn = 0;
  for (uint32_t t = 0; t < d->num_terms; ++t) dn += d->term_counts[t] * d->term_counts[t];
  dn = std::sqrt(dn);
  uint32_t best = 0;
  double best_cos = -INFINITY;
  for (uint32_t k = 0; k < K; ++k) {
    if (count[k] == 0) {  // an empty cluster takes the document
      best = k;
      break;
    }
    double dot = 0;
    for (uint32_t t = 0; t < d->num_terms; ++t) dot += centroid[k * V + d->term_ids[t]] * d->term_counts[t];
    const double cosine = dot / (dn * std::sqrt(std::max(norm2[k], kTiny)));
    if (cosine > best_cos) best_cos = cosine, best = k;
  }
  // centroid += (u - centroid) / n: scale all by (1 - 1/n), add u / n at the
  // document's terms (O(V), during the burn-in only).
  const double inv = 1.0 / static_cast<double>(++count[best]);
  double* c = &centroid[best * V];
  for (uint64_t w = 0; w < V; ++w) c[w] *= 1.0 - inv;
  for (uint32_t t = 0; t < d->num_terms; ++t) c[d->term_ids[t]] += inv * d->term_counts[t] / dn;
  double n2 = 0;
  for (uint64_t w = 0; w < V; ++w) n2 += c[w] * c[w];
  norm2[best] = n2;
  return best;
}

const std::vector<double>& StirlingRows::Row(uint32_t x) {
  if (row.empty()) row.push_back({}), row.push_back({0.0});  // c(1, 1) = 1
  while (row.size() <= x) {
    // c(n + 1, j) = n c(n, j) + c(n, j - 1)
    const uint32_t n = static_cast<uint32_t>(row.size() - 1);
    const std::vector<double>& prev = row[n];
    std::vector<double> next(n + 1);
    const double ln = std::log(static_cast<double>(n));
    for (uint32_t j = 1; j <= n + 1; ++j) {
      const double a = j <= n ? ln + prev[j - 1] : -INFINITY;
      const double b = j >= 2 ? prev[j - 2] : -INFINITY;
      const double mx = std::max(a, b);
      next[j - 1] = mx + std::log(std::exp(a - mx) + std::exp(b - mx));
    }
    row.push_back(std::move(next));
  }
  return row[x];
}

double RisingFactorialMoments(StirlingRows* rows, std::vector<double>* scratch, uint32_t x, double a, double b,
                              double* m1, double* m2, double* lm) {
  const std::vector<double>& lc = rows->Row(x);
  std::vector<double>& lw = *scratch;
  lw.resize(x);
  const double lb = std::log(b);
  double cum = 0, mx = -INFINITY;
  for (uint32_t j = 1; j <= x; ++j) {
    cum += std::log(a + (j - 1));  // log G(a + j) / G(a)
    lw[j - 1] = lc[j - 1] + cum - j * lb;
    mx = std::max(mx, lw[j - 1]);
  }
  double tw = 0, s1 = 0, s2 = 0, sl = 0, psi = Digamma(a + 1.0);
  for (uint32_t j = 1; j <= x; ++j) {
    const double w = std::exp(lw[j - 1] - mx), aj = a + j;
    tw += w;
    s1 += w * aj;
    s2 += w * aj * (aj + 1.0);
    sl += w * psi;
    psi += 1.0 / aj;  // psi(a + j + 1)
  }
  *m1 = s1 / (tw * b);
  *m2 = s2 / (tw * b * b);
  *lm = sl / tw - lb;
  return mx + std::log(tw);
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
