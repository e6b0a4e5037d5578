#include "tributary/checksum.h"

#include <isa-l/crc.h>

#include <array>

#include "tributary/simd.h"

namespace tributary {

// The CRC-32 of gzip and zlib (reflected polynomial 0xEDB88320, initial
// value and final xor 0xFFFFFFFF, as boost::crc_32_type, which wrote the
// earliest files), so old snapshots, logs and streams stay readable; ISA-L's
// crc32_gzip_refl computes it with carry-less multiplication (PCLMULQDQ /
// VPCLMULQDQ, chosen at run time) at ~10 GB/s on one core, 3.5x zlib's on
// large buffers and 4-6x on the ~200-byte frames of a document stream
// (tests/checksum_test.cc checks it against zlib's crc32).
namespace {
#if defined(__x86_64__) && defined(__GNUC__)
// ISA-L's AVX-512 / AVX2 kernels return with the upper halves of the vector
// registers dirty; the rest of the program is SSE code (the x86-64 baseline),
// which then runs with false dependencies on those halves (measured: eval of
// bible verses 0.53 s -> 0.71 s with ISA-L until this was added). vzeroupper
// clears them; only on CPUs with AVX, where it exists.
__attribute__((target("avx"))) void ZeroUpper() { __builtin_ia32_vzeroupper(); }
const bool kHaveAvx = tributary::simd::CpuHas(tributary::simd::Feature::kAvx);
#endif

// A byte at a time through a 256-entry table, for the few bytes ISA-L's
// kernels handle slowly (a frame's 1-2 byte length: 14.6 ns through ISA-L,
// ~2 ns here).
constexpr auto kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}();
constexpr size_t kTableMax = 8;

}  // namespace

uint32_t Crc32(const void* data, size_t n, uint32_t crc) {
  if (n <= kTableMax) {
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) crc = (crc >> 8) ^ kCrcTable[(crc ^ p[i]) & 0xffu];
    return ~crc;
  }
  const uint32_t c = crc32_gzip_refl(crc, static_cast<const unsigned char*>(data), n);
#if defined(__x86_64__) && defined(__GNUC__)
  if (kHaveAvx) ZeroUpper();
#endif
  return c;
}

}  // namespace tributary
