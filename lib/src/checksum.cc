#include "tributary/checksum.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace tributary {

// zlib's crc32 (braided, several bytes per step) instead of a byte-at-a-time
// table: snapshot writes checksum the whole model, and the same CRC (same
// polynomial, initial value and final xor as boost::crc_32_type, which wrote
// earlier files) keeps old snapshots and logs readable.
uint32_t Crc32(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const size_t chunk = std::min<size_t>(n, std::numeric_limits<uInt>::max());
    c = crc32(c, p, static_cast<uInt>(chunk));
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace tributary
