// The CVB0 sweep kernel of the "lda" family, in a header so that the tests
// can check that its SSE2 and AVX2 builds give the same bits.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tributary::lda {

// Stochastic CVB0 (Foulds et al. 2013; the zero-order collapsed update, eq. 7
// of the supervised-LDA paper with one class): with the topics fixed at their
// point estimate beta_kw = lambda_kw / lambda_k (lda_local.cc, MeanBeta),
//   phi_wk propto beta_kw (N_dk^{-w} + alpha),   N_dk = sum_w n_w phi_wk,
// where N_dk^{-w} = N_dk - u_w phi_wk leaves out the token's own share
// (u_w = min(1, n_w): one token of the term, or all of a fractional count).
// Gauss-Seidel sweeps over the distinct terms, N_dk updated right after each
// group of terms (Cvb0Group). The first sweep starts from phi = 0, N = 0, i.e.
// it assigns the terms one pair after the other given the ones before (the
// sequential start of collapsed Gibbs, sdEM Appendix B); the later sweeps
// refine in groups of four terms (kCvb0Group: as fast per term as one term at
// a time can never be, since each group waits on the division before it; on
// the bible benchmark, K = 20, the held-out perplexity of a validation split is
// the pairs' own, 294.3, where groups of four from the first sweep gave 294.8
// and groups of eight 296.5); then sweeps until max_k |change of N_dk| over a
// sweep < cvb0_tol or cvb0_max_iter sweeps (the first one included). No
// special function: 7 flops per (term, topic) per sweep, one division per
// term.
//
// The kernel works on chunks of 4 topics (W = 2: two SSE2 vectors, W = 4: one
// AVX vector) with the same 4 partial sums and no fused multiply-add, so both
// widths give the same bits: a model does not depend on the CPU it ran on.
//
// Arguments: beta and phi are T x K (term-major, K contiguous), nk, last K,
// norm T (the last sweep's normaliser of each term), counts T. phi and nk
// must start at 0 (the first sweep is then the sequential start). Returns
// the number of sweeps run.
template <int W>
struct VecOf;
template <>
struct VecOf<2> {
  typedef double type __attribute__((vector_size(16)));
};
template <>
struct VecOf<4> {
  typedef double type __attribute__((vector_size(32)));
};

// One group of G terms j .. j + G - 1 (G = 1, 2, 4, 8): every term reads the
// same N_dk (each without its own share), then all of them update it, in
// term order. The G chains of sums and divisions are independent, so the CPU
// overlaps them: one term at a time waits on the division of the term before
// (the sweep is latency-bound), a group of G does G terms' work in about the
// time of one.
//
// kVec (the supervised-LDA family, eq. 7 with the class's alpha row): the
// prior is the K-vector `av` instead of the scalar `alpha` (which is then
// unused); the same arithmetic with alpha_k in place of alpha.
template <int W, bool kVec, int G>
__attribute__((always_inline)) inline void Cvb0Group(const double* beta, double* phi, double* nk, double* norm,
                                                     const double* counts, uint32_t j, uint32_t K, double alpha,
                                                     const double* av) {
  using V = typename VecOf<W>::type;
  constexpr int H = 4 / W;  // vectors per chunk of 4 topics
  const V vz = {};
  const V va = vz + alpha;
  const uint32_t K4 = K & ~3u;
  const double* b[G];
  double* p[G];
  double c[G], u[G];
  _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
    b[g] = beta + static_cast<size_t>(j + g) * K;
    p[g] = phi + static_cast<size_t>(j + g) * K;
    c[g] = counts[j + g];
    u[g] = c[g] < 1 ? c[g] : 1.0;
  }
  // p_k = beta_kw ((N_dk - u phi_wk) + alpha) into phi; N_dk -= c phi_wk.
  V acc[G][H];
  _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
    _Pragma("GCC unroll 4") for (int h = 0; h < H; ++h) acc[g][h] = vz;
  }
  for (uint32_t k = 0; k < K4; k += 4) {
    _Pragma("GCC unroll 4") for (int h = 0; h < H; ++h) {
      V n;
      std::memcpy(&n, nk + k + h * W, sizeof(V));
      V a = va;
      if constexpr (kVec) std::memcpy(&a, av + k + h * W, sizeof(V));
      V o[G];
      _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
        V bb;
        std::memcpy(&o[g], p[g] + k + h * W, sizeof(V));
        std::memcpy(&bb, b[g] + k + h * W, sizeof(V));
        const V q = bb * ((n - (vz + u[g]) * o[g]) + a);
        std::memcpy(p[g] + k + h * W, &q, sizeof(V));
        acc[g][h] += q;
      }
      _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) n = n - (vz + c[g]) * o[g];
      std::memcpy(nk + k + h * W, &n, sizeof(V));
    }
  }
  double s[G];
  _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
    double l[4];
    std::memcpy(l, acc[g], sizeof l);
    s[g] = (l[0] + l[1]) + (l[2] + l[3]);
  }
  for (uint32_t k = K4; k < K; ++k) {
    const double ak = kVec ? av[k] : alpha;
    double o[G];
    _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
      o[g] = p[g][k];
      const double q = b[g][k] * ((nk[k] - u[g] * o[g]) + ak);
      p[g][k] = q;
      s[g] += q;
    }
    double n = nk[k];
    _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) n = n - c[g] * o[g];
    nk[k] = n;
  }
  double inv[G];
  _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
    s[g] = s[g] > 1e-300 ? s[g] : 1e-300;
    norm[j + g] = s[g];
    inv[g] = 1.0 / s[g];
  }
  // phi_wk = p_k / s; N_dk += c phi_wk.
  for (uint32_t k = 0; k < K4; k += W) {
    V n;
    std::memcpy(&n, nk + k, sizeof(V));
    _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
      V q;
      std::memcpy(&q, p[g] + k, sizeof(V));
      q = q * (vz + inv[g]);
      std::memcpy(p[g] + k, &q, sizeof(V));
      n = n + (vz + c[g]) * q;
    }
    std::memcpy(nk + k, &n, sizeof(V));
  }
  for (uint32_t k = K4; k < K; ++k) {
    double n = nk[k];
    _Pragma("GCC unroll 8") for (int g = 0; g < G; ++g) {
      p[g][k] = p[g][k] * inv[g];
      n = n + c[g] * p[g][k];
    }
    nk[k] = n;
  }
}

// Terms per group after the first sweep (Cvb0Group); the last T mod
// kCvb0Group in groups of halving size.
constexpr int kCvb0Group = 4;

template <int W, bool kVec = false>
__attribute__((always_inline)) inline uint32_t Cvb0SweepsT(const double* beta, double* phi, double* nk, double* last,
                                                           double* norm, const double* counts, uint32_t T, uint32_t K,
                                                           double alpha, uint32_t max_iter, double tol,
                                                           const double* av = nullptr) {
  uint32_t it = 0;
  while (it < max_iter) {
    ++it;
    std::memcpy(last, nk, K * sizeof(double));
    uint32_t j = 0;
    if (it == 1) {  // the sequential start: terms in pairs
      for (; j + 2 <= T; j += 2) Cvb0Group<W, kVec, 2>(beta, phi, nk, norm, counts, j, K, alpha, av);
    } else {
      for (; j + kCvb0Group <= T; j += kCvb0Group) {
        Cvb0Group<W, kVec, kCvb0Group>(beta, phi, nk, norm, counts, j, K, alpha, av);
      }
      if constexpr (kCvb0Group > 4) {
        if (j + 4 <= T) {
          Cvb0Group<W, kVec, 4>(beta, phi, nk, norm, counts, j, K, alpha, av);
          j += 4;
        }
      }
      if constexpr (kCvb0Group > 2) {
        if (j + 2 <= T) {
          Cvb0Group<W, kVec, 2>(beta, phi, nk, norm, counts, j, K, alpha, av);
          j += 2;
        }
      }
    }
    if (j < T) Cvb0Group<W, kVec, 1>(beta, phi, nk, norm, counts, j, K, alpha, av);
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) change = std::max(change, std::fabs(nk[k] - last[k]));
    if (it > 1 && change < tol) break;
  }
  return it;
}

using Cvb0SweepsFn = uint32_t (*)(const double*, double*, double*, double*, double*, const double*, uint32_t, uint32_t,
                                  double, uint32_t, double);
inline uint32_t Cvb0SweepsSse2(const double* beta, double* phi, double* nk, double* last, double* norm,
                               const double* counts, uint32_t T, uint32_t K, double alpha, uint32_t max_iter,
                               double tol) {
  return Cvb0SweepsT<2>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol);
}
// The vector-alpha kernel (kVec): alpha_k from av.
using Cvb0SweepsVecFn = uint32_t (*)(const double*, double*, double*, double*, double*, const double*, uint32_t,
                                     uint32_t, const double*, uint32_t, double);
inline uint32_t Cvb0SweepsVecSse2(const double* beta, double* phi, double* nk, double* last, double* norm,
                                  const double* counts, uint32_t T, uint32_t K, const double* av, uint32_t max_iter,
                                  double tol) {
  return Cvb0SweepsT<2, true>(beta, phi, nk, last, norm, counts, T, K, 0.0, max_iter, tol, av);
}
#if defined(__x86_64__) && defined(__GNUC__)
#define TRIB_LDA_HAVE_AVX2 1
__attribute__((target("avx2"))) inline uint32_t Cvb0SweepsVecAvx2(const double* beta, double* phi, double* nk,
                                                                  double* last, double* norm, const double* counts,
                                                                  uint32_t T, uint32_t K, const double* av,
                                                                  uint32_t max_iter, double tol) {
  return Cvb0SweepsT<4, true>(beta, phi, nk, last, norm, counts, T, K, 0.0, max_iter, tol, av);
}
__attribute__((target("avx2"))) inline uint32_t Cvb0SweepsAvx2(const double* beta, double* phi, double* nk,
                                                               double* last, double* norm, const double* counts,
                                                               uint32_t T, uint32_t K, double alpha, uint32_t max_iter,
                                                               double tol) {
  return Cvb0SweepsT<4>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol);
}
#endif
}  // namespace tributary::lda

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_
