// tributary/simd.h: the CPU's features as the kernels' dispatch reads them.
#include "tributary/simd.h"

#include <gtest/gtest.h>

namespace tributary {
namespace {

using simd::CpuHas;
using simd::Feature;

// CpuHas reads glibc's record of the CPU (no cpuid of its own); it must
// answer what GCC's own cpuid-based check answers, feature by feature.
TEST(SimdTest, CpuHasAnswersWhatTheCompilersCheckAnswers) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  EXPECT_EQ(CpuHas(Feature::kAvx), static_cast<bool>(__builtin_cpu_supports("avx")));
  EXPECT_EQ(CpuHas(Feature::kAvx2), static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(CpuHas(Feature::kAvx512F), static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(CpuHas(Feature::kAvx512Dq), static_cast<bool>(__builtin_cpu_supports("avx512dq")));
  EXPECT_EQ(CpuHas(Feature::kAvx512Vl), static_cast<bool>(__builtin_cpu_supports("avx512vl")));
  // Every x86-64 CPU this project runs its kernels on has SSE2 at least;
  // AVX2 implies AVX, and the level follows the features.
  if (CpuHas(Feature::kAvx2)) {
    EXPECT_TRUE(CpuHas(Feature::kAvx));
  }
  if (CpuHas(Feature::kAvx512Vl) || CpuHas(Feature::kAvx512Dq)) {
    EXPECT_TRUE(CpuHas(Feature::kAvx512F));
  }
#else
  for (Feature f : {Feature::kAvx, Feature::kAvx2, Feature::kAvx512F, Feature::kAvx512Dq, Feature::kAvx512Vl}) {
    EXPECT_FALSE(CpuHas(f));
  }
#endif
}

}  // namespace
}  // namespace tributary
