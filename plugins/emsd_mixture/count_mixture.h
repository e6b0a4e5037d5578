// Mixtures of EDCM / EMSD distributions over count vectors, learned by
// SEP, EP or ADF (lib: sep_engine.h; hooks: sep_abi.h). One implementation,
// two plugins: "emsd-mixture" (thesis ch. 3) and "edcm-mixture" (ch. 2).
//
// Model (eq. 14, 45, 46). K components; a document x (counts x_w over the
// vocabulary, length n) comes from component j with probability pi_j and
//   EDCM(x | a)    = n! / prod_{x_w>=1} x_w * G(s)/G(s+n) * prod_{x_w>=1} a_w
//   EMSD(x | a, b) = EDCM(x | a) * prod_{x_w>=1} b_w^(-x_w),    s = sum_w a_w,
// a = alpha_j the shape (EDCM's beta in ch. 2's notation), b = beta_j the
// scale. EDCM is EMSD with b = 1.
//
// Approximate posterior (eq. 17-18, 47-49): q(pi) Dirichlet, q(a_jw) and
// q(b_jw) independent Gaussians (diagonal, as the thesis uses "at inference
// time"). Natural parameters, laid out so a document's support is |d| runs
// of K*G consecutive entries:
//   block 0  pi:     eta_k = a_k - 1                              K entries
//   block 1  gauss:  (tau, h = tau m) of alpha_kw [, of beta_kw] G*K*V entries
//                    at K + (w K + k) G + {0, 1 [, 2, 3]}, G = 2 or 4
//   block 2  seed:   the init seed (family-owned, never touched by the engine)
// The engine keeps lambda = lambda0 + N mu (sep_abi.h); all blocks have
// nu = 0 and alpha_bar = 0.
//
// Prior lambda0: Dirichlet(pi_prior) on pi; N(m0_kw, shape_prior_variance) on
// alpha_kw with m0_kw = shape_prior_mean * exp(init_jitter * u_kw), u_kw a
// hash of (seed, k, w) uniform in [-1, 1] (the thesis's "random values for
// the prior means", §3.4.1): this is the components' symmetry breaking, and
// it is reproducible from the seed stored in block 2 (so a loaded snapshot
// has the same prior); N(scale_prior_mean, scale_prior_variance) on beta.
//
// Moment matching (eq. 26-35, 60-64) for one document, cavity given:
//  * Z_i = sum_j E[pi_j] E_j, E_j = E_cavity[EMSD(x | a_j, b_j)] (eq. 27-29),
//    by Monte Carlo with S cavity samples (antithetic pairs, shared by the
//    components; samples made positive by reflection, |theta|, i.e. the
//    likelihood is read at |theta| so the tilted distribution stays a proper
//    density on R). s = sum of the document's sampled a_w plus the rest of
//    the vocabulary, sampled from N(T_j - sum_doc m, U_j - sum_doc v) where
//    T_j, U_j are the posterior totals of means and variances (cached).
//  * E_j is estimated factorised, E[G(s)/G(s+n)] prod_w E[a_w] prod_w E[b_w^-x],
//    each factor a mean over the same S samples: a product of S-sample means
//    has far lower variance than the mean of S products once documents have
//    more than a handful of distinct terms.
//  * Tilted moments of each coordinate: the tilted marginal is
//    (1 - r_j) cavity + r_j cavity * l_jw / E[l_jw] (r_j the responsibility
//    a_j E_j / Z_i), with per-coordinate importance weights
//    l = |a_w| G(s)/G(s+n) for a shape, |b_w|^-x_w for a scale (the other
//    coordinates' factors are integrated out under the cavity, which is what a
//    factorised q can represent). Mean and variance are written as the exact
//    cavity moments plus weighted-minus-plain sample moments of the centred
//    draws (a control variate: an uninformative document changes nothing,
//    without Monte Carlo noise):
//      mean = m + r D1,  var = v + r D2 - r^2 D1^2,
//      D1 = sum_s (w_s - 1/S) c_s,  D2 = sum_s (w_s - 1/S) c_s^2,  c_s = theta_s - m.
//    This gives the new mean and *covariance* directly (DESIGN.md: eq. 35 and
//    63-64 are misprinted as precisions); lambda_new = (1/var, mean/var).
//  * Dirichlet (eq. 30, 33, 60): match E[log pi_k] of the tilted mixture
//    sum_j r_j Dir(a + e_j):  psi(a'_k) - psi(sum a') =
//    psi(a_k) + r_k / a_k - psi(A) - 1/A, solved by Minka's fixed point
//    Newton's method (Minka 2000; its fixed point a'_k <- psi^-1(psi(sum a')
//    + t_k) converges too slowly when sum a' ~ N).
//
// Locality: the document's evidence about terms it does not contain enters
// only through s; that effect on their (tiny, O(n / s)) marginals is not
// propagated to them, which keeps a document's support (and cost) at
// K + |d| K G entries. The totals T_j, U_j are updated incrementally in
// commit and recomputed in full every `refresh` updates (the SEP decay moves
// untouched entries a little towards the prior between refreshes).
//
// Scale (EMSD only). eq. 45 grows without bound as b_w -> 0 for every
// observed term, so the likelihood does not identify the scale: a Gaussian
// site on b has negative precision and the posterior precision eventually
// turns non-positive (the engine then skips the update). The default is
// therefore scale=fixed (b = 1, the value the thesis's synthetic data use,
// §3.4.1: the family is then EDCM with EMSD's option names);
// scale=learn keeps Gaussian sites on b_jw as the thesis describes, with a
// tight prior (scale_prior_variance, default 0.01).
//
// score(): log p(z = k, x) = log E[pi_k] + log EMSD(x | E[a_k], E[b_k]) with
// s = T_k (posterior means; K outputs, TRIB_OUTPUTS_LATENT).
//
// Options: components=K (2), samples=S (100, >= 2), pi_prior (1; "prior" is
// an alias), shape_prior_mean (0.5), shape_prior_variance (1), init_jitter
// (0.5), refresh (1000; 0 = only at rebuild), and for emsd-mixture scale=fixed|
// learn (fixed), scale_prior_mean (1), scale_prior_variance (0.01).
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_

#include <algorithm>
#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tributary/plugin_sdk.h"
#include "tributary/sep_abi.h"

namespace tributary::count_mixture {

using sdk::Fail;
using sdk::Guard;

enum class Flavor { kEdcm, kEmsd };

inline const trib_host_api* g_host = nullptr;

constexpr uint32_t kBlockPi = 0;
constexpr double kTiny = 1e-300;

inline double Lgamma(double x) { return g_host ? g_host->lgamma(x) : std::lgamma(x); }
inline double Digamma(double x) { return g_host ? g_host->digamma(x) : boost::math::digamma(x); }
inline double Trigamma(double x) { return boost::math::trigamma(x); }

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Model {
  Flavor flavor = Flavor::kEmsd;
  const char* name = "emsd-mixture";
  uint32_t K = 2;
  uint64_t V = 0;
  uint32_t S = 100;
  bool learn_scale = false;
  uint32_t G = 2;  // natural parameters per (term, component)
  double pi_prior = 1.0;
  double shape_mean = 0.5;
  double shape_var = 1.0;
  double scale_mean = 1.0;
  double scale_var = 0.01;
  double jitter = 0.5;
  uint64_t refresh = 1000;
  bool absent_shift = false;  // option absent=shift (experimental)
  uint64_t P = 0;             // K + G K V
  // Caches: N, the prior's seed, posterior totals of the shapes.
  double n = 1.0;
  uint64_t seed = 0;
  std::vector<double> total_mean;  // T_k = sum_w E[alpha_kw]
  std::vector<double> total_var;   // U_k = sum_w Var[alpha_kw]
  uint64_t commits = 0;
  std::vector<double> scratch;

  // Entry of parameter c (0 tau_alpha, 1 h_alpha, 2 tau_beta, 3 h_beta) of
  // component k, term w; block 1 + k G + c holds (k, c) for all terms.
  uint64_t Gauss(uint64_t w, uint32_t k, uint32_t c) const { return K + (static_cast<uint64_t>(k) * G + c) * V + w; }
  uint32_t GaussBlock(uint32_t k, uint32_t c) const { return 1 + k * G + c; }
  uint32_t SeedBlock() const { return 1 + K * G; }
  double ShapePriorMean(uint32_t k, uint64_t w) const {
    const uint64_t h = SplitMix64(SplitMix64(seed) ^ (static_cast<uint64_t>(k) * V + w + 1));
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    return shape_mean * std::exp(jitter * u);
  }
  // lambda0 at entry i < P.
  double Prior(uint64_t i) const {
    if (i < K) return pi_prior - 1.0;
    const uint64_t r = i - K;
    const uint64_t kc = r / V;
    const uint32_t c = static_cast<uint32_t>(kc % G);
    const uint32_t k = static_cast<uint32_t>(kc / G);
    const uint64_t w = r % V;
    switch (c) {
      case 0:
        return 1.0 / shape_var;
      case 1:
        return ShapePriorMean(k, w) / shape_var;
      case 2:
        return 1.0 / scale_var;
      default:
        return scale_mean / scale_var;
    }
  }
};

struct State {
  std::mt19937_64 rng;
  std::normal_distribution<double> normal{0.0, 1.0};
  std::vector<double> z;       // S x (d + 1) standard normal draws, antithetic
  std::vector<double> mA, sA;  // per (t, k): cavity mean and sd of alpha
  std::vector<double> mB, sB;  // per (t, k): of beta
  std::vector<double> rest_m, rest_s;
  std::vector<double> gs;      // S: log G(s)/G(s+n)
  std::vector<double> stot;    // S: s
  std::vector<double> gamma;   // K
  std::vector<double> lw;      // S: log weights
  std::vector<double> d1, d2;  // per (t, k, param): D1, D2
  std::vector<double> log_e;   // K
  std::vector<double> a_cav, a_new, target, grad;
};

inline Model* M(trib_family_model* m) { return sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return sdk::As<Model>(m); }

inline double MuAt(const trib_stats& s, uint64_t i, uint32_t b) {
  const trib_block& blk = s.blocks[b];
  return blk.scale * s.raw[i] + blk.shift * blk.alpha_bar;
}
inline uint32_t BlockOf(const Model& m, uint64_t i) {
  return i < m.K ? kBlockPi : static_cast<uint32_t>(1 + (i - m.K) / m.V);
}
inline double Posterior(const Model& m, const trib_stats& s, uint64_t i) {
  return m.Prior(i) + m.n * MuAt(s, i, BlockOf(m, i));
}

inline bool ParseUint(const std::string& v, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (v.empty() || v.size() > 12) return false;
  uint64_t x = 0;
  for (char ch : v) {
    if (ch < '0' || ch > '9') return false;
    x = x * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (x < lo || x > hi) return false;
  *out = x;
  return true;
}

inline int Create(Flavor flavor, const trib_schema* schema, const trib_option* opts, size_t num,
                  trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    auto m = std::make_unique<Model>();
    m->flavor = flavor;
    m->name = flavor == Flavor::kEmsd ? "emsd-mixture" : "edcm-mixture";
    if (schema->vocab_size == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s needs a vocabulary of count features (vocab_size is 0)", m->name);
    }
    m->V = schema->vocab_size;
    for (size_t i = 0; i < num; ++i) {
      const std::string key = opts[i].key ? opts[i].key : "";
      const std::string val = opts[i].value ? opts[i].value : "";
      uint64_t u = 0;
      double* target = nullptr;
      if (key == "components") {
        if (!ParseUint(val, 1, 100000, &u)) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option components='%s': expected an integer in [1, 100000]",
                      val.c_str());
        }
        m->K = static_cast<uint32_t>(u);
        continue;
      }
      if (key == "samples") {
        if (!ParseUint(val, 2, 1000000, &u)) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option samples='%s': expected an integer in [2, 1000000]",
                      val.c_str());
        }
        m->S = static_cast<uint32_t>(u);
        continue;
      }
      if (key == "refresh") {
        if (!ParseUint(val, 0, UINT64_C(1000000000000), &u)) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option refresh='%s': expected an integer >= 0", val.c_str());
        }
        m->refresh = u;
        continue;
      }
      if (key == "absent") {
        if (val == "ignore") {
          m->absent_shift = false;
        } else if (val == "shift") {
          m->absent_shift = true;
        } else {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option absent='%s': expected ignore or shift", val.c_str());
        }
        continue;
      }
      if (flavor == Flavor::kEmsd && key == "scale") {
        if (val == "fixed") {
          m->learn_scale = false;
        } else if (val == "learn") {
          m->learn_scale = true;
        } else {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option scale='%s': expected fixed or learn", val.c_str());
        }
        continue;
      }
      bool allow_zero = false;
      if (key == "pi_prior" || key == "prior") {
        target = &m->pi_prior;
      } else if (key == "shape_prior_mean") {
        target = &m->shape_mean;
      } else if (key == "shape_prior_variance") {
        target = &m->shape_var;
      } else if (key == "init_jitter") {
        target = &m->jitter;
        allow_zero = true;
      } else if (flavor == Flavor::kEmsd && key == "scale_prior_mean") {
        target = &m->scale_mean;
      } else if (flavor == Flavor::kEmsd && key == "scale_prior_variance") {
        target = &m->scale_var;
      } else {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "unknown option '%s' for family %s (known: components, samples, pi_prior, shape_prior_mean, "
                    "shape_prior_variance, init_jitter, refresh, absent%s)",
                    key.c_str(), m->name,
                    flavor == Flavor::kEmsd ? ", scale, scale_prior_mean, scale_prior_variance" : "");
      }
      if (!sdk::ParseDouble(val.c_str(), target) || !(allow_zero ? *target >= 0 : *target > 0) || *target > 1e6) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option %s='%s': expected a number %s 0 and <= 1e6", key.c_str(),
                    val.c_str(), allow_zero ? ">=" : ">");
      }
    }
    m->G = m->learn_scale ? 4 : 2;
    const long double p = static_cast<long double>(m->K) * m->G * static_cast<long double>(m->V) + m->K;
    if (p > 1e10L) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "%s with %u components over %llu terms needs %.3Lg parameters (max 1e10)", m->name, m->K,
                  static_cast<unsigned long long>(m->V), p);
    }
    m->P = m->K + static_cast<uint64_t>(m->G) * m->K * m->V;
    m->total_mean.assign(m->K, 0.0);
    m->total_var.assign(m->K, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

inline int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t nb = 2 + m->K * m->G;
  if (blocks == nullptr) {
    *num = nb;
    return TRIB_OK;
  }
  if (*num < nb) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", nb);
  blocks[kBlockPi] = trib_block{0, m->K, 0.0, 0.0, 1.0, 0.0};
  for (uint32_t k = 0; k < m->K; ++k) {
    for (uint32_t c = 0; c < m->G; ++c) {
      // alpha_bar = 1 on h_alpha: the block-uniform site of the terms a
      // document does not contain (see the header comment) lives in its shift.
      blocks[m->GaussBlock(k, c)] = trib_block{m->Gauss(0, k, c), m->V, 0.0, c == 1 ? 1.0 : 0.0, 1.0, 0.0};
    }
  }
  blocks[m->SeedBlock()] = trib_block{m->P, 1, 0.0, 0.0, 1.0, 0.0};
  *num = nb;
  return TRIB_OK;
}

inline int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    // The model starts at the prior: raw = 0 and no shift (Init sets shift = 1).
    for (uint32_t b = 0; b < s->num_blocks; ++b) const_cast<trib_block&>(s->blocks[b]).shift = 0.0;
    // The seed, stored exactly as a double (< 2^53).
    s->raw[m.P] = static_cast<double>(seed & ((UINT64_C(1) << 52) - 1)) / s->blocks[m.SeedBlock()].scale;
    return TRIB_OK;
  });
}

// Recomputes T_k, U_k from all statistics (O(model)); checks feasibility.
inline int RefreshTotals(Model* m, const trib_stats& s, trib_error* err) {
  std::vector<double> tm(m->K, 0.0), tv(m->K, 0.0);
  for (uint64_t w = 0; w < m->V; ++w) {
    for (uint32_t k = 0; k < m->K; ++k) {
      const uint64_t i = m->Gauss(w, k, 0);
      const double tau = Posterior(*m, s, i), h = Posterior(*m, s, i + m->V);
      if (!(tau > 0) || !std::isfinite(tau) || !std::isfinite(h)) {
        return Fail(err, TRIB_ERR_NUMERIC, "posterior precision of the shape of component %u, term %llu is %g", k,
                    static_cast<unsigned long long>(w), tau);
      }
      tm[k] += h / tau;
      tv[k] += 1.0 / tau;
    }
  }
  m->total_mean.swap(tm);
  m->total_var.swap(tv);
  return TRIB_OK;
}

inline int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (step && step->n > 0 && std::isfinite(step->n)) m->n = step->n;
    const double seed = MuAt(*s, m->P, m->SeedBlock());
    if (!(seed >= 0) || seed > 0x1.0p53) return Fail(err, TRIB_ERR_NUMERIC, "stored seed %g is invalid", seed);
    m->seed = static_cast<uint64_t>(seed);
    for (uint32_t k = 0; k < m->K; ++k) {
      const double a = Posterior(*m, *s, k) + 1.0;
      if (!(a > 0) || !std::isfinite(a)) {
        return Fail(err, TRIB_ERR_NUMERIC, "posterior Dirichlet parameter of component %u is %g", k, a);
      }
    }
    if (m->learn_scale) {
      for (uint64_t i = 0; i < static_cast<uint64_t>(m->K) * m->V; ++i) {
        const uint64_t t = m->Gauss(i % m->V, static_cast<uint32_t>(i / m->V), 2);
        const double tau = Posterior(*m, *s, t);
        if (!(tau > 0) || !std::isfinite(tau) || !std::isfinite(Posterior(*m, *s, t + m->V))) {
          return Fail(err, TRIB_ERR_NUMERIC, "posterior precision of a scale parameter (entry %llu) is %g",
                      static_cast<unsigned long long>(t), tau);
        }
      }
    }
    return RefreshTotals(m, *s, err);
  });
}

inline int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->rng.seed(SplitMix64(seed ^ 0x5e9a11ce5e9a11ceull));
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

inline int CheckDocument(const Model& m, const trib_document* d, trib_error* err) {
  if (d->num_terms == 0) {
    return Fail(err, TRIB_ERR_INVALID_DOCUMENT, "%s models count vectors; the document has no terms", m.name);
  }
  return TRIB_OK;
}

// log n! - sum_w log x_w: the part of log EMSD shared by all components.
inline double CountConstant(const trib_document* d) {
  double c = Lgamma(d->total_count + 1.0);
  for (uint32_t t = 0; t < d->num_terms; ++t) c -= std::log(d->term_counts[t]);
  return c;
}

inline int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state*, const trib_document* d,
                 double* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    const double n = d->total_count, c0 = CountConstant(d);
    double A = 0;
    for (uint32_t k = 0; k < m.K; ++k) A += Posterior(m, *s, k) + 1.0;
    for (uint32_t k = 0; k < m.K; ++k) {
      const double a = Posterior(m, *s, k) + 1.0;
      const double tot = std::max(m.total_mean[k], kTiny);
      double acc = std::log(a / A) + c0 + Lgamma(tot) - Lgamma(tot + n);
      for (uint32_t t = 0; t < d->num_terms; ++t) {
        const uint64_t i = m.Gauss(d->term_ids[t], k, 0);
        const double alpha = Posterior(m, *s, i + m.V) / Posterior(m, *s, i);
        acc += std::log(std::max(alpha, kTiny));
        if (m.learn_scale) {
          const double beta = Posterior(m, *s, i + 3 * m.V) / Posterior(m, *s, i + 2 * m.V);
          acc -= d->term_counts[t] * std::log(std::max(beta, kTiny));
        }
      }
      if (std::isnan(acc) || acc == INFINITY) {
        return Fail(err, TRIB_ERR_NUMERIC, "log p(z=%u, x) is %g", k, acc);
      }
      out[k] = acc;
    }
    return TRIB_OK;
  });
}

inline int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document*,
                      const double*, trib_delta*, trib_error* err) {
  return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s is trained with --engine sep, ep or adf (it has no sdEM update)",
              M(mm)->name);
}

inline int Commit(trib_family_model* mm, trib_stats*, const uint64_t*, const double*, size_t, const trib_step*,
                  trib_error* err) {
  return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s is trained with --engine sep, ep or adf (it has no sdEM update)",
              M(mm)->name);
}

inline double LogMeanExp(const double* x, uint32_t n) {
  return sdk::LogSumExp(x, n) - std::log(static_cast<double>(n));
}

inline int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_LATENT;
  *count = M(mm)->K;
  return TRIB_OK;
}

// p(term | k) = E[alpha_kw] / T_k (the expected proportions of a DCM with
// those shapes), negative means read as 0.
inline int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    if (k >= m.K) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "component %u >= %u", k, m.K);
    double tot = 0;
    for (uint64_t w = 0; w < m.V; ++w) {
      const uint64_t i = m.Gauss(w, k, 0);
      out[w] = std::max(0.0, Posterior(m, *s, i + m.V) / Posterior(m, *s, i));
      tot += out[w];
    }
    if (!(tot > 0)) return Fail(err, TRIB_ERR_NUMERIC, "component %u has no positive shape", k);
    for (uint64_t w = 0; w < m.V; ++w) out[w] /= tot;
    return TRIB_OK;
  });
}

inline int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  const Model& m = *M(mm);
  const size_t need = 2 * static_cast<size_t>(m.K) + 1;
  if (out == nullptr) {
    *size = need;
    return TRIB_OK;
  }
  std::memcpy(out, m.total_mean.data(), m.K * sizeof(double));
  std::memcpy(out + m.K, m.total_var.data(), m.K * sizeof(double));
  out[2 * m.K] = static_cast<double>(m.commits);
  *size = need;
  return TRIB_OK;
}

inline int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model& m = *M(mm);
  if (size != 2 * static_cast<size_t>(m.K) + 1) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache has %zu values, expected %zu", size,
                2 * static_cast<size_t>(m.K) + 1);
  }
  std::memcpy(m.total_mean.data(), in, m.K * sizeof(double));
  std::memcpy(m.total_var.data(), in + m.K, m.K * sizeof(double));
  m.commits = static_cast<uint64_t>(in[2 * m.K]);
  return TRIB_OK;
}

// ---- SEP hooks ---------------------------------------------------------------

inline uint64_t NumParams(const trib_family_model* mm) { return M(mm)->P; }

inline int Support(const trib_family_model* mm, const trib_stats*, const trib_document* d, trib_delta* out,
                   trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    const size_t need = out->size + m.K + static_cast<size_t>(d->num_terms) * m.K * m.G;
    if (need > out->capacity && out->grow(out, need) != 0) return Fail(err, TRIB_ERR_NO_MEMORY, "support");
    size_t p = out->size;
    for (uint32_t k = 0; k < m.K; ++k) {
      out->index[p] = k;
      out->value[p++] = m.Prior(k);
    }
    for (uint32_t t = 0; t < d->num_terms; ++t) {
      for (uint32_t k = 0; k < m.K; ++k) {
        for (uint32_t c = 0; c < m.G; ++c) {
          const uint64_t i = m.Gauss(d->term_ids[t], k, c);
          out->index[p] = i;
          out->value[p++] = m.Prior(i);
        }
      }
    }
    out->size = p;
    return TRIB_OK;
  });
}

// Per-coordinate tilt statistics (see the header comment): for draws
// theta_s = m + sd z_s with log weights lw_s, D1 = sum (w_s - 1/S) c_s and
// D2 = sum (w_s - 1/S) c_s^2 with c_s = sd z_s; returns log mean exp(lw).
inline double Tilt(const double* lw, const double* z, size_t stride, uint32_t S, double sd, double* d1, double* d2) {
  double mx = -INFINITY;
  for (uint32_t s = 0; s < S; ++s) mx = std::max(mx, lw[s]);
  double tot = 0;
  for (uint32_t s = 0; s < S; ++s) tot += std::exp(lw[s] - mx);
  const double inv_s = 1.0 / S;
  double a1 = 0, a2 = 0;
  for (uint32_t s = 0; s < S; ++s) {
    const double w = std::exp(lw[s] - mx) / tot - inv_s;
    const double c = sd * z[s * stride];
    a1 += w * c;
    a2 += w * c * c;
  }
  *d1 = a1;
  *d2 = a2;
  return mx + std::log(tot * inv_s);
}

inline int MomentMatch(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
                       const uint64_t* index, const double* cavity, size_t count, double* lambda_new,
                       trib_sep_outcome* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    State& st = *reinterpret_cast<State*>(ss);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    const uint32_t K = m.K, G = m.G, S = m.S, D = d->num_terms;
    if (count != K + static_cast<size_t>(D) * K * G || index[0] != 0) {
      return Fail(err, TRIB_ERR_INTERNAL, "moment_match got %zu entries, expected the support of %u terms", count, D);
    }
    auto skip = [&](const char* fmt, double v, uint32_t k) {
      out->skip = 1;
      Fail(err, TRIB_ERR_NUMERIC, fmt, k, v);
      return TRIB_OK;
    };
    // Cavity Dirichlet (eq. 23 / 55).
    st.a_cav.resize(K);
    double A = 0;
    for (uint32_t k = 0; k < K; ++k) {
      st.a_cav[k] = cavity[k] + 1.0;
      if (!(st.a_cav[k] > 0)) return skip("cavity Dirichlet parameter of component %u is %g <= 0", st.a_cav[k], k);
      A += st.a_cav[k];
    }
    // Cavity Gaussians (eq. 24-25 / 56-59), and the rest of s per component.
    const size_t TK = static_cast<size_t>(D) * K;
    st.mA.resize(TK);
    st.sA.resize(TK);
    st.mB.resize(G == 4 ? TK : 0);
    st.sB.resize(G == 4 ? TK : 0);
    st.rest_m.assign(K, 0.0);
    st.rest_s.assign(K, 0.0);
    for (uint32_t k = 0; k < K; ++k) {
      st.rest_m[k] = m.total_mean[k];
      st.rest_s[k] = m.total_var[k];
    }
    for (uint32_t t = 0; t < D; ++t) {
      for (uint32_t k = 0; k < K; ++k) {
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G;
        const double tau = cavity[j], h = cavity[j + 1];
        if (!(tau > 0)) return skip("cavity precision of a shape of component %u is %g <= 0", tau, k);
        st.mA[t * K + k] = h / tau;
        st.sA[t * K + k] = std::sqrt(1.0 / tau);
        if (G == 4) {
          const double tb = cavity[j + 2], hb = cavity[j + 3];
          if (!(tb > 0)) return skip("cavity precision of a scale of component %u is %g <= 0", tb, k);
          st.mB[t * K + k] = hb / tb;
          st.sB[t * K + k] = std::sqrt(1.0 / tb);
        }
        const uint64_t i = index[j];
        const double ptau = Posterior(m, *s, i);
        st.rest_m[k] -= Posterior(m, *s, i + m.V) / ptau;
        st.rest_s[k] -= 1.0 / ptau;
      }
    }
    for (uint32_t k = 0; k < K; ++k) {
      st.rest_m[k] = std::max(st.rest_m[k], 0.0);
      st.rest_s[k] = std::sqrt(std::max(st.rest_s[k], 0.0));
    }
    // Standard normal draws, antithetic pairs, shared by the components:
    // column t < D for the document's shapes, column D for the rest of s.
    // Scales (if learned) reuse the shapes' draws mirrored (-z), which keeps
    // their estimates independent of the shapes' in sign.
    const size_t stride = D + 1;
    st.z.resize(static_cast<size_t>(S) * stride);
    const uint32_t half = S / 2;
    for (uint32_t r = 0; r < half; ++r) {
      for (size_t c = 0; c < stride; ++c) {
        const double z = st.normal(st.rng);
        st.z[r * stride + c] = z;
        st.z[(r + half) * stride + c] = -z;
      }
    }
    if (S % 2 == 1) {
      for (size_t c = 0; c < stride; ++c) st.z[(S - 1) * stride + c] = 0.0;
    }
    const double n = d->total_count, c0 = CountConstant(d);
    st.gs.resize(S);
    st.stot.resize(S);
    st.gamma.resize(K);
    st.lw.resize(S);
    st.d1.assign(TK * (G / 2), 0.0);
    st.d2.assign(TK * (G / 2), 0.0);
    st.log_e.resize(K);
    for (uint32_t k = 0; k < K; ++k) {
      // log G(s)/G(s+n) per sample (eq. 45's normaliser).
      for (uint32_t r = 0; r < S; ++r) {
        const double* zr = &st.z[r * stride];
        double tot = std::max(st.rest_m[k] + st.rest_s[k] * zr[D], 0.0);
        for (uint32_t t = 0; t < D; ++t) tot += std::max(st.mA[t * K + k] + st.sA[t * K + k] * zr[t], 0.0);
        tot = std::max(tot, kTiny);
        st.stot[r] = tot;
        st.gs[r] = Lgamma(tot) - Lgamma(tot + n);
      }
      double log_e = c0 + LogMeanExp(st.gs.data(), S);
      {
        // gamma_k = d/ds log E[G(s)/G(s+n)] = E_w[psi(s) - psi(s+n)], the
        // weights w ~ G(s)/G(s+n): the first-order site on h of every shape
        // of component k the document does not contain (block site).
        double mx = -INFINITY, tw = 0, acc = 0;
        for (uint32_t r = 0; r < S; ++r) mx = std::max(mx, st.gs[r]);
        for (uint32_t r = 0; r < S; ++r) {
          const double w = std::exp(st.gs[r] - mx);
          tw += w;
          acc += w * (Digamma(st.stot[r]) - Digamma(st.stot[r] + n));
        }
        st.gamma[k] = acc / tw;
      }
      for (uint32_t t = 0; t < D; ++t) {
        const double ma = st.mA[t * K + k], sa = st.sA[t * K + k];
        // E|alpha| factor of E_j (without G, which is counted once above).
        for (uint32_t r = 0; r < S; ++r) st.lw[r] = std::log(std::max(ma + sa * st.z[r * stride + t], kTiny));
        log_e += LogMeanExp(st.lw.data(), S);
        for (uint32_t r = 0; r < S; ++r) st.lw[r] += st.gs[r];
        Tilt(st.lw.data(), &st.z[t], stride, S, sa, &st.d1[(t * K + k) * (G / 2)], &st.d2[(t * K + k) * (G / 2)]);
        if (G == 4) {
          const double mb = st.mB[t * K + k], sb = st.sB[t * K + k], x = d->term_counts[t];
          for (uint32_t r = 0; r < S; ++r) {
            st.lw[r] = -x * std::log(std::max(mb - sb * st.z[r * stride + t], kTiny));
          }
          // Draws are -z: D1 flips sign (D2 does not).
          double b1 = 0, b2 = 0;
          log_e += Tilt(st.lw.data(), &st.z[t], stride, S, sb, &b1, &b2);
          st.d1[(t * K + k) * 2 + 1] = -b1;
          st.d2[(t * K + k) * 2 + 1] = b2;
        }
      }
      st.log_e[k] = log_e;
    }
    // Z_i and the responsibilities (eq. 29).
    std::vector<double>& lr = st.log_e;  // becomes log(a_k / A) + log E_k
    for (uint32_t k = 0; k < K; ++k) lr[k] += std::log(st.a_cav[k] / A);
    const double log_z = sdk::LogSumExp(lr.data(), K);
    if (!std::isfinite(log_z)) return skip("log Z of the document is not finite (component %u, %g)", log_z, 0);
    out->log_z = log_z;
    // Gaussians: new mean and covariance of the tilted marginals.
    for (uint32_t t = 0; t < D; ++t) {
      for (uint32_t k = 0; k < K; ++k) {
        const double r = std::exp(lr[k] - log_z);
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G;
        for (uint32_t p = 0; p < G / 2; ++p) {
          const double mc = p == 0 ? st.mA[t * K + k] : st.mB[t * K + k];
          const double sc = p == 0 ? st.sA[t * K + k] : st.sB[t * K + k];
          const double D1 = st.d1[(t * K + k) * (G / 2) + p], D2 = st.d2[(t * K + k) * (G / 2) + p];
          const double mean = mc + r * D1;
          const double var = sc * sc + r * D2 - r * r * D1 * D1;
          if (!(var > 0) || !std::isfinite(var) || !std::isfinite(mean)) {
            return skip("tilted variance of component %u is %g", var, k);
          }
          lambda_new[j + 2 * p] = 1.0 / var;
          lambda_new[j + 2 * p + 1] = mean / var;
        }
      }
    }
    // The terms the document does not contain (block sites on h_alpha).
    for (uint32_t k = 0; k < K; ++k) {
      const uint32_t b = m.GaussBlock(k, 1);
      if (m.absent_shift && out->block_site != nullptr && b < out->num_blocks) {
        out->block_site[b] = std::exp(lr[k] - log_z) * st.gamma[k];
      }
    }
    // Dirichlet: match E[log pi] (eq. 60) by Minka's fixed point.
    st.target.resize(K);
    st.a_new.resize(K);
    const double psiA = Digamma(A) + 1.0 / A;
    for (uint32_t k = 0; k < K; ++k) {
      const double r = std::exp(lr[k] - log_z);
      st.target[k] = Digamma(st.a_cav[k]) + r / st.a_cav[k] - psiA;
      st.a_new[k] = st.a_cav[k] + r;
    }
    // Newton's method with the Hessian diag(-psi'(a_k)) + psi'(sum a) 1 1^T
    // (Minka 2000, "Estimating a Dirichlet distribution", §1), from
    // a_cav + r, which is already close: a few iterations to 1e-13.
    st.grad.resize(K);
    for (int it = 0; it < 100; ++it) {
      double sum = 0;
      for (uint32_t k = 0; k < K; ++k) sum += st.a_new[k];
      const double psi_sum = Digamma(sum), z = Trigamma(sum);
      double num = 0, den = 1.0 / z;
      for (uint32_t k = 0; k < K; ++k) {
        st.grad[k] = psi_sum - Digamma(st.a_new[k]) + st.target[k];
        const double q = -Trigamma(st.a_new[k]);
        num += st.grad[k] / q;
        den += 1.0 / q;
      }
      const double b = num / den;
      double change = 0, step = 1.0;
      for (int halve = 0; halve < 60; ++halve) {
        bool ok = true;
        for (uint32_t k = 0; k < K; ++k) ok &= st.a_new[k] - step * (st.grad[k] - b) / -Trigamma(st.a_new[k]) > 0;
        if (ok) break;
        step *= 0.5;
      }
      for (uint32_t k = 0; k < K; ++k) {
        const double delta = step * (st.grad[k] - b) / -Trigamma(st.a_new[k]);
        st.a_new[k] -= delta;
        change = std::max(change, std::fabs(delta) / st.a_new[k]);
      }
      if (!(change >= 1e-13)) break;  // converged (or NaN: checked below)
    }
    for (uint32_t k = 0; k < K; ++k) {
      if (!(st.a_new[k] > 0) || !std::isfinite(st.a_new[k])) {
        return skip("moment-matched Dirichlet parameter of component %u is %g", st.a_new[k], k);
      }
      lambda_new[k] = st.a_new[k] - 1.0;
    }
    return TRIB_OK;
  });
}

inline int Feasible(const trib_family_model* mm, const uint64_t* index, const double* lambda, size_t count,
                    trib_error* err) {
  const Model& m = *M(mm);
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = index[j];
    const double v = lambda[j];
    if (!std::isfinite(v)) {
      return Fail(err, TRIB_ERR_NUMERIC, "natural parameter %llu is not finite", static_cast<unsigned long long>(i));
    }
    if (i < m.K) {
      if (!(v + 1.0 > 0))
        return Fail(err, TRIB_ERR_NUMERIC, "Dirichlet parameter of component %llu would be %g",
                    static_cast<unsigned long long>(i), v + 1.0);
    } else if (((i - m.K) / m.V) % 2 == 0 && !(v > 0)) {
      const uint64_t kc = (i - m.K) / m.V;
      return Fail(err, TRIB_ERR_NUMERIC, "precision of the %s of component %llu, term %llu would be %g",
                  kc % m.G == 0 ? "shape" : "scale", static_cast<unsigned long long>(kc / m.G),
                  static_cast<unsigned long long>((i - m.K) % m.V), v);
    }
  }
  return TRIB_OK;
}

inline int SepCommit(trib_family_model* mm, const trib_stats* s, const uint64_t* index, const double* old_mu,
                     size_t count, const trib_sep_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    ++m->commits;
    if (step->n > 0 && step->n != m->n) {
      m->n = step->n;
      return RefreshTotals(m, *s, err);
    }
    // Support entries: exact old -> new. The support lists, per term, the G
    // entries of each component in order, so (tau, h) of a shape are
    // adjacent in the list (their indices differ by V).
    const uint32_t K = m->K, G = m->G;
    if (count < K || (count - K) % (static_cast<size_t>(K) * G) != 0) return RefreshTotals(m, *s, err);
    std::vector<double>& inv_tau_support = m->scratch;
    inv_tau_support.assign(K, 0.0);
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (index[j + 1] != i + m->V || i != m->Gauss((i - K) % m->V, k, 0)) return RefreshTotals(m, *s, err);
      const double to = m->Prior(i) + m->n * old_mu[j], ho = m->Prior(i + m->V) + m->n * old_mu[j + 1];
      const double tn = Posterior(*m, *s, i), hn = Posterior(*m, *s, i + m->V);
      m->total_mean[k] += hn / tn - ho / to;
      m->total_var[k] += 1.0 / tn - 1.0 / to;
      inv_tau_support[k] += 1.0 / tn;
    }
    // The other terms: their h moved by the block site, d lambda, so their
    // means by d lambda / tau (the decay's drift is left to the refresh).
    if (step->block_delta != nullptr) {
      for (uint32_t k = 0; k < K; ++k) {
        const uint32_t b = m->GaussBlock(k, 1);
        if (b < step->num_blocks && step->block_delta[b] != 0.0) {
          m->total_mean[k] += step->block_delta[b] * std::max(0.0, m->total_var[k] - inv_tau_support[k]);
        }
      }
    }
    if (m->refresh > 0 && m->commits % m->refresh == 0) return RefreshTotals(m, *s, err);
    return TRIB_OK;
  });
}

inline int Summary(const trib_family_model* mm, const trib_stats* s, trib_sep_summary_sink* sink, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    const bool emsd = m.flavor == Flavor::kEmsd;
    std::vector<double> v(m.K);
    double A = 0;
    for (uint32_t k = 0; k < m.K; ++k) A += Posterior(m, *s, k) + 1.0;
    for (uint32_t k = 0; k < m.K; ++k) v[k] = (Posterior(m, *s, k) + 1.0) / A;  // eq. 40
    if (sink->put(sink, "mixing_weight", UINT32_MAX, v.data(), v.size()) != 0) return TRIB_ERR_INTERNAL;
    std::vector<double> mean(m.V), var(m.V);
    // EDCM's single parameter is beta in ch. 2's notation; EMSD's shape is alpha.
    const char* shape_mean = emsd ? "alpha_mean" : "beta_mean";
    const char* shape_var = emsd ? "alpha_variance" : "beta_variance";
    for (uint32_t k = 0; k < m.K; ++k) {
      for (uint64_t w = 0; w < m.V; ++w) {
        const uint64_t i = m.Gauss(w, k, 0);
        const double tau = Posterior(m, *s, i);
        mean[w] = Posterior(m, *s, i + m.V) / tau;
        var[w] = 1.0 / tau;
      }
      if (sink->put(sink, shape_mean, k, mean.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (sink->put(sink, shape_var, k, var.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (emsd) {
        for (uint64_t w = 0; w < m.V; ++w) {
          if (m.learn_scale) {
            const uint64_t i = m.Gauss(w, k, 2);
            const double tau = Posterior(m, *s, i);
            mean[w] = Posterior(m, *s, i + m.V) / tau;
            var[w] = 1.0 / tau;
          } else {
            mean[w] = 1.0;
            var[w] = 0.0;
          }
        }
        if (sink->put(sink, "beta_mean", k, mean.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
        if (sink->put(sink, "beta_variance", k, var.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      }
    }
    return TRIB_OK;
  });
}

inline const trib_sep_hooks kSepHooks = {
    sizeof(trib_sep_hooks), NumParams, Support, MomentMatch, Feasible, SepCommit, Summary,
};

template <Flavor F>
int CreateFlavor(const trib_schema* schema, const trib_option* opts, size_t n, trib_family_model** out,
                 trib_error* err) {
  return Create(F, schema, opts, n, out, err);
}

template <Flavor F>
int Init(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  if (host == nullptr || host->abi_major != TRIB_ABI_MAJOR) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "host ABI mismatch");
  }
  g_host = host;
  trib_family_vtable& v = out->family;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = sizeof(trib_family_vtable);
  v.create = CreateFlavor<F>;
  v.destroy = sdk::DestroyModel<Model>;
  v.clone = sdk::CloneModel<Model>;
  v.layout = Layout;
  v.init_stats = InitStats;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.state_destroy = sdk::DestroyState<State>;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.outputs = Outputs;
  v.component_terms = ComponentTerms;
  v.sep = &kSepHooks;
  return TRIB_OK;
}

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_
