// CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG) as used by
// snapshots and the write-ahead log.
#ifndef TRIBUTARY_CHECKSUM_H_
#define TRIBUTARY_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace tributary {

/// CRC-32 of n bytes, continuing from `crc` (0 to start). Crc32(b, Crc32(a))
/// equals the CRC of a followed by b.
uint32_t Crc32(const void* data, size_t n, uint32_t crc = 0);

/// LevelDB's CRC mask, for CRCs stored among the bytes of other frames
/// (document stream frames): computing a CRC over data that embeds CRCs is
/// problematic (the CRC of bytes followed by their own CRC is a constant), so
/// what is stored is the CRC rotated and offset. UnmaskCrc32 inverts it.
inline uint32_t MaskCrc32(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
/// The CRC that MaskCrc32 turned into `masked`.
inline uint32_t UnmaskCrc32(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace tributary

#endif  // TRIBUTARY_CHECKSUM_H_
