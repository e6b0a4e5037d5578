// The "lgda" family's model and per-thread state, and what its two files
// share: the family's entry points (lgda.cc, whose header comment explains
// the model, the local step, the statistics and the options) and the local
// step, EP over theta (lgda_local.cc). The topics are lda's (lda_model.h,
// lda_topics.h). Everything else stays file-local.
#ifndef TRIBUTARY_PLUGINS_LGDA_LGDA_MODEL_H_
#define TRIBUTARY_PLUGINS_LGDA_LGDA_MODEL_H_

#include <cstdint>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::lgda {

enum class Match { kMoments, kLogs };

struct Model {
  lda::Model topics;  // T = K + 1 topics (topics.K), V, eta, raw_total, n, t, the random start
  uint32_t K = 0;     // sticks: T - 1
  double alpha0 = -1;
  Match match = Match::kMoments;
  double damping = 1.0;
  uint32_t ep_iter = 10;
  double ep_tol = 1e-3;
  bool learn_prior = false;
  double prior_floor = 0;
  double burnin = 0;
  double burnin_alpha = -1;
  // The prior GenDir(alpha, kappa) (K each): learned (a function of block 1,
  // warm-started, cached) or the start. start_* and the burn-in's prior: the
  // GD form of a symmetric Dirichlet. e0, f0: E[log V_k], E[log(1 - V_k)] at
  // the start (block 1 holds the documents' mean minus these).
  std::vector<double> alpha, kappa, start_alpha, start_kappa, burn_alpha, burn_kappa, e0, f0;
  std::vector<double> log_beta_prior;  // log B(alpha_k, kappa_k)
  bool fitted = false;

  uint32_t T() const { return topics.K; }
  uint64_t PriorStats() const { return topics.V * topics.K; }  // offset of block 1
  void Derive() {
    log_beta_prior.resize(K);
    for (uint32_t k = 0; k < K; ++k) {
      log_beta_prior[k] = lda::LogGammaPositive(alpha[k]) + lda::LogGammaPositive(kappa[k]) -
                          lda::LogGammaPositive(alpha[k] + kappa[k]);
    }
  }
};

struct State {
  lda::State base;  // rows (beta_tw of the document's terms, J x T), inv_total
  bool burnin = false;
  // EP: q's parameters (K each), the sites (J x K each), the prior used.
  std::vector<double> qa, qb, sa, sb, pa, pb, last;
  std::vector<double> ca, cb, theta, r, na, nb, zero;
  std::vector<double> resp;  // J x T: the final cavities' responsibilities r_wt
  double log_evidence = 0;
  double scratch[6];
  uint32_t sweeps = 0, skipped = 0;
};

inline Model* M(trib_family_model* m) { return sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return sdk::As<Model>(m); }

// ---- The local step: EP over theta (lgda_local.cc) -------------------------------

// E[theta_t] of the sticks Beta(a_k, b_k) (eq. 71) into theta (T).
inline void StickMeans(const double* a, const double* b, uint32_t K, double* theta) {
  double rest = 1.0;
  for (uint32_t k = 0; k < K; ++k) {
    const double v = a[k] / (a[k] + b[k]);
    theta[k] = rest * v;
    rest *= 1.0 - v;
  }
  theta[K] = rest;
}

// EP for document d (prior: LocalPrior, training or not; topic rows:
// lda::MeanBeta) into st: q in st->qa, st->qb, the final responsibilities
// (st->resp) and the evidence estimate (st->log_evidence).
void Run(const Model& m, const trib_stats& s, const trib_document& d, bool training, State* st);

}  // namespace tributary::lgda

#endif  // TRIBUTARY_PLUGINS_LGDA_LGDA_MODEL_H_
