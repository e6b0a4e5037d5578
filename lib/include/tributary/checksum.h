// CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG) as used by
// snapshots and the write-ahead log.
#ifndef TRIBUTARY_CHECKSUM_H_
#define TRIBUTARY_CHECKSUM_H_

#include <cstddef>
#include <cstdint>

namespace tributary {

// CRC-32 of n bytes, continuing from `crc` (0 to start). Crc32(b, Crc32(a))
// equals the CRC of a followed by b.
uint32_t Crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace tributary

#endif  // TRIBUTARY_CHECKSUM_H_
