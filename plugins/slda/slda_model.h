// The "slda" family's model and per-thread state, and what its files share:
// the family's entry points (slda.cc, whose header comment explains the
// model, its statistics, the estimation, the classifiers and the options),
// the local steps given a class (slda_local.cc) and the classifiers
// (slda_classify.cc: score, and the topic proportions). The topics are lda's
// (lda_model.h, lda_topics.h). Everything else stays file-local.
#ifndef TRIBUTARY_PLUGINS_SLDA_SLDA_MODEL_H_
#define TRIBUTARY_PLUGINS_SLDA_SLDA_MODEL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::slda {

enum class Train { kCvb0, kMap };
enum class Classifier { kCvb02, kCvb01, kMap };

struct Model {
  lda::Model topics;  // K, V, eta, raw_total, n, t, the cvb0 and burn-in settings
  uint32_t C = 0;
  double class_prior = 1.0;
  bool learn_alpha = true;
  double alpha0 = -1;
  Train train = Train::kCvb0;
  Classifier classifier = Classifier::kCvb02;
  uint32_t classify_iter = 20;
  double classify_tol = 0.01;
  uint32_t map_iter = 50;
  double map_tol = 1e-4;
  std::vector<double> alpha;      // C x K (a function of S and N; cached for warm starts)
  std::vector<double> alpha_sum;  // A_c
  std::vector<double> log_norm;   // log G(A_c) - sum_k log G(alpha_ck)
  bool fitted = false;            // alpha has been fitted (rebuild) or imported (import_cache)
  bool learn_eta = false;         // eta learned (topics.eta_point, a cache like alpha)
  uint32_t eta_every = 1000;

  uint32_t K() const { return topics.K; }
  uint64_t Counts() const { return topics.V * topics.K; }
  uint64_t LogTheta() const { return Counts() + C; }
  double T0() const { return sdk::Digamma(alpha0) - sdk::Digamma(topics.K * alpha0); }
  void Derive(uint32_t c) {  // alpha_sum and log_norm of class c
    const uint32_t K = topics.K;
    double a = 0, lg = 0;
    for (uint32_t k = 0; k < K; ++k) {
      a += alpha[size_t{c} * K + k];
      lg += lda::LogGammaPositive(alpha[size_t{c} * K + k]);
    }
    alpha_sum[c] = a;
    log_norm[c] = lda::LogGammaPositive(a) - lg;
  }
};

struct State {
  lda::State base;  // rows (the document's phi_kw), inv_total, last_nk, phinorm
  // Per class slot c (cvb0-1 and the training steps): gamma (J x K each),
  // topic counts n (K each).
  std::vector<double> gamma, nk, theta;
  std::vector<double> local_alpha, mix, post, work;
  std::vector<uint32_t> active;  // cvb0-2: the classes still in the mixture
  std::vector<char> have_post;
  std::vector<double> scratch;    // proportions: the scores it does not return
  std::vector<double> ones;       // map: the prior-free first phase
  std::vector<double> log_prior;  // log P(c) of the current document's scoring
  // accumulate: E[log theta | x, c] of one class, of every class, burn-in flags
  std::vector<double> e_log_theta, e_log_theta_by_class;
  std::vector<char> burn;
};

inline Model* M(trib_family_model* m) { return sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return sdk::As<Model>(m); }

inline double ClassCount(const Model& m, const trib_stats& s, uint32_t c) { return sdk::Mu(s, 1, m.Counts() + c); }

// ---- Local steps (slda_local.cc; each explained with its definition) ---------------

inline double LogPrior(const Model& m, const trib_stats& s, uint32_t c, double log_total) {
  return std::log(ClassCount(m, s, c)) - log_total;
}

double LogSumExp(const double* x, uint32_t n);
double LogTotal(const Model& m, const trib_stats& s);
void Cvb0Slot(const Model& m, const trib_document& d, const double* a, uint32_t iters, double tol, uint32_t c,
              State* st);
void MapTheta(const Model& m, const trib_stats& s, const trib_document& d, const double* a, bool mix, State* st);
void TrainStep(const Model& m, const trib_stats& s, const trib_document& d, uint32_t c, State* st, double* e,
               bool* burnin);
void Prepare(const Model& m, const trib_stats& s, const trib_document& d, State* st);
double PlugInLogPx(const trib_document& d, const double* norm, double A);

// ---- The classifiers (slda_classify.cc; the vtable's score, components, proportions) --

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err);
int Components(const trib_family_model* mm, uint32_t* count, trib_error*);
int Proportions(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
                double* out, trib_error* err);

}  // namespace tributary::slda

#endif  // TRIBUTARY_PLUGINS_SLDA_SLDA_MODEL_H_
