// The "lda" family's model and per-thread state, and what its files share:
// the family's entry points (lda.cc, whose header comment explains the model,
// its statistics, the local steps and the options; lda_step.cc, lda_fused.cc:
// lda_family.h), the local steps (lda_local.cc) and the kernels chosen for
// this CPU (lda_kernels.cc, also compiled into slda and lgda, which use this
// header's Model and State for their topics). Everything else stays file-local.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_MODEL_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_MODEL_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tributary/plugin_sdk.h"

namespace tributary::lda {

enum class Inference { kVi, kGibbs, kCvb0, kFast };

struct Model {
  uint32_t K = 10;
  uint64_t V = 0;
  double alpha = -1;  // < 0 until set: 1/K (learn_alpha: the learned value, refitted by rebuild / commit)
  // learn_alpha: alpha learned online, symmetric (Shan & Banerjee eq. 21 with
  // equal components): the last block (1 entry) holds the running mean over
  // documents of (1/K) sum_k E[log theta_k]; alpha0 is the option's value
  // (the start of the fit and the statistic's prior).
  bool learn_alpha = false;
  double alpha0 = -1;
  // alpha_shape=asymmetric (with learn_alpha, cvb0 only): one alpha_k per
  // topic, the Dirichlet fit to the documents' running mean E[log theta_k]
  // (K entries in the last block), warm-started, so a cache (alpha_fitted:
  // fitted by rebuild or imported with a snapshot). alpha is then their mean.
  bool asymmetric = false;
  std::vector<double> alpha_vec;
  bool alpha_fitted = false;
  double eta = -1;  // < 0 until set: 1/K
  // > 0: the topics' point estimate uses lambda_kw = n scale raw_kw + eta_point
  // (the counts with this prior) instead of the block's accumulated prior
  // mass n shift eta (slda's learned eta, learn_eta=1); <= 0: the block's.
  double eta_point = -1;
  Inference inference = Inference::kCvb0;
  uint32_t vi_max_iter = 50;
  double vi_tol = 1e-3;
  uint32_t cvb0_max_iter = 5;  // training (score / accumulate)
  double cvb0_tol = 0.5;
  uint32_t cvb0_predict_iter = 100;  // completion
  double cvb0_predict_tol = 0.01;
  uint32_t gibbs_burnin = 10;
  uint32_t gibbs_samples = 10;
  double init_mass = 1.0;     // sum over topics and terms of mu_0
  double init_shape = 100.0;  // shape of the Gamma noise of mu_0
  double burnin = 3000;       // documents over which the local alpha anneals
  double burnin_alpha = -1;   // the local alpha at the first document (< 0 until set: 30/K)
  // DLDA (discriminative=1, Shan & Banerjee 2010 §6): the schema's T
  // classes are the outputs; blocks 1 (A, H x K) and 2 (B, K) after the
  // topics hold the label statistics, eta_hc = log(A_hc / B_c).
  bool discriminative = false;
  uint32_t T = 0;  // classes
  double label_prior = 1.0;
  uint64_t t = 0;                 // sdEM steps so far (kept by commit / rebuild)
  double n = 1.0;                 // effective corpus size (trib_step.n)
  std::vector<double> raw_total;  // R[k] = sum_w raw[w*K + k]

  uint32_t H() const { return T > 0 ? T - 1 : 0; }
  uint64_t TopicEntries() const { return V * K; }
  uint64_t LabelA() const { return V * K; }                                                   // offset of A (H x K)
  uint64_t LabelB() const { return V * K + uint64_t{H()} * K; }                               // offset of B (K)
  uint64_t LogTheta() const { return V * K + (discriminative ? uint64_t{H() + 1} * K : 0); }  // learn_alpha's entry
  uint32_t LabelBlocks() const { return discriminative ? 2 : 0; }
};

// Which document (and model step) a state's cached local results belong to:
// score() remembers it, accumulate() reuses the results only for the same
// document at the same step (lda, slda, lgda).
struct ScoredDoc {
  bool valid = false;
  uint64_t index = 0;
  const uint32_t* terms = nullptr;
  uint32_t num_terms = 0;
  uint64_t t = 0;
  void Remember(const trib_document& d, uint64_t step) {
    valid = true;
    index = d.index;
    terms = d.term_ids;
    num_terms = d.num_terms;
    t = step;
  }
  bool Matches(const trib_document& d, uint64_t step) const {
    return valid && index == d.index && terms == d.term_ids && num_terms == d.num_terms && t == step;
  }
};

// Per-thread scratch; also carries the local step's results from score() to
// accumulate() for the same document.
struct State {
  std::mt19937_64 rng;
  ScoredDoc scored;  // the document the cached local results belong to
  // Topic factors of the current document, K each.
  std::vector<double> inv_total;  // 1 / lambda_k (gibbs) or exp(-psi(lambda_k)) (vi)
  std::vector<double> gamma, last_gamma, et, acc, theta;
  // |d| x K: vi: exp(E[log beta_kw]); gibbs: E[beta_kw], then phi.
  std::vector<double> rows;
  std::vector<double> phinorm;  // |d|
  // gibbs
  std::vector<uint32_t> tok_term, tok_z;
  std::vector<double> tok_w, ndk, ndk_sum, cdf;
  // cvb0: N_dk (K); alpha_shape=asymmetric (the double kernel): phi (|d| x K)
  // and N_dk's value one sweep ago.
  std::vector<double> phi, nk, last_nk;
  // cvb0 with a scalar alpha (the float group kernel, rows of Cvb0Stride(K)):
  // E[beta] (|d| x Kp), phi (|d| x Kp), N_dk and its last value (Kp), the
  // normalisers and the counts (|d|).
  std::vector<float> fbeta, fphi, fnk, flast, fnorm, fcounts;
  uint32_t fbeta_stride = 0;  // (fbeta's padding, K to Kp of each row, is zero for this stride)
  // fast (Shan & Banerjee's Fast LDA): the document's one phi (K), and
  // sum_w n_w E[log beta_kw] per topic (K).
  std::vector<double> fast_phi, fast_sum;
  double local_alpha = 0;  // the alpha of the last local step (LocalAlpha)
  // asymmetric: the last local step's alpha_k (K) and their sum; burn: it ran inside the burn-in.
  std::vector<double> local_alpha_vec;
  double local_alpha_sum = 0;
  bool burn = false;
  bool phi_ready = false;  // rows hold phi (gibbs) instead of exp(E log beta) (vi)
  bool phi_float = false;  // cvb0 with a scalar alpha: phi is in fphi (rows of Cvb0Stride(K)), not in rows

  // DLDA: the label parameters of the current statistics (eta, exp(eta),
  // sum_h exp(eta_hc)) and, per class slot y, the local step conditioned on
  // y: gamma, et (vi: exp(E log theta_k + label_k / m)), phinorm (vi), phi
  // (fast), zbar (E[mean z]), xi, and the label term of phi (K each).
  std::vector<double> eta, eexp, esum;
  std::vector<double> slot_gamma, slot_et, slot_phinorm, slot_phi, slot_zbar, slot_lab, slot_xi, slot_bound;

  // The fused step's general path (DLDA, learn_alpha): the delta accumulate
  // writes, then applied and committed as the engine does.
  std::vector<uint64_t> fused_index;
  std::vector<double> fused_value;
  // The fast path's topic totals R_k, updated here and copied back when the
  // whole step succeeded (K).
  std::vector<double> fused_total;
};

// ---- Kernels over K (Load2 also serves Commit's row check; the rest are in lda_local.cc) -----

typedef double v2d __attribute__((vector_size(16)));
inline v2d Load2(const double* p) {
  v2d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// lambda_kw = a raw + b, lambda_k = a R_k + b V with a = n scale, b = n shift eta.
struct LambdaMap {
  double a, b;
};
inline LambdaMap MapOf(const Model& m, const trib_stats& s) {
  const trib_block& blk = s.blocks[0];
  return {m.n * blk.scale, m.eta_point > 0 ? m.eta_point : m.n * blk.shift * blk.alpha_bar};
}
// Positive even if rounding in the lazy map gave 0 (never negative: raw >= 0).
inline double Positive(double x) { return x > 1e-300 ? x : 1e-300; }

// ---- Local step (lda_local.cc) ---------------------------------------------------

// Runs the configured local step on `d`; results stay in `st`.
void LocalStep(const Model& m, const trib_stats& s, const trib_document& d, State* st, bool predict = false);

// Per-document ELBO of the vi step (a lower bound on log p(x)), from the
// results LocalStep left in `st`.
double DocumentElbo(const Model& m, const trib_document& d, const State& st);

// The Fast LDA bound on log p(x) (mmnb-shan-banerjee-2010 eq. 60) from the
// results LocalStep left in `st`.
double FastElbo(const Model& m, const trib_document& d, const State& st);

// DLDA (m.discriminative): the label parameters eta from the statistics
// (§6.3, eta_hc = log(A_hc / B_c)) into st; false when A or B is not
// positive and finite (*bad names the component).
bool LabelParameters(const Model& m, const trib_stats& s, State* st, uint32_t* bad);

// DLDA: the local step conditioned on class y for every y (vi or fast, with
// the label term of Table 2 (a)-(c)); slot y's results and its bound on
// log p(x, y) (eq. 40 with eq. 41 / 43) stay in st. REQUIRES: LabelParameters.
void LabelledLocalSteps(const Model& m, const trib_stats& s, const trib_document& d, State* st);

// Plug-in estimate of log p(x) from the last CVB0 sweep LocalStep ran.
double Cvb0LogPx(const Model& m, const trib_document& d, State* st);

// DLDA: LabelParameters, then LabelledLocalSteps; TRIB_ERR_NUMERIC in `err`
// when the label statistics are not positive and finite.
int LabelledStep(const Model& m, const trib_stats& s, const trib_document& d, State* st, trib_error* err);

// ---- Kernels chosen for this CPU (lda_kernels.cc; lda, slda, lgda) ---------------

// out_j = log x_j for x_j normal and positive (lda_math.h LogEachT, on this
// CPU's widest lanes: the same bits in every width).
void LogEach(const double* x, double* out, uint32_t n);

// Fills st->rows with E[beta_kw] = lambda_kw / lambda_k for the terms `ids`
// (|ids| x K; st->inv_total = 1 / lambda_k), the topics' point estimate of
// the cvb0 and gibbs steps.
void MeanBeta(const Model& m, const trib_stats& s, const uint32_t* ids, uint32_t T, State* st);
// The same into st->fbeta, floats in rows of Cvb0Stride(K) (zero padding).
void MeanBetaFloat(const Model& m, const trib_stats& s, const uint32_t* ids, uint32_t T, State* st);

// The CVB0 sweeps of lda_cvb0.h with a K-vector alpha (the supervised family:
// eq. 7 with the class's alpha row), on this CPU's kernel.
uint32_t Cvb0SweepsVec(const double* beta, double* phi, double* nk, double* last, double* norm, const double* counts,
                       uint32_t T, uint32_t K, const double* alpha, uint32_t max_iter, double tol);

// The float group sweeps of lda_cvb0.h (a scalar alpha; rows of Kp =
// Cvb0Stride(K)), on this CPU's kernel.
uint32_t Cvb0FloatSweeps(const float* beta, float* phi, float* nk, float* last, float* norm, const float* counts,
                         uint32_t T, uint32_t Kp, float alpha, uint32_t max_iter, float tol, bool fresh);

// lda_math.h's WeightedLogRatioSumT (Cvb0LogPx's sum) on this CPU's widest
// lanes: the same bits in every width.
double WeightedLogRatioSum(const double* c, const double* p, double t, double a, uint32_t n, bool* nan);

// Picks the CVB0 sweep kernels, MeanBeta's and LogGammaSum's for this CPU (AVX2 where
// available; both give the same bits, lda_cvb0.h, lda_math.h). Called once,
// at plugin init.
void SelectCvb0Kernel();

// sum_k log Gamma(a_k + n_k) (a_k + n_k > 0) on this CPU's widest lanes
// (lda_math.h LogGammaSumT: the same bits in every width; slda's class
// posteriors, lgda's evidence).
double LogGammaSum(const double* a, const double* n, uint32_t K);

}  // namespace tributary::lda

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_MODEL_H_
