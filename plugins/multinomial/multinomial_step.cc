// The multinomial families' sdEM step (multinomial_core.h): accumulate (the
// document's expected statistics, Table 1), commit (the check-step of
// Algorithm 2 and the running totals) and the fused step (ABI 1.7), which does
// both and the engine's apply in one pass with the same bits.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "multinomial_model.h"
#include "multinomial_vector.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::multinomial {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::NonFiniteBit;

// The classes whose weight is not 0 (Accumulate and FusedStep skip the
// others), in order: index[0 .. count). Up to 64 classes on the stack.
struct ActiveClasses {
  uint32_t small[64];
  std::vector<uint32_t> big;
  const uint32_t* index = small;
  uint32_t count = 0;
  ActiveClasses(const double* w, uint32_t K) {
    uint32_t* act = small;
    if (K > 64) {
      big.resize(K);
      act = big.data();
    }
    for (uint32_t k = 0; k < K; ++k) {  // branch-free: which weights are 0 is data-dependent
      act[count] = k;
      count += w[k] != 0.0;
    }
    index = act;
  }
  ActiveClasses(const ActiveClasses&) = delete;
  ActiveClasses& operator=(const ActiveClasses&) = delete;
};

}  // namespace

// sum_k w_k s(k, x): w_k to C[k] and w_k n_w to N[w][k] (Table 1).
int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t K = m->K;
  ActiveClasses active(w, K);
  const uint32_t* act = active.index;
  const uint32_t na = active.count;
  if (na == 0) return TRIB_OK;
  size_t need = delta->size + na * (static_cast<size_t>(d->num_terms) + 1);
  if (need > delta->capacity && delta->grow(delta, need) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
  }
  uint64_t* __restrict index = delta->index;
  double* __restrict value = delta->value;
  size_t p = delta->size;
  if (na == K) {
    // Every class moves (NCLL: w_k = 1[k = y] - p(k | x)): whole rows.
    for (uint32_t k = 0; k < K; ++k) {
      index[p + k] = k;
      value[p + k] = w[k];
    }
    p += K;
    for (uint32_t j = 0; j < d->num_terms; ++j) {
      const uint64_t row = m->word_offset + static_cast<uint64_t>(d->term_ids[j]) * m->S;
      const double n = d->term_counts[j];
      for (uint32_t k = 0; k < K; ++k) {
        index[p + k] = row + k;
        value[p + k] = w[k] * n;
      }
      p += K;
    }
  } else {
    for (uint32_t a = 0; a < na; ++a) {
      index[p] = act[a];
      value[p++] = w[act[a]];
    }
    for (uint32_t j = 0; j < d->num_terms; ++j) {
      const uint64_t row = m->word_offset + static_cast<uint64_t>(d->term_ids[j]) * m->S;
      const double n = d->term_counts[j];
      for (uint32_t a = 0; a < na; ++a) {
        index[p] = row + act[a];
        value[p++] = w[act[a]] * n;
      }
    }
  }
  delta->size = p;
  return TRIB_OK;
}

namespace {

// max(v, floor) without a branch (which side is data-dependent: NCLL pushes
// many entries below the floor).
inline double ClampAbove(double v, double floor) {
  const v2d x = Splat(v), f = Splat(floor);
  return (x > f ? x : f)[0];
}

}  // namespace

// Check-step (Algorithm 2 lines 15, 22: N = max(N, 0), i.e. raw >= -abar)
// and totals.
// With floor=prior a discriminative step (c = 0) clamps at raw >= 0 instead:
// N >= scale abar, the initial pseudo-count is never taken away (1.0.0's rule;
// NLL steps never reach either floor, so they use the paper's).
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error*) {
  Model* m = M(mm);
  const uint32_t K = m->K, S = m->S;
  const uint64_t off = m->word_offset;
  double* __restrict raw = s->raw;
  double* __restrict total = m->raw_word_total.data();
  double class_total = m->raw_class_total;
  const bool prior_floor = m->prior_floor && step->c == 0.0;
  const double cfloor = prior_floor ? 0.0 : -s->blocks[0].alpha_bar;
  const double wfloor = prior_floor ? 0.0 : -s->blocks[1].alpha_bar;
  // A whole run idx[j..j+K) = first, first + 1, ... (what Accumulate writes
  // when every class moves): checked with xor/or, which vectorises on SSE2
  // unlike a 64-bit ==.
  auto whole_run = [&](size_t j, uint64_t first) {
    if (count - j < K || idx[j + K - 1] != first + K - 1) return false;
    uint64_t diff = 0;
    for (uint32_t k = 0; k < K; ++k) diff |= idx[j + k] ^ (first + k);
    return diff == 0;
  };
  uint64_t row_base = off;  // start of the row (stride S) holding the previous index
  size_t j = 0;
  while (j < count) {
    const uint64_t i = idx[j];
    if (i < off) {
      if (i == 0 && whole_run(j, 0)) {
        const double* o = old_raw + j;
        v2d change = Splat(0.0);
        uint32_t k = 0;
        for (; k + 2 <= K; k += 2) {
          v2d v = Load2(raw + k);
          v = v > Splat(cfloor) ? v : Splat(cfloor);
          std::memcpy(raw + k, &v, sizeof v);
          change += v - Load2(o + k);
        }
        double c = change[0] + change[1];
        if (k < K) {
          const double v = ClampAbove(raw[k], cfloor);
          raw[k] = v;
          c += v - o[k];
        }
        class_total += c;
        j += K;
        continue;
      }
      const double v = ClampAbove(raw[i], cfloor);
      raw[i] = v;
      class_total += v - old_raw[j];
      ++j;
      continue;
    }
    if (i - row_base >= S) row_base = i - (i - off) % S;  // one division per term, not per entry
    if (i == row_base && whole_run(j, i)) {
      double* r = raw + i;
      const double* o = old_raw + j;
      for (uint32_t k = 0; k < K; ++k) {
        const double v = r[k] > wfloor ? r[k] : wfloor;
        r[k] = v;
        total[k] += v - o[k];
      }
      j += K;
      continue;
    }
    const double v = ClampAbove(raw[i], wfloor);
    raw[i] = v;
    total[i - row_base] += v - old_raw[j];
    ++j;
  }
  m->raw_class_total = class_total;
  return TRIB_OK;
}

// ---- The fused step (ABI 1.7) ------------------------------------------------
//
// Accumulate, the engine's apply (raw[i] += d_i rho / scale_b,
// lib/src/learning/sdem_learner.cc) and Commit in one pass over each row the document
// touches: the same operations in the same order on every entry, so the
// statistics and totals come out bit for bit as the three calls leave them
// (plugin-check 'fused-step'), without the (index, value) delta, its second
// read and the engine's copy of the old values that Commit reads back. Under
// NCLL every class moves (K (T + 1) entries a document), which made those
// three passes about half of a training step.

namespace {

// FusedStep's word rows (the dense path): row entry q moves by
// w_q n wmult, floored, its old value logged and its class total updated;
// returns the non-finite bits of the deltas. Entry by entry, so the AVX2
// clone (four entries a vector, no FMA) gives the same bits as the baseline.
#define TRIB_FUSED_ROW_BODY          \
  uint64_t nonfinite = 0;            \
  for (uint32_t q = 0; q < K; ++q) { \
    const double o = rr[q];          \
    const double dv = w[q] * n;      \
    double v = o + dv * wmult;       \
    v = v > wfloor ? v : wfloor;     \
    old[q] = o;                      \
    rr[q] = v;                       \
    total[q] += v - o;               \
    nonfinite |= NonFiniteBit(dv);   \
  }                                  \
  return nonfinite;

TRIB_KEEP_LOOPS uint64_t FusedRowBaseline(double* __restrict rr, double* __restrict old, double* __restrict total,
                                          const double* __restrict w, double n, double wmult, double wfloor,
                                          uint32_t K){TRIB_FUSED_ROW_BODY}
#if defined(__x86_64__)
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t
    FusedRowAvx2(double* __restrict rr, double* __restrict old, double* __restrict total, const double* __restrict w,
                 double n, double wmult, double wfloor, uint32_t K) {
  TRIB_FUSED_ROW_BODY
}
#endif
#undef TRIB_FUSED_ROW_BODY

using FusedRowFn = uint64_t (*)(double*, double*, double*, const double*, double, double, double, uint32_t);
const FusedRowFn kFusedRow =
#if defined(__x86_64__)
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? FusedRowAvx2 :
#endif
                                                          FusedRowBaseline;

}  // namespace

int FusedStep(trib_family_model* mm, trib_stats* s, trib_family_state*, const trib_document* d, const double* w,
              const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err) {
  Model* m = M(mm);
  const uint32_t K = m->K, S = m->S, T = d->num_terms;
  ActiveClasses active(w, K);
  const uint32_t* act = active.index;
  const uint32_t na = active.count;
  if (na == 0) return TRIB_OK;
  const bool dense = na == K;
  const size_t runs = dense ? static_cast<size_t>(T) + 1 : static_cast<size_t>(na) * (T + 1);
  const size_t values = static_cast<size_t>(na) * (T + 1);
  if ((log->runs + runs > log->run_capacity || log->values + values > log->value_capacity) &&
      log->grow(log, log->runs + runs, log->values + values) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the step log to %zu entries", log->values + values);
  }
  uint64_t* __restrict start = log->start + log->runs;
  uint64_t* __restrict length = log->length + log->runs;
  double* __restrict old = log->old_raw + log->values;
  double* __restrict raw = s->raw;
  double* __restrict total = m->raw_word_total.data();
  double class_total = m->raw_class_total;
  const bool prior_floor = m->prior_floor && step->c == 0.0;
  const double cfloor = prior_floor ? 0.0 : -s->blocks[0].alpha_bar;
  const double wfloor = prior_floor ? 0.0 : -s->blocks[1].alpha_bar;
  const double cmult = block_mult[0], wmult = block_mult[1];
  uint64_t nonfinite = 0;
  size_t r = 0;
  if (dense) {
    // The class row as Commit's whole-run path sums it: two lanes, then the
    // odd class.
    start[r] = 0;
    length[r++] = K;
    v2d change = Splat(0.0);
    uint32_t k = 0;
    for (; k + 2 <= K; k += 2) {
      const v2d o = Load2(raw + k);
      std::memcpy(old + k, &o, sizeof o);
      const v2d dv = Load2(w + k);
      v2d v = o + dv * Splat(cmult);
      v = v > Splat(cfloor) ? v : Splat(cfloor);
      std::memcpy(raw + k, &v, sizeof v);
      change += v - o;
      nonfinite |= NonFiniteBit(dv[0]) | NonFiniteBit(dv[1]);
    }
    double c = change[0] + change[1];
    if (k < K) {
      old[k] = raw[k];
      const double v = ClampAbove(raw[k] + w[k] * cmult, cfloor);
      raw[k] = v;
      c += v - old[k];
      nonfinite |= NonFiniteBit(w[k]);
    }
    class_total += c;
    old += K;
    for (uint32_t j = 0; j < T; ++j) {
      const uint64_t row = m->word_offset + static_cast<uint64_t>(d->term_ids[j]) * S;
      const double n = d->term_counts[j];
      start[r] = row;
      length[r++] = K;
      nonfinite |= kFusedRow(raw + row, old, total, w, n, wmult, wfloor, K);
      old += K;
    }
  } else {
    // Entry by entry, as Commit takes a delta that is not whole rows.
    for (uint32_t a = 0; a < na; ++a) {
      const uint32_t k = act[a];
      start[r] = k;
      length[r++] = 1;
      const double o = raw[k];
      *old++ = o;
      const double v = ClampAbove(o + w[k] * cmult, cfloor);
      raw[k] = v;
      class_total += v - o;
      nonfinite |= NonFiniteBit(w[k]);
    }
    for (uint32_t j = 0; j < T; ++j) {
      const uint64_t row = m->word_offset + static_cast<uint64_t>(d->term_ids[j]) * S;
      const double n = d->term_counts[j];
      for (uint32_t a = 0; a < na; ++a) {
        const uint32_t k = act[a];
        start[r] = row + k;
        length[r++] = 1;
        const double o = raw[row + k];
        *old++ = o;
        const double dv = w[k] * n;
        const double v = ClampAbove(o + dv * wmult, wfloor);
        raw[row + k] = v;
        total[k] += v - o;
        nonfinite |= NonFiniteBit(dv);
      }
    }
  }
  log->runs += r;
  log->values += values;
  m->raw_class_total = class_total;
  if ((nonfinite >> 63) != 0) {
    for (uint32_t k = 0; k < K; ++k) {
      if (!std::isfinite(w[k]))
        return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (class %u's weight %g)", k, w[k]);
    }
    return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (a weight times a count overflows)");
  }
  return TRIB_OK;
}

}  // namespace tributary::multinomial
