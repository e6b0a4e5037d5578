// The local steps of the "lda" family: per document, with the topics fixed,
// the topic proportions and the per-term topic shares that score(),
// accumulate() and completion() (lda.cc, lda_step.cc, lda_fused.cc) use. The
// four inference options (mean-field VI, Fast LDA, collapsed Gibbs,
// stochastic CVB0), DLDA's labelled steps and the burn-in of the local alpha
// are explained in lda.cc's header comment, "Local step"; the CVB0 sweep
// kernels are in lda_cvb0.h, chosen for this CPU in lda_kernels.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "lda_cvb0.h"
#include "lda_math.h"
#include "lda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::lda {
namespace {

using tributary::sdk::Digamma;
using tributary::sdk::Fail;
double LogGamma(double x) { return tributary::sdk::Lgamma(x); }

// ---- Kernels over K (v2d and Load2: lda_model.h) ----------------------------------

inline void Store2(double* p, v2d v) { std::memcpy(p, &v, sizeof v); }

// sum_k a[k] b[k], four partial sums (a fixed order: deterministic).
inline double Dot(const double* a, const double* b, uint32_t K) {
  v2d s0 = {0, 0}, s1 = {0, 0};
  uint32_t k = 0;
  for (; k + 4 <= K; k += 4) {
    s0 += Load2(a + k) * Load2(b + k);
    s1 += Load2(a + k + 2) * Load2(b + k + 2);
  }
  double s = (s0[0] + s1[0]) + (s0[1] + s1[1]);
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}

// y[k] += c x[k]
inline void Axpy(double c, const double* x, double* y, uint32_t K) {
  const v2d cc = {c, c};
  uint32_t k = 0;
  for (; k + 2 <= K; k += 2) Store2(y + k, Load2(y + k) + cc * Load2(x + k));
  if (k < K) y[k] += c * x[k];
}

// The document-topic prior of every local step (cvb0, vi, gibbs): alpha,
// except during the burn-in (the first `burnin` sdEM steps), when it falls
// linearly from burnin_alpha to alpha. Completion always uses alpha; score()
// cannot tell training from prediction, so a model still in its burn-in also
// scores with the burn-in alpha.
inline double LocalAlpha(const Model& m, bool predict) {
  if (predict || !(static_cast<double>(m.t) < m.burnin)) return m.alpha;
  return m.alpha + (m.burnin_alpha - m.alpha) * (1.0 - static_cast<double>(m.t) / m.burnin);
}

// ---- Local step: mean-field VI --------------------------------------------------

// Fills st->rows with exp(E[log beta_kw]) for the document's terms.
void ExpElogBeta(const Model& m, const trib_stats& s, const uint32_t* ids, uint32_t T, State* st) {
  const uint32_t K = m.K;
  const LambdaMap f = MapOf(m, s);
  st->inv_total.resize(K);
  for (uint32_t k = 0; k < K; ++k) {
    const double lk = Positive(f.a * m.raw_total[k] + f.b * static_cast<double>(m.V));
    st->inv_total[k] = std::exp(-Digamma(lk));
  }
  st->rows.resize(static_cast<size_t>(T) * K);
  for (uint32_t j = 0; j < T; ++j) {
    const double* raw = s.raw + static_cast<uint64_t>(ids[j]) * K;
    double* row = st->rows.data() + static_cast<size_t>(j) * K;
    for (uint32_t k = 0; k < K; ++k) row[k] = ExpDigamma(Positive(f.a * raw[k] + f.b)) * st->inv_total[k];
  }
}

// exp(E[log theta_k]) = exp(psi(gamma_k) - psi(sum gamma)) into st->et.
void ExpElogTheta(uint32_t K, State* st) {
  double sum = 0;
  for (uint32_t k = 0; k < K; ++k) sum += st->gamma[k];
  const double norm = 1.0 / ExpDigamma(sum);
  for (uint32_t k = 0; k < K; ++k) st->et[k] = ExpDigamma(st->gamma[k]) * norm;
}

// phinorm_j = sum_k exp(E log theta_k) exp(E log beta_kw) (floored so that
// n_w / phinorm stays finite when every topic gives the term ~0).
void PhiNorm(uint32_t K, uint32_t T, State* st) {
  for (uint32_t j = 0; j < T; ++j) {
    const double p = Dot(st->et.data(), st->rows.data() + static_cast<size_t>(j) * K, K);
    st->phinorm[j] = p > 1e-300 ? p : 1e-300;
  }
}

// The gamma/phi fixed point (eq. 34 and 37) on st->rows; leaves gamma, et and
// phinorm consistent with each other.
void ViFixedPoint(const Model& m, const trib_document& d, State* st) {
  const uint32_t K = m.K, T = d.num_terms;
  st->gamma.assign(K, st->local_alpha + d.total_count / K);
  st->last_gamma.resize(K);
  st->et.resize(K);
  st->acc.resize(K);
  st->phinorm.resize(T);
  ExpElogTheta(K, st);
  PhiNorm(K, T, st);
  for (uint32_t it = 0; it < m.vi_max_iter; ++it) {
    std::fill(st->acc.begin(), st->acc.end(), 0.0);
    for (uint32_t j = 0; j < T; ++j) {
      Axpy(d.term_counts[j] / st->phinorm[j], st->rows.data() + static_cast<size_t>(j) * K, st->acc.data(), K);
    }
    st->last_gamma.swap(st->gamma);
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) {
      st->gamma[k] = st->local_alpha + st->et[k] * st->acc[k];
      change += std::fabs(st->gamma[k] - st->last_gamma[k]);
    }
    ExpElogTheta(K, st);
    PhiNorm(K, T, st);
    if (change < m.vi_tol * K) break;
  }
}

}  // namespace

// Per-document ELBO (Hoffman et al.'s bound without the topics' terms):
//   sum_w n_w log phinorm_w + sum_k [(alpha - gamma_k) E log theta_k
//   + lgamma(gamma_k) - lgamma(alpha)] + lgamma(K alpha) - lgamma(sum gamma).
double DocumentElbo(const Model& m, const trib_document& d, const State& st) {
  const uint32_t K = m.K;
  double elbo = 0;
  for (uint32_t j = 0; j < d.num_terms; ++j) elbo += d.term_counts[j] * std::log(st.phinorm[j]);
  double gsum = 0;
  for (uint32_t k = 0; k < K; ++k) gsum += st.gamma[k];
  const double psum = Digamma(gsum);
  for (uint32_t k = 0; k < K; ++k) {
    elbo += (st.local_alpha - st.gamma[k]) * (Digamma(st.gamma[k]) - psum) + LogGamma(st.gamma[k]);
  }
  elbo += LogGamma(K * st.local_alpha) - K * LogGamma(st.local_alpha) - LogGamma(gsum);
  return elbo;
}

namespace {

// ---- Local step: Fast LDA (Shan & Banerjee 2010, §5.3, App. A.3) ------------------

// One discrete distribution phi per document shared by all its m tokens
// (q_2, eq. 29) instead of one per term:
//   gamma_k = alpha + m phi_k                                       (eq. 30)
//   phi_k  propto exp(psi(gamma_k) - psi(sum gamma) + S_k / m)       (eq. 31)
// with S_k = sum_w n_w E[log beta_kw], E[log beta_kw] = psi(lambda_kw) -
// psi(lambda_k) standing for the paper's log beta_cv (our topics are
// variational Dirichlets, as in the vi step). S is computed once, O(|d| K);
// each iteration is O(K), independent of the document's length: the paper's
// speed-up. E_z[s] = n_w phi_k for every term (eq. 32's document term).
// S_k = sum_w n_w E[log beta_kw] into st->fast_sum; returns m = sum_w n_w.
double FastSums(const Model& m, const trib_stats& s, const trib_document& d, State* st) {
  const uint32_t K = m.K, T = d.num_terms;
  const LambdaMap f = MapOf(m, s);
  st->fast_sum.assign(K, 0.0);
  st->inv_total.resize(K);
  for (uint32_t k = 0; k < K; ++k) {
    st->inv_total[k] = Digamma(Positive(f.a * m.raw_total[k] + f.b * static_cast<double>(m.V)));
  }
  double mass = 0;
  for (uint32_t j = 0; j < T; ++j) {
    const double* raw = s.raw + static_cast<uint64_t>(d.term_ids[j]) * K;
    const double c = d.term_counts[j];
    mass += c;
    for (uint32_t k = 0; k < K; ++k) st->fast_sum[k] += c * (Digamma(Positive(f.a * raw[k] + f.b)) - st->inv_total[k]);
  }
  return mass;
}

void FastLocal(const Model& m, const trib_stats& s, const trib_document& d, State* st) {
  const uint32_t K = m.K, T = d.num_terms;
  const double mass = FastSums(m, s, d, st);
  const double inv_mass = mass > 0 ? 1.0 / mass : 0.0;
  st->gamma.assign(K, st->local_alpha + mass / K);
  st->last_gamma.resize(K);
  st->fast_phi.resize(K);
  for (uint32_t it = 0; it < m.vi_max_iter; ++it) {
    // phi from gamma (psi(sum gamma) is common to every k and cancels in
    // the normalisation), then gamma from phi.
    double top = -HUGE_VAL;
    for (uint32_t k = 0; k < K; ++k) {
      st->fast_phi[k] = Digamma(st->gamma[k]) + st->fast_sum[k] * inv_mass;
      top = std::max(top, st->fast_phi[k]);
    }
    double z = 0;
    for (uint32_t k = 0; k < K; ++k) z += (st->fast_phi[k] = std::exp(st->fast_phi[k] - top));
    st->last_gamma.swap(st->gamma);
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) {
      st->fast_phi[k] /= z;
      st->gamma[k] = st->local_alpha + mass * st->fast_phi[k];
      change += std::fabs(st->gamma[k] - st->last_gamma[k]);
    }
    if (change < m.vi_tol * K) break;
  }
  // rows = phi for every term (accumulate writes n_w phi_k).
  st->rows.resize(static_cast<size_t>(T) * K);
  for (uint32_t j = 0; j < T; ++j)
    std::memcpy(st->rows.data() + static_cast<size_t>(j) * K, st->fast_phi.data(), K * sizeof(double));
}

// ---- Local step: collapsed Gibbs -------------------------------------------------

// Uniform double in [0, 1) from 53 random bits (no library distribution, so
// the same seed gives the same numbers everywhere).
inline double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

inline uint32_t SampleTopic(const double* p, uint32_t K, std::vector<double>& cdf, std::mt19937_64& rng) {
  double c = 0;
  for (uint32_t k = 0; k < K; ++k) {
    c += p[k];
    cdf[k] = c;
  }
  const double u = Uniform(rng) * c;
  uint32_t k = 0;
  while (k + 1 < K && cdf[k] <= u) ++k;
  return k;
}

// p(z_i = k | z_-i) propto (alpha + n_dk^-i) E[beta_k,w_i] (eq. 30 / App. B
// eq. 19). Each term of count c becomes ceil(c) tokens of weight c / ceil(c)
// (exact for integer counts). Leaves in st->rows the per-term topic shares
// phi_wk (sum_k phi_wk = 1) averaged over the sample sweeps, and in st->theta
// E[theta_k] from the averaged topic counts.
void GibbsLocal(const Model& m, const trib_document& d, State* st) {
  const uint32_t K = m.K, T = d.num_terms;
  st->tok_term.clear();
  st->tok_w.clear();
  for (uint32_t j = 0; j < T; ++j) {
    const double c = d.term_counts[j];
    const double reps = std::max(1.0, std::ceil(c));
    if (reps > 1e7) throw std::length_error("a term count above 1e7 is too large for gibbs inference");
    const double w = c / reps;
    for (uint32_t r = 0; r < static_cast<uint32_t>(reps); ++r) {
      st->tok_term.push_back(j);
      st->tok_w.push_back(w);
    }
  }
  const size_t N = st->tok_term.size();
  st->tok_z.assign(N, 0);
  st->ndk.assign(K, 0.0);
  st->ndk_sum.assign(K, 0.0);
  st->cdf.resize(K);
  st->acc.resize(K);
  std::vector<double> counts(static_cast<size_t>(T) * K, 0.0);
  auto probs = [&](uint32_t j) {
    const double* row = st->rows.data() + static_cast<size_t>(j) * K;
    for (uint32_t k = 0; k < K; ++k) st->acc[k] = (st->local_alpha + st->ndk[k]) * row[k];
  };
  for (size_t i = 0; i < N; ++i) {  // sequential initialisation
    probs(st->tok_term[i]);
    const uint32_t z = SampleTopic(st->acc.data(), K, st->cdf, st->rng);
    st->tok_z[i] = z;
    st->ndk[z] += st->tok_w[i];
  }
  const uint32_t sweeps = m.gibbs_burnin + m.gibbs_samples;
  for (uint32_t sweep = 0; sweep < sweeps; ++sweep) {
    for (size_t i = 0; i < N; ++i) {
      const double w = st->tok_w[i];
      st->ndk[st->tok_z[i]] -= w;
      probs(st->tok_term[i]);
      const uint32_t z = SampleTopic(st->acc.data(), K, st->cdf, st->rng);
      st->tok_z[i] = z;
      st->ndk[z] += w;
    }
    if (sweep >= m.gibbs_burnin) {
      for (size_t i = 0; i < N; ++i) counts[static_cast<size_t>(st->tok_term[i]) * K + st->tok_z[i]] += st->tok_w[i];
      for (uint32_t k = 0; k < K; ++k) st->ndk_sum[k] += st->ndk[k];
    }
  }
  const double S = m.gibbs_samples;
  st->theta.resize(K);
  const double denom = K * st->local_alpha + d.total_count;
  for (uint32_t k = 0; k < K; ++k) st->theta[k] = (st->local_alpha + st->ndk_sum[k] / S) / denom;
  // log p(x) estimate needs E[beta] before rows become phi.
  st->phinorm.resize(T);
  for (uint32_t j = 0; j < T; ++j) {
    st->phinorm[j] = Positive(Dot(st->theta.data(), st->rows.data() + static_cast<size_t>(j) * K, K));
  }
  for (uint32_t j = 0; j < T; ++j) {
    const double inv = 1.0 / (S * d.term_counts[j]);
    double* row = st->rows.data() + static_cast<size_t>(j) * K;
    for (uint32_t k = 0; k < K; ++k) row[k] = counts[static_cast<size_t>(j) * K + k] * inv;
  }
}

// ---- Local step: CVB0 (kernel and its equations in lda_cvb0.h) --------------------

// Runs the sweeps; leaves phi in st->fphi (scalar alpha, phi_float) or
// st->rows (T x K doubles, asymmetric), N_dk in st->nk,
// theta_k = (N_dk + alpha) / (L + K alpha) in st->theta and, per term, the
// last sweep's normaliser sum_k beta_kw (N_dk^{-w} + alpha) in st->phinorm.
// A scalar alpha: the float group kernel on st->fbeta (MeanBetaFloat);
// alpha_k per topic (asymmetric): the double vector kernel on st->rows (MeanBeta).
void Cvb0Local(const Model& m, const trib_document& d, bool predict, State* st) {
  const uint32_t K = m.K, T = d.num_terms;
  const uint32_t iters = predict ? m.cvb0_predict_iter : m.cvb0_max_iter;
  const double tol = predict ? m.cvb0_predict_tol : m.cvb0_tol;
  st->nk.resize(K);
  st->phinorm.resize(T);
  st->theta.resize(K);
  if (m.asymmetric) {  // alpha_k per topic: the vector kernel (the same arithmetic)
    st->phi.assign(static_cast<size_t>(T) * K, 0.0);
    st->nk.assign(K, 0.0);
    st->last_nk.resize(K);
    const double* a = st->local_alpha_vec.data();
    Cvb0SweepsVec(st->rows.data(), st->phi.data(), st->nk.data(), st->last_nk.data(), st->phinorm.data(), d.term_counts,
                  T, K, a, iters, tol);
    const double denom = 1.0 / (st->local_alpha_sum + d.total_count);
    for (uint32_t k = 0; k < K; ++k) st->theta[k] = (std::max(st->nk[k], 0.0) + a[k]) * denom;
    st->rows.swap(st->phi);  // rows = phi, as for gibbs
    return;
  }
  const uint32_t Kp = Cvb0Stride(K);
  st->fphi.resize(static_cast<size_t>(T) * Kp);  // (not cleared: the kernel's fresh start)
  st->fnk.resize(Kp);
  st->flast.resize(Kp);
  st->fnorm.resize(T);
  st->fcounts.resize(T);
  for (uint32_t j = 0; j < T; ++j) st->fcounts[j] = static_cast<float>(d.term_counts[j]);
  const double alpha = st->local_alpha;
  Cvb0FloatSweeps(st->fbeta.data(), st->fphi.data(), st->fnk.data(), st->flast.data(), st->fnorm.data(),
                  st->fcounts.data(), T, Kp, static_cast<float>(alpha), iters, static_cast<float>(tol), /*fresh=*/true);
  const double denom = 1.0 / (K * alpha + d.total_count);
  for (uint32_t k = 0; k < K; ++k) {
    st->nk[k] = st->fnk[k];
    st->theta[k] = (std::max(st->nk[k], 0.0) + alpha) * denom;
  }
  for (uint32_t j = 0; j < T; ++j) st->phinorm[j] = st->fnorm[j];
  st->phi_float = true;  // (phi stays in fphi: accumulate and the fused step read it there)
}

}  // namespace

// The Fast LDA bound on log p(x) (Shan & Banerjee 2010):
// eq. 60 with the terms of (55)-(59): E log p(pi | alpha) + E log p(z | pi)
// + E log p(x | beta, z) - E log q(pi | gamma) - E log q(z | phi), where
// E log p(z | pi) = m sum_k phi_k E log theta_k, E log p(x | beta, z) =
// sum_k phi_k S_k and E log q(z) = m sum_k phi_k log phi_k (m tokens share phi).
double FastElbo(const Model& m, const trib_document& d, const State& st) {
  const uint32_t K = m.K;
  const double a = st.local_alpha;
  double gsum = 0;
  for (uint32_t k = 0; k < K; ++k) gsum += st.gamma[k];
  const double psum = Digamma(gsum);
  const double mass = d.total_count;
  double elbo = LogGamma(K * a) - K * LogGamma(a) - LogGamma(gsum);
  for (uint32_t k = 0; k < K; ++k) {
    const double elog_theta = Digamma(st.gamma[k]) - psum;
    const double phi = st.fast_phi[k];
    elbo += (a - st.gamma[k]) * elog_theta + LogGamma(st.gamma[k]) + mass * phi * elog_theta + phi * st.fast_sum[k];
    if (phi > 0) elbo -= mass * phi * std::log(phi);
  }
  return elbo;
}

// Plug-in estimate of log p(x) from the last CVB0 sweep: every token's
// predictive probability given the rest of the document,
//   sum_w n_w log( sum_k beta_kw (N_dk^{-w} + alpha) / (L - u_w + K alpha) ).
// The logs in vectors (lda_math.h WeightedLogRatioSumT: the same bits in every width).
double Cvb0LogPx(const Model& m, const trib_document& d, State* st) {
  const double ka = m.asymmetric ? st->local_alpha_sum : m.K * st->local_alpha;
  bool nan = false;
  const double s = WeightedLogRatioSum(d.term_counts, st->phinorm.data(), d.total_count, ka, d.num_terms, &nan);
  // (A NaN stays one: the learner refuses the score by name.)
  return nan ? std::numeric_limits<double>::quiet_NaN() : s;
}

// ---- DLDA: the local step conditioned on a class (Shan & Banerjee 2010 §6) -------

bool LabelParameters(const Model& m, const trib_stats& s, State* st, uint32_t* bad) {
  const uint32_t K = m.K, H = m.H();
  st->eta.resize(static_cast<size_t>(H) * K);
  st->eexp.resize(static_cast<size_t>(H) * K);
  st->esum.assign(K, 0.0);
  for (uint32_t c = 0; c < K; ++c) {
    const double b = tributary::sdk::Mu(s, 2, m.LabelB() + c);
    for (uint32_t h = 0; h < H; ++h) {
      const double a = tributary::sdk::Mu(s, 1, m.LabelA() + uint64_t{h} * K + c);
      if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
        *bad = c;
        return false;
      }
      // §6.3: eta_hc = log(sum_i zbar_ic y_ih / sum_i zbar_ic / xi_i) = log(A_hc / B_c).
      const double e = a / b;
      st->eta[static_cast<size_t>(h) * K + c] = std::log(e);
      st->eexp[static_cast<size_t>(h) * K + c] = e;
      st->esum[c] += e;
    }
  }
  return true;
}

// The label's expected log-likelihood is bounded by eq. 41 (vi) / eq. 43
// (fast) with the variational xi:
//   sum_c zbar_c (eta_yc - sum_h e_hc / xi) + 1 - 1/xi - log xi,
// eta_(T-1)c = 0 (the reference class), xi = 1 + sum_c zbar_c sum_h e_hc
// (Table 2 (c)); it enters phi as the term lab_c / m (Table 2 (a)).
void LabelledLocalSteps(const Model& m, const trib_stats& s, const trib_document& d, State* st) {
  const uint32_t K = m.K, T = m.T, H = m.H(), J = d.num_terms;
  st->local_alpha = LocalAlpha(m, /*predict=*/false);  // (the burn-in applies, as in LocalStep)
  const double a = st->local_alpha;
  double mass = 0;
  for (uint32_t j = 0; j < J; ++j) mass += d.term_counts[j];
  const double inv_mass = mass > 0 ? 1.0 / mass : 0.0;
  const bool fast = m.inference == Inference::kFast;
  st->slot_gamma.resize(static_cast<size_t>(T) * K);
  st->slot_zbar.resize(static_cast<size_t>(T) * K);
  st->slot_lab.resize(static_cast<size_t>(T) * K);
  st->slot_xi.resize(T);
  st->slot_bound.resize(T);
  if (fast) {
    st->slot_phi.resize(static_cast<size_t>(T) * K);
    FastSums(m, s, d, st);  // S_k, shared by every class
  } else {
    ExpElogBeta(m, s, d.term_ids, J, st);  // rows, shared by every class
    st->slot_et.resize(static_cast<size_t>(T) * K);
    st->slot_phinorm.resize(static_cast<size_t>(T) * J);
    st->acc.resize(K);
  }
  std::vector<double>& lg = st->last_gamma;
  lg.resize(K);
  for (uint32_t y = 0; y < T; ++y) {
    double* gamma = st->slot_gamma.data() + static_cast<size_t>(y) * K;
    double* zbar = st->slot_zbar.data() + static_cast<size_t>(y) * K;
    double* lab = st->slot_lab.data() + static_cast<size_t>(y) * K;
    double& xi = st->slot_xi[y];
    const double* eta_y = y < H ? st->eta.data() + static_cast<size_t>(y) * K : nullptr;
    auto update_xi = [&] {
      double acc = 0;
      for (uint32_t c = 0; c < K; ++c) acc += zbar[c] * st->esum[c];
      xi = 1.0 + acc;
      for (uint32_t c = 0; c < K; ++c) lab[c] = (eta_y ? eta_y[c] : 0.0) - st->esum[c] / xi;
    };
    for (uint32_t c = 0; c < K; ++c) {
      gamma[c] = a + mass / K;
      zbar[c] = 1.0 / K;
    }
    if (fast) {
      double* phi = st->slot_phi.data() + static_cast<size_t>(y) * K;
      for (uint32_t c = 0; c < K; ++c) phi[c] = 1.0 / K;
      for (uint32_t it = 0; mass > 0 && it < m.vi_max_iter; ++it) {
        update_xi();
        // Fast DLDA (Table 2 (a)): phi_c propto exp(psi(gamma_c) + (S_c + lab_c) / m); gamma = alpha + m phi.
        double top = -HUGE_VAL;
        for (uint32_t c = 0; c < K; ++c) {
          phi[c] = Digamma(gamma[c]) + (st->fast_sum[c] + lab[c]) * inv_mass;
          top = std::max(top, phi[c]);
        }
        double z = 0;
        for (uint32_t c = 0; c < K; ++c) z += (phi[c] = std::exp(phi[c] - top));
        double change = 0;
        for (uint32_t c = 0; c < K; ++c) {
          phi[c] /= z;
          zbar[c] = phi[c];
          const double g = a + mass * phi[c];
          change += std::fabs(g - gamma[c]);
          gamma[c] = g;
        }
        if (change < m.vi_tol * K) break;
      }
      update_xi();
      // eq. 60 + eq. 43 at (gamma, phi, xi).
      double gsum = 0;
      for (uint32_t c = 0; c < K; ++c) gsum += gamma[c];
      const double psum = Digamma(gsum);
      double L = LogGamma(K * a) - K * LogGamma(a) - LogGamma(gsum) + 1.0 - 1.0 / xi - std::log(xi);
      for (uint32_t c = 0; c < K; ++c) {
        const double elog = Digamma(gamma[c]) - psum;
        L += (a - gamma[c]) * elog + LogGamma(gamma[c]) + mass * phi[c] * elog + phi[c] * (st->fast_sum[c] + lab[c]);
        if (phi[c] > 0) L -= mass * phi[c] * std::log(phi[c]);
      }
      st->slot_bound[y] = L;
      continue;
    }
    // DLDA (Table 2 (a)): phi_wk propto exp(E log theta_k + E log beta_kw + lab_k / m),
    // i.e. the vi step with et_k = exp(E log theta_k + lab_k / m); gamma = alpha + sum_w n_w phi_wk.
    double* et = st->slot_et.data() + static_cast<size_t>(y) * K;
    double* phinorm = st->slot_phinorm.data() + static_cast<size_t>(y) * J;
    auto refresh = [&] {  // et and phinorm from gamma and lab; acc = sum_w n_w row_w / phinorm_w
      double gsum = 0;
      for (uint32_t c = 0; c < K; ++c) gsum += gamma[c];
      const double norm = 1.0 / ExpDigamma(gsum);
      for (uint32_t c = 0; c < K; ++c) et[c] = ExpDigamma(gamma[c]) * norm * std::exp(lab[c] * inv_mass);
      std::fill(st->acc.begin(), st->acc.end(), 0.0);
      for (uint32_t j = 0; j < J; ++j) {
        const double* row = st->rows.data() + static_cast<size_t>(j) * K;
        const double p = Dot(et, row, K);
        phinorm[j] = p > 1e-300 ? p : 1e-300;
        Axpy(d.term_counts[j] / phinorm[j], row, st->acc.data(), K);
      }
    };
    for (uint32_t it = 0; mass > 0 && it < m.vi_max_iter; ++it) {
      update_xi();
      refresh();
      double change = 0;
      for (uint32_t c = 0; c < K; ++c) {
        const double g = a + et[c] * st->acc[c];
        change += std::fabs(g - gamma[c]);
        gamma[c] = g;
        zbar[c] = et[c] * st->acc[c] * inv_mass;
      }
      if (change < m.vi_tol * K) break;
    }
    // The phi that accumulate writes and the bound uses: from the final
    // gamma and xi (zbar its own mean).
    update_xi();
    refresh();
    if (mass > 0) {
      for (uint32_t c = 0; c < K; ++c) zbar[c] = et[c] * st->acc[c] * inv_mass;
    }
    // eq. 40 with eq. 41: the phi terms and the label's zbar lab term are
    // sum_w n_w log phinorm_w (phi = et row / phinorm exactly), so
    //   L = sum_w n_w log phinorm_w + sum_k [(alpha - gamma_k) E log theta_k + lgamma(gamma_k)]
    //       + lgamma(K alpha) - K lgamma(alpha) - lgamma(sum gamma) + 1 - 1/xi - log xi.
    double gsum = 0;
    for (uint32_t c = 0; c < K; ++c) gsum += gamma[c];
    const double psum = Digamma(gsum);
    double L = LogGamma(K * a) - K * LogGamma(a) - LogGamma(gsum) + 1.0 - 1.0 / xi - std::log(xi);
    for (uint32_t j = 0; j < J; ++j) L += d.term_counts[j] * std::log(phinorm[j]);
    for (uint32_t c = 0; c < K; ++c) L += (a - gamma[c]) * (Digamma(gamma[c]) - psum) + LogGamma(gamma[c]);
    st->slot_bound[y] = L;
  }
}

// DLDA's local steps for every class (LabelledLocalSteps), after the label
// parameters of the current statistics (LabelParameters).
int LabelledStep(const Model& m, const trib_stats& s, const trib_document& d, State* st, trib_error* err) {
  st->scored.valid = false;
  uint32_t bad = 0;
  if (!LabelParameters(m, s, st, &bad)) {
    return Fail(err, TRIB_ERR_NUMERIC, "label statistics of topic %u are not positive and finite", bad);
  }
  LabelledLocalSteps(m, s, d, st);
  return TRIB_OK;
}

// Runs the configured local step on `d`; results stay in `st`.
void LocalStep(const Model& m, const trib_stats& s, const trib_document& d, State* st, bool predict) {
  st->scored.valid = false;
  st->phi_float = false;
  st->local_alpha = LocalAlpha(m, predict);
  st->burn = st->local_alpha != m.alpha;
  if (m.asymmetric) {  // alpha_k, during the burn-in moved towards burnin_alpha as the scalar is
    const uint32_t K = m.K;
    st->local_alpha_vec.resize(K);
    const bool burn = !predict && static_cast<double>(m.t) < m.burnin;
    st->burn = burn;
    const double f = burn ? 1.0 - static_cast<double>(m.t) / m.burnin : 0.0;
    double sum = 0;
    for (uint32_t k = 0; k < K; ++k) {
      const double a = m.alpha_vec[k];
      sum += (st->local_alpha_vec[k] = burn ? a + (m.burnin_alpha - a) * f : a);
    }
    st->local_alpha_sum = sum;
    st->local_alpha = sum / K;
  }
  if (m.inference == Inference::kVi) {
    ExpElogBeta(m, s, d.term_ids, d.num_terms, st);
    ViFixedPoint(m, d, st);
    st->theta.resize(m.K);
    double gsum = 0;
    for (uint32_t k = 0; k < m.K; ++k) gsum += st->gamma[k];
    for (uint32_t k = 0; k < m.K; ++k) st->theta[k] = st->gamma[k] / gsum;
    st->phi_ready = false;
  } else if (m.inference == Inference::kFast) {
    FastLocal(m, s, d, st);
    st->theta.resize(m.K);
    double gsum = 0;
    for (uint32_t k = 0; k < m.K; ++k) gsum += st->gamma[k];
    for (uint32_t k = 0; k < m.K; ++k) st->theta[k] = st->gamma[k] / gsum;
    st->phi_ready = true;
  } else if (m.inference == Inference::kCvb0) {
    if (m.asymmetric) {
      MeanBeta(m, s, d.term_ids, d.num_terms, st);
    } else {
      MeanBetaFloat(m, s, d.term_ids, d.num_terms, st);
    }
    Cvb0Local(m, d, predict, st);
    st->phi_ready = true;
  } else {
    MeanBeta(m, s, d.term_ids, d.num_terms, st);
    GibbsLocal(m, d, st);
    st->phi_ready = true;
  }
}

}  // namespace tributary::lda
