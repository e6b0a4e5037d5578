// The multinomial families' frozen scoring (ABI 1.6; multinomial_core.h):
// Score's sums with the logs taken once per (term, class) for the whole
// model instead of per document: log p(k, x) = a_k - n(x) b_k +
// sum_w n_w L[w][k] with L[w][k] = log x_wk (x = the word count with its
// prior mass, as Score reads it), a_k = log C_k - log sum_j C_j and
// b_k = log M_k. A document then costs one multiply-add per (term, class),
// no log, no range check. The same formula as ScoreScalar, each log rounded
// once: the sums agree with Score's to rounding (tests/predictor_test.cc).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "multinomial_model.h"
#include "multinomial_vector.h"
#include "tributary/huge_pages.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::multinomial {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

struct Frozen {
  uint32_t K = 0;
  uint32_t stride = 0;  // K rounded up to 4: rows aligned for two- and four-lane loops
  uint64_t V = 0;       // rows: the terms in use
  // L[w][k], V x stride (padding lanes 0). 2 MiB-aligned and advised as
  // transparent huge pages once it fills one: a document's rows are scattered
  // over the table (~9 MB for 28,000 terms x 40 classes), one 4 KiB page each,
  // and on 4 KiB pages every row missed the TLB.
  std::unique_ptr<double[], tributary::huge_pages::Free> word;
  std::vector<double> cls;        // a_k (stride)
  std::vector<double> log_total;  // b_k (stride)
  // The document's rows are prefetched, whole, before the sums once the
  // table is larger than a last-level cache holds (kPrefetchBytes): then
  // their misses overlap, ~7 % of a 10^6-term model's scoring
  // (bench/mnb_bench BM_MnbPredictFrozen). A table in the cache gains
  // nothing from it (out-of-order execution loads a few rows ahead) and pays
  // ~4 % of eval's time for the prefetch loop (fortunes, 28,000 terms).
  bool prefetch = false;
};
constexpr size_t kPrefetchBytes = size_t{32} << 20;

// n values, uninitialised (Freeze writes every one), advised as huge pages
// once they fill half a page.
double* AllocateTable(size_t n) {
  const size_t bytes = n * sizeof(double);
  return static_cast<double*>(tributary::huge_pages::Allocate(bytes, bytes >= tributary::huge_pages::kLargeBytes));
}

}  // namespace

int Freeze(const trib_family_model* mm, const trib_stats* s, trib_frozen** out, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto f = std::make_unique<Frozen>();
    f->K = m->K;
    f->stride = (m->K + 3) & ~3u;
    f->V = m->V;
    const trib_block& cb = s->blocks[0];
    const trib_block& wb = s->blocks[1];
    const double wscale = wb.scale, wshift = wb.shift * wb.alpha_bar;
    f->word.reset(AllocateTable(f->V * f->stride));
    f->prefetch = f->V * f->stride * sizeof(double) > kPrefetchBytes;
    f->cls.assign(f->stride, 0.0);
    f->log_total.assign(f->stride, 0.0);
    const double log_ctot = std::log(cb.scale * m->raw_class_total + cb.shift * cb.alpha_bar * m->K);
    for (uint32_t k = 0; k < m->K; ++k) {
      f->cls[k] = std::log(cb.scale * s->raw[k] + cb.shift * cb.alpha_bar) - log_ctot;
      f->log_total[k] = std::log(wscale * m->raw_word_total[k] + wshift * static_cast<double>(m->V));
    }
    // The table's logs two at a time with Score's vector log (within 1 ulp of
    // std::log, which takes the lanes it does not handle: zero, subnormal,
    // inf, NaN): a log per statistic is most of what freezing costs.
    const double* base = s->raw + m->word_offset;
    const v2d vscale = Splat(wscale), vshift = Splat(wshift);
    for (uint64_t w = 0; w < f->V; ++w) {
      const double* row = base + w * m->S;
      double* dst = f->word.get() + w * f->stride;
      uint32_t k = 0;
      for (; k + 2 <= m->K; k += 2) {
        const v2d x = vscale * Load2(row + k) + vshift;
        v2d y = LogPositiveNormal(x);
        const v2i normal = NormalMask(x);
        if ((normal[0] & normal[1]) == 0) {
          if (!normal[0]) y[0] = std::log(x[0]);
          if (!normal[1]) y[1] = std::log(x[1]);
        }
        std::memcpy(dst + k, &y, sizeof y);
      }
      for (; k < m->K; ++k) dst[k] = std::log(wscale * row[k] + wshift);
      for (; k < f->stride; ++k) dst[k] = 0.0;  // padding lanes
    }
    *out = reinterpret_cast<trib_frozen*>(f.release());
    return TRIB_OK;
  });
}

void FrozenDestroy(trib_frozen* f) { delete reinterpret_cast<Frozen*>(f); }

namespace {

// The rows' sum: acc[k] += n_j row_j[k] over the document's terms, in
// term order (the same sums on every path, so the bits do not depend on the
// CPU or on TRIBUTARY_SIMD, tributary/simd.h: the AVX-512 clone is compiled
// without FMA contraction, which AVX-512 F would otherwise allow;
// tests/cli/simd_levels.sh compares).
//
// The sums stay in registers across the rows, up to eight vectors of them
// (a chunk of the classes), and the chunks take turns over the rows: kept in
// memory, each row's add waited on the store of the row before (a
// store-to-load chain per row, ~3x the adds' own latency on 40 classes).
// Every count multiplies its row: n x r is r, bit for bit, at n = 1 (no
// branch on the count, which mispredicted on the counts of 2).
#define TRIB_SUM_CHUNK_BODY(V)                                            \
  constexpr uint32_t W = sizeof(V) / sizeof(double);                      \
  V a[N];                                                                 \
  for (int i = 0; i < N; ++i) std::memcpy(&a[i], acc + i * W, sizeof(V)); \
  for (uint32_t j = 0; j < T; ++j) {                                      \
    const double* row = table + static_cast<uint64_t>(ids[j]) * stride;   \
    V n = {};                                                             \
    for (uint32_t l = 0; l < W; ++l) n[l] = counts[j];                    \
    for (int i = 0; i < N; ++i) {                                         \
      V r;                                                                \
      std::memcpy(&r, row + i * W, sizeof(V));                            \
      a[i] += n * r;                                                      \
    }                                                                     \
  }                                                                       \
  for (int i = 0; i < N; ++i) std::memcpy(acc + i * W, &a[i], sizeof(V));

// The chunks: eight vectors at a time, then the rest (1 .. 7 vectors), then
// (AVX-512, whose vectors hold eight lanes) a last half vector of four: the
// stride is a multiple of four.
#define TRIB_SUM_CHUNK_CASE(CHUNK, n)                     \
  case n:                                                 \
    CHUNK<n>(acc + k, table + k, stride, ids, counts, T); \
    break;
#define TRIB_SUM_ROWS_BODY(CHUNK, V)                                                            \
  constexpr uint32_t W = sizeof(V) / sizeof(double);                                            \
  uint32_t k = 0;                                                                               \
  for (; k + 8 * W <= stride; k += 8 * W) CHUNK<8>(acc + k, table + k, stride, ids, counts, T); \
  switch ((stride - k) / W) {                                                                   \
    TRIB_SUM_CHUNK_CASE(CHUNK, 7)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 6)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 5)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 4)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 3)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 2)                                                               \
    TRIB_SUM_CHUNK_CASE(CHUNK, 1)                                                               \
    default:                                                                                    \
      break;                                                                                    \
  }                                                                                             \
  k += (stride - k) / W * W;

#define TRIB_SUM_CHUNK_ARGS                                                                                \
  double *__restrict acc, const double *__restrict table, uint32_t stride, const uint32_t *__restrict ids, \
      const double *__restrict counts, uint32_t T

template <int N>
void ChunkSse2(TRIB_SUM_CHUNK_ARGS) {
  TRIB_SUM_CHUNK_BODY(v2d)
}
void SumRowsSse2(TRIB_SUM_CHUNK_ARGS) { TRIB_SUM_ROWS_BODY(ChunkSse2, v2d) }

template <int N>
__attribute__((target("avx2"))) void ChunkAvx2(TRIB_SUM_CHUNK_ARGS) {
  TRIB_SUM_CHUNK_BODY(v4d)
}
__attribute__((target("avx2"))) void SumRowsAvx2(TRIB_SUM_CHUNK_ARGS) { TRIB_SUM_ROWS_BODY(ChunkAvx2, v4d) }

// AVX-512 F implies FMA: a contracted a * b + c would change the last digit
// of the sums (eval's hinge showed it), so contraction is off here
// (TRIB_NO_FP_CONTRACT, simd.h; for clang the pragma in multinomial_model.h).
template <int N>
__attribute__((target("avx512f") TRIB_NO_FP_CONTRACT)) void ChunkAvx512(TRIB_SUM_CHUNK_ARGS) {
  TRIB_SUM_CHUNK_BODY(v8d)
}
template <int N>
__attribute__((target("avx512f") TRIB_NO_FP_CONTRACT)) void ChunkAvx512Half(TRIB_SUM_CHUNK_ARGS) {
  TRIB_SUM_CHUNK_BODY(v4d)
}
__attribute__((target("avx512f") TRIB_NO_FP_CONTRACT)) void SumRowsAvx512(TRIB_SUM_CHUNK_ARGS) {
  TRIB_SUM_ROWS_BODY(ChunkAvx512, v8d)
  if (k < stride) ChunkAvx512Half<1>(acc + k, table + k, stride, ids, counts, T);
}
#undef TRIB_SUM_ROWS_BODY
#undef TRIB_SUM_CHUNK_CASE
#undef TRIB_SUM_CHUNK_BODY
#undef TRIB_SUM_CHUNK_ARGS

const bool kSumRowsAvx2 = tributary::simd::MaxLevel() >= tributary::simd::kAvx2;
const bool kSumRowsAvx512 = tributary::simd::MaxLevel() >= tributary::simd::kAvx512;

}  // namespace

int ScoreFrozen(const trib_family_model*, const trib_frozen* ff, trib_family_state* ss, const trib_document* d,
                double* out, trib_error* err) {
  return Guard(err, [&] {
    const Frozen* f = reinterpret_cast<const Frozen*>(ff);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t stride = f->stride;
    if (st->prod.size() < stride) st->prod.resize(stride);
    double* __restrict acc = st->prod.data();
    const double total = d->total_count;
    for (uint32_t k = 0; k < stride; ++k) acc[k] = f->cls[k] - total * f->log_total[k];
    const uint32_t T = d->num_terms;
    for (uint32_t j = 0; j < T; ++j) {
      if (d->term_ids[j] >= f->V) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "term id %llu >= vocabulary size %llu",
                    static_cast<unsigned long long>(d->term_ids[j]), static_cast<unsigned long long>(f->V));
      }
    }
    if (f->prefetch) {
      for (uint32_t j = 0; j < T; ++j) {
        const double* row = f->word.get() + static_cast<uint64_t>(d->term_ids[j]) * stride;
        for (uint32_t k = 0; k < stride; k += 8) __builtin_prefetch(row + k);
      }
    }
    if (kSumRowsAvx512) {
      SumRowsAvx512(acc, f->word.get(), stride, d->term_ids, d->term_counts, T);
    } else if (kSumRowsAvx2) {
      SumRowsAvx2(acc, f->word.get(), stride, d->term_ids, d->term_counts, T);
    } else {
      SumRowsSse2(acc, f->word.get(), stride, d->term_ids, d->term_counts, T);
    }
    std::memcpy(out, acc, sizeof(double) * f->K);
    return TRIB_OK;
  });
}

}  // namespace tributary::multinomial
