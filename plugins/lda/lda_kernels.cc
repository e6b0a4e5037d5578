// The LDA families' kernels chosen for this CPU (SelectCvb0Kernel, once, at
// plugin init): the topics' point estimate for a document's terms (MeanBeta,
// MeanBetaFloat: the rows of E[beta] the CVB0 and Gibbs steps read), the CVB0
// sweeps (lda_cvb0.h) and the vector logs of lda_math.h, each behind a
// function of lda_model.h. Compiled into lda and, without lda's local steps
// (lda_local.cc), into slda and lgda, which use the same kernels.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "lda_cvb0.h"
#include "lda_math.h"
#include "lda_model.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

namespace tributary::lda {
namespace {

// x > lo ? x : lo in every lane: what maxpd computes (its second operand
// when either is NaN), in one instruction; GCC otherwise compares and blends.
// (In place, through a pointer: a vector passed by value to or from code
// compiled outside the AVX2 clones would change its ABI.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <typename V>
__attribute__((always_inline)) inline void MaxLanes(V* x, const V& lo) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if constexpr (sizeof(V) == 32) {
    *x = __builtin_ia32_maxpd256(*x, lo);
  } else {
    *x = __builtin_ia32_maxpd(*x, lo);
  }
#else
  *x = *x > lo ? *x : lo;
#endif
}
#pragma GCC diagnostic pop

// The document's rows of E[beta]: row_j[k] = Positive(a raw_wk + b) inv_k,
// the rows scattered over the model (prefetched kAhead rows ahead), row j at
// rows + j stride. Out = float (the float CVB0 kernel's rows): rounded to
// float, floored at 1e-30; the padding up to the stride is not written
// (MeanBetaFloat keeps it zero); Out = double: the padding set to zero. The
// same lane-wise operations in the AVX2 clones (no FMA), so the same bits;
// chosen with the CVB0 kernel (SelectCvb0Kernel).
template <typename Out, int W>
__attribute__((always_inline)) inline void MeanBetaRowsT(Out* __restrict rows, uint32_t stride,
                                                         const double* __restrict raw, const uint32_t* ids, uint32_t T,
                                                         uint32_t K, double a, double b, const double* __restrict inv) {
  constexpr uint32_t kAhead = 4;
  const uint32_t lines = (K + 7) / 8;  // 64-byte lines per row
  for (uint32_t j = 0; j < T && j < kAhead; ++j) {
    for (uint32_t l = 0; l < lines; ++l) __builtin_prefetch(raw + static_cast<uint64_t>(ids[j]) * K + 8 * l);
  }
  for (uint32_t j = 0; j < T; ++j) {
    if (j + kAhead < T) {
      const double* next = raw + static_cast<uint64_t>(ids[j + kAhead]) * K;
      for (uint32_t l = 0; l < lines; ++l) __builtin_prefetch(next + 8 * l);
    }
    const double* r = raw + static_cast<uint64_t>(ids[j]) * K;
    Out* row = rows + static_cast<size_t>(j) * stride;
    uint32_t k = 0;
    if constexpr (std::is_same_v<Out, float>) {  // (by hand: GCC leaves the clamp and rounding scalar)
      using V = typename VecOf<W>::type;
      typedef float F __attribute__((vector_size(4 * W)));
      const V vz = {};
      const V va = vz + a, vb = vz + b, lo = vz + 1e-300, flo = vz + 1e-30;
      for (; k + W <= K; k += W) {
        V x, iv;
        std::memcpy(&x, r + k, sizeof(V));
        std::memcpy(&iv, inv + k, sizeof(V));
        x = va * x + vb;
        MaxLanes(&x, lo);
        x = x * iv;
        MaxLanes(&x, flo);
        const F f = __builtin_convertvector(x, F);
        std::memcpy(row + k, &f, sizeof(F));
      }
    }
    for (; k < K; ++k) {
      const double x = Positive(a * r[k] + b) * inv[k];
      if constexpr (std::is_same_v<Out, float>) {
        row[k] = x > 1e-30 ? static_cast<float>(x) : 1e-30f;
      } else {
        row[k] = x;
      }
    }
    if constexpr (!std::is_same_v<Out, float>) {
      for (k = K; k < stride; ++k) row[k] = 0;
    }
  }
}
template <typename Out>
using MeanBetaRowsFn = void (*)(Out*, uint32_t, const double*, const uint32_t*, uint32_t, uint32_t, double, double,
                                const double*);
template <typename Out>
TRIB_KEEP_LOOPS void MeanBetaRowsSse2(Out* rows, uint32_t stride, const double* raw, const uint32_t* ids, uint32_t T,
                                      uint32_t K, double a, double b, const double* inv) {
  MeanBetaRowsT<Out, 2>(rows, stride, raw, ids, T, K, a, b, inv);
}
#ifdef TRIB_LDA_HAVE_AVX2
template <typename Out>
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) void MeanBetaRowsAvx2(Out* rows, uint32_t stride, const double* raw,
                                                                      const uint32_t* ids, uint32_t T, uint32_t K,
                                                                      double a, double b, const double* inv) {
  MeanBetaRowsT<Out, 4>(rows, stride, raw, ids, T, K, a, b, inv);
}
#endif
MeanBetaRowsFn<double> g_mean_beta_rows = MeanBetaRowsSse2<double>;
MeanBetaRowsFn<float> g_mean_beta_rows_float = MeanBetaRowsSse2<float>;

// 1 / lambda_k into st->inv_total.
LambdaMap InverseTotals(const Model& m, const trib_stats& s, State* st) {
  const uint32_t K = m.K;
  const LambdaMap f = MapOf(m, s);
  st->inv_total.resize(K);
  for (uint32_t k = 0; k < K; ++k) {
    st->inv_total[k] = 1.0 / Positive(f.a * m.raw_total[k] + f.b * static_cast<double>(m.V));
  }
  return f;
}

}  // namespace

// Fills st->rows with E[beta_kw] = lambda_kw / lambda_k.
void MeanBeta(const Model& m, const trib_stats& s, const uint32_t* ids, uint32_t T, State* st) {
  const LambdaMap f = InverseTotals(m, s, st);
  st->rows.resize(static_cast<size_t>(T) * m.K);
  g_mean_beta_rows(st->rows.data(), m.K, s.raw, ids, T, m.K, f.a, f.b, st->inv_total.data());
}

// The same into st->fbeta as floats, rows padded to Cvb0Stride(K) with zeros
// (the float CVB0 kernel's layout). The padding is written once: the
// vector only grows with zeros, the rows' kernel writes the K entries of
// each row and nothing else writes it (a new stride starts it afresh).
void MeanBetaFloat(const Model& m, const trib_stats& s, const uint32_t* ids, uint32_t T, State* st) {
  const LambdaMap f = InverseTotals(m, s, st);
  const uint32_t Kp = Cvb0Stride(m.K);
  if (st->fbeta_stride != Kp) {
    st->fbeta.clear();
    st->fbeta_stride = Kp;
  }
  st->fbeta.resize(static_cast<size_t>(T) * Kp);
  g_mean_beta_rows_float(st->fbeta.data(), Kp, s.raw, ids, T, m.K, f.a, f.b, st->inv_total.data());
}

namespace {

// ---- The CVB0 sweeps (kernels and their equations in lda_cvb0.h) -----------------

Cvb0SweepsFn g_cvb0_sweeps = Cvb0SweepsSse2;            // chosen at plugin init (SelectCvb0Kernel)
Cvb0SweepsVecFn g_cvb0_sweeps_vec = Cvb0SweepsVecSse2;  // (the same, alpha a vector)
Cvb0FloatSweepsFn g_cvb0_float = Cvb0FloatSweepsSse2;   // (the float group kernel, a scalar alpha)

// sum_k log G(a_k + n_k) on this CPU's widest lanes (lda_math.h: the same
// bits in every width).
double LogGammaSumSse2(const double* a, const double* n, uint32_t K) { return LogGammaSumT<2>(a, n, K); }
#ifdef TRIB_LDA_HAVE_AVX2
__attribute__((target("avx2"))) double LogGammaSumAvx2(const double* a, const double* n, uint32_t K) {
  return LogGammaSumT<4>(a, n, K);
}
#endif
double (*g_log_gamma_sum)(const double*, const double*, uint32_t) = LogGammaSumSse2;
void LogEachSse2(const double* x, double* out, uint32_t n) { LogEachT<2>(x, out, n); }
#ifdef TRIB_LDA_HAVE_AVX2
__attribute__((target("avx2"))) void LogEachAvx2(const double* x, double* out, uint32_t n) { LogEachT<4>(x, out, n); }
#endif
WeightedLogRatioSumFn g_weighted_log_ratio_sum = WeightedLogRatioSumSse2;  // (lda_math.h)
void (*g_log_each)(const double*, double*, uint32_t) = LogEachSse2;
}  // namespace

void SelectCvb0Kernel() {
#ifdef TRIB_LDA_HAVE_AVX2
  if (tributary::simd::MaxLevel() >= tributary::simd::kAvx2) {
    g_cvb0_sweeps = Cvb0SweepsAvx2;
    g_cvb0_sweeps_vec = Cvb0SweepsVecAvx2;
    g_log_gamma_sum = LogGammaSumAvx2;
    g_weighted_log_ratio_sum = WeightedLogRatioSumAvx2;
    g_log_each = LogEachAvx2;
    g_mean_beta_rows = MeanBetaRowsAvx2<double>;
    g_mean_beta_rows_float = MeanBetaRowsAvx2<float>;
    g_cvb0_float = Cvb0FloatSweepsAvx2;
  }
  if (tributary::simd::Avx512With(tributary::simd::Feature::kAvx512Vl)) {
    g_cvb0_float = Cvb0FloatSweepsAvx512;  // (the AVX2 kernels with 32 registers)
    g_weighted_log_ratio_sum = WeightedLogRatioSumAvx512;
  }
#endif
}

double LogGammaSum(const double* a, const double* n, uint32_t K) { return g_log_gamma_sum(a, n, K); }
void LogEach(const double* x, double* out, uint32_t n) { g_log_each(x, out, n); }

uint32_t Cvb0SweepsVec(const double* beta, double* phi, double* nk, double* last, double* norm, const double* counts,
                       uint32_t T, uint32_t K, const double* alpha, uint32_t max_iter, double tol) {
  return g_cvb0_sweeps_vec(beta, phi, nk, last, norm, counts, T, K, alpha, max_iter, tol);
}

uint32_t Cvb0FloatSweeps(const float* beta, float* phi, float* nk, float* last, float* norm, const float* counts,
                         uint32_t T, uint32_t Kp, float alpha, uint32_t max_iter, float tol, bool fresh) {
  return g_cvb0_float(beta, phi, nk, last, norm, counts, T, Kp, alpha, max_iter, tol, fresh);
}

double WeightedLogRatioSum(const double* c, const double* p, double t, double a, uint32_t n, bool* nan) {
  return g_weighted_log_ratio_sum(c, p, t, a, n, nan);
}

}  // namespace tributary::lda
