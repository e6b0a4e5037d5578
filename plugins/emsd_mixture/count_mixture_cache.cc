// The caches saved with snapshots (ABI 1.1 export_cache / import_cache).
#include <cmath>
#include <cstring>

#include "count_mixture.h"

namespace tributary::count_mixture {

// Cache: T (K), U (K), the frames' smallest reference rates (K) and shifts
// (K), 1 (formerly the decay since the last refresh), commits: the layout of
// version 1.1.0; version 1.4.0 appends the number of revivals (a 1.1.0-1.3.0
// cache, without it, imports with 0: no model before 1.4.0 revived). Import
// restores T, U (so that a loaded model scores exactly as the saved one) and
// the counts; Model::Load runs rebuild() first, which restarts the frames at
// the loaded statistics, and the imported T, U are within the bound of those.
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  const Model& m = *M(mm);
  const size_t need = 4 * static_cast<size_t>(m.K) + 3;
  if (out == nullptr) {
    *size = need;
    return TRIB_OK;
  }
  const size_t K = m.K;
  std::memcpy(out, m.total_mean.data(), K * sizeof(double));
  std::memcpy(out + K, m.total_var.data(), K * sizeof(double));
  std::memcpy(out + 2 * K, m.frame_min_rate.data(), K * sizeof(double));
  std::memcpy(out + 3 * K, m.frame_shift.data(), K * sizeof(double));
  out[4 * K] = 1.0;
  out[4 * K + 1] = static_cast<double>(m.commits);
  out[4 * K + 2] = static_cast<double>(m.revivals);
  *size = need;
  return TRIB_OK;
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model& m = *M(mm);
  const size_t K = m.K;
  if (size != 4 * K + 2 && size != 4 * K + 3) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache has %zu values, expected %zu (or %zu before version 1.4.0)",
                size, 4 * K + 3, 4 * K + 2);
  }
  // Everything is checked before anything is copied: on error the model is
  // unchanged. The update count is a whole number of documents; 2^53 is the
  // largest a double holds exactly (and far beyond any stream), and casting a
  // larger or non-finite double to an integer is undefined behaviour (a
  // snapshot with a valid checksum may hold anything: fuzz finding
  // tests/fuzz/findings/snapshot/huge-update-count).
  // Values [2K, 4K) (the SEP frames' bookkeeping, where +inf is a valid
  // "no rate seen yet") are informational: the frames restart on import.
  for (size_t i = 0; i < size; ++i) {
    if (i >= 2 * K && i < 4 * K) continue;
    if (!std::isfinite(in[i])) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache value %zu is %g, expected a finite number", i, in[i]);
    }
  }
  // The update count and the revival count (0 when the cache predates it).
  const double counts[2] = {in[4 * K + 1], size > 4 * K + 2 ? in[4 * K + 2] : 0.0};
  for (size_t c = 0; c < 2; ++c) {
    if (counts[c] < 0 || counts[c] > 0x1p53 || counts[c] != std::floor(counts[c])) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache value %zu (%s) is %g, expected a whole number in [0, 2^53]",
                  4 * K + 1 + c, c == 0 ? "updates" : "revivals", counts[c]);
    }
  }
  std::memcpy(m.total_mean.data(), in, K * sizeof(double));
  std::memcpy(m.total_var.data(), in + K, K * sizeof(double));
  m.commits = static_cast<uint64_t>(counts[0]);
  m.revivals = static_cast<uint64_t>(counts[1]);
  return TRIB_OK;
}

}  // namespace tributary::count_mixture
