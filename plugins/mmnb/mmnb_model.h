// The "mmnb" family's model, document features and per-thread state, and
// what its files share: the family's entry points (mmnb.cc, whose header
// comment explains the model, the statistics, their layout and the options),
// the check-step (mmnb_check.cc: rebuild and commit) and the variational
// local step (mmnb_local.cc). Everything else stays file-local to one of them.
#ifndef TRIBUTARY_PLUGINS_MMNB_MMNB_MODEL_H_
#define TRIBUTARY_PLUGINS_MMNB_MMNB_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tributary/plugin_sdk.h"

namespace tributary::mmnb {

// Statistic kinds, in layout order.
// kLogPi (learn_alpha): the running average of E[log pi_c], the sufficient
// statistic of the membership prior alpha (eq. 21 / 52's data term).
enum Kind : uint32_t { kGN = 0, kGS, kGV, kPN, kPS, kCat, kLA, kLB, kLogPi, kNumKinds };

enum FeatureType : uint8_t { kGauss = 0, kPoisson = 1, kCategorical = 2 };

struct Model {
  uint32_t K = 5;
  uint32_t G = 0, P = 0, C = 0;  // Gaussian, Poisson, categorical features
  uint32_t num_reals = 0;
  uint32_t T = 0;  // classes
  bool discriminative = false;
  bool fast = false;
  uint32_t max_iters = 100;
  double tol = 1e-4;
  double alpha = -1;  // < 0: 1/K
  // learn_alpha: alpha_vec is fitted to the kLogPi statistics (FitAlpha,
  // eq. 21 / 52) by rebuild and commit; otherwise every entry is Alpha(m).
  bool learn_alpha = false;
  std::vector<double> alpha_vec;
  double prior = 1.0;
  double prior_variance = 1.0;
  double prior_rate = 1.0;
  double smoothing = 1.0;
  double label_prior = 1.0;
  double init_spread = 1.0;
  uint64_t warmup = 0;  // documents learned with the fast step before the standard one
  // real index -> (type, slot within its type)
  std::vector<uint8_t> real_type;
  std::vector<uint32_t> real_slot;
  std::vector<uint32_t> card;     // categorical cardinalities
  std::vector<uint64_t> cat_off;  // absolute offset of categorical j (C + 1 entries)
  uint64_t off[kNumKinds + 1] = {};
  int block_of[kNumKinds] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  uint32_t num_blocks = 0;
  // Cache: raw totals R_jc = sum_r raw M_jcr, so T_jc = scale R_jc + shift eps r_j.
  std::vector<double> cat_total;
  double n = 1.0;        // effective data-set size, from the last rebuild / commit
  uint64_t updates = 0;  // sdEM steps applied so far (trib_step.t), for warmup
  // The local step in use now: eq. 23-24 when fast or still warming up.
  bool FastNow() const { return fast || updates < warmup; }

  uint32_t H() const { return T > 0 ? T - 1 : 0; }
  uint32_t Outputs() const { return discriminative ? T : K; }
};

// One present feature of the current document.
struct Feature {
  uint8_t type;
  uint32_t slot;  // index within its type
  double x;       // value (Gaussian, Poisson)
  uint32_t cat;   // category (categorical)
};

struct State {
  // Cache of the last scored document (score -> accumulate).
  bool valid = false;
  bool fast = false;  // the local step used for this document
  uint64_t doc_index = 0;
  const void* doc_ptr = nullptr;
  std::vector<Feature> feats;
  std::vector<double> ll;     // m x K: log p(x_j | theta_jc)
  std::vector<double> llsum;  // K: sum_j ll
  // Per inference slot s (1 for latent outputs, T for classes):
  std::vector<double> phi;    // s x (m x K) standard, s x K fast
  std::vector<double> gamma;  // s x K
  std::vector<double> zbar;   // s x K
  std::vector<double> xi;     // s
  // Label parameters of the current model: eta (H x K), e = exp(eta), sum_h e_hc.
  std::vector<double> eta, eexp, esum;
  std::vector<double> work, work2, dig, q;
};

// The block of a statistic kind (present in the layout).
inline uint32_t B(const Model& m, uint32_t kind) { return static_cast<uint32_t>(m.block_of[kind]); }

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

// ---- Check-step (mmnb_check.cc) --------------------------------------------------

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err);
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err);

// ---- Local step (mmnb_local.cc) --------------------------------------------------

// The membership prior's default: the option alpha, or 1/K.
double Alpha(const Model& m);

// learn_alpha: alpha fitted to t_c, the mean E[log pi_c] of the documents
// (the kLogPi statistics), by eq. 21 / 52 (FitDirichlet, plugins/shared/dirichlet_fit.h) from
// Alpha(m) for every component, so alpha is a function of the statistics
// alone (resumed models continue bit for bit). REQUIRES: t feasible.
uint32_t FitAlpha(const Model& m, const double* t, std::vector<double>* alpha);

// Collects the present features and log p(x_j | theta_jc) for every c.
int Prepare(const Model& m, const trib_stats& s, const trib_document* d, State* st, trib_error* err);

// The local variational step for inference slot `slot`, conditioned on class
// y (discriminative, y >= 0) or not (y = -1). Returns the lower bound L on
// log p(x) (log p(x, y) with a label).
double Infer(const Model& m, State* st, uint32_t slot, int64_t y);

}  // namespace tributary::mmnb

#endif  // TRIBUTARY_PLUGINS_MMNB_MMNB_MODEL_H_
