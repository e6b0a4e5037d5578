// The topic block of the LDA families ("lda" and "slda"): K x V expected
// topic-word counts, term-major (mu[w*K + k]), block 0 of the statistics with
// prior eta, and the per-topic raw totals R_k that make lambda_k O(1) (see
// lda.cc's header comment). Its random start, its check-step in rebuild and
// in commit, and the topics' term distributions, shared by both families so
// that the supervised one keeps the same topic statistics bit for bit.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_TOPICS_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_TOPICS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lda_model.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::lda {

// The value an infeasible topic entry is repaired to: the prior mass rho eta / n
// that the step added to every entry (with rho = 0, e.g. an edited snapshot,
// a tiny fraction of eta).
inline double Floor(const Model& m, const trib_step& step) {
  return step.rho > 0 ? step.rho * m.eta / step.n : m.eta * 1e-12;
}
// The same for a block of prior `prior` (DLDA's label statistics, sLDA's class counts).
inline double FloorFor(double prior, const trib_step& step) {
  return step.rho > 0 ? step.rho * prior / step.n : prior * 1e-12;
}
// raw such that mu = floor, nudged up so that the lazy map reads back > 0.
inline double RawForFloor(const trib_block& blk, double floor) {
  double r = (floor - blk.shift * blk.alpha_bar) / blk.scale;
  while (!(blk.scale * r + blk.shift * blk.alpha_bar > 0)) r = std::nextafter(r, INFINITY) + std::fabs(r) * 1e-15;
  return r;
}

// Symmetry breaking: mu_0[w, k] = init_mass g_wk / (K V) with g_wk noise of
// mean 1 and the variance 1 / init_shape of a Gamma(init_shape, 1/init_shape)
// (Hoffman et al.'s start), drawn uniform on 1 +- sqrt(3 / init_shape)
// (floored at 1e-3) from SplitMix64: the start costs ~1 ns per entry, not the
// ~40 ns of a gamma variate, which matters for a model of K x V entries.
// raw = mu_0 - eta (the block starts at scale = shift = 1). In lambda = n mu
// terms the start weighs as much as init_mass tokens per document of the
// whole corpus, whatever the vocabulary size.
// (always inlined: lda.cc compiles it for AVX-512 as well, where eight lanes
// of 64-bit multiplies and conversions make the same values; not contracted
// into FMA there, TRIB_NO_FP_CONTRACT, and for clang the pragma here.)
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#endif
__attribute__((always_inline)) inline void InitTopics(const Model& m, double* raw, uint64_t seed) {
  uint64_t x = seed ^ 0x6c6461u;  // "lda"
  const uint64_t size = m.V * m.K;
  const double unit = m.init_mass / static_cast<double>(size);
  const double half = std::sqrt(3.0 / m.init_shape);
  for (uint64_t i = 0; i < size; ++i) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);  // SplitMix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // [0, 1)
    raw[i] = unit * std::max(1.0 + half * (2 * u - 1), 1e-3) - m.eta;
  }
}
#if defined(__clang__)
#pragma float_control(pop)
#endif

// InitTopics where the CPU has AVX-512 F and DQ (SplitMix64's 64-bit
// multiplies and the integer-to-double conversions in eight lanes): lane by
// lane the same operations, none contracted into an FMA, so the same values
// (tests/lda_family_test.cc compares them bit for bit). The random start of
// the K x V values was a tenth of a one-document `train`.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq") TRIB_NO_FP_CONTRACT)) inline void InitTopicsAvx512(const Model& m,
                                                                                             double* raw,
                                                                                             uint64_t seed) {
  InitTopics(m, raw, seed);
}
#endif

// Rebuild's check of the topic block (every entry finite, mu > 0: feasible
// values stay bit for bit) and the totals R_k recomputed; n from the step.
inline int RebuildTopics(Model* m, trib_stats* s, const trib_step& step, trib_error* err) {
  if (!(step.n > 0) || !std::isfinite(step.n)) {
    return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                                "effective corpus size n = %g, expected a finite number > 0", step.n);
  }
  const uint32_t K = m->K;
  const trib_block& blk = s->blocks[0];
  const double floor = Floor(*m, step);
  std::vector<double> total(K, 0.0);
  for (uint64_t w = 0; w < m->V; ++w) {
    double* row = s->raw + w * K;
    for (uint32_t k = 0; k < K; ++k) {
      if (!std::isfinite(row[k])) {
        return tributary::sdk::Fail(err, TRIB_ERR_NUMERIC, "statistic of topic %u, term %llu is %g", k,
                                    static_cast<unsigned long long>(w), row[k]);
      }
      if (!(blk.scale * row[k] + blk.shift * blk.alpha_bar > 0)) row[k] = RawForFloor(blk, floor);
      total[k] += row[k];
    }
  }
  m->raw_total = std::move(total);
  m->n = step.n;
  return TRIB_OK;
}

// Commit's check-step on the touched entries of the topic block (mu > 0) and
// the totals R_k; every entry past the topic block goes to other(i, j) (j its
// position in idx / old_raw). Sets n and t from the step.
template <typename Other>
inline void CommitTopics(Model* m, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
                         const trib_step& step, Other other) {
  const uint64_t K = m->K;
  double* raw = s->raw;
  double* total = m->raw_total.data();
  const trib_block& blk = s->blocks[0];
  const double scale = blk.scale, prior = blk.shift * blk.alpha_bar;
  uint64_t row_base = 0;
  bool have_row = false;
  const double floor = Floor(*m, step);
  const uint64_t topic_entries = m->TopicEntries();
  size_t j = 0;
  while (j < count) {
    const uint64_t i = idx[j];
    if (i >= topic_entries) {
      other(i, j);
      ++j;
      continue;
    }
    // Fast path: a whole row w*K .. w*K + K-1 in order (what accumulate writes).
    if (i % K == 0 && count - j >= K && idx[j + K - 1] == i + K - 1) {
      uint64_t off = 0;  // 0 iff idx[j + t] == i + t for every t (branch-free: vectorised)
      for (uint64_t t = 0; t < K; ++t) off |= idx[j + t] ^ (i + t);
      if (off == 0) {
        double* r = raw + i;
        const double* o = old_raw + j;
        // mu > 0 for the whole row, two entries per compare (NaN fails it).
        typedef int64_t v2l __attribute__((vector_size(16)));
        const v2d vs = {scale, scale}, vp = {prior, prior}, vz = {0, 0};
        v2l ok = {-1, -1};
        uint64_t e = 0;
        for (; e + 2 <= K; e += 2) ok &= (vs * Load2(r + e) + vp) > vz;
        bool feasible = (ok[0] & ok[1]) != 0;
        for (; e < K; ++e) feasible &= scale * r[e] + prior > 0;
        if (!feasible) {
          for (uint64_t t = 0; t < K; ++t) {
            if (!(scale * r[t] + prior > 0)) r[t] = RawForFloor(blk, floor);
          }
        }
        for (uint64_t t = 0; t < K; ++t) total[t] += r[t] - o[t];
        j += K;
        have_row = false;
        continue;
      }
    }
    if (!have_row || i - row_base >= K) {  // one division per term, not per entry
      row_base = i - i % K;
      have_row = true;
    }
    // mu > 0: NLL steps only add (w, phi >= 0), so this repairs only what
    // rounding or a loss with negative weights could push to <= 0.
    if (!(scale * raw[i] + prior > 0)) raw[i] = RawForFloor(blk, floor);
    total[i - row_base] += raw[i] - old_raw[j];
    ++j;
  }
  m->n = step.n;
  m->t = step.t + 1;
}

// p(w | topic k) = E[beta_kw] = lambda_kw / lambda_k for every term.
inline int TopicTerms(const Model& m, const trib_stats& s, uint32_t k, double* out, trib_error* err) {
  if (k >= m.K) return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT, "topic %u >= topics %u", k, m.K);
  const LambdaMap f = MapOf(m, s);
  const double inv = 1.0 / Positive(f.a * m.raw_total[k] + f.b * static_cast<double>(m.V));
  for (uint64_t w = 0; w < m.V; ++w) out[w] = Positive(f.a * s.raw[w * m.K + k] + f.b) * inv;
  return TRIB_OK;
}

}  // namespace tributary::lda

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_TOPICS_H_
