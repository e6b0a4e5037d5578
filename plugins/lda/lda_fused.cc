// The "lda" family's fused step (ABI 1.7): accumulate, the engine's apply
// and commit (lda_step.cc) in one pass over the document's topic rows, with
// the same bits as the three calls (plugin-check 'fused-step'); DLDA and
// learn_alpha take the general path, the three calls' arithmetic on a delta.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "lda_cvb0.h"
#include "lda_family.h"
#include "lda_model.h"
#include "lda_topics.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::lda {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;
using tributary::sdk::NonFiniteBit;

// (clang: no contraction in the fused step's kernels below, whose AVX-512
// build could otherwise fuse; GCC: TRIB_NO_FP_CONTRACT on that build.)
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#endif
// One topic row of the fused step, W lanes at a time (no fused multiply-add,
// so every width gives the bits of the scalar expressions): dv_k = c row_k
// (vi: (c et_k) row_k, Accumulate's order), old_k = r_k, r_k = old_k + dv_k
// mult. Returns the non-finite bits of the dv_k; *feasible = every
// scale r_k + prior > 0 (NaN fails it). When feasible, the row's change joins
// the totals here, total_k += r_k - old_k (the caller's scalar loop's
// bits); otherwise the caller clamps the row first and adds it itself.
template <int W, typename R = double>
__attribute__((always_inline)) inline uint64_t FusedRowT(double* __restrict r, double* __restrict old,
                                                         double* __restrict total, const R* __restrict row,
                                                         const double* __restrict et, double c, double mult,
                                                         double scale, double prior, uint32_t K, bool* feasible) {
  using V = typename tributary::lda::VecOf<W>::type;
  using L = typename tributary::lda::VecOf<W>::mask;
  const V vz = {};
  const L lz = {};
  const V vc = vz + c, vm = vz + mult, vs = vz + scale, vp = vz + prior;
  const L exp_bits = lz + static_cast<int64_t>(0x7ff0000000000000ull);
  const L exp_one = lz + static_cast<int64_t>(0x0010000000000000ull);
  L bad = lz, ok = lz - 1;
  uint32_t k = 0;
  for (; k + W <= K; k += W) {
    V x, o;
    if constexpr (std::is_same_v<R, float>) {  // (float to double: exact)
      typedef float F __attribute__((vector_size(4 * W)));
      F f;
      std::memcpy(&f, row + k, sizeof(F));
      x = __builtin_convertvector(f, V);
    } else {
      std::memcpy(&x, row + k, sizeof(V));
    }
    std::memcpy(&o, r + k, sizeof(V));
    V dv;
    if (et != nullptr) {
      V e;
      std::memcpy(&e, et + k, sizeof(V));
      dv = (vc * e) * x;
    } else {
      dv = vc * x;
    }
    const V v = o + dv * vm;
    std::memcpy(old + k, &o, sizeof(V));
    std::memcpy(r + k, &v, sizeof(V));
    L bits;
    std::memcpy(&bits, &dv, sizeof(V));
    bad |= (bits & exp_bits) + exp_one;
    ok &= (vs * v + vp) > vz;
  }
  uint64_t nonfinite = 0;
  bool all = true;
  for (int l = 0; l < W; ++l) {
    nonfinite |= static_cast<uint64_t>(bad[l]);
    all &= ok[l] != 0;
  }
  for (; k < K; ++k) {
    const double x = row[k];
    const double dv = et != nullptr ? c * et[k] * x : c * x;
    const double o = r[k];
    const double v = o + dv * mult;
    old[k] = o;
    r[k] = v;
    nonfinite |= NonFiniteBit(dv);
    all &= scale * v + prior > 0;
  }
  *feasible = all;
  if (all) {
    uint32_t q = 0;
    for (; q + W <= K; q += W) {
      V t, v, o;
      std::memcpy(&t, total + q, sizeof(V));
      std::memcpy(&v, r + q, sizeof(V));
      std::memcpy(&o, old + q, sizeof(V));
      t += v - o;
      std::memcpy(total + q, &t, sizeof(V));
    }
    for (; q < K; ++q) total[q] += r[q] - old[q];
  }
  return nonfinite;
}

using FusedRowFn = uint64_t (*)(double*, double*, double*, const double*, const double*, double, double, double, double,
                                uint32_t, bool*);
TRIB_KEEP_LOOPS uint64_t FusedRowSse2(double* r, double* old, double* total, const double* row, const double* et,
                                      double c, double mult, double scale, double prior, uint32_t K, bool* feasible) {
  return FusedRowT<2>(r, old, total, row, et, c, mult, scale, prior, K, feasible);
}
#ifdef TRIB_LDA_HAVE_AVX2
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowAvx2(double* r, double* old, double* total,
                                                                      const double* row, const double* et, double c,
                                                                      double mult, double scale, double prior,
                                                                      uint32_t K, bool* feasible) {
  return FusedRowT<4>(r, old, total, row, et, c, mult, scale, prior, K, feasible);
}
#endif
const FusedRowFn g_fused_row =
#ifdef TRIB_LDA_HAVE_AVX2
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? FusedRowAvx2 :
#endif
                                                          FusedRowSse2;
// The same with phi as floats (cvb0's float kernel; et unused).
using FusedRowFloatFn = uint64_t (*)(double*, double*, double*, const float*, double, double, double, double, uint32_t,
                                     bool*);
TRIB_KEEP_LOOPS uint64_t FusedRowFloatSse2(double* r, double* old, double* total, const float* row, double c,
                                           double mult, double scale, double prior, uint32_t K, bool* feasible) {
  return FusedRowT<2, float>(r, old, total, row, nullptr, c, mult, scale, prior, K, feasible);
}
#ifdef TRIB_LDA_HAVE_AVX2
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowFloatAvx2(double* r, double* old, double* total,
                                                                           const float* row, double c, double mult,
                                                                           double scale, double prior, uint32_t K,
                                                                           bool* feasible) {
  return FusedRowT<4, float>(r, old, total, row, nullptr, c, mult, scale, prior, K, feasible);
}
#endif
const FusedRowFloatFn g_fused_row_float =
#ifdef TRIB_LDA_HAVE_AVX2
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? FusedRowFloatAvx2 :
#endif
                                                          FusedRowFloatSse2;

// All T topic rows of a document whose phi is cvb0's floats (rows of Kp),
// K = NV W: FusedRowT row after row (old values to old, T x K), with the
// totals held in registers across the rows; an infeasible row is clamped
// to clamp_raw where scale r + prior <= 0 and then added, as FusedStep's
// scalar loop does. The same bits as FusedRowT and that loop.
template <int W, int NV>
__attribute__((always_inline)) inline uint64_t FusedRowsFloatT(double* __restrict raw, double* __restrict old,
                                                               double* __restrict total, const uint32_t* ids,
                                                               const double* counts, uint32_t T,
                                                               const float* __restrict phi, uint32_t Kp, double wsum,
                                                               double mult, double scale, double prior,
                                                               double clamp_raw) {
  using V = typename tributary::lda::VecOf<W>::type;
  using L = typename tributary::lda::VecOf<W>::mask;
  typedef float F __attribute__((vector_size(4 * W)));
  constexpr uint32_t K = NV * W;
  const V vz = {};
  const L lz = {};
  const V vm = vz + mult, vs = vz + scale, vp = vz + prior;
  const L exp_bits = lz + static_cast<int64_t>(0x7ff0000000000000ull);
  const L exp_one = lz + static_cast<int64_t>(0x0010000000000000ull);
  L bad = lz;
  V tot[NV];
  for (int v = 0; v < NV; ++v) std::memcpy(&tot[v], total + v * W, sizeof(V));
  for (uint32_t j = 0; j < T; ++j) {
    double* r = raw + static_cast<uint64_t>(ids[j]) * K;
    double* o = old + static_cast<size_t>(j) * K;
    const float* x = phi + static_cast<size_t>(j) * Kp;
    const V vc = vz + wsum * counts[j];
    L ok = lz - 1;
    V next[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      F f;
      std::memcpy(&f, x + v * W, sizeof(F));
      V was;
      std::memcpy(&was, r + v * W, sizeof(V));
      const V dv = vc * __builtin_convertvector(f, V);
      const V now = was + dv * vm;
      std::memcpy(o + v * W, &was, sizeof(V));
      std::memcpy(r + v * W, &now, sizeof(V));
      L bits;
      std::memcpy(&bits, &dv, sizeof(V));
      bad |= (bits & exp_bits) + exp_one;
      ok &= (vs * now + vp) > vz;
      next[v] = tot[v] + (now - was);
    }
    bool all = true;
    for (int l = 0; l < W; ++l) all &= ok[l] != 0;
    if (all) {
      for (int v = 0; v < NV; ++v) tot[v] = next[v];
    } else {  // (NLL steps only add: rounding, or a loss with negative weights)
      double t[K];
      std::memcpy(t, tot, sizeof t);
      for (uint32_t k = 0; k < K; ++k) {
        if (!(scale * r[k] + prior > 0)) r[k] = clamp_raw;
      }
      for (uint32_t k = 0; k < K; ++k) t[k] += r[k] - o[k];
      std::memcpy(tot, t, sizeof t);
    }
  }
  for (int v = 0; v < NV; ++v) std::memcpy(total + v * W, &tot[v], sizeof(V));
  uint64_t nonfinite = 0;
  for (int l = 0; l < W; ++l) nonfinite |= static_cast<uint64_t>(bad[l]);
  return nonfinite;
}

#define TRIB_FUSED_ROWS_ARGS                                                                                        \
  double *raw, double *old, double *total, const uint32_t *ids, const double *counts, uint32_t T, const float *phi, \
      uint32_t Kp, double wsum, double mult, double scale, double prior, double clamp_raw
#define TRIB_FUSED_ROWS_PASS raw, old, total, ids, counts, T, phi, Kp, wsum, mult, scale, prior, clamp_raw
using FusedRowsFloatFn = uint64_t (*)(TRIB_FUSED_ROWS_ARGS);
template <int NV>
TRIB_KEEP_LOOPS uint64_t FusedRowsFloatSse2(TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<2, NV>(TRIB_FUSED_ROWS_PASS);
}
#ifdef TRIB_LDA_HAVE_AVX2
template <int NV>
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowsFloatAvx2(TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<4, NV>(TRIB_FUSED_ROWS_PASS);
}
// The AVX2 build where the CPU has AVX-512 VL: the same 256-bit operations
// with 32 vector registers (the totals, the row and its masks without
// spilling), not contracted into FMA.
template <int NV>
TRIB_KEEP_LOOPS __attribute__((target("avx2,avx512f,avx512vl") TRIB_NO_FP_CONTRACT)) uint64_t FusedRowsFloatAvx512(
    TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<4, NV>(TRIB_FUSED_ROWS_PASS);
}
#endif
#undef TRIB_FUSED_ROWS_ARGS
#undef TRIB_FUSED_ROWS_PASS
#if defined(__clang__)
#pragma float_control(pop)
#endif

// FusedRowsFloatT for K topics on this CPU, or nullptr when K is not a
// multiple of the lanes or its totals need more than eight vectors (then
// FusedRowT row by row).
FusedRowsFloatFn FusedRowsFloatFor(uint32_t K) {
  static const FusedRowsFloatFn kSse2[8] = {FusedRowsFloatSse2<1>, FusedRowsFloatSse2<2>, FusedRowsFloatSse2<3>,
                                            FusedRowsFloatSse2<4>, FusedRowsFloatSse2<5>, FusedRowsFloatSse2<6>,
                                            FusedRowsFloatSse2<7>, FusedRowsFloatSse2<8>};
  const FusedRowsFloatFn* table = kSse2;
  uint32_t W = 2;
#ifdef TRIB_LDA_HAVE_AVX2
  static const FusedRowsFloatFn kAvx2[8] = {FusedRowsFloatAvx2<1>, FusedRowsFloatAvx2<2>, FusedRowsFloatAvx2<3>,
                                            FusedRowsFloatAvx2<4>, FusedRowsFloatAvx2<5>, FusedRowsFloatAvx2<6>,
                                            FusedRowsFloatAvx2<7>, FusedRowsFloatAvx2<8>};
  static const FusedRowsFloatFn kAvx512[8] = {FusedRowsFloatAvx512<1>, FusedRowsFloatAvx512<2>, FusedRowsFloatAvx512<3>,
                                              FusedRowsFloatAvx512<4>, FusedRowsFloatAvx512<5>, FusedRowsFloatAvx512<6>,
                                              FusedRowsFloatAvx512<7>, FusedRowsFloatAvx512<8>};
  if (tributary::simd::MaxLevel() >= tributary::simd::kAvx2) {
    table = kAvx2;
    W = 4;
  }
  if (tributary::simd::Avx512With(tributary::simd::Feature::kAvx512Vl)) table = kAvx512;
#endif
  if (K == 0 || K % W != 0 || K / W > 8) return nullptr;
  return table[K / W - 1];
}

int GrowFusedDelta(trib_delta* d, size_t min_capacity) {
  auto* st = static_cast<State*>(d->host);
  const size_t cap = std::max(min_capacity, d->capacity * 2);
  try {
    st->fused_index.resize(cap);
    st->fused_value.resize(cap);
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  d->index = st->fused_index.data();
  d->value = st->fused_value.data();
  d->capacity = cap;
  return TRIB_OK;
}

// The general path (DLDA's labelled rows and label statistics, learn_alpha's
// entries): Accumulate's delta, applied entry by entry as the engine applies
// it (raw += value * rho / scale of the entry's block, each run logged before
// it is written), then Commit on the same indices and old values.
int FusedGeneral(trib_family_model* mm, trib_stats* s, trib_family_state* ss, const trib_document* d, const double* w,
                 const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err) {
  auto* st = reinterpret_cast<State*>(ss);
  if (st->fused_index.empty()) {
    st->fused_index.resize(1024);
    st->fused_value.resize(1024);
  }
  trib_delta delta{st->fused_index.data(), st->fused_value.data(), 0, st->fused_index.size(), st, &GrowFusedDelta};
  if (int rc = Accumulate(mm, s, ss, d, w, &delta, err); rc != TRIB_OK) return rc;
  const size_t n = delta.size;
  if ((log->runs + n > log->run_capacity || log->values + n > log->value_capacity) &&
      log->grow(log, log->runs + n, log->values + n) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the step log to %zu entries", log->values + n);
  }
  double* old = log->old_raw + log->values;
  uint32_t b = 0;
  for (size_t e = 0; e < n; ++e) {
    const uint64_t i = delta.index[e];
    if (i >= s->size) {
      return Fail(err, TRIB_ERR_INTERNAL, "statistic index %llu >= %llu", static_cast<unsigned long long>(i),
                  static_cast<unsigned long long>(s->size));
    }
    if (!std::isfinite(delta.value[e])) {
      return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (entry %llu)",
                  static_cast<unsigned long long>(i));
    }
    while (!(i >= s->blocks[b].offset && i - s->blocks[b].offset < s->blocks[b].size)) {
      b = b + 1 < s->num_blocks ? b + 1 : 0;  // (the delta runs through one block at a time)
    }
    // One run per stretch of consecutive indices (a term's row).
    if (e > 0 && delta.index[e - 1] + 1 == i) {
      ++log->length[log->runs - 1];
    } else {
      log->start[log->runs] = i;
      log->length[log->runs++] = 1;
    }
    old[e] = s->raw[i];
    ++log->values;
    s->raw[i] += delta.value[e] * block_mult[b];
  }
  return Commit(mm, s, delta.index, old, n, step, err);
}

}  // namespace

// Accumulate, the engine's apply and Commit in one pass over the document's
// topic rows: raw_wk += ((sum_k w_k) n_w phi_wk) * rho / scale (vi: phi_wk =
// et_k row_wk / phinorm_w, Accumulate's products in its order), the check-step
// mu_wk > 0 and the totals R_k += raw_new - raw_old, row after row as Commit
// takes them: the same bits as the three calls (plugin-check 'fused-step'),
// without the (index, value) delta, the engine's second read of it and its
// copy of the old values that Commit reads back (together a fifth of a CVB0
// training step at K = 20). DLDA and learn_alpha take FusedGeneral.
int FusedStep(trib_family_model* mm, trib_stats* s, trib_family_state* ss, const trib_document* d, const double* w,
              const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (m->discriminative || m->learn_alpha) return FusedGeneral(mm, s, ss, d, w, block_mult, step, log, err);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K, T = d->num_terms;
    double wsum = 0;
    for (uint32_t k = 0; k < K; ++k) wsum += w[k];
    if (wsum != 0 && T != 0) {
      if (!st->scored.Matches(*d, m->t)) LocalStep(*m, *s, *d, st);  // not right after score() on this document
      st->scored.valid = false;
      const size_t values = static_cast<size_t>(T) * K;
      if ((log->runs + T > log->run_capacity || log->values + values > log->value_capacity) &&
          log->grow(log, log->runs + T, log->values + values) != 0) {
        return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the step log to %zu entries", log->values + values);
      }
      const trib_block& blk = s->blocks[0];
      const double mult = block_mult[0], scale = blk.scale, prior = blk.shift * blk.alpha_bar;
      const double floor = tributary::lda::Floor(*m, *step);
      st->fused_total = m->raw_total;  // (written back only when every entry was finite)
      double* __restrict total = st->fused_total.data();
      double* __restrict raw = s->raw;
      uint64_t nonfinite = 0;
      const uint32_t Kp = tributary::lda::Cvb0Stride(K);
      const FusedRowsFloatFn rows_fn = st->phi_float ? FusedRowsFloatFor(K) : nullptr;
      if (rows_fn != nullptr) {  // every row at once, the totals in registers
        for (uint32_t j = 0; j < T; ++j) {
          log->start[log->runs] = static_cast<uint64_t>(d->term_ids[j]) * K;
          log->length[log->runs++] = K;
        }
        double* __restrict old = log->old_raw + log->values;
        log->values += static_cast<size_t>(T) * K;
        nonfinite |= rows_fn(raw, old, total, d->term_ids, d->term_counts, T, st->fphi.data(), Kp, wsum, mult, scale,
                             prior, RawForFloor(blk, floor));
      } else {  // row by row
        for (uint32_t j = 0; j < T; ++j) {
          const uint64_t base = static_cast<uint64_t>(d->term_ids[j]) * K;
          log->start[log->runs] = base;
          log->length[log->runs++] = K;
          double* __restrict old = log->old_raw + log->values;
          log->values += K;
          double* __restrict r = raw + base;
          bool feasible = true;
          if (st->phi_float) {  // cvb0: phi in fphi
            nonfinite |= g_fused_row_float(r, old, total, st->fphi.data() + static_cast<size_t>(j) * Kp,
                                           wsum * d->term_counts[j], mult, scale, prior, K, &feasible);
          } else {
            const double* __restrict row = st->rows.data() + static_cast<size_t>(j) * K;
            const double c = st->phi_ready ? wsum * d->term_counts[j] : wsum * d->term_counts[j] / st->phinorm[j];
            nonfinite |= g_fused_row(r, old, total, row, st->phi_ready ? nullptr : st->et.data(), c, mult, scale, prior,
                                     K, &feasible);
          }
          if (!feasible) {  // (NLL steps only add: rounding, or a loss with negative weights)
            for (uint32_t k = 0; k < K; ++k) {
              if (!(scale * r[k] + prior > 0)) r[k] = RawForFloor(blk, floor);
            }
            for (uint32_t k = 0; k < K; ++k) total[k] += r[k] - old[k];
          }
        }
      }
      if ((nonfinite >> 63) != 0) {
        return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (a topic row of the document)");
      }
      m->raw_total.swap(st->fused_total);
    }
    m->n = step->n;
    m->t = step->t + 1;
    return TRIB_OK;
  });
}

}  // namespace tributary::lda
