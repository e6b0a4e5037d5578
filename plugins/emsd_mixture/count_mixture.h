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
// and is not available to a streaming learner. K-means burn-in (version
// 1.3.0, option init=kmeans, off by default): its streaming counterpart.
// During the burn-in each document goes wholly (r = 1) to the cluster of an
// online spherical K-means (MacQueen; cosine on L2-normalised counts, the
// distance of the thesis's NLTK K-means; the first K documents seed the
// centroids, kept in the learner's State: O(K V) memory, O(V) per burn-in
// document), so each component starts from its K-means cluster instead of
// the average of all documents. Measured (bench/COUNT_MIXTURE_TABLE3.md) it
// does not help: on Table 3 at 50 counts eq. 14 still merges the components
// (batch EM on eq. 14 started AT the true parameters merges them too, so no
// initialisation can keep them apart), and with likelihood=dcm it left one
// component with E[pi] ~0.01 on every seed (0.52-0.59 accuracy with the
// tied burn-in, 0.33-0.59 with K-means). A snapshot taken during the burn-in
// does not carry the centroids (a resumed learner restarts them).
//
// Exact DCM (version 1.3.0, option likelihood=dcm; bench/COUNT_MIXTURE_TABLE3.md).
// eq. 14 / 45 replace G(x + a) / G(a) by G(x) a, valid for a -> 0. At
// shapes ~0.1-0.9 with 50 counts over 3 terms (issue 17's Table 3 setting)
// the approximation ranks components by which terms are present, not by
// how many times: its maximum is one component (shapes ~0.1, 70 % off), and
// the learned mixture has three copies of it (accuracy 1/3). likelihood=dcm
// uses eq. 13 itself: G(x + a) / G(a) is the rising factorial a^(x) = sum_j
// c(x, j) a^j (c: unsigned Stirling numbers of the first kind), so under a
// Gamma(a, b) it is exact: E[a^(x)] = sum_j c(x, j) G(a + j) / (G(a) b^j),
// and the tilted marginal of a present shape is the Gamma mixture sum_j w_j
// Gamma(a + j, b - c), projected like the others on E[theta], E[log theta]
// (RisingFactorialMoments, O(x) per term and component). Because a^(x)
// tilts a shape far more than eq. 14's a, the linearisation of G(s)/G(s+n)
// takes the tilted moments of s at the rate b - c_k and iterates c_k with
// them (kDcmIterations); without that, the tilted shapes ran away to the
// multinomial limit (shapes in the thousands). Integer counts up to
// kMaxDcmCount only (a document with another count is refused). The scale
// of EMSD enters as before (b^-x). Measured: SEP then separates Table 3's
// components (accuracy 0.52-0.59 against Bayes-optimal 0.60-0.64, 3 x 300
// documents, 50 passes) and, with the revival below, meets issue 17's
// criterion on 5 seeds of 5 at 3 x 1000 documents and 150 passes (4 of 5
// without it); ~3x the cost of eq. 14 per document there. Not the default:
// on real text it is behind eq. 14 / 45 after 5 passes (validation split,
// bench/COUNT_MIXTURE_TABLE3.md §8).
//
// Pruning (version 1.3.0, option prune; ch. 2, Algorithm 1, line 13:
// "combine or eliminate clusters with very small weights"). score() gives
// -inf to a component with E[pi_k] < prune / K (default 0.1: a tenth of the
// uniform weight), never to the heaviest one; the statistics keep it (a
// streaming learner may revive it), and the summary still lists it.
//
// Revival (version 1.4.0, option revive=split|off, default split; the SEP
// hooks' move, ABI 1.9). Pruning's converse: under SEP a component can lose
// every document early (one component takes the whole stream for a pass,
// before the jitter has separated them) and then never win one back, so K
// components fit K - 1 clusters (bench/COUNT_MIXTURE_TABLE3.md §8: Table 3's
// seed 1 kept a component at E[pi] 0.003 for 150 passes whatever the model
// seed). Once every N updates (a pass of the effective data-set size: at
// updates N / 2, 3 N / 2, ..., so that half a pass is left to settle the
// split before a pass, and a one-pass training, ends), after the burn-in, the
// lightest component d, if its E[pi_d] < prune / K, takes
// half of the heaviest component h: a_h, a_d of q(pi) both become their mean,
// and h's evidence lambda_h - lambda0_h on every shape (and scale) is halved
// and given to both, the shapes' part multiplied by exp(+-init_jitter u_w) (a
// hash of the seed, the revival count and w) so that d and h start apart along
// a random direction; SEP then moves them to the two sub-clusters if the data
// have them (else d dies again and is revived once a pass: at most one O(KV)
// move per pass). This is the split of split-and-merge EM (Ueda et al.,
// 2000) without its acceptance test (the engine's approximate evidence over
// one pass is noisy): where the data have fewer clusters than K, the revived
// component either dies again or shares a cluster with h.
// Only SEP calls the move (EP's stored sites would no longer sum to mu; a
// shard of --threads / --distributed composes affine steps). The revival
// count is cached (a 1.3.0 cache imports with 0).
//
// Learned scale, measured (bench/COUNT_MIXTURE_TABLE3.md): at Table 3's
// setting scale=learn skips 4197 of 4200 updates (E[b^-x] needs a Gamma
// shape above the count x, ~17 here), so it stays the default's "fixed".
//
// score(): log p(z = k, x) = log E[pi_k] + log EMSD(x | E[a_k], E[b_k]) (or
// the DCM's, likelihood=dcm) with s = T_k (posterior means; K outputs,
// TRIB_OUTPUTS_LATENT); -inf for a pruned component.
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
// drops the evidence of absent terms, for comparison), likelihood=edcm|dcm
// (edcm-mixture) or emsd|dcm (emsd-mixture) (the thesis's approximation;
// dcm: the exact DCM, see above), prune (0.1, see above), init=tied|kmeans
// (tied: the burn-in above; kmeans: see "K-means burn-in"), revive=split|off
// (split; see "Revival"), and for emsd-mixture
// scale=fixed|learn (fixed), scale_prior_mean (1), scale_prior_variance
// (0.01).
//
// Files (all in namespace tributary::count_mixture, compiled into both
// plugins): count_mixture.h (this: the model, its layout and the entry
// points), count_mixture_options.h (the option tables),
// count_mixture_math.h (special functions), count_mixture_model.cc
// (create, layout, init_stats, rebuild), count_mixture_totals.{h,cc}
// ("Totals"), count_mixture_score.cc (score, component_terms),
// count_mixture_cache.cc (export / import of the caches),
// count_mixture_moment_match.cc ("Moment matching", with the rising
// factorial of likelihood=dcm and the K-means of init=kmeans),
// count_mixture_sep.cc (the other SEP hooks) and count_mixture_vtable.cc
// (the vtable).
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tributary/plugin_sdk.h"
#include "tributary/sep_abi.h"

namespace tributary::count_mixture {

using sdk::Fail;
using sdk::Guard;

enum class Flavor { kEdcm, kEmsd };

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
  bool absent = true;        // propagate the evidence of absent terms (block sites)
  bool dcm = false;          // likelihood=dcm: the exact DCM (eq. 13) instead of eq. 14 / 45
  double prune = 0.1;        // score() ignores components with E[pi_k] < prune / K
  bool kmeans_init = false;  // init=kmeans: burn-in responsibilities from online K-means
  bool revive = true;        // revive=split: split the heaviest component into a dead one (move)
  uint32_t G = 2;            // natural parameters per (term, component)
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
  uint64_t revivals = 0;             // moves made (revive=split), the split's hash salt; cached
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

// likelihood=dcm: log c(x, j), j = 1..x, of the unsigned Stirling numbers of
// the first kind (the coefficients of the rising factorial a (a + 1) ...
// (a + x - 1) = sum_j c(x, j) a^j), rows grown on demand up to kMaxDcmCount.
constexpr uint32_t kMaxDcmCount = 2048;
// likelihood=dcm: iterations between the tilted moments of s and its slope c.
constexpr int kDcmIterations = 20;
struct StirlingRows {
  std::vector<std::vector<double>> row;  // row[x][j - 1]
  const std::vector<double>& Row(uint32_t x);
};

// init=kmeans: online spherical K-means (MacQueen) over the documents'
// L2-normalised count vectors; the first K documents seed the centroids.
struct OnlineKMeans {
  std::vector<double> centroid;  // K * V, unnormalised running means
  std::vector<double> norm2;     // K: |centroid|^2
  std::vector<uint64_t> count;   // K
  // Assigns d to the centroid of the largest cosine and moves that centroid.
  uint32_t Assign(uint32_t K, uint64_t V, const trib_document* d);
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
  OnlineKMeans kmeans;         // init=kmeans, during the burn-in
  StirlingRows stirling;       // likelihood=dcm
  std::vector<double> dcm_m1;  // per (t, k): E[theta] of the DCM-tilted cavity (rate b)
  std::vector<double> dcm_lw;  // scratch: log weights of the Gamma mixture
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

// ---- Entry points (count_mixture_model.cc) -------------------------------------

int Create(Flavor flavor, const trib_schema* schema, const trib_option* opts, size_t num, trib_family_model** out,
           trib_error* err);
int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err);
int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err);
int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err);
int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err);
// No sdEM update: both fail with TRIB_ERR_INVALID_ARGUMENT.
int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document*, const double*,
               trib_delta*, trib_error* err);
int Commit(trib_family_model* mm, trib_stats*, const uint64_t*, const double*, size_t, const trib_step*,
           trib_error* err);

// ---- Scoring (count_mixture_score.cc) ----------------------------------------

// TRIB_ERR_INVALID_DOCUMENT for a document without terms.
int CheckDocument(const Model& m, const trib_document* d, trib_error* err);
// The part of log p(x | component) shared by all components: log n! - sum_w
// log x_w (eq. 14 / 45), or log n! - sum_w log x_w! (likelihood=dcm).
double CountConstant(const Model& m, const trib_document* d);
// likelihood=dcm: TRIB_ERR_INVALID_DOCUMENT unless every count is an integer
// in [1, kMaxDcmCount].
int CheckDcmCounts(const Model& m, const trib_document* d, trib_error* err);
// The rising factorial under a Gamma(a, b) (likelihood=dcm): theta^(x) =
// sum_j c(x, j) theta^j turns theta^(x) Gamma(theta | a, b) into the
// mixture sum_j w_j Gamma(theta | a + j, b), w_j prop. to c(x, j) G(a + j) / (G(a)
// b^j). Returns log E[theta^(x)] and sets E[theta], E[theta^2] and
// E[log theta] of the normalised mixture (each a sum of positive terms).
double RisingFactorialMoments(StirlingRows* rows, std::vector<double>* scratch, uint32_t x, double a, double b,
                              double* m1, double* m2, double* lm);
int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state*, const trib_document* d, double* out,
          trib_error* err);
int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*);
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err);

// ---- Caches (count_mixture_cache.cc) -----------------------------------------

int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*);
int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err);

// ---- SEP hooks (count_mixture_moment_match.cc, count_mixture_sep.cc) ----------

uint64_t NumParams(const trib_family_model* mm);
int Support(const trib_family_model* mm, const trib_stats*, const trib_document* d, trib_delta* out, trib_error* err);
int MomentMatch(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
                const uint64_t* index, const double* cavity, size_t count, double* lambda_new, trib_sep_outcome* out,
                trib_error* err);
int Feasible(const trib_family_model* mm, const uint64_t* index, const double* lambda, size_t count, trib_error* err);
int SepCommit(trib_family_model* mm, const trib_stats* s, const uint64_t* index, const double* old_mu, size_t count,
              const trib_sep_step* step, trib_error* err);
int Summary(const trib_family_model* mm, const trib_stats* s, trib_sep_summary_sink* sink, trib_error* err);
int BlockFeasible(const trib_family_model* mm, const trib_stats*, uint32_t block, double decay, double delta,
                  trib_error* err);
int Move(trib_family_model* mm, trib_stats* s, const trib_sep_step* step, uint32_t* moved, trib_error* err);

extern const trib_sep_hooks kSepHooks;

// ---- The vtable (count_mixture_vtable.cc) -------------------------------------

// Fills `out` with the family of the given flavour (and its SEP hooks).
int Init(Flavor flavor, const trib_host_api* host, trib_plugin_vtable* out, trib_error* err);
template <Flavor F>
int Init(const trib_host_api* host, trib_plugin_vtable* out, trib_error* err) {
  return Init(F, host, out, err);
}

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_H_
