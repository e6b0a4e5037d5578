// The multinomial families' vector kernels: two doubles per operation through
// the GCC/Clang vector extensions: on the x86-64 baseline this is plain SSE2
// (no -march, no -ffast-math); a build with a wider -m flag gets the same code
// on wider registers. Shared by score (multinomial_score.cc), the frozen table
// (multinomial_frozen.cc) and the step (multinomial_step.cc).
#ifndef TRIBUTARY_PLUGINS_MULTINOMIAL_VECTOR_H_
#define TRIBUTARY_PLUGINS_MULTINOMIAL_VECTOR_H_

#include <cstdint>
#include <cstring>

namespace tributary::multinomial {

typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef uint64_t v2u __attribute__((vector_size(16)));
typedef int64_t v2i __attribute__((vector_size(16)));

inline v2d Load2(const double* p) {
  v2d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline v2d Splat(double x) { return v2d{x, x}; }

constexpr uint64_t kMant = 0x000fffffffffffffull, kOne = 0x3ff0000000000000ull;  // mantissa bits, 1.0
constexpr double ln2_hi = 0x1.62e42feep-1;        // 3fe62e42 fee00000 (ln 2 to 32 bits: k ln2_hi is exact)
constexpr double ln2_lo = 0x1.a39ef35793c76p-33;  // 3dea39ef 35793c76 (ln 2 - ln2_hi)

// log(x) for positive normal finite x, both lanes, without branches.
// The algorithm of fdlibm's e_log.c (also musl's former log.c): reduce x to
// 2^k * m with m in [sqrt(2)/2, sqrt(2)), then log(m) = f - hfsq + s (hfsq + R)
// with f = m - 1, s = f / (2 + f) and R a degree-14 minimax polynomial in s.
// Error < 1 ulp; against glibc's std::log on 4e7 inputs (random bit patterns
// over all positive normal doubles, and dense around 1, sqrt(2)/2 and sqrt(2)):
// at most 1 ulp apart, relative difference <= 2.3e-16. Other inputs (0,
// subnormal, negative, inf, NaN) give meaningless values: callers check and
// fall back to std::log.
inline v2d LogPositiveNormal(v2d x) {
  constexpr double Lg1 = 0x1.5555555555593p-1, Lg2 = 0x1.999999997fa04p-2, Lg3 = 0x1.2492494229359p-2,
                   Lg4 = 0x1.c71c51d8e78afp-3, Lg5 = 0x1.7466496cb03dep-3, Lg6 = 0x1.39a09d078c69fp-3,
                   Lg7 = 0x1.2f112df3e5244p-3;
  // Adding (0x3ff00000 - 0x3fe6a09e) to the high word moves the exponent up by
  // one exactly when the mantissa is >= sqrt(2); the mantissa is then re-based
  // on 0x3fe6a09e so that m lands in [sqrt(2)/2, sqrt(2)).
  const v2u ix = reinterpret_cast<v2u>(x) + ((0x3ff00000ull - 0x3fe6a09eull) << 32);
  // k = (ix >> 52) - 1023 as a double, exactly (2^52 + e trick; SSE2 has no
  // 64-bit integer -> double conversion).
  const v2d dk = reinterpret_cast<v2d>((ix >> 52) | 0x4330000000000000ull) - Splat(0x1p52 + 1023.0);
  const v2d m = reinterpret_cast<v2d>((ix & kMant) + (0x3fe6a09eull << 32));
  const v2d f = m - 1.0;
  const v2d hfsq = 0.5 * f * f;
  const v2d s = f / (2.0 + f);
  const v2d z = s * s;
  const v2d w = z * z;
  const v2d t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const v2d t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const v2d R = t2 + t1;
  return s * (hfsq + R) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// All-ones lanes where x is a positive normal finite double (NaN: zero).
inline v2i NormalMask(v2d x) { return (x >= Splat(0x1p-1022)) & (x <= Splat(0x1.fffffffffffffp+1023)); }

}  // namespace tributary::multinomial

#endif  // TRIBUTARY_PLUGINS_MULTINOMIAL_VECTOR_H_
