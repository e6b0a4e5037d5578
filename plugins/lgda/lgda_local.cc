// The "lgda" family's local step: EP over theta with the topics at their
// point estimate (the thesis's Algorithm 3 for one document; lgda.cc's header
// comment, "Local step", gives the equations and the deviations), which
// score(), accumulate() and completion() (lgda.cc) run.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "../shared/dirichlet_fit.h"
#include "lgda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::lgda {
namespace {

inline double LogBeta(double a, double b) {
  return lda::LogGammaPositive(a) + lda::LogGammaPositive(b) - lda::LogGammaPositive(a + b);
}

// The cavity of term j into st->ca, st->cb; false if a parameter is <= 0.
inline bool Cavity(uint32_t K, uint32_t j, State* st) {
  const double* sa = st->sa.data() + size_t{j} * K;
  const double* sb = st->sb.data() + size_t{j} * K;
  bool ok = true;
  for (uint32_t k = 0; k < K; ++k) {
    st->ca[k] = st->qa[k] - sa[k];
    st->cb[k] = st->qb[k] - sb[k];
    ok &= st->ca[k] > 0 && st->cb[k] > 0;
  }
  return ok;
}

// The tilted responsibilities r_t = beta_tw E_cav[theta_t] / z_w of row
// `beta` at the cavity in st->ca, st->cb (eq. 86-87); returns log z_w
// (-inf if z_w is not > 0).
inline double Responsibilities(uint32_t K, const double* beta, State* st, double* r) {
  StickMeans(st->ca.data(), st->cb.data(), K, st->theta.data());
  double z = 0;
  for (uint32_t t = 0; t <= K; ++t) z += (r[t] = beta[t] * st->theta[t]);
  if (!(z > 0) || !std::isfinite(z)) return -HUGE_VAL;
  const double inv = 1.0 / z;
  for (uint32_t t = 0; t <= K; ++t) r[t] *= inv;
  return std::log(z);
}

// The Beta of stick k matched to the tilted (the cavity Beta(a, b) mixed
// with weights: R_lt (t < k), rk (t = k: a + 1), R_gt (t > k: b + 1)).
inline bool MatchStick(Match match, double a, double b, double rk, double R_gt, double* na, double* nb,
                       double* scratch) {
  const double R_lt = std::max(0.0, 1.0 - rk - R_gt);
  const double s = a + b;
  if (match == Match::kMoments) {
    // Mean and second moment of V under the mixture; Beta(a', b') with those.
    const double i0 = 1 / s, i1 = 1 / (s + 1), i2 = 1 / (s + 2);
    const double m1 = R_lt * a * i0 + (rk * (a + 1) + R_gt * a) * i1;
    const double m2 = (R_lt * a * (a + 1) * i0 + (rk * (a + 2) + R_gt * a) * (a + 1) * i2) * i1;
    const double var = m2 - m1 * m1;
    const double ns = m1 * (1 - m1) / var - 1;
    if (!(var > 0) || !(ns > 0) || !std::isfinite(ns)) return false;
    *na = m1 * ns;
    *nb = (1 - m1) * ns;
    return *na > 0 && *nb > 0;
  }
  // eq. 88-89: E[log V], E[log(1 - V)] of the tilted, then the Beta with those.
  const double ps = sdk::Digamma(s), inc = (rk + R_gt) / s;
  double t[2] = {sdk::Digamma(a) - ps + rk / a - inc, sdk::Digamma(b) - ps + R_gt / b - inc};
  double x[2] = {a + rk, b + R_gt};  // (the start: the cavity plus the expected increments)
  tributary::dirichlet::FitDirichletIn(t, 2, sdk::Digamma, sdk::Trigamma, x, scratch);
  *na = x[0];
  *nb = x[1];
  return *na > 0 && *nb > 0 && std::isfinite(*na) && std::isfinite(*nb);
}

// The local prior: (alpha, kappa), or during the burn-in moved towards the
// symmetric Dirichlet(burnin_alpha) (1 - t / burnin of the way).
void LocalPrior(const Model& m, bool training, State* st) {
  st->pa = m.alpha;
  st->pb = m.kappa;
  const double t = static_cast<double>(m.topics.t);
  st->burnin = training && t < m.burnin;
  if (!st->burnin) return;
  const double f = 1.0 - t / m.burnin;
  for (uint32_t k = 0; k < m.K; ++k) {
    st->pa[k] += (m.burn_alpha[k] - st->pa[k]) * f;
    st->pb[k] += (m.burn_kappa[k] - st->pb[k]) * f;
  }
}

// EP for document d (terms ids / counts, J of them) with the topic rows in
// st->base.rows; leaves q in st->qa, st->qb, the sites, the final
// responsibilities (st->resp) and the evidence estimate (st->log_evidence).
void Ep(const Model& m, const uint32_t J, const double* counts, State* st) {
  const uint32_t K = m.K, T = K + 1;
  st->qa = st->pa;
  st->qb = st->pb;
  st->sa.assign(size_t{J} * K, 0.0);  // t~_w = 1 (Algorithm 3, line 1)
  st->sb.assign(size_t{J} * K, 0.0);
  st->ca.resize(K);
  st->cb.resize(K);
  st->na.resize(K);
  st->nb.resize(K);
  st->theta.resize(T);
  st->r.resize(T);
  st->last.resize(2 * size_t{K});
  st->skipped = 0;
  const double* rows = st->base.rows.data();
  double* r = st->r.data();
  uint32_t sweep = 0;
  for (; sweep < m.ep_iter; ++sweep) {
    std::copy(st->qa.begin(), st->qa.end(), st->last.begin());
    std::copy(st->qb.begin(), st->qb.end(), st->last.begin() + K);
    for (uint32_t j = 0; j < J; ++j) {
      const double n = counts[j];
      if (!Cavity(K, j, st) || !std::isfinite(Responsibilities(K, rows + size_t{j} * T, st, r))) {
        ++st->skipped;  // (lines 7-8)
        continue;
      }
      double* sa = st->sa.data() + size_t{j} * K;
      double* sb = st->sb.data() + size_t{j} * K;
      double R_gt = 1.0;  // sum_{t > k} r_t
      bool matched = true;
      for (uint32_t k = 0; k < K && matched; ++k) {
        R_gt -= r[k];
        matched =
            MatchStick(m.match, st->ca[k], st->cb[k], r[k], std::max(R_gt, 0.0), &st->na[k], &st->nb[k], st->scratch);
      }
      if (!matched) {
        ++st->skipped;
        continue;
      }
      // eq. 91-92, the step halved while the new posterior is infeasible.
      double mu = m.damping;
      bool done = false;
      for (int halvings = 0; halvings <= 10 && !done; ++halvings, mu *= 0.5) {
        bool ok = true;
        for (uint32_t k = 0; k < K && ok; ++k) {
          const double da = mu * (st->na[k] - st->ca[k] - sa[k]), db = mu * (st->nb[k] - st->cb[k] - sb[k]);
          ok = st->qa[k] + n * da > 0 && st->qb[k] + n * db > 0;
        }
        if (!ok) continue;
        for (uint32_t k = 0; k < K; ++k) {
          const double da = mu * (st->na[k] - st->ca[k] - sa[k]), db = mu * (st->nb[k] - st->cb[k] - sb[k]);
          sa[k] += da;
          sb[k] += db;
          st->qa[k] += n * da;
          st->qb[k] += n * db;
        }
        done = true;
      }
      if (!done) ++st->skipped;  // (lines 13-14)
    }
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) {
      change = std::max(change, std::fabs(st->qa[k] - st->last[k]) / st->qa[k]);
      change = std::max(change, std::fabs(st->qb[k] - st->last[K + k]) / st->qb[k]);
    }
    if (change < m.ep_tol) {
      ++sweep;
      break;
    }
  }
  st->sweeps = sweep;
  // Evidence (eq. 90, 93) and the final responsibilities (eq. 96).
  st->resp.resize(size_t{J} * T);
  st->zero.assign(K, 0.0);
  double lz = 0, log_beta_q = 0;
  for (uint32_t k = 0; k < K; ++k) {
    log_beta_q += LogBeta(st->qa[k], st->qb[k]);
    lz -= LogBeta(st->pa[k], st->pb[k]);
  }
  lz += log_beta_q;
  for (uint32_t j = 0; j < J; ++j) {
    double* rj = st->resp.data() + size_t{j} * T;
    double ls;
    if (Cavity(K, j, st)) {
      ls = Responsibilities(K, rows + size_t{j} * T, st, rj);
      // sum_k log B(cavity_k) - log B(cavity_k + site_k), on lanes; cavity +
      // site is q itself (the cavity removed this very site), so the second
      // sum is the same for every term.
      const double* zero = st->zero.data();
      ls += lda::LogGammaSum(st->ca.data(), zero, K) + lda::LogGammaSum(st->cb.data(), zero, K) -
            lda::LogGammaSum(st->ca.data(), st->cb.data(), K) - log_beta_q;
    } else {  // (a cavity made infeasible by later terms: q itself, site ignored)
      std::copy(st->qa.begin(), st->qa.end(), st->ca.begin());
      std::copy(st->qb.begin(), st->qb.end(), st->cb.begin());
      ls = Responsibilities(K, rows + size_t{j} * T, st, rj);
    }
    if (!std::isfinite(ls)) {  // (every topic gives the term probability 0: uniform responsibilities)
      for (uint32_t t = 0; t < T; ++t) rj[t] = 1.0 / T;
      ls = -745.0;
    }
    lz += counts[j] * ls;
  }
  st->log_evidence = lz;
}

}  // namespace

void Run(const Model& m, const trib_stats& s, const trib_document& d, bool training, State* st) {
  LocalPrior(m, training, st);
  lda::MeanBeta(m.topics, s, d.term_ids, d.num_terms, &st->base);
  Ep(m, d.num_terms, d.term_counts, st);
}

}  // namespace tributary::lgda
