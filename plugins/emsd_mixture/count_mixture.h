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
//    log-normal with those moments (option samples = S): a given cavity
//    always gives the same site. DEVIATION from the thesis (eq. 28: Monte
//    Carlo with S samples of the cavity): with the first Monte Carlo
//    implementation the sampling noise kept SEP and EP from agreeing on small
//    data. integration=montecarlo restores the thesis's estimator on s: S
//    (default 100) positive draws exp(mu + sd z), z ~ N(0, 1) from the
//    learner's seeded generator (state_create's seed), the same draws for
//    all components of a document (tests: EmsdMixtureTest.MonteCarlo...,
//    SepEngineTest.SepAgreesWithEpOnSmallData with both).
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
// Cost per document: O(K (|d| + S)) special-function evaluations, plus
// O(K |d| P^2) arithmetic for the totals (see "Totals").
//
// Totals (version 1.2.0; 1.2.0 also adds the block_feasible hook below). T_k = sum_w a_w / b_w and U_k = sum_w a_w /
// b_w^2 (shape a_w, rate b_w of alpha_kw) are needed by every document, and a document moves all V terms: the block
// site adds Delta to every absent rate, and the SEP decay moves every (a, b) towards the prior (a0, b0): lambda -
// lambda0 <- decay (lambda - lambda0). So between two O(V) recomputations ("refreshes") of component k, every term not
// in a support since then is, exactly,
//     a = a0 + D x,   b = b0 + D y + Delta,   i.e.  a = a' - e x,
//     b = b' + h,  h = Delta - e y,  e = 1 - D,  a' = a0 + x, b' = b0 + y,
// with (a', b') its values at the refresh (the "frame" of k), D the product
// of the decays and Delta the decayed sum of the block deltas since then
// (SEP: Delta <- decay Delta - block_delta; EP / ADF: decay 1). A term in a
// support is removed at its old values and re-added at its new ones with
// x = (a - a0) / D, y = (b - b0 - Delta) / D, so the same form holds for it.
// Hence T_k = sum_w (a' - e x) / (b' + h), expanded in h / b' to order P:
//     1 / (b' + h) = sum_{p<=P} (-h)^p / b'^(p+1)  +  (-h / b')^(P+1) / (b' + h),
// (-h)^p = (-1)^p sum_q C(p, q) Delta^(p-q) (-e)^q y^q, which needs only the
// moments A[p][q] = sum_w a' y^q / b'^(p+1) and X[p][q] = sum_w x y^q /
// b'^(p+1) (q <= p <= P + 1; U likewise from 1 / (b' + h)^2 = sum_{p<=P}
// (p + 1) (-h)^p / b'^(p+2) + remainder). A support term updates them in
// O(P^2); T and U cost O(P^2) per component and document. The remainder is
// bounded rigorously: with g = 1 - e - max(0, -Delta) / min_w b' (then b'
// + h >= g b', as y < b' because b0 > 0; Delta < 0 happens with EP, when a
// block site is replaced by a smaller one), n = P + 1, and |h|^n <= (1 + th)^P
// |Delta|^n + (1 + 1/th)^P (e |y|)^n for any th > 0,
//     |T~ - T| <= [(1+th)^P |Delta|^n (B0 + e B1) + (1+1/th)^P e^n (B2 + e B3)] / g
//     |U~ - U| <= 2 (P + 2) [the same with C0..C3] / g^2
// where B0..B3 = sum_w (a', |x|, a' |y|^n, |x| |y|^n) / b'^(P+2) and C0..C3
// the same over b'^(P+3) (for z = h / b' >= -(1 - g): |1/(1+z) - its
// Taylor polynomial| <= |z|^n / g, the U remainder <= 2 (P + 2) |z|^n / g^2).
// Component k is refreshed (O(V)) when a bound exceeds 1e-8 T_k (resp.
// 1e-6 U_k; U only sets the spread of the log-normal of s), when g < 0.5,
// when D < 0.5, or when a term's b' is not > 0. The 1e-8 bound moves
// log G(T) - log G(T + n), and so score() and every moment match, by at most
// n 1e-8 nats (tests/count_mixture_totals_test.cc checks 1e-6 relative).
// P = 9 (kOrder). A few terms with small rates would dominate the bound (a
// rate shrunk by the projection of a present term with an intermediate
// responsibility: measured 0.05-0.2 next to typical rates ~1 in
// near-prior components, 30-400 in the others; their number grows with the
// vocabulary): the E = clamp(V / 64, 16, 256) smallest reference rates of
// each component are kept exactly instead, (a0, x, b0, y) per term, summed
// in O(E) per document; a support term whose new b' is below the largest of
// them joins them while there is room. (A support term held exactly is
// found by a scan of the E held by its component; at most K E / V <= K / 64
// of the terms are held, so the scans cost O(K) per document term.)
// Consequences (bench/sep_bench.cc, K = 10, L = 50): a component is
// refreshed when its shift reaches ~15% ((1e-8)^(1/10)) of its typical
// rate; rates grow linearly with the documents a component absorbs, so that
// happens O(log t) times, and the amortised O(V / t) per document vanishes
// as the stream grows. Previously (first order in Delta, the decay ignored until
// 5%, a refresh of all K components when any component's rates moved by 5%
// of its smallest rate) the smallest rate, not the bulk, set the refresh
// rate: with 10-term documents every 4th document refreshed all K V totals,
// and the totals were off by up to 2e-3 (T) and 10% (U).
// Besides, a full refresh runs every max(refresh, V) updates (rounding
// only: O(K) amortised) and whenever N changes.
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
// Options: components=K (2), samples=S (32, >= 2, quadrature points for s;
// 100 Monte Carlo draws with integration=montecarlo),
// integration=quadrature|montecarlo (quadrature),
// pi_prior (1; "prior" is an alias), shape_prior_mean (0.1),
// shape_prior_variance (= shape_prior_mean), init_jitter (0.5), refresh
// (1000: a full recomputation of the totals every max(refresh, V) updates, a
// guard against rounding, see "Totals"; 0 = only when the error bound asks
// for it), burn_in=auto|B (auto:
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
#include <boost/math/special_functions/gamma.hpp>
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
// Totals between refreshes (header comment, "Totals"): order P of the
// series in (shift, decay) and the relative error bounds that trigger a
// refresh of a component's totals (the number of smallest-rate terms held
// exactly instead is Model::exact_cap).
constexpr int kOrder = 9;
constexpr double kTolMean = 1e-8;  // |T~ - T| <= kTolMean T
constexpr double kTolVar = 1e-6;   // |U~ - U| <= kTolVar U
// Moments per component: A[p][q], X[p][q] (0 <= q <= p <= P + 1), then the
// eight bound moments B0..B3, C0..C3.
constexpr int kTri = (kOrder + 2) * (kOrder + 3) / 2;
constexpr int kMoments = 2 * kTri + 8;
constexpr int Tri(int p, int q) { return p * (p + 1) / 2 + q; }

// Double-precision Boost special functions. The host's lgamma / digamma
// (g_host) promote double to long double: digamma's rational approximations
// run in x87 arithmetic, and lgamma goes through gamma_imp, whose pow is
// then powl (the "powl" of bench/SEP_RESULTS.md's profile of short
// documents: perf shows HostLgamma -> lgamma_imp<long double> -> gamma_imp ->
// powl, called from the quadrature over s in MomentMatch). Double keeps a
// few ulps, far below the quadrature's error. Domain errors return NaN and
// poles inf, which the callers check.
using DoublePolicy =
    boost::math::policies::policy<boost::math::policies::promote_double<false>,
                                  boost::math::policies::domain_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::pole_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::evaluation_error<boost::math::policies::ignore_error>>;
inline double Lgamma(double x) { return boost::math::lgamma(x, DoublePolicy()); }
inline double Digamma(double x) { return boost::math::digamma(x, DoublePolicy()); }
inline double Trigamma(double x) { return boost::math::trigamma(x, DoublePolicy()); }

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
  bool samples_given = false;  // samples=S was an option (else 32, or 100 for Monte Carlo)
  bool monte_carlo = false;    // integration=montecarlo: S seeded log-normal draws instead of quadrature
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
  // The frame of component k since its last refresh (header comment,
  // "Totals"): kMoments moments, the product D of the decays, the shift
  // Delta of the rates, the smallest reference rate.
  std::vector<double> moments;  // K * kMoments
  std::vector<double> frame_decay, frame_shift, frame_min_rate;
  // The exact terms of component k: term ids and (a0, x, b0, y) (at most
  // exact_cap), the admission threshold on the reference rate, and per term the
  // number of components holding it exactly.
  struct Exact {
    std::vector<uint32_t> w;
    std::vector<double> p;  // 4 per term
    double tau = 0;
  };
  std::vector<Exact> exact;
  std::vector<uint32_t> exact_count;
  uint32_t exact_cap = 16;  // clamp(V / 64, 16, 256)
  uint64_t commits = 0;
  uint64_t refreshes = 0;            // full recomputations (all components)
  uint64_t drift_refreshes = 0;      // one component, its error bound exceeded
  std::vector<double> z;             // S standard normal quadrature points (quantile midpoints)
  std::vector<double> scratch;       // V: prior means during a refresh
  std::vector<unsigned char> stale;  // K: components to refresh in commit
  std::vector<double> support_m0;    // prior means of the support terms in commit

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
  std::vector<double> z;  // integration=montecarlo: this document's standard normal draws
  std::mt19937_64 rng;    // seeded by state_create (SepOptions::seed)
  std::normal_distribution<double> normal;
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

// The options (`tributary plugins --options emsd-mixture`); see the header
// comment. edcm-mixture has the same without the scale's.
namespace option {
inline constexpr trib_option_spec kComponents =
    sdk::Integer("components", "2", "number of mixture components K").AtLeast(1).AtMost(100000);
inline constexpr trib_option_spec kSamples =
    sdk::Integer("samples", "32 (100 with integration=montecarlo)", "quadrature points / Monte Carlo draws for s")
        .AtLeast(2)
        .AtMost(1000000)
        .Derived();
inline constexpr trib_option_spec kPiPrior =
    sdk::Number("pi_prior", "1", "Dirichlet prior of the mixing weights").Above(0).AtMost(1e6);
inline constexpr trib_option_spec kPrior = sdk::Alias("prior", "pi_prior");
inline constexpr trib_option_spec kShapeMean =
    sdk::Number("shape_prior_mean", "0.1", "prior mean of the shapes").Above(0).AtMost(1e6);
inline constexpr trib_option_spec kShapeVariance =
    sdk::Number("shape_prior_variance", "shape_prior_mean", "prior variance of the shapes")
        .Above(0)
        .AtMost(1e6)
        .Derived();
inline constexpr trib_option_spec kJitter =
    sdk::Number("init_jitter", "0.5", "log-uniform jitter of the prior means that breaks symmetry")
        .AtLeast(0)
        .AtMost(1e6);
inline constexpr trib_option_spec kRefresh =
    sdk::Integer("refresh", "1000", "recompute the totals every max(refresh, V) updates; 0: only when needed")
        .AtLeast(0)
        .AtMost(1e12);
inline constexpr trib_option_spec kBurnIn =
    sdk::Integer("burn_in", "auto", "updates with responsibilities 1/K; auto: min(100, floor(N / 10))")
        .AtLeast(0)
        .AtMost(1e12)
        .Words("auto");
inline constexpr trib_option_spec kAbsent =
    sdk::Choice("absent", "propagate|ignore", "propagate", "the evidence of absent terms: propagate or ignore");
inline constexpr trib_option_spec kIntegration =
    sdk::Choice("integration", "quadrature|montecarlo", "quadrature", "how moment matching integrates over s");
}  // namespace option

inline constexpr trib_option_spec kEdcmOptions[] = {
    option::kComponents, option::kSamples,       option::kPiPrior,     option::kPrior,
    option::kShapeMean,  option::kShapeVariance, option::kJitter,      option::kRefresh,
    option::kBurnIn,     option::kAbsent,        option::kIntegration, {},
};
inline constexpr trib_option_spec kEmsdOptions[] = {
    option::kComponents,
    option::kSamples,
    option::kPiPrior,
    option::kPrior,
    option::kShapeMean,
    option::kShapeVariance,
    option::kJitter,
    option::kRefresh,
    option::kBurnIn,
    option::kAbsent,
    option::kIntegration,
    sdk::Choice("scale", "fixed|learn", "fixed", "fixed: b = 1 (EDCM with EMSD's names); learn: Gamma sites on b"),
    sdk::Number("scale_prior_mean", "1", "scale=learn: prior mean of b").Above(0).AtMost(1e6),
    sdk::Number("scale_prior_variance", "0.01", "scale=learn: prior variance of b").Above(0).AtMost(1e6),
    {},
};

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
    sdk::OptionValues o;
    const trib_option_spec* table = flavor == Flavor::kEmsd ? kEmsdOptions : kEdcmOptions;
    if (int rc = sdk::ParseOptions(table, TRIB_KIND_FAMILY, m->name, opts, num, &o, err); rc != TRIB_OK) return rc;
    m->K = o.Integer<uint32_t>("components");
    m->samples_given = o.IsSet("samples");
    if (m->samples_given) m->S = o.Integer<uint32_t>("samples");
    m->monte_carlo = o.Is("integration", "montecarlo");
    m->refresh = o.Integer<uint64_t>("refresh");
    m->burn_in = o.Is("burn_in", "auto") ? -1 : o.Number("burn_in");
    m->absent = o.Is("absent", "propagate");
    m->pi_prior = o.Number("pi_prior");
    m->shape_mean = o.Number("shape_prior_mean");
    m->shape_var = o.HasValue("shape_prior_variance") ? o.Number("shape_prior_variance") : m->shape_mean;
    m->jitter = o.Number("init_jitter");
    if (flavor == Flavor::kEmsd) {
      m->learn_scale = o.Is("scale", "learn");
      m->scale_mean = o.Number("scale_prior_mean");
      m->scale_var = o.Number("scale_prior_variance");
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
    m->moments.assign(static_cast<size_t>(m->K) * kMoments, 0.0);
    m->frame_decay.assign(m->K, 1.0);
    m->frame_shift.assign(m->K, 0.0);
    m->frame_min_rate.assign(m->K, INFINITY);
    m->exact.assign(m->K, Model::Exact{});
    m->exact_count.assign(m->V, 0);
    m->exact_cap = static_cast<uint32_t>(std::clamp<uint64_t>(m->V / 64, 16, 256));
    // Quadrature for s: the S quantile midpoints of N(0, 1), equal weights
    // (Monte Carlo draws its points per document, in the state).
    if (m->monte_carlo && !m->samples_given) m->S = 100;  // the thesis's S (§3.3)
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

// Reference values of a term with current shape a, rate b and prior (a0,
// b0) in the frame of component k (header comment, "Totals"): a = a0 + D x,
// b = b0 + D y + Delta, and b' = b0 + y.
struct Ref {
  double x, y, ar, br;
};
inline Ref RefOf(const Model& m, uint32_t k, double a, double b, double a0, double b0) {
  const double D = m.frame_decay[k], x = (a - a0) / D, y = (b - b0 - m.frame_shift[k]) / D;
  return Ref{x, y, a0 + x, b0 + y};
}

// Adds (sign +1) or removes (-1) a term to / from the series moments of
// component k. Returns false if b' is not > 0 (the series cannot represent
// the term: the caller refreshes the component).
inline bool SeriesTerm(Model* m, uint32_t k, const Ref& r, double sign) {
  if (!(r.br > 0) || !std::isfinite(r.br) || !std::isfinite(r.ar)) return false;
  double* mo = &m->moments[static_cast<size_t>(k) * kMoments];
  constexpr int n = kOrder + 1;
  double inv[kOrder + 3], yq[kOrder + 2];
  const double ib = 1.0 / r.br;
  inv[0] = ib;
  yq[0] = 1.0;
  for (int p = 1; p <= kOrder + 2; ++p) inv[p] = inv[p - 1] * ib;  // 1 / b'^(p+1)
  for (int p = 1; p <= kOrder + 1; ++p) yq[p] = yq[p - 1] * r.y;   // y^p
  for (int p = 0; p <= kOrder + 1; ++p) {
    const double fa = sign * r.ar * inv[p];
    for (int q = 0; q <= p; ++q) mo[Tri(p, q)] += fa * yq[q];
  }
  if (r.x != 0) {  // x = 0 for the terms no document has touched (most, at a refresh)
    for (int p = 0; p <= kOrder + 1; ++p) {
      const double fx = sign * r.x * inv[p];
      for (int q = 0; q <= p; ++q) mo[kTri + Tri(p, q)] += fx * yq[q];
    }
  }
  const double ax = std::fabs(r.x), yn = std::fabs(yq[n]);
  double* bm = mo + 2 * kTri;
  for (int c = 0; c < 2; ++c) {  // B: 1 / b'^(P+2); C: 1 / b'^(P+3)
    const double ip = sign * inv[kOrder + 1 + c];
    bm[4 * c + 0] += r.ar * ip;
    bm[4 * c + 1] += ax * ip;
    bm[4 * c + 2] += r.ar * yn * ip;
    bm[4 * c + 3] += ax * yn * ip;
  }
  if (sign > 0) m->frame_min_rate[k] = std::min(m->frame_min_rate[k], r.br);
  return true;
}

inline int ExactSlot(const Model& m, uint32_t k, uint64_t w) {
  if (m.exact_count[w] == 0) return -1;
  const auto& ids = m.exact[k].w;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == w) return static_cast<int>(i);
  }
  return -1;
}
inline void ExactRemove(Model* m, uint32_t k, int slot) {
  Model::Exact& ex = m->exact[k];
  const size_t last = ex.w.size() - 1, i = static_cast<size_t>(slot);
  --m->exact_count[ex.w[i]];
  ex.w[i] = ex.w[last];
  for (int c = 0; c < 4; ++c) ex.p[4 * i + c] = ex.p[4 * last + c];
  ex.w.pop_back();
  ex.p.resize(4 * last);
}
// Adds a term: to the exact terms if its reference rate is below the
// threshold and there is room, else to the series.
inline bool AddTerm(Model* m, uint32_t k, uint64_t w, double a, double b, double a0, double b0) {
  const Ref r = RefOf(*m, k, a, b, a0, b0);
  Model::Exact& ex = m->exact[k];
  if (!(r.br >= ex.tau) && ex.w.size() < m->exact_cap && std::isfinite(r.x) && std::isfinite(r.y)) {
    ex.w.push_back(static_cast<uint32_t>(w));
    ex.p.insert(ex.p.end(), {a0, r.x, b0, r.y});
    ++m->exact_count[w];
    return true;
  }
  return SeriesTerm(m, k, r, 1.0);
}

// T_k and U_k at the frame's (D, Delta): the series plus the exact terms;
// false if the error bound exceeds kTolMean T or kTolVar U (header
// comment, "Totals").
inline bool FrameTotals(Model* m, uint32_t k) {
  const double* mo = &m->moments[static_cast<size_t>(k) * kMoments];
  const double D = m->frame_decay[k], e = 1.0 - D, dl = m->frame_shift[k];
  constexpr int n = kOrder + 1;
  double dp[kOrder + 2], ep[kOrder + 2], binom[kOrder + 1][kOrder + 1];
  dp[0] = ep[0] = 1.0;
  for (int p = 1; p <= kOrder + 1; ++p) {
    dp[p] = dp[p - 1] * dl;
    ep[p] = ep[p - 1] * -e;
  }
  for (int p = 0; p <= kOrder; ++p) {
    binom[p][0] = binom[p][p] = 1.0;
    for (int q = 1; q < p; ++q) binom[p][q] = binom[p - 1][q - 1] + binom[p - 1][q];
  }
  // (-h)^p / b'^(p+1) (T) and (p + 1) (-h)^p / b'^(p+2) (U), h = Delta - e y,
  // expanded in Delta and e.
  double t = 0, u = 0;
  for (int p = 0; p <= kOrder; ++p) {
    double tp = 0, up = 0;
    for (int q = 0; q <= p; ++q) {
      const double c = binom[p][q] * dp[p - q] * ep[q];
      tp += c * (mo[Tri(p, q)] - e * mo[kTri + Tri(p, q)]);
      up += c * (mo[Tri(p + 1, q)] - e * mo[kTri + Tri(p + 1, q)]);
    }
    const double sgn = p % 2 == 0 ? 1.0 : -1.0;
    t += sgn * tp;
    u += sgn * (p + 1) * up;
  }
  double err_t = 0, err_u = 0;
  const double g = 1.0 - e - std::max(0.0, -dl) / m->frame_min_rate[k];
  if (!(g >= 0.5)) {
    err_t = err_u = INFINITY;
  } else {
    // |h|^n <= (1 + th)^P |Delta|^n + (1 + 1/th)^P (e |y|)^n for any th > 0.
    const double* bm = mo + 2 * kTri;
    const double d1 = std::fabs(dp[n]), e1 = std::fabs(ep[n]);
    err_t = err_u = INFINITY;
    for (double th : {1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0}) {
      const double f = std::pow(1.0 + th, kOrder) * d1, h = std::pow(1.0 + 1.0 / th, kOrder) * e1;
      err_t = std::min(err_t, (f * (bm[0] + e * bm[1]) + h * (bm[2] + e * bm[3])) / g);
      err_u = std::min(err_u, 2.0 * (kOrder + 2) * (f * (bm[4] + e * bm[5]) + h * (bm[6] + e * bm[7])) / (g * g));
    }
  }
  // The exact terms.
  const Model::Exact& ex = m->exact[k];
  bool ok = true;
  for (size_t i = 0; i < ex.w.size(); ++i) {
    const double* q = &ex.p[4 * i];
    const double a = q[0] + D * q[1], b = q[2] + D * q[3] + dl;
    ok &= a > 0 && b > 0;
    t += a / b;
    u += a / (b * b);
  }
  m->total_mean[k] = t;
  m->total_var[k] = u;
  return ok && t > 0 && u > 0 && err_t <= kTolMean * t && err_u <= kTolVar * u;
}

// Recomputes the moments and exact terms of component k from all statistics
// (O(V)) and restarts its frame (D = 1, Delta = 0); checks feasibility.
inline int RefreshComponent(Model* m, const trib_stats& s, uint32_t k, trib_error* err) {
  std::fill(m->moments.begin() + static_cast<size_t>(k) * kMoments,
            m->moments.begin() + static_cast<size_t>(k + 1) * kMoments, 0.0);
  m->frame_decay[k] = 1.0;
  m->frame_shift[k] = 0.0;
  m->frame_min_rate[k] = INFINITY;
  Model::Exact& ex = m->exact[k];
  for (uint32_t w : ex.w) --m->exact_count[w];
  ex.w.clear();
  ex.p.clear();
  const uint32_t b0 = m->GaussBlock(k, 0), b1 = m->GaussBlock(k, 1);
  const trib_block &blk0 = s.blocks[b0], &blk1 = s.blocks[b1];
  const double sh0 = blk0.shift * blk0.alpha_bar, sh1 = blk1.shift * blk1.alpha_bar;
  const uint64_t i0 = m->Gauss(0, k, 0), i1 = m->Gauss(0, k, 1);
  // Pass 1: the prior means and the exact_cap smallest rates (a max-heap).
  std::vector<double>& prior = m->scratch;
  prior.resize(m->V);
  std::vector<std::pair<double, uint32_t>> heap;
  heap.reserve(m->exact_cap + 1);
  for (uint64_t w = 0; w < m->V; ++w) {
    const double m0 = m->ShapePriorMean(k, w), pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
    prior[w] = m0;
    const double a = pa + m->n * (blk0.scale * s.raw[i0 + w] + sh0);
    const double b = pb - m->n * (blk1.scale * s.raw[i1 + w] + sh1);
    if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
      return Fail(err, TRIB_ERR_NUMERIC, "posterior Gamma of the shape of component %u, term %llu is (%g, %g)", k,
                  static_cast<unsigned long long>(w), a, b);
    }
    if (heap.size() < m->exact_cap || b < heap.front().first) {
      heap.emplace_back(b, static_cast<uint32_t>(w));
      std::push_heap(heap.begin(), heap.end());
      if (heap.size() > m->exact_cap) {
        std::pop_heap(heap.begin(), heap.end());
        heap.pop_back();
      }
    }
  }
  // The threshold: the largest rate held exactly (none if V <= exact_cap: all
  // terms are exact).
  ex.tau = heap.size() < m->V ? heap.front().first : INFINITY;
  for (const auto& hw : heap) prior[hw.second] = -prior[hw.second];  // mark
  // Pass 2: the series over the other terms, then the exact terms.
  for (uint64_t w = 0; w < m->V; ++w) {
    const double m0 = std::fabs(prior[w]), pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
    const double a = pa + m->n * (blk0.scale * s.raw[i0 + w] + sh0);
    const double b = pb - m->n * (blk1.scale * s.raw[i1 + w] + sh1);
    if (prior[w] < 0) {
      ex.w.push_back(static_cast<uint32_t>(w));
      ex.p.insert(ex.p.end(), {pa, a - pa, pb, b - pb});
      ++m->exact_count[w];
    } else {
      SeriesTerm(m, k, Ref{a - pa, b - pb, a, b}, 1.0);
    }
  }
  FrameTotals(m, k);  // D = 1, Delta = 0: the series is exact
  return TRIB_OK;
}

// Recomputes all components (O(K V)).
inline int RefreshTotals(Model* m, const trib_stats& s, trib_error* err) {
  for (uint32_t k = 0; k < m->K; ++k) {
    if (int rc = RefreshComponent(m, s, k, err); rc != TRIB_OK) return rc;
  }
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

inline int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->rng.seed(SplitMix64(seed ^ 0x6d6f6e7465ull));
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

// Cache: T (K), U (K), the frames' smallest reference rates (K) and shifts
// (K), 1 (formerly the decay since the last refresh), commits: the layout of
// version 1.1.0. Import restores T, U (so that a loaded model scores exactly
// as the saved one) and the update count; Model::Load runs rebuild() first,
// which restarts the frames at the loaded statistics, and the imported T, U
// are within the bound of those.
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
  std::memcpy(out + 2 * K, m.frame_min_rate.data(), K * sizeof(double));
  std::memcpy(out + 3 * K, m.frame_shift.data(), K * sizeof(double));
  out[4 * K] = 1.0;
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
    // integration=montecarlo: S positive draws s = exp(mu + sd z), z ~ N(0, 1)
    // from the state's seeded generator, the same draws for every component
    // of this document (common random numbers); the thesis's Monte Carlo
    // estimate of Z_i (eq. 28), over s, the only part of E_j without a closed
    // form.
    const double* zr = m.z.data();
    if (m.monte_carlo) {
      st.z.resize(S);
      for (uint32_t r = 0; r < S; ++r) st.z[r] = st.normal(st.rng);
      zr = st.z.data();
    }
    for (uint32_t k = 0; k < K; ++k) {
      const double mean = st.mean[k] + std::max(rest_m[k], 0.0);
      const double var = st.var[k] + std::max(rest_v[k], 0.0);
      const double s2 = std::log1p(var / (mean * mean));
      const double mu = std::log(mean) - 0.5 * s2, sd = std::sqrt(s2);
      double mx = -INFINITY;
      for (uint32_t r = 0; r < S; ++r) {
        const double sv = std::max(std::exp(mu + sd * zr[r]), kTiny);
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
    // Periodic full recomputation, a safety net against rounding only (the
    // frames bound the truncation error): at least every max(refresh, V)
    // updates, O(K) amortised per update.
    if (m->refresh > 0 && m->commits % std::max<uint64_t>(m->refresh, m->V) == 0) return RefreshTotals(m, *s, err);
    const uint32_t K = m->K, G = m->G;
    if (count < K || (count - K) % (static_cast<size_t>(K) * G) != 0) return RefreshTotals(m, *s, err);
    // The support lists, per term, the G entries of each component in order,
    // so (shape, -rate) of a shape are adjacent (their indices differ by V).
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (index[j + 1] != i + m->V || i != m->Gauss((i - K) % m->V, k, 0)) return RefreshTotals(m, *s, err);
    }
    // 1. Remove the support terms' old values in the old frames. A term the
    //    series cannot represent marks its component for a refresh.
    std::vector<unsigned char>& stale = m->stale;  // 1: refresh component k
    stale.assign(K, 0);
    std::vector<double>& prior_mean = m->support_m0;  // per j / G
    prior_mean.resize(count / G + 1);
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      const uint64_t w = (i - K) % m->V;
      const double m0 = prior_mean[j / G] = m->ShapePriorMean(k, w);
      if (stale[k] != 0) continue;
      if (const int slot = ExactSlot(*m, k, w); slot >= 0) {
        ExactRemove(m, k, slot);
        continue;
      }
      const double pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
      const double ao = pa + m->n * old_mu[j], bo = pb - m->n * old_mu[j + 1];
      if (!SeriesTerm(m, k, RefOf(*m, k, ao, bo, pa, pb), -1.0)) stale[k] = 1;
    }
    // 2. Advance the frames: every other entry decayed (a - a0 and b - b0 by
    //    the factor `decay`) and the rates moved by the block delta.
    for (uint32_t k = 0; k < K; ++k) {
      m->frame_decay[k] *= step->decay;
      m->frame_shift[k] *= step->decay;
      const uint32_t b = m->GaussBlock(k, 1);
      if (step->block_delta != nullptr && b < step->num_blocks) m->frame_shift[k] -= step->block_delta[b];
      if (!(m->frame_decay[k] > 0.5)) stale[k] = 1;
    }
    // 3. Add the support terms' new values in the new frames.
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (stale[k] != 0) continue;
      const uint64_t w = (i - K) % m->V;
      const double m0 = prior_mean[j / G], pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
      const double an = pa + m->n * MuAt(*s, i, m->GaussBlock(k, 0));
      const double bn = pb - m->n * MuAt(*s, i + m->V, m->GaussBlock(k, 1));
      if (!AddTerm(m, k, w, an, bn, pa, pb)) stale[k] = 1;
    }
    // 4. The totals, or a refresh of the components whose bound is exceeded.
    for (uint32_t k = 0; k < K; ++k) {
      if (stale[k] == 0 && FrameTotals(m, k)) continue;
      ++m->drift_refreshes;
      if (int rc = RefreshComponent(m, *s, k, err); rc != TRIB_OK) return rc;
    }
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

// block_feasible (sep_abi.h): the only block sites are on the -rate block
// of each component's shapes (absent terms' evidence, "Moment matching").
// The new rate of an off-support term is b0 + decay (b - b0) - delta >=
// decay b - delta (b0 > 0), and b >= L_k, a lower bound on component k's
// current rates from the totals' frame ("Totals"): a series term has b =
// b0 + D y + Delta = D b' + (1 - D) b0 + Delta >= D min b' + Delta, with
// frame_min_rate[k] <= min b' (never raised between refreshes); the exact
// terms are evaluated one by one (O(E)). Conservative: a refused update
// might have been feasible; it is counted as skipped. Needed for EP, where
// a replaced block site can shrink (SEP and ADF only add r c < 0 to -rate,
// i.e. raise every rate).
inline int BlockFeasible(const trib_family_model* mm, const trib_stats*, uint32_t block, double decay, double delta,
                         trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    if (delta == 0.0) return TRIB_OK;
    for (uint32_t k = 0; k < m.K; ++k) {
      if (block != m.GaussBlock(k, 1)) continue;
      if (delta <= 0.0) return TRIB_OK;  // -rate falls: every rate grows (decay moves towards the prior)
      const double D = m.frame_decay[k], dl = m.frame_shift[k];
      double lower = D * m.frame_min_rate[k] + dl;
      const Model::Exact& ex = m.exact[k];
      for (size_t i = 0; i < ex.w.size(); ++i) {
        const double* q = &ex.p[4 * i];
        lower = std::min(lower, q[2] + D * q[3] + dl);
      }
      if (!(decay * lower - delta > 0)) {
        return Fail(err, TRIB_ERR_NUMERIC,
                    "the block site would lower every absent term's rate in component %u by %g, but a rate may be as "
                    "small as %g",
                    k, delta, decay * lower);
      }
      return TRIB_OK;
    }
    return Fail(err, TRIB_ERR_NUMERIC, "unexpected block site %g on block %u", delta, block);
  });
}

inline const trib_sep_hooks kSepHooks = {
    sizeof(trib_sep_hooks), NumParams, Support, MomentMatch, Feasible, SepCommit, Summary, BlockFeasible,
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
