// Moment matching of one document (count_mixture.h, header comment,
// "Moment matching"; eq. 26-35, 60-64).
#include <algorithm>
#include <cmath>
#include <vector>

#include "count_mixture.h"
#include "count_mixture_math.h"

namespace tributary::count_mixture {

namespace {

// Projects a distribution of theta > 0 with E[theta] = m and E[log theta] =
// lm on one Gamma by matching both: log a - psi(a) = log m - lm =: y, b = a
// / m (Minka, "Estimating a Gamma distribution", 2002: Newton on 1/a).
// `start` is a starting shape. Returns false if the moments are degenerate.
bool ProjectMoments(double m, double lm, double start, double* shape, double* rate) {
  const double y = std::log(m) - lm;
  if (!(y > 0) || !std::isfinite(y) || !(m > 0)) return false;
  double a = start > 0 ? start : 0.5 / y;
  for (int it = 0; it < 50; ++it) {
    const double f = std::log(a) - Digamma(a) - y;
    const double fp = 1.0 / a - Trigamma(a);
    double inv = 1.0 / a + f / (a * a * fp);
    if (!(inv > 0)) inv = 0.5 / a;  // keep a positive (Newton from far above)
    const double next = 1.0 / inv;
    const double change = std::fabs(next - a) / a;
    a = next;
    if (!(change >= 1e-13)) break;
  }
  if (!(a > 0) || !std::isfinite(a)) return false;
  *shape = a;
  *rate = a / m;
  return true;
}

// The same for w0 Gamma(a0, b0) + w1 Gamma(a1, b1).
bool ProjectGamma(double w0, double a0, double b0, double w1, double a1, double b1, double start, double* shape,
                  double* rate) {
  const double m = w0 * a0 / b0 + w1 * a1 / b1;
  const double lm = w0 * (Digamma(a0) - std::log(b0)) + w1 * (Digamma(a1) - std::log(b1));
  return ProjectMoments(m, lm, start, shape, rate);
}

}  // namespace

// ---- likelihood=dcm and init=kmeans (count_mixture.h) -----------------------------

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

// ---- Moment matching ----------------------------------------------------------------

int MomentMatch(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
                const uint64_t* index, const double* cavity, size_t count, double* lambda_new, trib_sep_outcome* out,
                trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    State& st = *reinterpret_cast<State*>(ss);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    if (m.dcm && (rc = CheckDcmCounts(m, d, err)) != TRIB_OK) return rc;
    const uint32_t K = m.K, G = m.G, S = m.S, D = d->num_terms;
    if (count != K + static_cast<size_t>(D) * K * G || index[0] != 0) {
      return Fail(err, TRIB_ERR_INTERNAL, "moment_match got %zu entries, expected the support of %u terms", count, D);
    }
    auto skip = [&](const char* fmt, double v, uint32_t k) {
      out->skip = 1;
      Fail(err, TRIB_ERR_NUMERIC, fmt, k, v);
      return TRIB_OK;
    };
    // Cavity Dirichlet (eq. 23 / 55).
    st.a_cav.resize(K);
    double A = 0;
    for (uint32_t k = 0; k < K; ++k) {
      st.a_cav[k] = cavity[k] + 1.0;
      if (!(st.a_cav[k] > 0)) return skip("cavity Dirichlet parameter of component %u is %g <= 0", st.a_cav[k], k);
      A += st.a_cav[k];
    }
    // Cavity Gammas (eq. 24-25 / 56-59) and the moments of s per component
    // under the cavity tilted by the present shapes (Gamma(a + 1, b)): the
    // posterior totals with the document's terms replaced.
    const size_t TK = static_cast<size_t>(D) * K;
    st.ca.resize(TK);
    st.cb.resize(TK);
    st.da.resize(G == 4 ? TK : 0);
    st.db.resize(G == 4 ? TK : 0);
    st.mean.assign(K, 0.0);
    st.var.assign(K, 0.0);
    std::vector<double>& rest_m = st.target;  // reused: K
    std::vector<double>& rest_v = st.grad;
    rest_m.assign(m.total_mean.begin(), m.total_mean.end());
    rest_v.assign(m.total_var.begin(), m.total_var.end());
    const double n = d->total_count, c0 = CountConstant(m, d);
    st.log_e.assign(K, c0);
    for (uint32_t t = 0; t < D; ++t) {
      for (uint32_t k = 0; k < K; ++k) {
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G, tk = t * K + k;
        const double a = cavity[j] + 1.0, b = -cavity[j + 1];
        if (!(a > 0)) return skip("cavity shape of a shape parameter of component %u is %g <= 0", a, k);
        if (!(b > 0)) return skip("cavity rate of a shape parameter of component %u is %g <= 0", b, k);
        st.ca[tk] = a;
        st.cb[tk] = b;
        if (m.dcm) {
          // E[alpha^(x)] (the rising factorial of eq. 13) and the moments of
          // the cavity tilted by it (count_mixture.h, RisingFactorialMoments).
          double m1, m2, lm;
          st.log_e[k] += RisingFactorialMoments(&st.stirling, &st.dcm_lw, static_cast<uint32_t>(d->term_counts[t]), a,
                                                b, &m1, &m2, &lm);
          st.mean[k] += m1;
          st.var[k] += std::max(m2 - m1 * m1, 0.0);
        } else {
          st.mean[k] += (a + 1.0) / b;
          st.var[k] += (a + 1.0) / (b * b);
          st.log_e[k] += std::log(a / b);  // E[alpha_w]
        }
        double pa, pb;
        GammaAt(m, *s, index[j], &pa, &pb);
        rest_m[k] -= pa / pb;
        rest_v[k] -= pa / (pb * pb);
        if (G == 4) {
          const double x = d->term_counts[t];
          const double sa = cavity[j + 2] + 1.0, sb = -cavity[j + 3];
          if (!(sb > 0)) return skip("cavity rate of a scale parameter of component %u is %g <= 0", sb, k);
          // E[beta^-x] = b^x G(a - x) / G(a) needs a > x (eq. 45's b^-x).
          if (!(sa > x)) return skip("cavity shape of a scale parameter of component %u is %g <= the count", sa, k);
          st.da[tk] = sa;
          st.db[tk] = sb;
          st.log_e[k] += x * std::log(sb) + Lgamma(sa - x) - Lgamma(sa);
        }
      }
    }
    // E~[G(s)/G(s+n)] by S quadrature points of the log-normal with the
    // moments of s, and c_k = E~[psi(s) - psi(s+n)] weighted by G(s)/G(s+n):
    // the slope of log G(s)/G(s+n) at the tilted s.
    st.c.resize(K);
    st.gs.resize(S);
    st.ws.resize(S);
    // integration=montecarlo: S positive draws s = exp(mu + sd z), z ~ N(0, 1)
    // from the state's seeded generator, the same draws for every component
    // of this document (common random numbers); the thesis's Monte Carlo
    // estimate of Z_i (eq. 28), over s, the only part of E_j without a closed
    // form.
    const double* zr = m.z.data();
    if (m.monte_carlo) {
      st.z.resize(S);
      for (uint32_t r = 0; r < S; ++r) st.z[r] = st.normal(st.rng);
      zr = st.z.data();
    }
    // Sets c_k and returns log E~[G(s)/G(s+n)] of component k.
    auto integrate = [&](uint32_t k) {
      const double mean = st.mean[k] + std::max(rest_m[k], 0.0);
      const double var = st.var[k] + std::max(rest_v[k], 0.0);
      const double s2 = std::log1p(var / (mean * mean));
      const double mu = std::log(mean) - 0.5 * s2, sd = std::sqrt(s2);
      double mx = -INFINITY;
      for (uint32_t r = 0; r < S; ++r) {
        const double sv = std::max(std::exp(mu + sd * zr[r]), kTiny);
        st.ws[r] = sv;
        st.gs[r] = Lgamma(sv) - Lgamma(sv + n);
        mx = std::max(mx, st.gs[r]);
      }
      double tw = 0, acc = 0;
      for (uint32_t r = 0; r < S; ++r) {
        const double w = std::exp(st.gs[r] - mx);
        tw += w;
        acc += w * (Digamma(st.ws[r]) - Digamma(st.ws[r] + n));
      }
      st.c[k] = acc / tw;
      return mx + std::log(tw / S);
    };
    for (uint32_t k = 0; k < K; ++k) {
      double log_s = integrate(k);
      // likelihood=dcm: the rising factorial alpha^(x) tilts a present shape
      // far more than eq. 14's alpha (the weight of alpha^x); the tilted
      // moments of s are taken at the rate b - c_k the normaliser adds, and
      // c_k is recomputed from them until they agree (a few iterations).
      for (int it = 0; m.dcm && it < kDcmIterations; ++it) {
        st.mean[k] = st.var[k] = 0;
        for (uint32_t t = 0; t < D; ++t) {
          const size_t tk = t * K + k;
          double m1, m2, lm;
          RisingFactorialMoments(&st.stirling, &st.dcm_lw, static_cast<uint32_t>(d->term_counts[t]), st.ca[tk],
                                 st.cb[tk] - st.c[k], &m1, &m2, &lm);
          st.mean[k] += m1;
          st.var[k] += std::max(m2 - m1 * m1, 0.0);
        }
        const double before = st.c[k];
        log_s = integrate(k);
        if (!(std::fabs(st.c[k] - before) > 1e-10 * std::fabs(before))) break;
      }
      st.log_e[k] += log_s;
      if (!(st.c[k] <= 0) || !std::isfinite(st.log_e[k])) {
        return skip("the normaliser of component %u is degenerate (%g)", st.log_e[k], k);
      }
    }
    // Z_i and the responsibilities (eq. 29); during the burn-in r_k = 1/K.
    std::vector<double>& lr = st.log_e;  // becomes log(a_k / A) + log E_k
    for (uint32_t k = 0; k < K; ++k) lr[k] += std::log(st.a_cav[k] / A);
    double log_z = sdk::LogSumExp(lr.data(), K);
    if (!std::isfinite(log_z)) return skip("log Z of the document is not finite (component %u, %g)", log_z, 0);
    out->log_z = log_z;
    if (m.Burning() && m.kmeans_init) {
      // init=kmeans: the document goes wholly to the cluster of an online
      // spherical K-means (count_mixture.h, "K-means burn-in").
      const uint32_t j = st.kmeans.Assign(K, m.V, d);
      std::fill(lr.begin(), lr.end(), -INFINITY);
      lr[j] = 0.0;
      log_z = 0.0;
    } else if (m.Burning()) {
      std::fill(lr.begin(), lr.end(), 0.0);
      log_z = std::log(static_cast<double>(K));
    }
    // Present terms: project the tilted marginals on Gammas (eq. 61-64 with
    // Gamma moments, see the header comment).
    for (uint32_t k = 0; k < K; ++k) {
      const double r = std::exp(lr[k] - log_z), c = st.c[k];
      for (uint32_t t = 0; t < D; ++t) {
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G, tk = t * K + k;
        for (uint32_t p = 0; p < G / 2; ++p) {
          if (r < 1e-12) {  // the document says nothing about component k
            lambda_new[j + 2 * p] = cavity[j + 2 * p];
            lambda_new[j + 2 * p + 1] = cavity[j + 2 * p + 1];
            continue;
          }
          const double a = p == 0 ? st.ca[tk] : st.da[tk], b = p == 0 ? st.cb[tk] : st.db[tk];
          const double a1 = p == 0 ? a + 1.0 : a - d->term_counts[t], b1 = p == 0 ? b - c : b;
          double na, nb;
          bool ok;
          if (p == 0 && m.dcm) {
            // The tilted part is the rising-factorial mixture at rate b - c.
            double m1, m2, lm;
            RisingFactorialMoments(&st.stirling, &st.dcm_lw, static_cast<uint32_t>(d->term_counts[t]), a, b1, &m1, &m2,
                                   &lm);
            ok = ProjectMoments((1.0 - r) * a / b + r * m1, (1.0 - r) * (Digamma(a) - std::log(b)) + r * lm, a + r, &na,
                                &nb);
          } else {
            ok = ProjectGamma(1.0 - r, a, b, r, a1, b1, p == 0 ? a + r : a1, &na, &nb);
          }
          if (!ok) {
            return skip("the tilted marginal of a parameter of component %u is degenerate (r = %g)", r, k);
          }
          lambda_new[j + 2 * p] = na - 1.0;
          lambda_new[j + 2 * p + 1] = -nb;
        }
      }
      // Absent terms: rate += r |c| for all of them (block site on -rate).
      const uint32_t b = m.GaussBlock(k, 1);
      if (m.absent && out->block_site != nullptr && b < out->num_blocks) out->block_site[b] = r * c;
    }
    // Dirichlet: match E[log pi] (eq. 60) by Newton's method.
    st.target.resize(K);
    st.a_new.resize(K);
    const double psiA = Digamma(A) + 1.0 / A;
    for (uint32_t k = 0; k < K; ++k) {
      const double r = std::exp(lr[k] - log_z);
      st.target[k] = Digamma(st.a_cav[k]) + r / st.a_cav[k] - psiA;
      st.a_new[k] = st.a_cav[k] + r;
    }
    // Newton's method with the Hessian diag(-psi'(a_k)) + psi'(sum a) 1 1^T
    // (Minka 2000, §1), from a_cav + r, which is already close.
    st.grad.resize(K);
    // With K = 1, pi = 1 whatever the Dirichlet: E[log pi] = 0 says nothing
    // and the Newton step is 0 / 0 (it made every update infeasible); the
    // site on pi stays 0 (a_new = a_cav).
    if (K == 1) st.a_new[0] = st.a_cav[0];
    for (int it = 0; K > 1 && it < 100; ++it) {
      double sum = 0;
      for (uint32_t k = 0; k < K; ++k) sum += st.a_new[k];
      const double psi_sum = Digamma(sum), z = Trigamma(sum);
      double num = 0, den = 1.0 / z;
      for (uint32_t k = 0; k < K; ++k) {
        st.grad[k] = psi_sum - Digamma(st.a_new[k]) + st.target[k];
        const double q = -Trigamma(st.a_new[k]);
        num += st.grad[k] / q;
        den += 1.0 / q;
      }
      const double bb = num / den;
      double change = 0, step = 1.0;
      for (int halve = 0; halve < 60; ++halve) {
        bool ok = true;
        for (uint32_t k = 0; k < K; ++k) ok &= st.a_new[k] - step * (st.grad[k] - bb) / -Trigamma(st.a_new[k]) > 0;
        if (ok) break;
        step *= 0.5;
      }
      for (uint32_t k = 0; k < K; ++k) {
        const double delta = step * (st.grad[k] - bb) / -Trigamma(st.a_new[k]);
        st.a_new[k] -= delta;
        change = std::max(change, std::fabs(delta) / st.a_new[k]);
      }
      if (!(change >= 1e-13)) break;  // converged (or NaN: checked below)
    }
    for (uint32_t k = 0; k < K; ++k) {
      if (!(st.a_new[k] > 0) || !std::isfinite(st.a_new[k])) {
        return skip("moment-matched Dirichlet parameter of component %u is %g", st.a_new[k], k);
      }
      lambda_new[k] = st.a_new[k] - 1.0;
    }
    return TRIB_OK;
  });
}

}  // namespace tributary::count_mixture
