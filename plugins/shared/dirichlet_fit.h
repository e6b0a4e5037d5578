// A Dirichlet prior fitted to mean log-proportions: the Newton step of Shan &
// Banerjee 2010 (eq. 21, App. A eq. 48-52), shared by the families that learn
// their document prior (mmnb and lda, option learn_alpha) and their tests. It
// depends only on psi and psi', passed in, so a test can run it with Boost's.
#ifndef TRIBUTARY_PLUGINS_SHARED_DIRICHLET_FIT_H_
#define TRIBUTARY_PLUGINS_SHARED_DIRICHLET_FIT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tributary::dirichlet {

// The alpha that maximises sum_c (alpha_c - 1) t_c + log Gamma(sum alpha) -
// sum log Gamma(alpha_c), i.e. eq. 21's objective divided by n with t_c =
// (1/n) sum_i (psi(gamma_ic) - psi(sum_l gamma_il)), the documents' mean
// E[log pi_c]: Newton steps alpha' = alpha - eta (g - u) / h with
//   g_c = psi(sum alpha) - psi(alpha_c) + t_c,  h_c = -psi'(alpha_c),
//   u = sum_c g_c / h_c / (1 / w + sum_c 1 / h_c),  w = psi'(sum alpha)
// (eq. 51: the Hessian is diagonal plus a constant, inverted in O(K)), the
// step halved (eta) until every alpha_c stays > 0 (eq. 52's line search),
// from `start` for every component, until no alpha_c moves by more than
// 1e-12 of itself or 200 steps. REQUIRES: t is feasible (t_c < 0 and
// log sum_c exp(t_c) < 0: then the optimum exists and is unique). Returns the
// steps taken. FitDirichletFrom starts from *out instead (K values > 0: a
// warm start, e.g. the previous fit of a statistic that moved a little).
// FitDirichletIn is the same on raw arrays: a (K values > 0, the start and
// the result) and scratch (3 K doubles), allocating nothing (lgda's eq. 88-89
// fit runs per term and topic boundary in its EP sweeps).
template <typename Psi, typename Psi1>
uint32_t FitDirichletIn(const double* t, uint32_t K, Psi psi, Psi1 trigamma, double* a, double* scratch) {
  double* g = scratch;
  double* h = scratch + K;
  double* step = scratch + 2 * size_t{K};
  uint32_t it = 0;
  for (; it < 200; ++it) {
    double sum = 0;
    for (uint32_t c = 0; c < K; ++c) sum += a[c];
    const double ps = psi(sum), w = trigamma(sum);
    double gh = 0, ih = 0;
    for (uint32_t c = 0; c < K; ++c) {
      g[c] = ps - psi(a[c]) + t[c];
      h[c] = -trigamma(a[c]);
      gh += g[c] / h[c];
      ih += 1.0 / h[c];
    }
    const double u = gh / (1.0 / w + ih);
    for (uint32_t c = 0; c < K; ++c) step[c] = (g[c] - u) / h[c];
    double eta = 1.0;
    for (int halvings = 0; halvings < 60; ++halvings) {
      bool ok = true;
      for (uint32_t c = 0; c < K; ++c) ok = ok && a[c] - eta * step[c] > 0;
      if (ok) break;
      eta *= 0.5;
    }
    double change = 0;
    for (uint32_t c = 0; c < K; ++c) {
      const double next = a[c] - eta * step[c];
      if (!(next > 0)) continue;  // (60 halvings did not do: this one stays)
      change = std::max(change, std::fabs(next - a[c]) / a[c]);
      a[c] = next;
    }
    if (change < 1e-12) break;
  }
  return it;
}

// Makes K mean log-proportions t feasible for the fits below, in place:
// every t_k <= -margin, and when log sum_k exp(t_k) is not below -1e-9 every
// t_k lowered by that log-sum-exp + margin. A mean of documents' E[log theta]
// is always feasible; rounding or negative weights (NCLL, hinge) can take a
// running statistic out (slda's classes, lda's asymmetric alpha, lgda's sticks).
inline void MakeFeasible(double* t, uint32_t K, double margin) {
  double top = -HUGE_VAL;
  for (uint32_t k = 0; k < K; ++k) {
    t[k] = std::min(t[k], -margin);
    top = std::max(top, t[k]);
  }
  double z = 0;
  for (uint32_t k = 0; k < K; ++k) z += std::exp(t[k] - top);
  const double lse = top + std::log(z);
  if (!(lse < -1e-9)) {
    for (uint32_t k = 0; k < K; ++k) t[k] -= lse + margin;
  }
}

template <typename Psi, typename Psi1>
uint32_t FitDirichletFrom(const double* t, uint32_t K, Psi psi, Psi1 trigamma, std::vector<double>* out) {
  std::vector<double> scratch(3 * size_t{K});
  return FitDirichletIn(t, K, psi, trigamma, out->data(), scratch.data());
}

template <typename Psi, typename Psi1>
uint32_t FitDirichlet(const double* t, uint32_t K, double start, Psi psi, Psi1 trigamma, std::vector<double>* out) {
  out->assign(K, start);
  return FitDirichletFrom(t, K, psi, trigamma, out);
}

// psi^-1(y): Minka's start (exp(y) + 1/2 for y >= -2.22, else -1 / (y -
// psi(1))) and five Newton steps (Minka 2000, "Estimating a Dirichlet
// distribution", App. C).
template <typename Psi, typename Psi1>
double InverseDigamma(double y, Psi psi, Psi1 trigamma) {
  double x = y >= -2.22 ? std::exp(y) + 0.5 : -1.0 / (y + 0.5772156649015329);
  for (int i = 0; i < 5; ++i) x -= (psi(x) - y) / trigamma(x);
  return x;
}

// The same maximisation with every alpha_c >= lower (supervised LDA's MAP
// estimation restricts alpha >= 1, supervised-lda-inference-2014 §6.1.1), by
// an active set: Newton's step of FitDirichlet on the free components with
// the others held at `lower`; a free component that the step would take to
// or below `lower` is fixed there instead (and the step recomputed); once the
// free components have converged, the fixed one whose gradient is the most
// positive (if any: the KKT conditions) is freed again, and so on. The
// problem is concave, so this ends at the constrained optimum; should it not
// within 500 steps, Minka's fixed point alpha_c = max(lower, psi^-1(psi(sum
// alpha) + t_c)) (an ascent method: each step maximises a lower bound exact at
// the current alpha) finishes it. From *out (K values > 0), until no alpha_c
// moves by more than 1e-12 of itself. REQUIRES: t feasible. Returns the steps.
template <typename Psi, typename Psi1>
uint32_t FitDirichletAtLeast(const double* t, uint32_t K, double lower, Psi psi, Psi1 trigamma,
                             std::vector<double>* out) {
  std::vector<double>& a = *out;
  std::vector<char> fixed(K, 0);
  for (uint32_t c = 0; c < K; ++c) {
    if (!(a[c] > lower)) {
      a[c] = lower;
      fixed[c] = 1;
    }
  }
  std::vector<double> g(K), h(K), step(K);
  uint32_t it = 0;
  for (; it < 500; ++it) {
    double sum = 0;
    for (uint32_t c = 0; c < K; ++c) sum += a[c];
    const double ps = psi(sum), w = trigamma(sum);
    double gh = 0, ih = 0;
    uint32_t free_count = 0;
    for (uint32_t c = 0; c < K; ++c) {
      g[c] = ps - psi(a[c]) + t[c];
      if (fixed[c]) continue;
      h[c] = -trigamma(a[c]);
      gh += g[c] / h[c];
      ih += 1.0 / h[c];
      ++free_count;
    }
    double change = 0;
    bool blocked = false;
    if (free_count > 0) {
      const double u = gh / (1.0 / w + ih);
      for (uint32_t c = 0; c < K; ++c) {
        if (fixed[c]) continue;
        step[c] = (g[c] - u) / h[c];
        if (!(a[c] - step[c] > lower)) {  // the step leaves the set: hold c at the bound
          change = std::max(change, std::fabs(lower - a[c]) / a[c]);
          a[c] = lower;
          fixed[c] = 1;
          blocked = true;
        }
      }
      if (blocked) continue;
      for (uint32_t c = 0; c < K; ++c) {
        if (fixed[c]) continue;
        const double next = a[c] - step[c];
        change = std::max(change, std::fabs(next - a[c]) / a[c]);
        a[c] = next;
      }
    }
    if (change >= 1e-12) continue;
    // Converged on the free set: free the bound component the KKT conditions
    // reject most (gradient > 0: the objective rises inside the set).
    uint32_t worst = K;
    double top = 1e-12;
    for (uint32_t c = 0; c < K; ++c) {
      if (fixed[c] && g[c] > top) {
        top = g[c];
        worst = c;
      }
    }
    if (worst == K) return it;
    fixed[worst] = 0;
  }
  for (uint32_t more = 0; more < 100000; ++more, ++it) {  // (the fallback: Minka's clamped fixed point)
    double sum = 0;
    for (uint32_t c = 0; c < K; ++c) sum += a[c];
    const double ps = psi(sum);
    double change = 0;
    for (uint32_t c = 0; c < K; ++c) {
      const double next = std::max(lower, InverseDigamma(ps + t[c], psi, trigamma));
      change = std::max(change, std::fabs(next - a[c]) / a[c]);
      a[c] = next;
    }
    if (change < 1e-12) break;
  }
  return it;
}

// The symmetric case: the one alpha of Dirichlet(alpha, ..., alpha) over K
// components whose mean log-component is tbar, i.e. psi(alpha) - psi(K alpha)
// = tbar (eq. 21 with every alpha_c and t_c equal). The left side increases
// with alpha from -infinity to -log K, so the root is unique for tbar <
// -log K. Newton's step on it, halved until alpha stays > 0, from `start`,
// until alpha moves by less than 1e-12 of itself or 100 steps; O(1) a step,
// whatever K. REQUIRES: tbar < -log K, K >= 2.
template <typename Psi, typename Psi1>
double FitSymmetricDirichlet(double tbar, uint32_t K, double start, Psi psi, Psi1 trigamma) {
  const double k = static_cast<double>(K);
  double a = start;
  for (int it = 0; it < 100; ++it) {
    const double f = psi(a) - psi(k * a) - tbar;
    const double df = trigamma(a) - k * trigamma(k * a);  // > 0
    double step = f / df, eta = 1.0;
    while (!(a - eta * step > 0) && eta > 1e-18) eta *= 0.5;
    const double next = a - eta * step;
    if (!(next > 0)) break;
    const double change = std::fabs(next - a) / a;
    a = next;
    if (change < 1e-12) break;
  }
  return a;
}

}  // namespace tributary::dirichlet

#endif  // TRIBUTARY_PLUGINS_SHARED_DIRICHLET_FIT_H_
