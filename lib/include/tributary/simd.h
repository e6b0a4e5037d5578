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

// (Not under clang: glibc's header spells bool as C's _Bool, which clang
// refuses in C++; clang builds, the fuzz targets, ask GCC's way below.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>  // glibc >= 2.33: what ld.so found at start-up
#define TRIB_SIMD_GLIBC_CPU_FEATURES 1
#endif
#endif

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

/// Instruction-set extensions the kernels ask about.
enum class Feature { kAvx, kAvx2, kAvx512F, kAvx512Dq, kAvx512Vl };

/// Whether the CPU has `f` and the OS keeps its registers (what
/// __builtin_cpu_supports answers). Read from glibc's record of the CPU,
/// made once by the dynamic loader at start-up, where glibc has one: GCC's
/// __builtin_cpu_init runs a dozen cpuid instructions in every binary that
/// asks (the program, each plugin), and under a hypervisor each cpuid traps
/// (~3.5 us on the machine of bench/LDA_RESULTS.md: ~0.15 ms of a one-document
/// `train`).
inline bool CpuHas(Feature f) {
#if defined(TRIB_SIMD_GLIBC_CPU_FEATURES)
  switch (f) {
    case Feature::kAvx:
      return CPU_FEATURE_ACTIVE(AVX);
    case Feature::kAvx2:
      return CPU_FEATURE_ACTIVE(AVX2);
    case Feature::kAvx512F:
      return CPU_FEATURE_ACTIVE(AVX512F);
    case Feature::kAvx512Dq:
      return CPU_FEATURE_ACTIVE(AVX512DQ);
    case Feature::kAvx512Vl:
      return CPU_FEATURE_ACTIVE(AVX512VL);
  }
  return false;
#elif defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();  // may run from a static initialiser, before the runtime's own
  switch (f) {
    case Feature::kAvx:
      return __builtin_cpu_supports("avx");
    case Feature::kAvx2:
      return __builtin_cpu_supports("avx2");
    case Feature::kAvx512F:
      return __builtin_cpu_supports("avx512f");
    case Feature::kAvx512Dq:
      return __builtin_cpu_supports("avx512dq");
    case Feature::kAvx512Vl:
      return __builtin_cpu_supports("avx512vl");
  }
  return false;
#else
  (void)f;
  return false;
#endif
}

enum Level : int {
  kSse2 = 0,    ///< the x86-64 baseline (and every other architecture)
  kAvx2 = 1,    ///< AVX2 (without FMA)
  kAvx512 = 2,  ///< AVX-512 F (kernels compiled without FMA contraction)
};

/// The level the CPU supports, capped by TRIBUTARY_SIMD (see the file comment).
inline int MaxLevel() {
  static const int level = [] {
    int cpu = kSse2;
    if (CpuHas(Feature::kAvx2)) cpu = kAvx2;
    if (cpu == kAvx2 && CpuHas(Feature::kAvx512F)) cpu = kAvx512;
    int cap = kAvx512;
    if (const char* e = std::getenv("TRIBUTARY_SIMD")) {
      if (std::strcmp(e, "sse2") == 0) cap = kSse2;
      if (std::strcmp(e, "avx2") == 0) cap = kAvx2;
    }
    return std::min(cpu, cap);
  }();
  return level;
}

/// For kernels built for AVX-512 F plus another extension (DQ, VL): the
/// level allows AVX-512 (the CPU has F, TRIBUTARY_SIMD does not cap it) and
/// the CPU has `f` too.
inline bool Avx512With(Feature f) { return MaxLevel() >= kAvx512 && CpuHas(f); }

}  // namespace tributary::simd

#endif  // TRIBUTARY_SIMD_H_
