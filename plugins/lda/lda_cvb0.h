// The CVB0 sweep kernel of the "lda" family, in a header so that the tests
// can check that its SSE2 and AVX2 builds give the same bits.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tributary/simd.h"

// No kernel here is contracted into fused multiply-adds (the same bits at
// every width): clang attaches the setting to expressions as it parses them.
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#endif

namespace tributary::lda {

// x in every lane of *v (a broadcast). `V{} + x` would be one too but costs
// an addition (0 + x is not x for x = -0, so the compiler keeps it): for the
// reciprocals on a sweep's chain of dependent operations. (Through a
// pointer: a vector returned by value from code compiled outside the AVX2
// clones would change its ABI.)
// (From zeros: GCC at -O1, the ThreadSanitizer build, takes lane writes
// into an uninitialised vector for a use of it; optimised builds drop the
// zeros, every lane being written.)
template <typename V, typename S>
__attribute__((always_inline)) inline void Splat(V* v, S x) {
  V t = {};
  for (size_t i = 0; i < sizeof(V) / sizeof(S); ++i) t[i] = x;
  *v = t;
}

// W doubles in one vector (`type`), and what comparing two of them gives
// (`mask`: -1 true, 0 false, per lane).
template <int W>
struct VecOf;
template <>
struct VecOf<2> {
  typedef double type __attribute__((vector_size(16)));
  typedef int64_t mask __attribute__((vector_size(16)));
};
template <>
struct VecOf<4> {
  typedef double type __attribute__((vector_size(32)));
  typedef int64_t mask __attribute__((vector_size(32)));
};

// Two kernels: Cvb0SweepsT (double, terms in pairs; a K-vector alpha: the
// supervised-LDA family and lda's alpha_shape=asymmetric) and, below it,
// Cvb0FloatSweepsT (float, terms in fours; lda's local step with a scalar
// alpha, about twice as fast).
//
// Stochastic CVB0 (Foulds et al. 2013; the zero-order collapsed update, eq. 7
// of the supervised-LDA paper with one class): with the topics fixed at their
// point estimate beta_kw = lambda_kw / lambda_k (lda_kernels.cc, MeanBeta),
//   phi_wk propto beta_kw (N_dk^{-w} + alpha),   N_dk = sum_w n_w phi_wk,
// where N_dk^{-w} = N_dk - u_w phi_wk leaves out the token's own share
// (u_w = min(1, n_w): one token of the term, or all of a fractional count).
// Gauss-Seidel sweeps over the distinct terms, N_dk updated right after each
// pair of terms. The first sweep starts from phi = 0, N = 0, i.e. it assigns the terms
// one after the other given the ones before (the sequential start of collapsed
// Gibbs, sdEM Appendix B); then sweeps until max_k |change of N_dk| over a
// sweep < cvb0_tol or cvb0_max_iter sweeps (the first one included). No special
// function: 7 flops per (term, topic) per sweep, one division per term.
//
// The kernel works on chunks of 4 topics (W = 2: two SSE2 vectors, W = 4: one
// AVX vector) with the same 4 partial sums and no fused multiply-add, so both
// widths give the same bits: a model does not depend on the CPU it ran on.
//
// Arguments: beta and phi are T x K (term-major, K contiguous), nk, last K,
// norm T (the last sweep's normaliser of each term), counts T. The sweeps
// continue from the phi and nk given: zeros for a document's first call (its
// first sweep is then the sequential start), or what earlier calls left, so
// that N calls of one sweep are one call of N sweeps, bit for bit (the
// supervised-LDA family steps them so; test
// LdaMathTest.Cvb0KernelContinuesFromThePhiItIsGiven). Returns the number
// of sweeps run.
//
// kVec (the supervised-LDA family, eq. 7 with the class's alpha row): the
// prior is the K-vector `av` instead of the scalar `alpha` (which is then
// unused); the same arithmetic with alpha_k in place of alpha.
//
// NV > 0: the first K4 = NV W entries of N_dk live in registers across the
// sweep (NV vectors; stored back to nk at the end of each sweep). In memory,
// each pair's first read of N_dk waited on the store of the pair before,
// twice per pair on the sweep's chain; the arithmetic is the same, so the
// same bits. NV = 0: N_dk in memory (any K).
template <int W, bool kVec = false, int NV = 0>
__attribute__((always_inline)) inline uint32_t Cvb0SweepsT(const double* beta, double* phi, double* nk, double* last,
                                                           double* norm, const double* counts, uint32_t T, uint32_t K,
                                                           double alpha, uint32_t max_iter, double tol,
                                                           const double* av = nullptr) {
  using V = typename VecOf<W>::type;
  constexpr int H = 4 / W;  // vectors per chunk of 4 topics
  const V vz = {};
  const V va = vz + alpha;
  const uint32_t K4 = NV > 0 ? static_cast<uint32_t>(NV * W) : K & ~3u;
  V nr[NV > 0 ? NV : 1] = {};
  // N_dk's vector at k (a multiple of W below K4): a register, or memory.
  // (Through pointers: a vector returned by value from a lambda compiled
  // outside the AVX2 clone would change its ABI.)
  auto load_n = [&](uint32_t k, V* n) {
    if constexpr (NV > 0) {
      *n = nr[k / W];
    } else {
      std::memcpy(n, nk + k, sizeof(V));
    }
  };
  auto store_n = [&](uint32_t k, const V* n) {
    if constexpr (NV > 0) {
      nr[k / W] = *n;
    } else {
      std::memcpy(nk + k, n, sizeof(V));
    }
  };
  uint32_t it = 0;
  while (it < max_iter) {
    ++it;
    std::memcpy(last, nk, K * sizeof(double));
    if constexpr (NV > 0) {
      for (int v = 0; v < NV; ++v) std::memcpy(&nr[v], nk + v * W, sizeof(V));
    }
    // Terms two at a time: both read the same N_dk (each without its own
    // share), then both update it. The two chains of sums and divisions are
    // independent, so the CPU overlaps them (one term at a time waits on the
    // division of the term before); it converges like term-by-term updates.
    uint32_t j = 0;
    for (; j + 1 < T; j += 2) {
      const double* b0 = beta + static_cast<size_t>(j) * K;
      const double* b1 = b0 + K;
      double* p0 = phi + static_cast<size_t>(j) * K;
      double* p1 = p0 + K;
      const double c0 = counts[j], u0 = c0 < 1 ? c0 : 1.0;
      const double c1 = counts[j + 1], u1 = c1 < 1 ? c1 : 1.0;
      const V vc0 = vz + c0, vu0 = vz + u0, vc1 = vz + c1, vu1 = vz + u1;
      V acc0[H], acc1[H];
      for (int h = 0; h < H; ++h) acc0[h] = acc1[h] = vz;
      for (uint32_t k = 0; k < K4; k += 4) {
        for (int h = 0; h < H; ++h) {
          V o0, o1, n, bb0, bb1;
          std::memcpy(&o0, p0 + k + h * W, sizeof(V));
          std::memcpy(&o1, p1 + k + h * W, sizeof(V));
          load_n(k + h * W, &n);
          std::memcpy(&bb0, b0 + k + h * W, sizeof(V));
          std::memcpy(&bb1, b1 + k + h * W, sizeof(V));
          V a = va;
          if constexpr (kVec) std::memcpy(&a, av + k + h * W, sizeof(V));
          const V q0 = bb0 * ((n - vu0 * o0) + a);
          const V q1 = bb1 * ((n - vu1 * o1) + a);
          n = (n - vc0 * o0) - vc1 * o1;
          store_n(k + h * W, &n);
          std::memcpy(p0 + k + h * W, &q0, sizeof(V));
          std::memcpy(p1 + k + h * W, &q1, sizeof(V));
          acc0[h] += q0;
          acc1[h] += q1;
        }
      }
      double l0[4], l1[4];
      std::memcpy(l0, acc0, sizeof l0);
      std::memcpy(l1, acc1, sizeof l1);
      double s0 = (l0[0] + l0[1]) + (l0[2] + l0[3]);
      double s1 = (l1[0] + l1[1]) + (l1[2] + l1[3]);
      for (uint32_t k = K4; k < K; ++k) {
        const double ak = kVec ? av[k] : alpha;
        const double q0 = b0[k] * ((nk[k] - u0 * p0[k]) + ak);
        const double q1 = b1[k] * ((nk[k] - u1 * p1[k]) + ak);
        nk[k] = (nk[k] - c0 * p0[k]) - c1 * p1[k];
        p0[k] = q0;
        p1[k] = q1;
        s0 += q0;
        s1 += q1;
      }
      s0 = s0 > 1e-300 ? s0 : 1e-300;
      s1 = s1 > 1e-300 ? s1 : 1e-300;
      norm[j] = s0;
      norm[j + 1] = s1;
      const double inv0 = 1.0 / s0, inv1 = 1.0 / s1;
      V vi0, vi1;  // (inv > 0: the bits of vz + inv)
      Splat(&vi0, inv0);
      Splat(&vi1, inv1);
      for (uint32_t k = 0; k < K4; k += W) {
        V q0, q1, n;
        std::memcpy(&q0, p0 + k, sizeof(V));
        std::memcpy(&q1, p1 + k, sizeof(V));
        load_n(k, &n);
        q0 = q0 * vi0;
        q1 = q1 * vi1;
        n = (n + vc0 * q0) + vc1 * q1;
        std::memcpy(p0 + k, &q0, sizeof(V));
        std::memcpy(p1 + k, &q1, sizeof(V));
        store_n(k, &n);
      }
      for (uint32_t k = K4; k < K; ++k) {
        p0[k] = p0[k] * inv0;
        p1[k] = p1[k] * inv1;
        nk[k] = (nk[k] + c0 * p0[k]) + c1 * p1[k];
      }
    }
    if (j < T) {  // the last term of an odd count, alone
      const double* b = beta + static_cast<size_t>(j) * K;
      double* ph = phi + static_cast<size_t>(j) * K;
      const double c = counts[j], u = c < 1 ? c : 1.0;
      const V vc = vz + c, vu = vz + u;
      // p_k = beta_kw ((N_dk - u phi_wk) + alpha) into phi; N_dk -= c phi_wk.
      V acc[H];
      for (int h = 0; h < H; ++h) acc[h] = vz;
      for (uint32_t k = 0; k < K4; k += 4) {
        for (int h = 0; h < H; ++h) {
          V old, n, bb;
          std::memcpy(&old, ph + k + h * W, sizeof(V));
          load_n(k + h * W, &n);
          std::memcpy(&bb, b + k + h * W, sizeof(V));
          V a = va;
          if constexpr (kVec) std::memcpy(&a, av + k + h * W, sizeof(V));
          const V p = bb * ((n - vu * old) + a);
          n = n - vc * old;
          store_n(k + h * W, &n);
          std::memcpy(ph + k + h * W, &p, sizeof(V));
          acc[h] += p;
        }
      }
      double lanes[4];
      std::memcpy(lanes, acc, sizeof lanes);
      double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
      for (uint32_t k = K4; k < K; ++k) {
        const double p = b[k] * ((nk[k] - u * ph[k]) + (kVec ? av[k] : alpha));
        nk[k] = nk[k] - c * ph[k];
        ph[k] = p;
        s += p;
      }
      s = s > 1e-300 ? s : 1e-300;
      norm[j] = s;
      const double inv = 1.0 / s;
      V vi;
      Splat(&vi, inv);
      // phi_wk = p_k / s; N_dk += c phi_wk.
      for (uint32_t k = 0; k < K4; k += W) {
        V p, n;
        std::memcpy(&p, ph + k, sizeof(V));
        load_n(k, &n);
        p = p * vi;
        n = n + vc * p;
        std::memcpy(ph + k, &p, sizeof(V));
        store_n(k, &n);
      }
      for (uint32_t k = K4; k < K; ++k) {
        ph[k] = ph[k] * inv;
        nk[k] = nk[k] + c * ph[k];
      }
    }
    if constexpr (NV > 0) {
      for (int v = 0; v < NV; ++v) std::memcpy(nk + v * W, &nr[v], sizeof(V));
    }
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) change = std::max(change, std::fabs(nk[k] - last[k]));
    if (it > 1 && change < tol) break;
  }
  return it;
}

// Cvb0SweepsT with N_dk in registers when its K4 = K & ~3 entries fit in
// eight vectors (K < 36 at four lanes, K < 20 at two), in memory otherwise.
template <int W, bool kVec>
__attribute__((always_inline)) inline uint32_t Cvb0SweepsAnyK(const double* beta, double* phi, double* nk, double* last,
                                                              double* norm, const double* counts, uint32_t T,
                                                              uint32_t K, double alpha, uint32_t max_iter, double tol,
                                                              const double* av) {
  // (n W is K4, a multiple of four: at two lanes only even n occur.)
#define TRIB_CVB0_CASE(n)                                                                                \
  case n:                                                                                                \
    if constexpr (n * W % 4 == 0) {                                                                      \
      return Cvb0SweepsT<W, kVec, n>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol, av); \
    }                                                                                                    \
    break;
  switch ((K & ~3u) / W) {
    TRIB_CVB0_CASE(1)
    TRIB_CVB0_CASE(2)
    TRIB_CVB0_CASE(3)
    TRIB_CVB0_CASE(4)
    TRIB_CVB0_CASE(5)
    TRIB_CVB0_CASE(6)
    TRIB_CVB0_CASE(7)
    TRIB_CVB0_CASE(8)
    default:
      break;
  }
#undef TRIB_CVB0_CASE
  return Cvb0SweepsT<W, kVec, 0>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol, av);
}

using Cvb0SweepsFn = uint32_t (*)(const double*, double*, double*, double*, double*, const double*, uint32_t, uint32_t,
                                  double, uint32_t, double);
inline uint32_t Cvb0SweepsSse2(const double* beta, double* phi, double* nk, double* last, double* norm,
                               const double* counts, uint32_t T, uint32_t K, double alpha, uint32_t max_iter,
                               double tol) {
  return Cvb0SweepsAnyK<2, false>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol, nullptr);
}
// The vector-alpha kernel (kVec): alpha_k from av.
using Cvb0SweepsVecFn = uint32_t (*)(const double*, double*, double*, double*, double*, const double*, uint32_t,
                                     uint32_t, const double*, uint32_t, double);
inline uint32_t Cvb0SweepsVecSse2(const double* beta, double* phi, double* nk, double* last, double* norm,
                                  const double* counts, uint32_t T, uint32_t K, const double* av, uint32_t max_iter,
                                  double tol) {
  return Cvb0SweepsAnyK<2, true>(beta, phi, nk, last, norm, counts, T, K, 0.0, max_iter, tol, av);
}
#if defined(__x86_64__) && defined(__GNUC__)
#define TRIB_LDA_HAVE_AVX2 1
__attribute__((target("avx2"))) inline uint32_t Cvb0SweepsVecAvx2(const double* beta, double* phi, double* nk,
                                                                  double* last, double* norm, const double* counts,
                                                                  uint32_t T, uint32_t K, const double* av,
                                                                  uint32_t max_iter, double tol) {
  return Cvb0SweepsAnyK<4, true>(beta, phi, nk, last, norm, counts, T, K, 0.0, max_iter, tol, av);
}
__attribute__((target("avx2"))) inline uint32_t Cvb0SweepsAvx2(const double* beta, double* phi, double* nk,
                                                               double* last, double* norm, const double* counts,
                                                               uint32_t T, uint32_t K, double alpha, uint32_t max_iter,
                                                               double tol) {
  return Cvb0SweepsAnyK<4, false>(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol, nullptr);
}
#endif

// ---- The float group kernel (lda's local step with a scalar alpha) ---------
//
// The same CVB0 update as Cvb0SweepsT, for throughput: single precision (a
// local step needs phi to ~1e-6, far below what a document's evidence pins
// down; the statistics it feeds stay double) and Gauss-Seidel by groups of
// terms: the terms of a group read the same N_dk, each less its own share,
// then all of them update it (Cvb0SweepsT's pairs are groups of two). A
// sweep's chain of dependent operations (sum of a row, division, update of
// N_dk) is then paid once per group instead of once per pair, and a vector
// holds eight topics instead of four. The groups: four terms in a call's
// first sweep (from zeros: the sequential start, where each term's
// assignment should see the ones before it), eight in the later sweeps
// (which refine an assignment that is already there); the last group of a
// sweep takes what is left (1 to 7 terms: a group of four, then the rest).
// (So, unlike Cvb0SweepsT, N calls of one sweep are not one call of N
// sweeps: each call's first sweep goes by fours. lda calls it once per
// document.)
// On the bible's validation split (bench/LDA_RESULTS.md) groups of four
// throughout and this schedule are within the run-to-run noise of a model,
// eight throughout is a little worse (a sweep of eight is ~30 % cheaper).
//
// Layout: beta and phi are T x Kp floats, Kp = Cvb0Stride(K) (K rounded up
// to a multiple of 8), the padding of beta zero: a padded topic's q is
// 0 x (N + alpha) = 0, so phi and N_dk stay 0 there and sums are unchanged.
// nk and last are Kp floats, norm T. Like Cvb0SweepsT: the sweeps continue
// from the phi and N_dk given (zeros: the first sweep is the sequential
// start), or, with `fresh`, start as from zeros whatever phi and nk hold (the
// first sweep neither reads phi nor needs it cleared: the same bits); stop when max_k |change of N_dk| over a sweep <
// tol (after the second sweep) or after max_iter sweeps; returns the sweeps run.
//
// Same bits at every width: each of the eight lanes of a chunk of topics
// sums its q over the chunks in order (W = 4: two vectors per chunk), the
// eight lane sums are added in one fixed tree (at W = 8 four rows' trees at
// once, in vector lanes), the group's changes of N_dk in another, no fused
// multiply-add.
inline uint32_t Cvb0Stride(uint32_t K) { return (K + 7u) & ~7u; }

template <int W>
struct FloatVecOf;
template <>
struct FloatVecOf<4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct FloatVecOf<8> {
  typedef float type __attribute__((vector_size(32)));
};

// One group of G terms from j. NV > 0: N_dk is the NV vectors nr
// (Kp = NV W); NV = 0: N_dk is nk in memory, Kp / W vectors.
template <int W, int NV, int G, bool kFresh>
__attribute__((always_inline)) inline void Cvb0FloatGroup(const float* beta, float* phi, float* norm,
                                                          const float* counts, uint32_t j, uint32_t Kp_arg, float alpha,
                                                          typename FloatVecOf<W>::type* nr, float* nk) {
  using V = typename FloatVecOf<W>::type;
  constexpr int H = 8 / W;  // vectors per chunk of eight topics
  // (With N_dk in registers the row stride is the constant NV W: the rows'
  // addresses are then one pointer and constant offsets, none spilled.)
  const uint32_t Kp = NV > 0 ? static_cast<uint32_t>(NV * W) : Kp_arg;
  const uint32_t nv = NV > 0 ? static_cast<uint32_t>(NV) : Kp / W;
  const V vz = {};
  const V va = vz + alpha;
  const float* b = beta + static_cast<size_t>(j) * Kp;
  float* p = phi + static_cast<size_t>(j) * Kp;
  V vc[G], vu[G], acc[G][H];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    const float c = counts[j + g];
    vc[g] = vz + c;
    vu[g] = vz + (c < 1 ? c : 1.0f);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) acc[g][h] = vz;
  }
  auto load_n = [&](uint32_t v, V* n) {
    if constexpr (NV > 0) {
      *n = nr[v];
    } else {
      std::memcpy(n, nk + v * W, sizeof(V));
    }
  };
  auto store_n = [&](uint32_t v, const V* n) {
    if constexpr (NV > 0) {
      nr[v] = *n;
    } else {
      std::memcpy(nk + v * W, n, sizeof(V));
    }
  };
  // q_gk = beta_gk ((N_dk - u_g phi_gk) + alpha) into phi; N_dk -= sum_g c_g phi_gk.
#pragma GCC unroll 8
  for (uint32_t v = 0; v < nv; ++v) {
    V n;
    load_n(v, &n);
    V out[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      V bb;
      std::memcpy(&bb, b + g * Kp + v * W, sizeof(V));
      if constexpr (kFresh) {  // phi = 0: (n - u 0) + alpha = n + alpha and n - c 0 = n, bit for bit
        const V q = bb * (n + va);
        std::memcpy(p + g * Kp + v * W, &q, sizeof(V));
        acc[g][v % H] += q;
        continue;
      }
      V o;
      std::memcpy(&o, p + g * Kp + v * W, sizeof(V));
      const V q = bb * ((n - vu[g] * o) + va);
      std::memcpy(p + g * Kp + v * W, &q, sizeof(V));
      acc[g][v % H] += q;
      out[g] = vc[g] * o;
    }
    if constexpr (kFresh) {
      continue;
    } else if constexpr (G == 4) {
      n = n - ((out[0] + out[1]) + (out[2] + out[3]));
    } else if constexpr (G == 8) {
      n = n - (((out[0] + out[1]) + (out[2] + out[3])) + ((out[4] + out[5]) + (out[6] + out[7])));
    } else {
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) n = n - out[g];
    }
    store_n(v, &n);
  }
  float inv[G];
  if constexpr (W == 8 && G % 4 == 0) {
    // Four rows' sums at once, in the scalar loop's tree: lane pairs, pairs
    // of pairs (two horizontal adds), then the two halves; one division.
    typedef float V4 __attribute__((vector_size(16)));
    // haddps: (a0+a1, a2+a3, b0+b1, b2+b3) in each 128-bit half.
    auto hadd = [](const V& lhs, const V& rhs, V* out) {
      *out = __builtin_shufflevector(lhs, rhs, 0, 2, 8, 10, 4, 6, 12, 14) +
             __builtin_shufflevector(lhs, rhs, 1, 3, 9, 11, 5, 7, 13, 15);
    };
#pragma GCC unroll 2
    for (int g = 0; g < G; g += 4) {
      V x, y, z;
      hadd(acc[g][0], acc[g + 1][0], &x);
      hadd(acc[g + 2][0], acc[g + 3][0], &y);
      hadd(x, y, &z);
      V4 lo, hi;
      std::memcpy(&lo, &z, sizeof lo);
      std::memcpy(&hi, reinterpret_cast<const char*>(&z) + sizeof lo, sizeof hi);
      const V4 floor = V4{} + 1e-30f;
      V4 s = lo + hi;
      s = s > floor ? s : floor;
      std::memcpy(norm + j + g, &s, sizeof s);
      const V4 r = (V4{} + 1.0f) / s;
      std::memcpy(inv + g, &r, sizeof r);
    }
  } else {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      float l[8];
      std::memcpy(l, acc[g], sizeof l);
      float s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      s = s > 1e-30f ? s : 1e-30f;
      norm[j + g] = s;
      inv[g] = 1.0f / s;
    }
  }
  // phi_g = q_g / s_g; N_dk += sum_g c_g phi_gk.
#pragma GCC unroll 8
  for (uint32_t v = 0; v < nv; ++v) {
    V n;
    load_n(v, &n);
    V in[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      V q;
      std::memcpy(&q, p + g * Kp + v * W, sizeof(V));
      V vi;
      Splat(&vi, inv[g]);  // (inv > 0: the bits of vz + inv)
      q = q * vi;
      std::memcpy(p + g * Kp + v * W, &q, sizeof(V));
      in[g] = vc[g] * q;
    }
    if constexpr (G == 4) {
      n = n + ((in[0] + in[1]) + (in[2] + in[3]));
    } else if constexpr (G == 8) {
      n = n + (((in[0] + in[1]) + (in[2] + in[3])) + ((in[4] + in[5]) + (in[6] + in[7])));
    } else {
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) n = n + in[g];
    }
    store_n(v, &n);
  }
}

// One sweep: groups of G8 (8 or 4) terms, then the rest, four and the last
// one to three terms.
template <int W, int NV, bool kFresh, int G8>
__attribute__((always_inline)) inline void Cvb0FloatSweep(const float* beta, float* phi, float* norm,
                                                          const float* counts, uint32_t T, uint32_t Kp, float alpha,
                                                          typename FloatVecOf<W>::type* nr, float* nk) {
  uint32_t j = 0;
  if constexpr (G8 == 8) {
    for (; j + 8 <= T; j += 8) Cvb0FloatGroup<W, NV, 8, kFresh>(beta, phi, norm, counts, j, Kp, alpha, nr, nk);
  }
  for (; j + 4 <= T; j += 4) Cvb0FloatGroup<W, NV, 4, kFresh>(beta, phi, norm, counts, j, Kp, alpha, nr, nk);
  switch (T - j) {
    case 3:
      Cvb0FloatGroup<W, NV, 3, kFresh>(beta, phi, norm, counts, j, Kp, alpha, nr, nk);
      break;
    case 2:
      Cvb0FloatGroup<W, NV, 2, kFresh>(beta, phi, norm, counts, j, Kp, alpha, nr, nk);
      break;
    case 1:
      Cvb0FloatGroup<W, NV, 1, kFresh>(beta, phi, norm, counts, j, Kp, alpha, nr, nk);
      break;
    default:
      break;
  }
}

template <int W, int NV>
__attribute__((always_inline)) inline uint32_t Cvb0FloatSweepsT(const float* beta, float* phi, float* nk, float* last,
                                                                float* norm, const float* counts, uint32_t T,
                                                                uint32_t Kp, float alpha, uint32_t max_iter, float tol,
                                                                bool fresh) {
  using V = typename FloatVecOf<W>::type;
  V nr[NV > 0 ? NV : 1] = {};
  if (fresh) std::memset(nk, 0, Kp * sizeof(float));
  uint32_t it = 0;
  while (it < max_iter) {
    ++it;
    std::memcpy(last, nk, Kp * sizeof(float));
    if constexpr (NV > 0) {
      for (int v = 0; v < NV; ++v) std::memcpy(&nr[v], nk + v * W, sizeof(V));
    }
    if (it > 1) {
      Cvb0FloatSweep<W, NV, false, 8>(beta, phi, norm, counts, T, Kp, alpha, nr, nk);
    } else if (fresh) {
      Cvb0FloatSweep<W, NV, true, 4>(beta, phi, norm, counts, T, Kp, alpha, nr, nk);
    } else {
      Cvb0FloatSweep<W, NV, false, 4>(beta, phi, norm, counts, T, Kp, alpha, nr, nk);
    }
    if constexpr (NV > 0) {
      for (int v = 0; v < NV; ++v) std::memcpy(nk + v * W, &nr[v], sizeof(V));
    }
    float change = 0;
    for (uint32_t k = 0; k < Kp; ++k) change = std::max(change, std::fabs(nk[k] - last[k]));
    if (it > 1 && change < tol) break;
  }
  return it;
}

// Cvb0FloatSweepsT with N_dk in registers when it fits in eight vectors
// (K <= 64 at eight lanes, <= 32 at four), in memory otherwise.
template <int W>
__attribute__((always_inline)) inline uint32_t Cvb0FloatSweepsAnyK(const float* beta, float* phi, float* nk,
                                                                   float* last, float* norm, const float* counts,
                                                                   uint32_t T, uint32_t Kp, float alpha,
                                                                   uint32_t max_iter, float tol, bool fresh) {
  // (Kp is a multiple of 8: at four lanes only even n occur.)
#define TRIB_CVB0F_CASE(n)                                                                                  \
  case n:                                                                                                   \
    if constexpr (n * W % 8 == 0) {                                                                         \
      return Cvb0FloatSweepsT<W, n>(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh); \
    }                                                                                                       \
    break;
  switch (Kp / W) {
    TRIB_CVB0F_CASE(1)
    TRIB_CVB0F_CASE(2)
    TRIB_CVB0F_CASE(3)
    TRIB_CVB0F_CASE(4)
    TRIB_CVB0F_CASE(5)
    TRIB_CVB0F_CASE(6)
    TRIB_CVB0F_CASE(7)
    TRIB_CVB0F_CASE(8)
    default:
      break;
  }
#undef TRIB_CVB0F_CASE
  return Cvb0FloatSweepsT<W, 0>(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh);
}

using Cvb0FloatSweepsFn = uint32_t (*)(const float*, float*, float*, float*, float*, const float*, uint32_t, uint32_t,
                                       float, uint32_t, float, bool);
inline uint32_t Cvb0FloatSweepsSse2(const float* beta, float* phi, float* nk, float* last, float* norm,
                                    const float* counts, uint32_t T, uint32_t Kp, float alpha, uint32_t max_iter,
                                    float tol, bool fresh = false) {
  return Cvb0FloatSweepsAnyK<4>(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh);
}
#ifdef TRIB_LDA_HAVE_AVX2
__attribute__((target("avx2"))) inline uint32_t Cvb0FloatSweepsAvx2(const float* beta, float* phi, float* nk,
                                                                    float* last, float* norm, const float* counts,
                                                                    uint32_t T, uint32_t Kp, float alpha,
                                                                    uint32_t max_iter, float tol, bool fresh = false) {
  return Cvb0FloatSweepsAnyK<8>(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh);
}
// The AVX2 kernel where the CPU has AVX-512 VL: the same 256-bit vectors
// and operations, with the 32 vector registers of AVX-512 (the sweep keeps
// N_dk, a group's accumulators and its counts in registers; with AVX2's 16 it
// spills) and no fused multiply-add (AVX-512 F implies FMA; contraction is off).
__attribute__((target("avx2,avx512f,avx512vl") TRIB_NO_FP_CONTRACT)) inline uint32_t Cvb0FloatSweepsAvx512(
    const float* beta, float* phi, float* nk, float* last, float* norm, const float* counts, uint32_t T, uint32_t Kp,
    float alpha, uint32_t max_iter, float tol, bool fresh = false) {
  return Cvb0FloatSweepsAnyK<8>(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh);
}
#endif
}  // namespace tributary::lda

#if defined(__clang__)
#pragma float_control(pop)
#endif

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_CVB0_H_
