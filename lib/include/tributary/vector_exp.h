// exp over arrays, two doubles per operation, for softmaxes: the ncll
// loss's (plugins/losses/ncll.cc) and the posterior of the metrics
// (metrics.cc). Header-only, for the library and plugins alike;
// tests/vector_exp_test.cc checks it against std::exp.
//
// The algorithm is fdlibm's e_exp.c (also musl's former exp.c), made
// branch-free on GCC/Clang vector extensions (plain SSE2 on the x86-64
// baseline, like the multinomial family's vector log): x = k ln 2 + r with
// |r| <= ln 2 / 2 (ln 2 split in two so that k ln2_hi is exact), then
//   exp(r) = 1 - ((lo - r c / (2 - c)) - hi),  c = r - r^2 P(r^2),
// P a degree-5 minimax polynomial, and 2^k added to the exponent bits. Error
// < 1 ulp. Lanes outside [-708, 709] (where the result or 2^k leaves the
// normal range), and NaN, are recomputed with std::exp, so every input gives
// std::exp's result there.
#ifndef TRIBUTARY_VECTOR_EXP_H_
#define TRIBUTARY_VECTOR_EXP_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tributary/simd.h"

namespace tributary::vector_exp {

/// Two doubles (one SSE2 register; a GCC/Clang vector extension).
typedef double v2d __attribute__((vector_size(16)));
/// Two 64-bit integers: what comparing two v2d gives (-1: true, 0: false, per lane).
typedef int64_t v2i __attribute__((vector_size(16)));
/// Bit arithmetic on the doubles' representations: unsigned, so that a
/// carry into the sign bit is not signed overflow (undefined; UBSan).
typedef uint64_t v2u __attribute__((vector_size(16)));

/// The range of ExpInRange: exp(x) and 2^k are normal doubles.
constexpr double kMin = -708.0, kMax = 709.0;
/// \var kMax
/// The upper end of ExpInRange's range (see kMin).

/// Four doubles and their bits (one AVX2 register): ExpInRangeT on these is
/// for code compiled for AVX2 (ExpShiftedWide below); elsewhere the compiler
/// would split every operation in two.
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));

/// exp(x) for x in [kMin, kMax], every lane, without branches (other inputs
/// give meaningless values: see ExpShifted below). D is v2d or v4d, U the
/// unsigned integers of its width. Lane by lane the same operations whatever
/// the width, none contracted into an FMA (neither the x86-64 baseline nor
/// the AVX2 target has one), so both widths give the same bits.
/// (x and the result by reference: a 32-byte vector passed by value would
/// change the calling convention of code compiled without AVX.)
template <typename D, typename U>
__attribute__((always_inline)) inline void ExpInRangeT(const D& x, D* result) {
  constexpr double P1 = 0x1.555555555553ep-3, P2 = -0x1.6c16c16bebd93p-9, P3 = 0x1.1566aaf25de2cp-14,
                   P4 = -0x1.bbd41c5d26bf1p-20, P5 = 0x1.6376972bea4d0p-25;
  constexpr double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33, inv_ln2 = 0x1.71547652b82fep0;
  constexpr double kRound = 0x1.8p52;  // adding it rounds to an integer, held in the low mantissa bits
  const D kr = x * inv_ln2 + kRound;
  const D k = kr - kRound;
  const U ki = reinterpret_cast<U>(kr) - reinterpret_cast<U>(D{} + kRound);
  const D hi = x - k * ln2_hi;  // exact
  const D lo = k * ln2_lo;
  const D r = hi - lo;
  const D t = r * r;
  const D c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
  const D y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
  *result = reinterpret_cast<D>(reinterpret_cast<U>(y) + (ki << 52));
}

/// exp(x) for x in [kMin, kMax], both lanes (ExpInRangeT on two lanes).
inline v2d ExpInRange(v2d x) {
  v2d e;
  ExpInRangeT<v2d, v2u>(x, &e);
  return e;
}

/// out[i] = exp(x[i] - shift) for i < n (out may be x). Within 1 ulp of
/// std::exp; the same value where the argument is outside [-708, 709] or NaN.
inline void ExpShifted(const double* x, double shift, uint32_t n, double* out) {
  const v2d sh{shift, shift};
  uint32_t i = 0;
  for (; i + 2 <= n; i += 2) {
    v2d a;
    std::memcpy(&a, x + i, sizeof a);
    a -= sh;
    const v2i in = (a >= v2d{kMin, kMin}) & (a <= v2d{kMax, kMax});
    v2d e = ExpInRange(a);
    if ((in[0] & in[1]) == 0) {  // rare: underflow, overflow or NaN
      if (!in[0]) e[0] = std::exp(a[0]);
      if (!in[1]) e[1] = std::exp(a[1]);
    }
    std::memcpy(out + i, &e, sizeof e);
  }
  if (i < n) {
    const double a = x[i] - shift;
    out[i] = a >= kMin && a <= kMax ? ExpInRange(v2d{a, a})[0] : std::exp(a);
  }
}

/// ExpShifted, four lanes at a time: the same values bit for bit. Only for
/// functions compiled for AVX2 (`__attribute__((target("avx2")))`, chosen at
/// run time), into which it is inlined.
__attribute__((always_inline)) inline void ExpShiftedWide(const double* x, double shift, uint32_t n, double* out) {
  const v4d sh = v4d{} + shift;
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    v4d a;
    std::memcpy(&a, x + i, sizeof a);
    a -= sh;
    const v4i in = (a >= kMin) & (a <= kMax);
    v4d e;
    ExpInRangeT<v4d, v4u>(a, &e);
    if ((in[0] & in[1] & in[2] & in[3]) == 0) {  // rare: underflow, overflow or NaN
      for (int l = 0; l < 4; ++l) {
        if (!in[l]) e[l] = std::exp(a[l]);
      }
    }
    std::memcpy(out + i, &e, sizeof e);
  }
  if (i < n) ExpShifted(x + i, shift, n - i, out + i);
}

#if defined(__x86_64__) && defined(__GNUC__)
/// ExpShiftedWide compiled for AVX2 (see ExpShiftedBest).
__attribute__((target("avx2"))) inline void ExpShiftedAvx2(const double* x, double shift, uint32_t n, double* out) {
  ExpShiftedWide(x, shift, n, out);
}
#endif

/// ExpShifted four lanes at a time where the CPU has AVX2 and TRIBUTARY_SIMD
/// allows it (tributary/simd.h), two otherwise: the same bits either way.
inline void ExpShiftedBest(const double* x, double shift, uint32_t n, double* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx2 = simd::MaxLevel() >= simd::kAvx2;
  if (avx2) return ExpShiftedAvx2(x, shift, n, out);
#endif
  ExpShifted(x, shift, n, out);
}

/// The softmax of the log-scores s (n of them) into p, p_k = exp(s_k - lse),
/// with lse = log sum_k exp(s_k) (sdk::LogSumExp's sums, through the vector
/// exp above: within an ulp or so of std::exp's), which it returns. With no
/// finite score, lse is the largest score (-inf or NaN) and p follows from it.
/// For the losses' p(k | x) (ncll, nll on unlabelled documents).
inline double SoftmaxBest(const double* s, uint32_t n, double* p) {
  double lse = -INFINITY;
  for (uint32_t k = 0; k < n; ++k) lse = s[k] > lse ? s[k] : lse;
  if (std::isfinite(lse)) {
    ExpShiftedBest(s, lse, n, p);
    double sum = 0;
    for (uint32_t k = 0; k < n; ++k) sum += p[k];
    lse += std::log(sum);
  }
  ExpShiftedBest(s, lse, n, p);
  return lse;
}

}  // namespace tributary::vector_exp

#endif  // TRIBUTARY_VECTOR_EXP_H_
