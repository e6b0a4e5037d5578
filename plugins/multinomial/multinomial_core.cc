// The multinomial families' shared implementation (multinomial_core.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "multinomial_core.h"
#include "tributary/huge_pages.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

#if defined(__clang__)
// No contraction of a * b + c into FMA in this file's kernels (see
// SumRowsAvx512): GCC's optimize attribute does it per function there.
#pragma STDC FP_CONTRACT OFF
#endif

namespace tributary::multinomial {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;
using tributary::sdk::NonFiniteBit;

namespace sdk = tributary::sdk;

struct Model {
  uint32_t K = 0;
  // Row stride and size of the class block: the class capacity (ABI 1.4,
  // >= K); the entries of classes K .. S-1 are padding: classes never seen
  // (rebuild moves them as any entry never touched), brought into use by
  // add_class.
  uint32_t S = 0;
  uint64_t V = 0;
  // Rows of the word block: the vocabulary capacity (ABI 1.5, >= V) and, for
  // an open vocabulary, one more: the sentinel, row Vcap, a term that never
  // occurs. Block restarts and rebuild move it as they move any term never
  // seen, so it holds what a term present from the start and never seen
  // holds now: a new term's row is a copy of it (add_terms, grow_terms). The
  // rows V .. Vcap-1 are padding, copies of it too, never scored.
  uint64_t Vcap = 0;
  bool sentinel = false;
  uint64_t Rows() const { return Vcap + (sentinel ? 1 : 0); }
  double alpha = 1.0;                  // word pseudo-count
  double class_alpha = 1.0;            // class pseudo-count
  uint64_t word_offset = 0;            // = S
  std::vector<double> raw_word_total;  // R[k] = sum_w raw N[w][k]
  double raw_class_total = 0;          // sum_k raw C[k]
  double init_scale = 1.0;             // mixture: random initial counts, in units of alpha
  // floor=prior (1.0.0's check-step, kept as an option): discriminative steps
  // (c = 0) never take a count below its initial pseudo-count (raw >= 0).
  bool prior_floor = false;
};

struct State {
  // Score's scratch: the rows of the document's factors (a term with a small
  // integer count once per occurrence), the rows of its other terms and their
  // counts.
  std::vector<const double*> rows;
  std::vector<const double*> other_rows;
  std::vector<double> counts;
  std::vector<double> prod;    // P_k (see Score)
  std::vector<uint64_t> expo;  // E_k
};

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

int Create(Variant variant, const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
           trib_error* err) {
  return Guard(err, [&] {
    const uint64_t room =
        schema->struct_size > offsetof(trib_schema, vocab_capacity) ? schema->vocab_capacity : uint64_t{0};
    if (schema->vocab_size == 0 && room == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "multinomial needs a vocabulary (vocab_size is 0), or room for terms (open vocabulary)");
    }
    auto m = std::make_unique<Model>();
    m->V = schema->vocab_size;
    m->Vcap = std::max(m->V, room);
    m->sentinel = room > 0;
    const bool mixture = variant == Variant::kMixture;
    if (!mixture) {  // the mixture's K is its option components; classes only label documents
      if (schema->num_classes == 0 && schema->class_capacity == 0) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "multinomial needs >= 1 class, or room for classes (open classes)");
      }
      m->K = schema->num_classes;
    }
    const trib_option_spec* table = mixture ? kMixtureOptions : kNaiveBayesOptions;
    const char* family = mixture ? "multinomial-mixture" : "multinomial";
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(table, TRIB_KIND_FAMILY, family, opts, n, &o, err); rc != TRIB_OK) return rc;
    if (mixture) {
      m->K = o.Integer<uint32_t>("components");
      m->init_scale = o.Number("init_scale");
    }
    if (o.Is("prior", "laplace")) {
      m->alpha = 1.0;
    } else if (o.Is("prior", "log")) {
      if (room > 0) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "option prior=log (alpha = ln |W|) needs a closed vocabulary: with an open one |W| grows as "
                    "the stream goes; give a number (e.g. prior=1)");
      }
      m->alpha = std::log(static_cast<double>(m->V));  // the paper's P2: ln |W|
    } else {
      m->alpha = o.Number("prior");
    }
    m->class_alpha = o.Number("class_prior");
    m->prior_floor = o.Is("floor", "prior");
    if (m->alpha <= 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "prior alpha = ln|W| is %g for |W| = %llu; expected > 0", m->alpha,
                  static_cast<unsigned long long>(m->V));
    }
    m->S = m->K;
    if (!mixture && schema->struct_size > offsetof(trib_schema, class_capacity)) {
      m->S = std::max(m->K, schema->class_capacity);
    }
    m->word_offset = m->S;
    m->raw_word_total.reserve(m->S);
    m->raw_word_total.assign(m->K, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  if (blocks == nullptr) {
    *num = 2;
    return TRIB_OK;
  }
  if (*num < 2) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for 2 blocks");
  blocks[0] = trib_block{0, m->S, 0.0, m->class_alpha, 1.0, 0.0};
  blocks[1] = trib_block{m->word_offset, m->Rows() * m->S, 0.0, m->alpha, 1.0, 0.0};
  *num = 2;
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step*, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    m->raw_class_total = 0;
    const double cfloor = -s->blocks[0].alpha_bar, wfloor = -s->blocks[1].alpha_bar;
    // The padding classes K .. S-1 get the check-step too, as a class never
    // seen would: they hold what a class declared from the start and never
    // seen holds now, which add_class brings into use (only the classes in
    // use count in the totals).
    for (uint32_t k = 0; k < m->S; ++k) {
      s->raw[k] = std::max(s->raw[k], cfloor);
      if (k < m->K) m->raw_class_total += s->raw[k];
    }
    std::fill(m->raw_word_total.begin(), m->raw_word_total.end(), 0.0);
    double* r = s->raw + m->word_offset;
    // Every row gets the check-step, the padding rows and the sentinel too
    // (as a term never seen would); only the vocabulary's rows count in R[k].
    for (uint64_t w = 0; w < m->Rows(); ++w) {
      double* row = r + w * m->S;
      for (uint32_t k = 0; k < m->S; ++k) row[k] = std::max(row[k], wfloor);
      if (w < m->V) {
        for (uint32_t k = 0; k < m->K; ++k) m->raw_word_total[k] += row[k];
      }
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model*, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

// ---- Vector kernels -----------------------------------------------------------
//
// Two doubles per operation through the GCC/Clang vector extensions: on the
// x86-64 baseline this is plain SSE2 (no -march, no -ffast-math); a build with
// a wider -m flag gets the same code on wider registers.
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef uint64_t v2u __attribute__((vector_size(16)));
typedef int64_t v2i __attribute__((vector_size(16)));

inline v2d Load2(const double* p) {
  v2d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline v2d Splat(double x) { return v2d{x, x}; }

constexpr uint64_t kMant = 0x000fffffffffffffull, kOne = 0x3ff0000000000000ull;  // mantissa bits, 1.0
constexpr double ln2_hi = 0x1.62e42feep-1;        // 3fe62e42 fee00000 (ln 2 to 32 bits: k ln2_hi is exact)
constexpr double ln2_lo = 0x1.a39ef35793c76p-33;  // 3dea39ef 35793c76 (ln 2 - ln2_hi)

// log(x) for positive normal finite x, both lanes, without branches.
// The algorithm of fdlibm's e_log.c (also musl's former log.c): reduce x to
// 2^k * m with m in [sqrt(2)/2, sqrt(2)), then log(m) = f - hfsq + s (hfsq + R)
// with f = m - 1, s = f / (2 + f) and R a degree-14 minimax polynomial in s.
// Error < 1 ulp; against glibc's std::log on 4e7 inputs (random bit patterns
// over all positive normal doubles, and dense around 1, sqrt(2)/2 and sqrt(2)):
// at most 1 ulp apart, relative difference <= 2.3e-16. Other inputs (0,
// subnormal, negative, inf, NaN) give meaningless values: callers check and
// fall back to std::log.
inline v2d LogPositiveNormal(v2d x) {
  constexpr double Lg1 = 0x1.5555555555593p-1, Lg2 = 0x1.999999997fa04p-2, Lg3 = 0x1.2492494229359p-2,
                   Lg4 = 0x1.c71c51d8e78afp-3, Lg5 = 0x1.7466496cb03dep-3, Lg6 = 0x1.39a09d078c69fp-3,
                   Lg7 = 0x1.2f112df3e5244p-3;
  // Adding (0x3ff00000 - 0x3fe6a09e) to the high word moves the exponent up by
  // one exactly when the mantissa is >= sqrt(2); the mantissa is then re-based
  // on 0x3fe6a09e so that m lands in [sqrt(2)/2, sqrt(2)).
  const v2u ix = reinterpret_cast<v2u>(x) + ((0x3ff00000ull - 0x3fe6a09eull) << 32);
  // k = (ix >> 52) - 1023 as a double, exactly (2^52 + e trick; SSE2 has no
  // 64-bit integer -> double conversion).
  const v2d dk = reinterpret_cast<v2d>((ix >> 52) | 0x4330000000000000ull) - Splat(0x1p52 + 1023.0);
  const v2d m = reinterpret_cast<v2d>((ix & kMant) + (0x3fe6a09eull << 32));
  const v2d f = m - 1.0;
  const v2d hfsq = 0.5 * f * f;
  const v2d s = f / (2.0 + f);
  const v2d z = s * s;
  const v2d w = z * z;
  const v2d t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const v2d t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const v2d R = t2 + t1;
  return s * (hfsq + R) + dk * ln2_lo - hfsq + f + dk * ln2_hi;
}

// All-ones lanes where x is a positive normal finite double (NaN: zero).
inline v2i NormalMask(v2d x) { return (x >= Splat(0x1p-1022)) & (x <= Splat(0x1.fffffffffffffp+1023)); }

// ---- Score ---------------------------------------------------------------------

// log p(k, x) = log p(k) + sum_w n_w log p(w | k)   (Algorithm 3, without the
// multinomial coefficient, which is the same for every class).
//
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

// ---- Frozen scoring (ABI 1.6) ---------------------------------------------
//
// Score's sums with the logs taken once per (term, class) for the whole
// model instead of per document: log p(k, x) = a_k - n(x) b_k +
// sum_w n_w L[w][k] with L[w][k] = log x_wk (x = the word count with its
// prior mass, as Score reads it), a_k = log C_k - log sum_j C_j and
// b_k = log M_k. A document then costs one multiply-add per (term, class),
// no log, no range check. The same formula as ScoreScalar, each log rounded
// once: the sums agree with Score's to rounding (tests/predictor_test.cc).
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
// (TRIB_NO_FP_CONTRACT, simd.h; for clang the pragma at the top of this file).
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

// max(v, floor) without a branch (which side is data-dependent: NCLL pushes
// many entries below the floor).
inline double ClampAbove(double v, double floor) {
  const v2d x = Splat(v), f = Splat(floor);
  return (x > f ? x : f)[0];
}

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

// ---- Naive Bayes (labelled classes) ------------------------------------------

int GrowClasses(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
                trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (n->V != o->V || n->Rows() != o->Rows() || n->K <= o->K || n->S < n->K) {
      return Fail(err, TRIB_ERR_INTERNAL, "grow_classes: incompatible layouts");
    }
    // The old classes, then for every new class (the one being added and
    // the new padding) what the old model's spare padding class holds: a
    // class never seen (the host keeps one spare; a model without one, from
    // an older snapshot, leaves them at raw zero).
    const bool spare = o->S > o->K;
    for (uint32_t k = 0; k < n->S; ++k) ns->raw[k] = k < o->K ? os->raw[k] : spare ? os->raw[o->K] : 0.0;
    // Every row: the vocabulary's, and an open vocabulary's padding and
    // sentinel (what a term never seen holds, for each old class).
    for (uint64_t w = 0; w < o->Rows(); ++w) {
      const double* src = os->raw + o->word_offset + w * o->S;
      double* dst = ns->raw + n->word_offset + w * n->S;
      std::copy(src, src + o->K, dst);
      std::fill(dst + o->K, dst + n->S, spare ? src[o->K] : 0.0);
    }
    return TRIB_OK;
  });
}

// The next padded class comes into use (ABI 1.4): its statistics are what a
// class never seen holds (rebuild moves the padding as it moves any entry
// never touched), so it joins the totals: O(rows).
int AddClass(trib_family_model* mm, trib_stats* s, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (m->K >= m->S) return Fail(err, TRIB_ERR_INTERNAL, "add_class: no room (capacity %u)", m->S);
    const uint32_t k = m->K;
    m->raw_class_total += s->raw[k];
    double total = 0;
    const double* r = s->raw + m->word_offset;
    for (uint64_t w = 0; w < m->V; ++w) total += r[w * m->S + k];
    m->raw_word_total.push_back(total);  // (reserved for S classes at creation)
    ++m->K;
    return TRIB_OK;
  });
}

// ---- Open vocabulary (ABI 1.5) ------------------------------------------------

// The next padded terms come into use: each row becomes a copy of the
// sentinel's (what a term present from the start and never seen holds now;
// raw zero, N = scale alpha, until the block's first restart) and joins the
// totals R[k]; M[k] = scale R[k] + shift alpha |W| counts the new terms'
// prior mass through |W|. O(count x classes).
int AddTerms(trib_family_model* mm, trib_stats* s, uint64_t count, trib_error* err) {
  Model* m = M(mm);
  if (!m->sentinel || count > m->Vcap - m->V) {
    return Fail(err, TRIB_ERR_INTERNAL, "add_terms: %llu terms do not fit (%llu of %llu rows in use)",
                static_cast<unsigned long long>(count), static_cast<unsigned long long>(m->V),
                static_cast<unsigned long long>(m->Vcap));
  }
  double* r = s->raw + m->word_offset;
  const double* never = r + m->Vcap * m->S;
  for (uint64_t w = m->V; w < m->V + count; ++w) {
    std::copy(never, never + m->S, r + w * m->S);
    for (uint32_t k = 0; k < m->K; ++k) m->raw_word_total[k] += never[k];
  }
  m->V += count;
  return TRIB_OK;
}

// The word block is term-major with the same row stride in both layouts
// (classes and options are unchanged): the class block and the old rows are
// one copy; every other row of the new layout (the new terms, the padding,
// the sentinel) is a copy of the old sentinel. Rebuild then sums R[k].
int GrowTerms(const trib_family_model* om, const trib_stats* os, trib_family_model* nm, trib_stats* ns,
              trib_error* err) {
  return Guard(err, [&] {
    const Model* o = M(om);
    const Model* n = M(nm);
    if (n->S != o->S || n->K != o->K || n->V < o->V || n->word_offset != o->word_offset || !o->sentinel ||
        !n->sentinel) {
      return Fail(err, TRIB_ERR_INTERNAL, "grow_terms: incompatible layouts");
    }
    std::copy(os->raw, os->raw + o->word_offset + o->V * o->S, ns->raw);
    const double* never = os->raw + o->word_offset + o->Vcap * o->S;
    double* r = ns->raw + n->word_offset;
    for (uint64_t w = o->V; w < n->Rows(); ++w) std::copy(never, never + n->S, r + w * n->S);
    return TRIB_OK;
  });
}

// The running totals R[k] and sum_k raw C[k] are kept incrementally by
// Commit; recomputing them in Rebuild sums in another order and differs in the
// last bits. Saving them in snapshots lets a resumed model continue exactly
// as the uninterrupted one would (ABI 1.1 export_cache / import_cache).
// Finite, not necessarily >= 0 (e.g. -5e-16 for a class seen only early
// under NCLL): sdk::ImportCache's rule.
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return sdk::ExportCache(out, size, M(mm)->raw_word_total, M(mm)->raw_class_total);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  return sdk::ImportCache(in, size, err, "classes + 1", M(mm)->raw_word_total, M(mm)->raw_class_total);
}

// ---- Mixture of multinomials (latent class; online EM = sdEM with NLL) ------

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_LATENT;
  *count = M(mm)->K;
  return TRIB_OK;
}

// Symmetry breaking: every component starts at the prior plus a random
// fraction (init_scale x alpha x U(0, 1)) of pseudo-counts per term, so the
// first documents' posteriors p(k | x) differ between components.
int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    std::mt19937_64 rng(seed ^ 0x6d6978747572650aULL);
    const double scale = m->init_scale * m->alpha / s->blocks[1].scale;
    double* r = s->raw + m->word_offset;
    for (uint64_t i = 0; i < m->V * m->K; ++i) {
      r[i] = scale * static_cast<double>(rng() >> 11) * 0x1.0p-53;
    }
    return TRIB_OK;
  });
}

// p(w | k) = N[w][k] / M[k] for every term.
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error*) {
  const Model* m = M(mm);
  const trib_block& b = s->blocks[1];
  const double total = b.scale * m->raw_word_total[k] + b.shift * m->alpha * static_cast<double>(m->V);
  for (uint64_t w = 0; w < m->V; ++w) {
    out[w] = (b.scale * s->raw[m->word_offset + w * m->S + k] + b.shift * m->alpha) / total;
  }
  return TRIB_OK;
}

// log p(heldout | observed) = sum_w n_w log sum_k p(k | observed) p(w | k).
int Completion(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* obs,
               const trib_document* held, double* log_prob, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    std::vector<double> post(m->K);
    int rc = Score(mm, s, ss, obs, post.data(), err);
    if (rc != TRIB_OK) return rc;
    const double lse = tributary::sdk::LogSumExp(post.data(), m->K);
    for (auto& p : post) p = std::exp(p - lse);
    const trib_block& b = s->blocks[1];
    std::vector<double> total(m->K);
    for (uint32_t k = 0; k < m->K; ++k) {
      total[k] = b.scale * m->raw_word_total[k] + b.shift * m->alpha * static_cast<double>(m->V);
    }
    double lp = 0;
    for (uint32_t i = 0; i < held->num_terms; ++i) {
      const double* row = s->raw + m->word_offset + uint64_t{held->term_ids[i]} * m->S;
      double p = 0;
      for (uint32_t k = 0; k < m->K; ++k) p += post[k] * (b.scale * row[k] + b.shift * m->alpha) / total[k];
      lp += held->term_counts[i] * std::log(p);
    }
    *log_prob = lp;
    return TRIB_OK;
  });
}

template <Variant V>
int CreateVariant(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
                  trib_error* err) {
  return Create(V, schema, opts, n, out, err);
}

}  // namespace

int Init(Variant variant, const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  if (int rc = tributary::sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  trib_family_vtable& v = out->family;
  v.create = variant == Variant::kMixture ? CreateVariant<Variant::kMixture> : CreateVariant<Variant::kNaiveBayes>;
  v.layout = Layout;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.fused_step = FusedStep;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.add_terms = AddTerms;
  v.grow_terms = GrowTerms;
  v.freeze = Freeze;
  v.frozen_destroy = FrozenDestroy;
  v.score_frozen = ScoreFrozen;
  if (variant == Variant::kMixture) {
    v.init_stats = InitStats;
    v.outputs = Outputs;
    v.component_terms = ComponentTerms;
    v.completion = Completion;
  } else {
    v.grow_classes = GrowClasses;
    v.add_class = AddClass;
  }
  return TRIB_OK;
}

}  // namespace tributary::multinomial
