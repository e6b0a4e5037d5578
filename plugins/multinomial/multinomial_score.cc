// The multinomial families' score (multinomial_core.h):
// log p(k, x) = log p(k) + sum_w n_w log p(w | k)   (Algorithm 3, without the
// multinomial coefficient, which is the same for every class).
// One log per class instead of one per (term, class) on the fast path, the
// reference form when the fast path meets a value it does not handle.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "multinomial_model.h"
#include "multinomial_vector.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::multinomial {
namespace {

using tributary::sdk::Guard;

// The reference form, one std::log per (term, class): used when the fast path
// meets a value it does not handle (zero, subnormal, inf or NaN statistics).
void ScoreScalar(const Model* m, const trib_stats* s, const trib_document* d, double* out) {
  const uint32_t K = m->K;
  const trib_block& cb = s->blocks[0];
  const trib_block& wb = s->blocks[1];
  const double log_ctot = std::log(cb.scale * m->raw_class_total + cb.shift * cb.alpha_bar * K);
  const double wshift = wb.shift * wb.alpha_bar;
  const double wscale = wb.scale;
  const double total = d->total_count;
  for (uint32_t k = 0; k < K; ++k) {
    const double mk = wscale * m->raw_word_total[k] + wshift * static_cast<double>(m->V);
    out[k] = std::log(cb.scale * s->raw[k] + cb.shift * cb.alpha_bar) - log_ctot - total * std::log(mk);
  }
  const double* base = s->raw + m->word_offset;
  for (uint32_t j = 0; j < d->num_terms; ++j) {
    const double* row = base + static_cast<uint64_t>(d->term_ids[j]) * m->S;
    const double n = d->term_counts[j];
    for (uint32_t k = 0; k < K; ++k) out[k] += n * std::log(wscale * row[k] + wshift);
  }
}

// The fast path computes the same sums, two classes per vector, with
//   sum_{w: n_w = 1} log x_wk = E_k ln 2 + log P_k:
// the x_wk are multiplied together, eight terms at a time, and after each group
// the product's binary exponent is moved into the integer E_k (P_k back to
// [1, 2)), so one log per class replaces one per (term, class). Every x is
// checked to lie in [2^-100, 2^100] (a min and a max per vector), so a group's
// product stays a normal double (|exponent| <= 801) and each multiplication
// rounds once (relative 1.1e-16): the same absolute error as summing the logs.
// NaN propagates through the products and is caught by the group check; any
// failed check sends the whole document to ScoreScalar. A term with a small
// integer count n_w (2 .. kMaxRepeat; 15% of the entries of real short
// documents) is n_w factors, its row repeated in the list: n_w log x_wk is
// then the log of a product like the others, n_w roundings instead of one per
// (term, class) log. Terms with other counts take n_w * log x_wk.
//
// Pass 1 (memory-bound) walks the unit-count rows four classes at a time and
// stores P and E; pass 2 (compute-bound) takes the logs. Keeping the logs out
// of pass 1 lets the core run further ahead on the rows' cache misses; pass 1
// also prefetches each row two cache lines ahead.
struct ScoreArgs {
  const double* const* unit_rows;  // rows of the terms with count 1
  uint32_t num_unit;
  const double* const* other_rows;  // rows of the other terms ...
  const double* other_counts;       // ... and their counts
  uint32_t num_other;
  const double* class_raw;   // raw C[k]
  const double* word_total;  // R[k]
  double cscale, cshift, wscale, wshift, mshift, log_ctot, total;
  uint32_t K;
  double* prod;    // pass 1 -> 2: P_k in [1, 2)
  uint64_t* expo;  // pass 1 -> 2: E_k
};

// Two lanes of p at classes k, k + 1; in a tail, lanes past K - 1 repeat
// class K - 1 (never reading past the row).
template <bool Tail>
inline v2d LoadClasses(const double* p, uint32_t k, uint32_t K) {
  if (!Tail) return Load2(p + k);
  return v2d{p[std::min(k, K - 1)], p[std::min(k + 1, K - 1)]};
}

constexpr uint32_t kGroup = 8;                                 // factors per product before renormalising
constexpr double kMinFactor = 0x1p-100, kMaxFactor = 0x1p100;  // kGroup * 100 + 1 < 1022
// Terms with an integer count up to this are that many factors of the product
// (more roundings than n log x, each of them 1.1e-16 relative: the same error
// as a log); other counts take n log x.
constexpr uint32_t kMaxRepeat = 8;

struct PassOneResult {
  v2d lo, hi;  // smallest and largest factor seen
  v2u ok;      // all ones while every group product was a positive normal double
};

// Pass 1 for classes k0 .. k0 + 3.
template <bool Tail>
inline void ProductPass(const ScoreArgs& a, uint32_t k0, PassOneResult* res) {
  const v2d wscale = Splat(a.wscale), wshift = Splat(a.wshift);
  v2d lo = res->lo, hi = res->hi;
  v2u ok = res->ok;
  v2u E0 = v2u{0, 0}, E1 = v2u{0, 0};
  v2d P0 = Splat(1.0), P1 = Splat(1.0);
  for (uint32_t j0 = 0; j0 < a.num_unit; j0 += kGroup) {
    const uint32_t j1 = std::min(a.num_unit, j0 + kGroup);
    for (uint32_t j = j0; j < j1; ++j) {
      const double* row = a.unit_rows[j];
      __builtin_prefetch(row + k0 + 16);  // two cache lines ahead (never faults)
      const v2d x0 = wscale * LoadClasses<Tail>(row, k0, a.K) + wshift;
      const v2d x1 = wscale * LoadClasses<Tail>(row, k0 + 2, a.K) + wshift;
      P0 *= x0;
      P1 *= x1;
      const v2d mn = x0 < x1 ? x0 : x1, mx = x0 > x1 ? x0 : x1;
      lo = mn < lo ? mn : lo;
      hi = mx > hi ? mx : hi;
    }
    // Move the exponent into E, P back to [1, 2).
    ok &= reinterpret_cast<v2u>(NormalMask(P0) & NormalMask(P1));
    const v2u p0 = reinterpret_cast<v2u>(P0), p1 = reinterpret_cast<v2u>(P1);
    E0 += (p0 >> 52) - 1023u;
    E1 += (p1 >> 52) - 1023u;
    P0 = reinterpret_cast<v2d>((p0 & kMant) | kOne);
    P1 = reinterpret_cast<v2d>((p1 & kMant) | kOne);
  }
  std::memcpy(a.prod + k0, &P0, sizeof P0);
  std::memcpy(a.prod + k0 + 2, &P1, sizeof P1);
  std::memcpy(a.expo + k0, &E0, sizeof E0);
  std::memcpy(a.expo + k0 + 2, &E1, sizeof E1);
  res->lo = lo;
  res->hi = hi;
  res->ok = ok;
}

// Pass 2 for classes k, k + 1. Returns false if some value is not a positive
// normal double. The class count C_k joins the product (one log less):
//   log C_k + sum_{n_w = 1} log x_wk = E'_k ln 2 + log (P_k m(C_k)).
template <bool Tail>
inline bool LogPass(const ScoreArgs& a, uint32_t k, double* out) {
  const v2d wscale = Splat(a.wscale), wshift = Splat(a.wshift);
  const v2d c = Splat(a.cscale) * LoadClasses<Tail>(a.class_raw, k, a.K) + a.cshift;
  const v2d mk = wscale * LoadClasses<Tail>(a.word_total, k, a.K) + a.mshift;
  v2u ok = reinterpret_cast<v2u>(NormalMask(c) & NormalMask(mk));
  const v2u cu = reinterpret_cast<v2u>(c);
  v2d P;
  v2u E;
  std::memcpy(&P, a.prod + k, sizeof P);
  std::memcpy(&E, a.expo + k, sizeof E);
  P *= reinterpret_cast<v2d>((cu & kMant) | kOne);  // in [1, 4)
  // E (unbiased) plus C_k's unbiased exponent; |.| < 2^51, to double exactly
  // (1.5 * 2^52 trick).
  const v2u e_unb = E + (cu >> 52) - 1023u;
  const v2d dE = reinterpret_cast<v2d>(e_unb + 0x4338000000000000ull) - Splat(0x1.8p52);
  v2d S = dE * ln2_hi + (dE * ln2_lo + LogPositiveNormal(P));
  for (uint32_t j = 0; j < a.num_other; ++j) {
    const v2d x = wscale * LoadClasses<Tail>(a.other_rows[j], k, a.K) + wshift;
    ok &= reinterpret_cast<v2u>(NormalMask(x));
    S += a.other_counts[j] * LogPositiveNormal(x);
  }
  const v2d r = S - a.log_ctot - a.total * LogPositiveNormal(mk);
  if (!Tail) {
    std::memcpy(out + k, &r, sizeof r);
  } else {
    out[k] = r[0];  // k = K - 1
  }
  return (ok[0] & ok[1]) != 0;
}

// Both passes over every class; false sends the document to ScoreScalar.
// Compiled for the baseline and for AVX2 (the same two-lane operations,
// VEX-encoded: no FMA, so the same bits), chosen by tributary/simd.h.
#define TRIB_SCORE_PASSES_BODY                                                                \
  const uint32_t K = a.K;                                                                     \
  PassOneResult r1{Splat(kMaxFactor), Splat(kMinFactor), v2u{~0ull, ~0ull}};                  \
  uint32_t k = 0;                                                                             \
  for (; k + 4 <= K; k += 4) ProductPass<false>(a, k, &r1);                                   \
  if (k < K) ProductPass<true>(a, k, &r1);                                                    \
  bool ok = (r1.ok[0] & r1.ok[1]) != 0 && r1.lo[0] >= kMinFactor && r1.lo[1] >= kMinFactor && \
            r1.hi[0] <= kMaxFactor && r1.hi[1] <= kMaxFactor;                                 \
  for (k = 0; k + 2 <= K; k += 2) ok &= LogPass<false>(a, k, out);                            \
  if (k < K) ok &= LogPass<true>(a, k, out);                                                  \
  return ok;

bool ScorePassesBaseline(const ScoreArgs& a, double* out) { TRIB_SCORE_PASSES_BODY }
#if defined(__x86_64__)
__attribute__((target("avx2"))) bool ScorePassesAvx2(const ScoreArgs& a, double* out) { TRIB_SCORE_PASSES_BODY }
#endif
#undef TRIB_SCORE_PASSES_BODY

using ScorePassesFn = bool (*)(const ScoreArgs&, double*);
const ScorePassesFn kScorePasses =
#if defined(__x86_64__)
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? ScorePassesAvx2 :
#endif
                                                          ScorePassesBaseline;

}  // namespace

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K;
    const trib_block& cb = s->blocks[0];
    const trib_block& wb = s->blocks[1];
    const uint32_t T = d->num_terms;
    if (st->other_rows.size() < T) {
      st->rows.resize(static_cast<size_t>(T) * kMaxRepeat);
      st->other_rows.resize(T);
      st->counts.resize(T);
    }
    const size_t K4 = (static_cast<size_t>(K) + 3) & ~size_t{3};
    if (st->prod.size() < K4 || st->expo.size() < K4) {  // (score_frozen grows prod alone)
      st->prod.resize(K4);
      st->expo.resize(K4);
    }
    const double* base = s->raw + m->word_offset;
    // A term with an integer count n in 1 .. kMaxRepeat is n factors of the
    // product pass (its row n times in `rows`); the others go to `other_rows`.
    uint32_t nu = 0, no = 0;
    const double** rows = st->rows.data();
    for (uint32_t j = 0; j < T; ++j) {
      const double* row = base + static_cast<uint64_t>(d->term_ids[j]) * m->S;
      __builtin_prefetch(row);
      __builtin_prefetch(row + 8);
      const double n = d->term_counts[j];
      if (n == 1.0) {
        rows[nu++] = row;
      } else if (n >= 2.0 && n <= kMaxRepeat && n == static_cast<double>(static_cast<uint32_t>(n))) {
        for (uint32_t r = static_cast<uint32_t>(n); r > 0; --r) rows[nu++] = row;
      } else {
        st->other_rows[no] = row;
        st->counts[no++] = n;
      }
    }
    ScoreArgs a;
    a.unit_rows = rows;
    a.num_unit = nu;
    a.other_rows = st->other_rows.data();
    a.other_counts = st->counts.data();
    a.num_other = no;
    a.class_raw = s->raw;
    a.word_total = m->raw_word_total.data();
    a.cscale = cb.scale;
    a.cshift = cb.shift * cb.alpha_bar;
    a.wscale = wb.scale;
    a.wshift = wb.shift * wb.alpha_bar;
    a.mshift = a.wshift * static_cast<double>(m->V);
    a.log_ctot = std::log(cb.scale * m->raw_class_total + cb.shift * cb.alpha_bar * K);
    a.total = d->total_count;
    a.K = K;
    a.prod = st->prod.data();
    a.expo = st->expo.data();
    if (!kScorePasses(a, out)) ScoreScalar(m, s, d, out);
    return TRIB_OK;
  });
}

}  // namespace tributary::multinomial
