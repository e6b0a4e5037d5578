// Which vector instruction set the run-time-dispatched kernels use (the
// frozen table's sums, Canonicalize's rank sort, the metrics' exp, LDA's
// CVB0 sweeps): the widest the CPU has, capped by the environment variable
// TRIBUTARY_SIMD ("sse2", "avx2" or "avx512"; anything else, or unset: no
// cap). Every kernel gives the same bits at every level (the same operations
// in the same order, none contracted into an FMA), so the cap changes speed
// only: tests run a program at each level and compare its output byte for
// byte, and a user can compare machines or rule a kernel out.
//
// Header-only, for the library and plugins alike; the level is read once
// per binary (library, plugin), on first use.
#ifndef TRIBUTARY_SIMD_H_
#define TRIBUTARY_SIMD_H_

#include <algorithm>
#include <cstdlib>
#include <cstring>

// For a kernel that logs the values it overwrites (old[k] = r[k] in the
// loop that updates r[k]): GCC splits such a copy out of the loop into a call
// to memcpy (loop distribution), a second pass over the row and a library
// call per row, ~10 % of an NCLL training step on short documents. Put before
// the function: TRIB_KEEP_LOOPS __attribute__((target("avx2"))) void F(...).
// Clang does not split such loops.
#if defined(__GNUC__) && !defined(__clang__)
#define TRIB_KEEP_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define TRIB_KEEP_LOOPS
#endif

// For a kernel compiled for AVX-512 F, which implies FMA: GCC would contract
// a * b + c into one fused multiply-add, which rounds once instead of twice
// and so changes the last digit (the same-bits-at-every-level promise above).
// Put inside a target attribute: __attribute__((target("avx512f")
// TRIB_NO_FP_CONTRACT)). Clang has no optimize attribute and its
// -ffp-contract=on fuses within one expression: a file or header with such
// kernels switches it off with `#pragma clang fp contract(off)` (or STDC
// FP_CONTRACT OFF) around their definitions.
#if defined(__clang__)
#define TRIB_NO_FP_CONTRACT
#else
#define TRIB_NO_FP_CONTRACT , optimize("fp-contract=off")
#endif

namespace tributary::simd {

enum Level : int {
  kSse2 = 0,    ///< the x86-64 baseline (and every other architecture)
  kAvx2 = 1,    ///< AVX2 (without FMA)
  kAvx512 = 2,  ///< AVX-512 F (kernels compiled without FMA contraction)
};

/// The level the CPU supports, capped by TRIBUTARY_SIMD (see the file comment).
inline int MaxLevel() {
  static const int level = [] {
    int cpu = kSse2;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();  // may run from a static initialiser, before the runtime's own
    if (__builtin_cpu_supports("avx2")) cpu = kAvx2;
    if (cpu == kAvx2 && __builtin_cpu_supports("avx512f")) cpu = kAvx512;
#endif
    int cap = kAvx512;
    if (const char* e = std::getenv("TRIBUTARY_SIMD")) {
      if (std::strcmp(e, "sse2") == 0) cap = kSse2;
      if (std::strcmp(e, "avx2") == 0) cap = kAvx2;
    }
    return std::min(cpu, cap);
  }();
  return level;
}

}  // namespace tributary::simd

#endif  // TRIBUTARY_SIMD_H_
