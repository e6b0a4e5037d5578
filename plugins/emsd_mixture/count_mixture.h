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
// Approximate posterior. q(pi) is Dirichlet (eq. 17, 47). DEVIATION from
// the thesis (eq. 18, 48-49 use Gaussians): q(alpha_kw) and q(beta_kw) are
// independent *Gamma* distributions. Two reasons:
//  * a Gaussian puts mass on alpha < 0, where eq. 45 is undefined; the
//    evidence a document carries about the terms it does NOT contain (they
//    enter only through s) pushes their means down without bound, and a
//    Gaussian site on alpha then drives them negative (measured: means ->
//    -inf with the previous Gaussian implementation);
//  * with Gamma factors EMSD is conjugate up to G(s)/G(s+n): a_w multiplies
//    Gamma(a, b) into Gamma(a + 1, b), b_w^-x into Gamma(a - x, b), and the
//    normaliser, linearised in s at the tilted distribution
//        G(s)/G(s+n) ~ const * exp(c s),  c = E~[psi(s) - psi(s+n)] < 0,
//    multiplies every Gamma(a, b) of the component into Gamma(a, b - c):
//    the *same* change of the rate for every term. So the evidence about
//    all absent terms is one number per component, applied in O(1) through
//    the rate block's lazy shift (a block-uniform site, sep_abi.h), and the
//    rate only grows, so positivity is never at risk.
// Natural parameters, laid out so a document's support is |d| runs of K*G
// consecutive entries (G = 2, or 4 when the scale is learned):
//   block 0        pi:    eta_k = a_k - 1                          K entries
//   block 1 + kG + c:     c = 0: shape_kw - 1 of alpha_kw,
//                         c = 1: -rate_kw of alpha_kw (alpha_bar = 1: the
//                                block-uniform site of absent terms),
//                         c = 2, 3: the same for beta_kw           V entries each
//   last block     seed:  the init seed (family-owned, never touched)
// The engine keeps lambda = lambda0 + N mu (sep_abi.h).
//
// Prior lambda0: Dirichlet(pi_prior) on pi; Gamma with mean m0_kw =
// shape_prior_mean * exp(init_jitter * u_kw) and variance
// shape_prior_variance (default: = the mean, i.e. prior rate ~1) on alpha_kw, u_kw a hash of (seed, k, w) uniform in
// [-1, 1] (the thesis's "random values for the prior means", §3.4.1: the
// components' symmetry breaking, reproducible from the seed stored in the
// last block); Gamma(mean scale_prior_mean, variance scale_prior_variance)
// on beta_kw.
//
// Moment matching (eq. 26-35, 60-64) for one document, cavity given:
//  * E_j = E_cavity[EMSD(x | a_j, b_j)] (eq. 27-29) factorises exactly into
//      prod_w E[a_w] * prod_w E[b_w^-x_w] * E~[G(s)/G(s+n)],
//    the last expectation under the cavity tilted by the present shapes
//    (each Gamma(a + 1, b)); s is a sum of independent Gammas whose mean and
//    variance come from the cached posterior totals T_j = sum_w E[alpha_jw],
//    U_j = sum_w Var[alpha_jw] (corrected at the document's terms to the
//    cavity), and is integrated with S deterministic quadrature points of the
//    log-normal with those moments (option samples = S). No Monte Carlo: a
//    given cavity always gives the same site.
//  * r_j = E[pi_j] E_j / Z_i (eq. 29). The tilted marginal of a present
//    shape is (1 - r) Gamma(a, b) + r Gamma(a + 1, b - c_j); of a learned
//    scale (1 - r) Gamma(a, b) + r Gamma(a - x_w, b). Each is projected on a
//    Gamma by matching E[theta] and E[log theta], the Gamma's sufficient
//    statistics (Minka's Newton iteration for log a - psi(a) = y).
//  * Absent shapes: the tilted marginal (1 - r) Gamma(a, b) + r Gamma(a, b -
//    c) is replaced by its first-order (in c) projection Gamma(a, b - r c):
//    the block site u_j = r_j c_j on the -rate block of component j (exact as
//    |c| / b -> 0, which holds after a few documents, b growing with every
//    document).
//  * Dirichlet (eq. 30, 33, 60): match E[log pi_k] of the tilted mixture
//    sum_j r_j Dir(a + e_j) by Newton's method (Minka 2000, "Estimating a
//    Dirichlet distribution", §1).
// Cost per document: O(K (|d| + S)) special-function evaluations.
//
// The totals T_j, U_j are updated in commit: exactly at the document's
// terms, to first order for the block site; and recomputed in full
// (O(K V)) when the rates moved by more than 5% since the last refresh
// (frequent only while the rates are small, i.e. the first documents), when
// the SEP decay since the last refresh exceeds 5%, and every `refresh`
// updates.
//
// Scale (EMSD only). eq. 45 grows without bound as b_w -> 0 for every
// observed term, so the likelihood does not identify the scale: the shape of
// its Gamma decreases by r x_w per document and eventually reaches 0 (the
// engine then skips the update). The default is therefore scale=fixed (b =
// 1, the value the thesis's synthetic data use, §3.4.1: the family is then
// EDCM with EMSD's option names); scale=learn keeps Gamma sites on b_jw with
// a tight prior (scale_prior_variance, default 0.01).
//
// Early learning (version 1.1.0; bench/SEP_RESULTS.md, "real corpora").
// With the previous defaults (prior mean 1.5 / V, variance 4 mean^2, i.e.
// Gamma shape 1/4 and rate V / 6 per term) every SEP / EP run on real text
// (KJV chapters, fortunes) put all documents in one cluster. Measured cause:
// the prior rate (~2,000 for V = 12,000) outweighs the rate evidence of
// hundreds of documents (|c| ~ 2-5 per document), so a component's total s
// grows with the number of documents it absorbed; the component that
// absorbed the first documents has the s closest to the data's and wins
// every later document, while the other decays back to the prior
// (winner-take-all in the first ~10 documents). Measured non-fixes: hard
// seeding of the first K documents (component 1 seeded, component 2 seeded,
// the third document's winner takes all), tempering the responsibilities
// by tau = t / T (the difference of log E_k grows faster than tau shrinks
// it: 57 nats at tau = 0.04). What works (Bible, stop words removed: 95%
// accuracy against a 78% majority baseline; synthetic test
// LongDocumentsDoNotCollapseToOneCluster):
//  * a weak prior rate: default shape_prior_mean 0.1 and
//    shape_prior_variance = shape_prior_mean (Gamma shape 0.1, rate 1: one
//    document's evidence outweighs it), so a component's s is set by its
//    data, not by how many documents it has absorbed;
//  * a burn-in: the first burn_in updates (default auto = min(100,
//    floor(N / 10))) give every component responsibility 1/K, so all
//    components start from the same data-driven average (the same
//    vocabulary coverage) instead of one of them starting at the prior;
//    the prior jitter then breaks the symmetry, as a random start does for
//    batch EM. The counter is the family's update count (exported with the
//    caches, so a resumed snapshot continues the same schedule); the cost
//    per document is unchanged. The burn-in sites are ordinary sites: SEP
//    decays them, EP replaces them in the next sweep.
// The thesis's K-means-based prior (§2.3.3) needs the data before training
// and is not available to a streaming learner.
//
// score(): log p(z = k, x) = log E[pi_k] + log EMSD(x | E[a_k], E[b_k]) with
// s = T_k (posterior means; K outputs, TRIB_OUTPUTS_LATENT).
//
// Options: components=K (2), samples=S (32, >= 2, quadrature points for s),
// pi_prior (1; "prior" is an alias), shape_prior_mean (0.1),
// shape_prior_variance (= shape_prior_mean), init_jitter (0.5), refresh
// (1000; 0 = only when the rates or the decay moved), burn_in=auto|B (auto:
// min(100, floor(N / 10)) updates with responsibilities 1/K; 0 = none),
// absent=propagate|ignore (propagate; ignore
// drops the evidence of absent terms, for comparison), and for emsd-mixture
// scale=fixed|learn (fixed), scale_prior_mean (1), scale_prior_variance
// (0.01).
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_

#include <algorithm>
#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/erf.hpp>
#include <boost/math/special_functions/trigamma.hpp>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
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
// Refresh the totals when the rates moved by more than this fraction of the
// smallest rate, or the SEP decay since the last refresh exceeds it.
constexpr double kDrift = 0.05;

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
  uint32_t S = 32;
  bool learn_scale = false;
  bool absent = true;  // propagate the evidence of absent terms (block sites)
  uint32_t G = 2;      // natural parameters per (term, component)
  double pi_prior = 1.0;
  double shape_mean = 0;  // 0: 0.1 (see "Early learning")
  double shape_var = 0;   // 0: shape_mean (Gamma rate 1)
  double scale_mean = 1.0;
  double scale_var = 0.01;
  double jitter = 0.5;
  uint64_t refresh = 1000;
  double burn_in = -1;  // updates with tied responsibilities; < 0: auto (BurnIn)
  uint64_t P = 0;       // K + G K V
  // Caches: N, the prior's seed, posterior totals of the shapes.
  double n = 1.0;
  uint64_t seed = 0;
  std::vector<double> total_mean;  // T_k = sum_w E[alpha_kw]
  std::vector<double> total_var;   // U_k = sum_w Var[alpha_kw]
  std::vector<double> min_rate;    // smallest rate of component k at the last refresh
  std::vector<double> rate_moved;  // |change of the rates| since then
  double decay_since = 1.0;        // product of SEP decays since then
  uint64_t commits = 0;
  uint64_t refreshes = 0;
  std::vector<double> z;  // S standard normal quadrature points (quantile midpoints)
  std::vector<double> scratch;

  // Entry of parameter c (0: shape - 1 of alpha, 1: -rate of alpha, 2, 3: of
  // beta) of component k, term w; block 1 + k G + c holds (k, c) for all terms.
  uint64_t Gauss(uint64_t w, uint32_t k, uint32_t c) const { return K + (static_cast<uint64_t>(k) * G + c) * V + w; }
  uint32_t GaussBlock(uint32_t k, uint32_t c) const { return 1 + k * G + c; }
  uint32_t SeedBlock() const { return 1 + K * G; }
  // Burn-in (see the header comment): the first B updates give every
  // component the same responsibility 1/K, whatever the likelihood.
  double BurnIn() const { return burn_in >= 0 ? burn_in : std::min(100.0, std::floor(0.1 * n)); }
  bool Burning() const { return static_cast<double>(commits) < BurnIn(); }
  double ShapePriorMean(uint32_t k, uint64_t w) const {
    const uint64_t h = SplitMix64(SplitMix64(seed) ^ (static_cast<uint64_t>(k) * V + w + 1));
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    return shape_mean * std::exp(jitter * u);
  }
  // lambda0 at entry i < P: Gamma(mean m, variance v) has shape m^2 / v and
  // rate m / v.
  double Prior(uint64_t i) const {
    if (i < K) return pi_prior - 1.0;
    const uint64_t r = i - K;
    const uint64_t kc = r / V;
    const uint32_t c = static_cast<uint32_t>(kc % G);
    const uint32_t k = static_cast<uint32_t>(kc / G);
    const uint64_t w = r % V;
    switch (c) {
      case 0: {
        const double m = ShapePriorMean(k, w);
        return m * m / shape_var - 1.0;
      }
      case 1:
        return -ShapePriorMean(k, w) / shape_var;
      case 2:
        return scale_mean * scale_mean / scale_var - 1.0;
      default:
        return -scale_mean / scale_var;
    }
  }
};

struct State {
  std::vector<double> ca, cb;     // per (t, k): cavity shape and rate of alpha
  std::vector<double> da, db;     // per (t, k): of beta
  std::vector<double> mean, var;  // K: tilted moments of s
  std::vector<double> c;          // K: slope of log G(s)/G(s+n) at the tilted s
  std::vector<double> log_e;      // K
  std::vector<double> gs, ws;     // S
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
// Gamma (shape, rate) from the natural parameters at entries i, i + V.
inline void GammaAt(const Model& m, const trib_stats& s, uint64_t i, double* shape, double* rate) {
  *shape = Posterior(m, s, i) + 1.0;
  *rate = -Posterior(m, s, i + m.V);
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

// Projects sum_j w_j Gamma(a_j, b_j) (two components) on one Gamma by
// matching E[theta] and E[log theta]: log a - psi(a) = log E[theta] -
// E[log theta] =: y, b = a / E[theta] (Minka, "Estimating a Gamma
// distribution", 2002: Newton on 1/a). `start` is a starting shape.
// Returns false if the moments are degenerate.
inline bool ProjectGamma(double w0, double a0, double b0, double w1, double a1, double b1, double start, double* shape,
                         double* rate) {
  const double m = w0 * a0 / b0 + w1 * a1 / b1;
  const double lm = w0 * (Digamma(a0) - std::log(b0)) + w1 * (Digamma(a1) - std::log(b1));
  const double y = std::log(m) - lm;
  if (!(y > 0) || !std::isfinite(y) || !(m > 0)) return false;
  double a = start > 0 ? start : 0.5 / y;
  for (int it = 0; it < 50; ++it) {
    const double f = std::log(a) - Digamma(a) - y;
    const double fp = 1.0 / a - Trigamma(a);
    double inv = 1.0 / a + f / (a * a * fp);
    if (!(inv > 0)) inv = 0.5 / a;  // keep a positive (Newton from far above)
    const double next = 1.0 / inv;
    const double change = std::fabs(next - a) / a;
    a = next;
    if (!(change >= 1e-13)) break;
  }
  if (!(a > 0) || !std::isfinite(a)) return false;
  *shape = a;
  *rate = a / m;
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
      if (key == "burn_in") {
        if (val == "auto") {
          m->burn_in = -1;
        } else if (!ParseUint(val, 0, UINT64_C(1000000000000), &u)) {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option burn_in='%s': expected auto or an integer >= 0",
                      val.c_str());
        } else {
          m->burn_in = static_cast<double>(u);
        }
        continue;
      }
      if (key == "absent") {
        if (val == "ignore") {
          m->absent = false;
        } else if (val == "propagate") {
          m->absent = true;
        } else {
          return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option absent='%s': expected propagate or ignore", val.c_str());
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
                    "shape_prior_variance, init_jitter, refresh, burn_in, absent%s)",
                    key.c_str(), m->name,
                    flavor == Flavor::kEmsd ? ", scale, scale_prior_mean, scale_prior_variance" : "");
      }
      if (!sdk::ParseDouble(val.c_str(), target) || !(allow_zero ? *target >= 0 : *target > 0) || *target > 1e6) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "option %s='%s': expected a number %s 0 and <= 1e6", key.c_str(),
                    val.c_str(), allow_zero ? ">=" : ">");
      }
    }
    if (m->shape_mean == 0) m->shape_mean = 0.1;
    if (m->shape_var == 0) m->shape_var = m->shape_mean;
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
    m->min_rate.assign(m->K, 0.0);
    m->rate_moved.assign(m->K, 0.0);
    // Quadrature for s: the S quantile midpoints of N(0, 1), equal weights.
    m->z.resize(m->S);
    for (uint32_t i = 0; i < m->S; ++i) {
      m->z[i] = std::sqrt(2.0) * boost::math::erf_inv(2.0 * (i + 0.5) / m->S - 1.0);
    }
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
      // alpha_bar = 1 on -rate of alpha: the block-uniform site of the terms
      // a document does not contain (see the header comment) is its shift.
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

// Recomputes T_k, U_k and the smallest rates from all statistics
// (O(K V)); checks feasibility.
inline int RefreshTotals(Model* m, const trib_stats& s, trib_error* err) {
  std::vector<double> tm(m->K, 0.0), tv(m->K, 0.0), mr(m->K, INFINITY);
  for (uint32_t k = 0; k < m->K; ++k) {
    for (uint64_t w = 0; w < m->V; ++w) {
      double a, b;
      GammaAt(*m, s, m->Gauss(w, k, 0), &a, &b);
      if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
        return Fail(err, TRIB_ERR_NUMERIC, "posterior Gamma of the shape of component %u, term %llu is (%g, %g)", k,
                    static_cast<unsigned long long>(w), a, b);
      }
      tm[k] += a / b;
      tv[k] += a / (b * b);
      mr[k] = std::min(mr[k], b);
    }
  }
  m->total_mean.swap(tm);
  m->total_var.swap(tv);
  m->min_rate.swap(mr);
  std::fill(m->rate_moved.begin(), m->rate_moved.end(), 0.0);
  m->decay_since = 1.0;
  ++m->refreshes;
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
        double a, b;
        GammaAt(*m, *s, m->Gauss(i % m->V, static_cast<uint32_t>(i / m->V), 2), &a, &b);
        if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
          return Fail(err, TRIB_ERR_NUMERIC, "posterior Gamma of a scale parameter is (%g, %g)", a, b);
        }
      }
    }
    return RefreshTotals(m, *s, err);
  });
}

inline int StateCreate(const trib_family_model*, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    *out = reinterpret_cast<trib_family_state*>(new State());
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
        double sa, ra;
        GammaAt(m, *s, m.Gauss(d->term_ids[t], k, 0), &sa, &ra);
        acc += std::log(std::max(sa / ra, kTiny));
        if (m.learn_scale) {
          GammaAt(m, *s, m.Gauss(d->term_ids[t], k, 2), &sa, &ra);
          acc -= d->term_counts[t] * std::log(std::max(sa / ra, kTiny));
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
// those shapes).
inline int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    if (k >= m.K) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "component %u >= %u", k, m.K);
    double tot = 0;
    for (uint64_t w = 0; w < m.V; ++w) {
      double a, b;
      GammaAt(m, *s, m.Gauss(w, k, 0), &a, &b);
      out[w] = std::max(0.0, a / b);
      tot += out[w];
    }
    if (!(tot > 0)) return Fail(err, TRIB_ERR_NUMERIC, "component %u has no positive shape", k);
    for (uint64_t w = 0; w < m.V; ++w) out[w] /= tot;
    return TRIB_OK;
  });
}

// Cache: T (K), U (K), smallest rates (K), rates moved (K), decay since the
// last refresh, commits.
inline int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  const Model& m = *M(mm);
  const size_t need = 4 * static_cast<size_t>(m.K) + 2;
  if (out == nullptr) {
    *size = need;
    return TRIB_OK;
  }
  const size_t K = m.K;
  std::memcpy(out, m.total_mean.data(), K * sizeof(double));
  std::memcpy(out + K, m.total_var.data(), K * sizeof(double));
  std::memcpy(out + 2 * K, m.min_rate.data(), K * sizeof(double));
  std::memcpy(out + 3 * K, m.rate_moved.data(), K * sizeof(double));
  out[4 * K] = m.decay_since;
  out[4 * K + 1] = static_cast<double>(m.commits);
  *size = need;
  return TRIB_OK;
}

inline int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model& m = *M(mm);
  const size_t K = m.K;
  if (size != 4 * K + 2) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cache has %zu values, expected %zu", size, 4 * K + 2);
  }
  std::memcpy(m.total_mean.data(), in, K * sizeof(double));
  std::memcpy(m.total_var.data(), in + K, K * sizeof(double));
  std::memcpy(m.min_rate.data(), in + 2 * K, K * sizeof(double));
  std::memcpy(m.rate_moved.data(), in + 3 * K, K * sizeof(double));
  m.decay_since = in[4 * K];
  m.commits = static_cast<uint64_t>(in[4 * K + 1]);
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
    // Cavity Gammas (eq. 24-25 / 56-59) and the moments of s per component
    // under the cavity tilted by the present shapes (Gamma(a + 1, b)): the
    // posterior totals with the document's terms replaced.
    const size_t TK = static_cast<size_t>(D) * K;
    st.ca.resize(TK);
    st.cb.resize(TK);
    st.da.resize(G == 4 ? TK : 0);
    st.db.resize(G == 4 ? TK : 0);
    st.mean.assign(K, 0.0);
    st.var.assign(K, 0.0);
    std::vector<double>& rest_m = st.target;  // reused: K
    std::vector<double>& rest_v = st.grad;
    rest_m.assign(m.total_mean.begin(), m.total_mean.end());
    rest_v.assign(m.total_var.begin(), m.total_var.end());
    const double n = d->total_count, c0 = CountConstant(d);
    st.log_e.assign(K, c0);
    for (uint32_t t = 0; t < D; ++t) {
      for (uint32_t k = 0; k < K; ++k) {
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G, tk = t * K + k;
        const double a = cavity[j] + 1.0, b = -cavity[j + 1];
        if (!(a > 0)) return skip("cavity shape of a shape parameter of component %u is %g <= 0", a, k);
        if (!(b > 0)) return skip("cavity rate of a shape parameter of component %u is %g <= 0", b, k);
        st.ca[tk] = a;
        st.cb[tk] = b;
        st.mean[k] += (a + 1.0) / b;
        st.var[k] += (a + 1.0) / (b * b);
        st.log_e[k] += std::log(a / b);  // E[alpha_w]
        double pa, pb;
        GammaAt(m, *s, index[j], &pa, &pb);
        rest_m[k] -= pa / pb;
        rest_v[k] -= pa / (pb * pb);
        if (G == 4) {
          const double x = d->term_counts[t];
          const double sa = cavity[j + 2] + 1.0, sb = -cavity[j + 3];
          if (!(sb > 0)) return skip("cavity rate of a scale parameter of component %u is %g <= 0", sb, k);
          // E[beta^-x] = b^x G(a - x) / G(a) needs a > x (eq. 45's b^-x).
          if (!(sa > x)) return skip("cavity shape of a scale parameter of component %u is %g <= the count", sa, k);
          st.da[tk] = sa;
          st.db[tk] = sb;
          st.log_e[k] += x * std::log(sb) + Lgamma(sa - x) - Lgamma(sa);
        }
      }
    }
    // E~[G(s)/G(s+n)] by S quadrature points of the log-normal with the
    // moments of s, and c_k = E~[psi(s) - psi(s+n)] weighted by G(s)/G(s+n):
    // the slope of log G(s)/G(s+n) at the tilted s.
    st.c.resize(K);
    st.gs.resize(S);
    st.ws.resize(S);
    for (uint32_t k = 0; k < K; ++k) {
      const double mean = st.mean[k] + std::max(rest_m[k], 0.0);
      const double var = st.var[k] + std::max(rest_v[k], 0.0);
      const double s2 = std::log1p(var / (mean * mean));
      const double mu = std::log(mean) - 0.5 * s2, sd = std::sqrt(s2);
      double mx = -INFINITY;
      for (uint32_t r = 0; r < S; ++r) {
        const double sv = std::max(std::exp(mu + sd * m.z[r]), kTiny);
        st.ws[r] = sv;
        st.gs[r] = Lgamma(sv) - Lgamma(sv + n);
        mx = std::max(mx, st.gs[r]);
      }
      double tw = 0, acc = 0;
      for (uint32_t r = 0; r < S; ++r) {
        const double w = std::exp(st.gs[r] - mx);
        tw += w;
        acc += w * (Digamma(st.ws[r]) - Digamma(st.ws[r] + n));
      }
      st.c[k] = acc / tw;
      st.log_e[k] += mx + std::log(tw / S);
      if (!(st.c[k] <= 0) || !std::isfinite(st.log_e[k])) {
        return skip("the normaliser of component %u is degenerate (%g)", st.log_e[k], k);
      }
    }
    // Z_i and the responsibilities (eq. 29); during the burn-in r_k = 1/K.
    std::vector<double>& lr = st.log_e;  // becomes log(a_k / A) + log E_k
    for (uint32_t k = 0; k < K; ++k) lr[k] += std::log(st.a_cav[k] / A);
    double log_z = sdk::LogSumExp(lr.data(), K);
    if (!std::isfinite(log_z)) return skip("log Z of the document is not finite (component %u, %g)", log_z, 0);
    out->log_z = log_z;
    if (m.Burning()) {
      std::fill(lr.begin(), lr.end(), 0.0);
      log_z = std::log(static_cast<double>(K));
    }
    // Present terms: project the tilted marginals on Gammas (eq. 61-64 with
    // Gamma moments, see the header comment).
    for (uint32_t k = 0; k < K; ++k) {
      const double r = std::exp(lr[k] - log_z), c = st.c[k];
      for (uint32_t t = 0; t < D; ++t) {
        const size_t j = K + (static_cast<size_t>(t) * K + k) * G, tk = t * K + k;
        for (uint32_t p = 0; p < G / 2; ++p) {
          if (r < 1e-12) {  // the document says nothing about component k
            lambda_new[j + 2 * p] = cavity[j + 2 * p];
            lambda_new[j + 2 * p + 1] = cavity[j + 2 * p + 1];
            continue;
          }
          const double a = p == 0 ? st.ca[tk] : st.da[tk], b = p == 0 ? st.cb[tk] : st.db[tk];
          const double a1 = p == 0 ? a + 1.0 : a - d->term_counts[t], b1 = p == 0 ? b - c : b;
          double na, nb;
          if (!ProjectGamma(1.0 - r, a, b, r, a1, b1, p == 0 ? a + r : a1, &na, &nb)) {
            return skip("the tilted marginal of a parameter of component %u is degenerate (r = %g)", r, k);
          }
          lambda_new[j + 2 * p] = na - 1.0;
          lambda_new[j + 2 * p + 1] = -nb;
        }
      }
      // Absent terms: rate += r |c| for all of them (block site on -rate).
      const uint32_t b = m.GaussBlock(k, 1);
      if (m.absent && out->block_site != nullptr && b < out->num_blocks) out->block_site[b] = r * c;
    }
    // Dirichlet: match E[log pi] (eq. 60) by Newton's method.
    st.target.resize(K);
    st.a_new.resize(K);
    const double psiA = Digamma(A) + 1.0 / A;
    for (uint32_t k = 0; k < K; ++k) {
      const double r = std::exp(lr[k] - log_z);
      st.target[k] = Digamma(st.a_cav[k]) + r / st.a_cav[k] - psiA;
      st.a_new[k] = st.a_cav[k] + r;
    }
    // Newton's method with the Hessian diag(-psi'(a_k)) + psi'(sum a) 1 1^T
    // (Minka 2000, §1), from a_cav + r, which is already close.
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
      const double bb = num / den;
      double change = 0, step = 1.0;
      for (int halve = 0; halve < 60; ++halve) {
        bool ok = true;
        for (uint32_t k = 0; k < K; ++k) ok &= st.a_new[k] - step * (st.grad[k] - bb) / -Trigamma(st.a_new[k]) > 0;
        if (ok) break;
        step *= 0.5;
      }
      for (uint32_t k = 0; k < K; ++k) {
        const double delta = step * (st.grad[k] - bb) / -Trigamma(st.a_new[k]);
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
      continue;
    }
    const uint64_t kc = (i - m.K) / m.V;
    const uint32_t c = static_cast<uint32_t>(kc % m.G);
    const bool shape = c % 2 == 0;
    if (shape ? !(v + 1.0 > 0) : !(v < 0)) {
      return Fail(err, TRIB_ERR_NUMERIC, "Gamma %s of the %s of component %llu, term %llu would be %g",
                  shape ? "shape" : "rate", c < 2 ? "shape" : "scale", static_cast<unsigned long long>(kc / m.G),
                  static_cast<unsigned long long>((i - m.K) % m.V), shape ? v + 1.0 : -v);
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
    m->decay_since *= step->decay;
    // Support entries: exact old -> new. The support lists, per term, the G
    // entries of each component in order, so (shape, -rate) of a shape are
    // adjacent in the list (their indices differ by V).
    const uint32_t K = m->K, G = m->G;
    if (count < K || (count - K) % (static_cast<size_t>(K) * G) != 0) return RefreshTotals(m, *s, err);
    std::vector<double>& var_support = m->scratch;
    var_support.assign(K, 0.0);
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (index[j + 1] != i + m->V || i != m->Gauss((i - K) % m->V, k, 0)) return RefreshTotals(m, *s, err);
      const double ao = m->Prior(i) + m->n * old_mu[j] + 1.0, bo = -(m->Prior(i + m->V) + m->n * old_mu[j + 1]);
      double an, bn;
      GammaAt(*m, *s, i, &an, &bn);
      m->total_mean[k] += an / bn - ao / bo;
      m->total_var[k] += an / (bn * bn) - ao / (bo * bo);
      var_support[k] += an / (bn * bn);
    }
    // The other terms: their -rate moved by the block delta d, so their means
    // a / b by d a / b^2 to first order; a refresh follows once the rates
    // moved by more than kDrift of the smallest one.
    bool refresh = m->refresh > 0 && m->commits % m->refresh == 0;
    if (step->block_delta != nullptr) {
      for (uint32_t k = 0; k < K; ++k) {
        const uint32_t b = m->GaussBlock(k, 1);
        if (b < step->num_blocks && step->block_delta[b] != 0.0) {
          const double dl = step->block_delta[b];
          m->total_mean[k] += dl * std::max(0.0, m->total_var[k] - var_support[k]);
          m->rate_moved[k] += std::fabs(dl);
          refresh |= m->rate_moved[k] > kDrift * m->min_rate[k];
        }
      }
    }
    refresh |= m->decay_since < 1.0 - kDrift;
    if (refresh) return RefreshTotals(m, *s, err);
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
    for (uint32_t k = 0; k < m.K; ++k) v[k] = (Posterior(m, *s, k) + 1.0) / A;  // E[pi_k] (§3.4.1)
    if (sink->put(sink, "mixing_weights", UINT32_MAX, v.data(), v.size()) != 0) return TRIB_ERR_INTERNAL;
    std::vector<double> mean(m.V), var(m.V);
    // EDCM's single parameter is beta in ch. 2's notation; EMSD's shape is alpha.
    const char* shape_mean = emsd ? "alpha_mean" : "beta_mean";
    const char* shape_var = emsd ? "alpha_variance" : "beta_variance";
    for (uint32_t k = 0; k < m.K; ++k) {
      for (uint64_t w = 0; w < m.V; ++w) {
        double a, b;
        GammaAt(m, *s, m.Gauss(w, k, 0), &a, &b);
        mean[w] = a / b;
        var[w] = a / (b * b);
      }
      if (sink->put(sink, shape_mean, k, mean.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (sink->put(sink, shape_var, k, var.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (emsd) {
        for (uint64_t w = 0; w < m.V; ++w) {
          if (m.learn_scale) {
            double a, b;
            GammaAt(m, *s, m.Gauss(w, k, 2), &a, &b);
            mean[w] = a / b;
            var[w] = a / (b * b);
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
  if (int rc = sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  g_host = host;
  trib_family_vtable& v = out->family;
  v.create = CreateFlavor<F>;
  v.layout = Layout;
  v.init_stats = InitStats;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
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
