// Special-function kernels of the "lda" family, in a header so that the tests
// can check them against Boost.Math.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_MATH_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_MATH_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tributary/simd.h"

// No kernel here is contracted into fused multiply-adds (the same bits at
// every width; clang attaches the setting to expressions as it parses them).
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#endif

namespace tributary::lda {

// exp(digamma(x)) for x > 0 (x <= 0 or NaN: meaningless result).
//
// The mean-field update of the word-topic responsibilities (Blei's notes,
// eq. 37) needs exp(E[log beta_kw]) = exp(psi(lambda_kw)) / exp(psi(lambda_k))
// for every (term, topic) of a document: one of these per entry is the
// family's hottest special function, so it avoids the log of psi(x) = ln x + ...
// and the exp of a separate digamma call:
//   psi(x) = psi(x + m) - sum_{i<m} 1/(x + i)          (recurrence, x + m >= 8)
//   psi(y) = ln y - 1/(2y) - 1/(12y^2) + 1/(120y^4) - 1/(252y^6) + 1/(240y^8) - 1/(132y^10) + O(y^-12)
// so exp(psi(x)) = y exp(t - s) with y = x + m, t the series after ln y and s
// the recurrence sum. Truncation error < 691/(32760 y^12) <= 3.1e-13 for y >= 8;
// tests/lda_family_test.cc checks the result against Boost.Math's digamma to
// a relative 1e-12 over 1e-8 .. 1e12.
inline double ExpDigamma(double x) {
  double s = 0;
  // Two steps per division: 1/x + 1/(x+1) = (2x+1) / (x (x+1)).
  while (x < 7) {
    s += (2 * x + 1) / (x * (x + 1));
    x += 2;
  }
  if (x < 8) {
    s += 1 / x;
    x += 1;
  }
  const double r = 1 / x, r2 = r * r;
  const double t =
      -0.5 * r - r2 * (1.0 / 12 - r2 * (1.0 / 120 - r2 * (1.0 / 252 - r2 * (1.0 / 240 - r2 * (1.0 / 132)))));
  return x * std::exp(t - s);
}

// log Gamma(x) for x > 0, in lanes (the supervised family's class
// posteriors: C x K of them per CVB0-2 sweep; Boost's Lanczos through the
// host was ~3x slower than even the scalar form of this):
//   log G(x) = log G(y) - log(x (x + 1) ... (y - 1))       (recurrence, y = x + m >= 8)
//   log G(y) = (y - 1/2) ln y - y + ln(2 pi) / 2 + 1/(12y) - 1/(360y^3)
//              + 1/(1260y^5) - 1/(1680y^7) + 1/(1188y^9) + O(y^-11),
// truncation error < 691/(360360 y^11) <= 2.3e-13 for y >= 8 (absolute),
// and ln by its own series (LogLanes: ln m = 2 atanh((m - 1)/(m + 1)) on the
// mantissa in [sqrt(1/2), sqrt(2)), terms to s^21), so that the same
// operations run in every lane and in the scalar tail: the SSE2 and AVX2
// builds and the scalar function give the same bits. tests/slda_family_test.cc
// checks it against Boost.Math's lgamma over 1e-6 .. 1e8 and the widths
// against each other. REQUIRES: x normal (>= 2.3e-308), < 1e300.
// (Every function below is inlined: the note that 32-byte vectors change the
// calling convention without AVX does not apply.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename V, typename I>
__attribute__((always_inline)) inline void LogLanes(const V& x, V& out) {
  // x = 2^e m, m in [1, 2); then m in [sqrt(1/2), sqrt(2)).
  I bits;
  std::memcpy(&bits, &x, sizeof bits);
  const I e_raw = ((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL;
  V m;
  std::memcpy(&m, &bits, sizeof m);
  const V zero = m - m;
  const I big = m > (zero + 1.4142135623730951);
  V ev;
  for (size_t i = 0; i < sizeof(V) / sizeof(double); ++i) ev[i] = static_cast<double>(e_raw[i] - big[i]);
  m = big ? m * 0.5 : m;
  const V s = (m - 1.0) / (m + 1.0), s2 = s * s;
  V q = zero + (1.0 / 21);
  q = q * s2 + (1.0 / 19);
  q = q * s2 + (1.0 / 17);
  q = q * s2 + (1.0 / 15);
  q = q * s2 + (1.0 / 13);
  q = q * s2 + (1.0 / 11);
  q = q * s2 + (1.0 / 9);
  q = q * s2 + (1.0 / 7);
  q = q * s2 + (1.0 / 5);
  q = q * s2 + (1.0 / 3);
  q = q * s2 + 1.0;
  out = ev * 0.6931471805599453 + 2.0 * s * q;
}

template <typename V, typename I>
__attribute__((always_inline)) inline void LogGammaLanes(V x, V& out) {
  const V zero = x - x;
  V p = zero + 1.0;
  for (int i = 0; i < 8; ++i) {  // the recurrence, branch-free: up to 8 steps to x >= 8
    const I low = x < (zero + 8.0);
    p = low ? p * x : p;
    x = low ? x + 1.0 : x;
  }
  const V r = 1.0 / x, r2 = r * r;
  const V series = r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680 - r2 * (1.0 / 1188)))));
  V lx, lp;
  LogLanes<V, I>(x, lx);
  LogLanes<V, I>(p, lp);
  out = (x - 0.5) * lx - x + 0.91893853320467274178 + series - lp;
}

typedef double LaneD1 __attribute__((vector_size(8)));
typedef long long LaneI1 __attribute__((vector_size(8)));
typedef double LaneD2 __attribute__((vector_size(16)));
typedef long long LaneI2 __attribute__((vector_size(16)));
typedef double LaneD4 __attribute__((vector_size(32)));
typedef long long LaneI4 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline double LogGammaPositive(double x) {
  const LaneD1 v = {x};
  LaneD1 r;
  LogGammaLanes<LaneD1, LaneI1>(v, r);
  return r[0];
}

// sum_j term_j over j < n with four partial sums (j mod 4) added as
// (0 + 1) + (2 + 3), then the rest one by one: the same bits for W = 2
// (SSE2) and W = 4 (AVX2). lanes(j, &out) writes the W terms from j into
// out (a V), one(j) returns term j.
template <int W, typename Lanes, typename One>
__attribute__((always_inline)) inline double FourLaneSumT(uint32_t n, Lanes lanes, One one) {
  using V = typename std::conditional<W == 2, LaneD2, LaneD4>::type;
  constexpr int H = 4 / W;
  V acc[H];
  for (int h = 0; h < H; ++h) acc[h] = V{} + 0.0;
  const uint32_t n4 = n & ~3u;
  for (uint32_t j = 0; j < n4; j += 4) {
    for (int h = 0; h < H; ++h) {
      V t;
      lanes(j + h * W, &t);
      acc[h] += t;
    }
  }
  double l[4];
  std::memcpy(l, acc, sizeof l);
  double sum = (l[0] + l[1]) + (l[2] + l[3]);
  for (uint32_t j = n4; j < n; ++j) sum += one(j);
  return sum;
}

// sum_k log G(a_k + n_k).
template <int W>
__attribute__((always_inline)) inline double LogGammaSumT(const double* a, const double* n, uint32_t K) {
  using V = typename std::conditional<W == 2, LaneD2, LaneD4>::type;
  using I = typename std::conditional<W == 2, LaneI2, LaneI4>::type;
  return FourLaneSumT<W>(
      K,
      [&](uint32_t k, V* out) {
        V va, vn;
        std::memcpy(&va, a + k, sizeof(V));
        std::memcpy(&vn, n + k, sizeof(V));
        LogGammaLanes<V, I>(va + vn, *out);
      },
      [&](uint32_t k) { return LogGammaPositive(a[k] + n[k]); });
}

// sum_j c_j log x_j with x_j = max(p_j / ((t - min(c_j, 1)) + a), 1e-300):
// the CVB0 plug-in estimate of log p(x) (Cvb0LogPx: p_j a token's unnormalised
// probability given the rest of the document, t the document's length, a =
// K alpha), the ratios made in the lanes that take their logs (IEEE division
// lane by lane: the same bits as one by one). *nan is set when a ratio is
// NaN (then the sum means nothing). Every ratio must be < 1e300 (finite).
template <int W>
__attribute__((always_inline)) inline double WeightedLogRatioSumT(const double* c, const double* p, double t, double a,
                                                                  uint32_t n, bool* nan) {
  using V = typename std::conditional<W == 2, LaneD2, LaneD4>::type;
  using I = typename std::conditional<W == 2, LaneI2, LaneI4>::type;
  I bad{};
  const double s = FourLaneSumT<W>(
      n,
      [&](uint32_t j, V* out) {
        V vc, vp, l;
        std::memcpy(&vc, c + j, sizeof(V));
        std::memcpy(&vp, p + j, sizeof(V));
        const V zero = vc - vc, one = zero + 1.0, tiny = zero + 1e-300;
        const V u = vc < one ? vc : one;
        const V r = vp / ((t - u) + a);
        bad |= r != r;
        const V x = r > tiny ? r : tiny;
        LogLanes<V, I>(x, l);
        *out = vc * l;
      },
      [&](uint32_t j) {
        const double u = c[j] < 1 ? c[j] : 1.0;
        const double r = p[j] / ((t - u) + a);
        bad[0] |= r != r ? -1 : 0;
        const LaneD1 v = {r > 1e-300 ? r : 1e-300};
        LaneD1 l;
        LogLanes<LaneD1, LaneI1>(v, l);
        return c[j] * l[0];
      });
  for (int i = 0; i < W; ++i) *nan |= bad[i] != 0;
  return s;
}
using WeightedLogRatioSumFn = double (*)(const double*, const double*, double, double, uint32_t, bool*);
inline double WeightedLogRatioSumSse2(const double* c, const double* p, double t, double a, uint32_t n, bool* nan) {
  return WeightedLogRatioSumT<2>(c, p, t, a, n, nan);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) inline double WeightedLogRatioSumAvx2(const double* c, const double* p, double t,
                                                                      double a, uint32_t n, bool* nan) {
  return WeightedLogRatioSumT<4>(c, p, t, a, n, nan);
}
// The AVX2 build where the CPU has AVX-512 VL: its 32 registers, the same
// operations (no FMA), so the same bits.
__attribute__((target("avx2,avx512f,avx512vl") TRIB_NO_FP_CONTRACT)) inline double WeightedLogRatioSumAvx512(
    const double* c, const double* p, double t, double a, uint32_t n, bool* nan) {
  return WeightedLogRatioSumT<4>(c, p, t, a, n, nan);
}
#endif

// out_j = log x_j (every x_j normal and positive), W at a time, the rest one
// by one: the same bits in every width.
template <int W>
__attribute__((always_inline)) inline void LogEachT(const double* x, double* out, uint32_t n) {
  using V = typename std::conditional<W == 2, LaneD2, LaneD4>::type;
  using I = typename std::conditional<W == 2, LaneI2, LaneI4>::type;
  uint32_t j = 0;
  for (; j + W <= n; j += W) {
    V vx, l;
    std::memcpy(&vx, x + j, sizeof(V));
    LogLanes<V, I>(vx, l);
    std::memcpy(out + j, &l, sizeof(V));
  }
  for (; j < n; ++j) {
    const LaneD1 v = {x[j]};
    LaneD1 r;
    LogLanes<LaneD1, LaneI1>(v, r);
    out[j] = r[0];
  }
}
#pragma GCC diagnostic pop

}  // namespace tributary::lda

#if defined(__clang__)
#pragma float_control(pop)
#endif

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_MATH_H_
