// Family "slda": supervised latent Dirichlet allocation (Fei-Fei and Perona's
// model as studied by Lakshminarayanan and Raich, supervised-lda-inference-2014),
// learned online from a labelled stream by sdEM, with the paper's MAP and
// CVB0 estimation and its three classifiers.
//
// Model (Algorithm 1): K topics phi_k ~ Dir_V(eta); per document a class
// y ~ P(y), topic proportions theta ~ Dir_K(alpha_y) with a class-dependent
// prior (alpha is C x K), z_j ~ Mult(theta), w_j ~ Mult(phi_{z_j}). The
// outputs are the schema's C classes; score(y) estimates log p(x, y).
//
// Statistics (block, entries, prior):
//   0  mu_kw     K x V, term-major (lda's topic block, lda_topics.h), eta
//   1  N_c       C class counts, class_prior
//   2  S_ck      C x K (learn_alpha): the running sum over documents of class c
//                of E[log theta_k | x, c], prior class_prior * (psi(alpha0) -
//                psi(K alpha0)), so t_c = S_c / N_c is the class's mean
//                E[log theta] (the symmetric alpha0 before any document).
// As in lda, lambda_kw = n mu_kw is the topics' variational Dirichlet and
// their point estimate is phi_kw = lambda_kw / lambda_k. P(y) = N_y / sum N.
// The sdEM step with NLL (w = e_y) is the online version of the paper's
// batch estimation: accumulate pushes E[s | x, y] of the local step
// conditioned on the document's class; with NCLL or hinge every class with
// w_c != 0 is pushed with its weight (sdEM's discriminative sLDA).
//
// Estimation (option train), the local step given the class y:
//  cvb0 (default)  eq. 7 with the class's alpha row, with the topics at
//      their point estimate (stochastic CVB0, as lda's default; the kernel of
//      lda_cvb0.h with a vector alpha):
//        gamma_jk propto (n_k^{-j} + alpha_yk) phi_{k,w_j},
//      E_z[s] = n_w gamma_wk; E[log theta_k | x, y] = psi(n_k + alpha_yk) -
//      psi(L + A_y) (q(theta | z) = Dir(alpha_y + n) at the zeroth order).
//  map  eq. 3-4 for theta with phi fixed (EM over the document's z):
//        g_k = theta^_k sum_v phi_kv n_v / (sum_k' phi_k'v theta^_k') + (alpha_yk - 1),
//        theta_k propto max(g_k, 0),
//      from theta = 1/K until sum_k |change| < map_tol or map_iter
//      iterations; E_z[s] = n_v phi_kv theta_k / sum_k' phi_k'v theta_k' (the
//      responsibilities whose sum over documents is h of eq. 4); E[log theta]
//      = log max(theta_k, 1e-12). The paper's phi update (eq. 3, phi propto
//      max(h_kv, 0) with h = counts + beta - 1) is the mode of the topics'
//      Dirichlet; the engine keeps the Dirichlet lambda = eta + counts and
//      uses its mean lambda / sum lambda, which is that mode for the prior
//      eta + 1: DEVIATION (the mode with eta < 1 zeroes every term with fewer
//      than 1 - eta expected counts in a topic, and a test document with such
//      a term in every topic would have probability 0).
// Hyperparameters (learn_alpha=1, the default: with alpha fixed and equal for
// every class, the classes do not differ and the model cannot classify):
// alpha_c is the Dirichlet maximum likelihood fit to t_c (Shan & Banerjee's
// Newton step, plugins/shared/dirichlet_fit.h, warm-started from the current
// alpha_c and kept in the cache for bit-exact snapshots), refitted in commit
// when a document of class c moves S_c: alpha_c is the fit at the class's
// last document. (Every step also moves the other classes' t_c a little
// towards alpha0's value, the prior's share growing as the statistics decay;
// refitting all C classes per document would cost C Newton fits. Rebuild
// keeps the fitted alpha, so it is a cache, exported with the snapshots.) For map the paper restricts alpha >= 1
// (§6.1.1, by a log barrier): here the constrained optimum by Minka's fixed
// point clamped at 1 (FitDirichletAtLeast, an ascent method). DEVIATION for cvb0: the paper
// fits alpha and beta by Minka's fixed point for the Polya distribution
// (§6.1.2, a batch iteration over every document's topic counts); online we
// fit the Dirichlet to the running mean of E[log theta] (the VB M-step).
// eta (the paper's beta, §6.1.1-6.1.2) is learned with learn_eta=1: every
// eta_every documents (a fit costs K x V digammas), once the block's prior
// mass n shift eta has decayed to within 1.5 times its steady value (before
// that the statistics still carry the random start, and the counts are not
// separable from the prior), one EM step of the symmetric Dirichlet's
// maximum likelihood for the topics, the VB M-step of Blei et al. 2003
// (App. A.4) with the same deviation as alpha (the paper: Minka's Polya fixed
// point, batch):
//   psi(eta) - psi(V eta) = (1 / K V) sum_kw E[log phi_kw],
//   E[log phi_kw] = psi(lambda_kw) - psi(lambda_k),  lambda_kw = counts_kw + eta,
// solved by Newton (FitSymmetricDirichlet); the topics' point estimate then
// uses counts + the learned eta (lda::Model::eta_point, read by MapOf). A
// cache like alpha (exported with the snapshots).
// Burn-in (training only): over the first `burnin` documents the local step's
// alpha falls linearly from burnin_alpha to alpha_y (lda's remedy for merged
// topics); those documents count in S at the class's current mean (they say
// nothing about alpha).
//
// Classification (option classifier), score(c) for every class c:
//  cvb0-2 (default)  eq. 16: one CVB0 run with the prior mixed by the class
//      posterior given the previous sweep's topic counts,
//        alpha^mix_k = sum_c P(c | n^) alpha_ck,
//        P(c | n^) propto P(c) Polya(n^ | alpha_c) = P(c) G(A_c) / G(A_c + L)
//                         prod_k G(alpha_ck + n^_k) / G(alpha_ck),
//      (the first sweep, n^ = 0, mixes by P(c)), up to classify_iter sweeps
//      (classify_tol). A class whose posterior falls below e^-30 of the best
//      leaves the mixture for the document's later sweeps (it moves
//      alpha^mix by < 1e-13 of itself); the final scores use every class. score(c) = log P(c | n^) + the plug-in log
//      p(x) of the last sweep (lda's Cvb0LogPx with alpha^mix). O(1) CVB0 runs and O(C K) per sweep for the posterior:
//      the paper's fast rule.
//  cvb0-1  eq. 9 per class: a CVB0 run with alpha_c (classify_iter sweeps),
//      then the collapsed bound at its zeroth order (E log G(a + n) ~
//      log G(a + E n), the CVB0 approximation):
//        log P(c) + sum_w n_w sum_k gamma_wk (log phi_kw - log gamma_wk)
//        + log G(A_c) - log G(A_c + L) + sum_k [log G(alpha_ck + n_k) - log G(alpha_ck)].
//      C CVB0 runs a document.
//  map  eq. 15: EM for theta_t with the prior term sum_c P(c | theta^)(alpha_ck - 1),
//      P(c | theta^) propto P(c) Dir(theta^ | alpha_c) (theta floored at
//      1e-12 in the logs), started from the document's own maximum-likelihood
//      theta (the EM without the prior term; from the uniform start a sharp
//      alpha pulls every document to one class); score(c) = log P(c |
//      theta*) + log p(x | theta*).
// The classifier only scores: accumulate always runs the training step given
// the class (cvb0_max_iter sweeps), so the statistics do not depend on it.
//
// Check-step (commit, rebuild): topic entries > 0 (lda_topics.h), class
// counts > 0 (floored at the step's prior mass), t_c made feasible for the fit
// (t_ck < 0, log sum_k exp t_ck < 0; only negative weights can break it).
// Options: topics (10), alpha (1/K; the start of the fit, or the fixed value),
// eta (1/K), class_prior (1), train cvb0|map, classifier cvb0-2|cvb0-1|map,
// learn_alpha (1), cvb0_max_iter (20), cvb0_tol (0.01), classify_iter (20),
// classify_tol (0.01), map_iter (50), map_tol (1e-4), burnin (0),
// burnin_alpha (30/K), init_mass (1), init_shape (100), learn_eta (0),
// eta_every (1000). The schema's classes
// are fixed at creation (no add_class: a stream with a new class is refused
// by the engine). Only the terms of a document are used.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "../lda/lda_topics.h"
#include "../shared/dirichlet_fit.h"
#include "tributary/plugin_sdk.h"

namespace {

namespace sdk = tributary::sdk;
namespace lda = tributary::lda;
using sdk::Fail;
using sdk::Guard;

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

constexpr trib_option_spec kOptions[] = {
    sdk::Integer("topics", "10", "number of topics K").AtLeast(1).AtMost(100000),
    sdk::Number("alpha", "1/K", "document-topic prior of every class: the start of the fit (learn_alpha=1) or fixed")
        .Above(0)
        .AtMost(1e100)
        .Derived(),
    sdk::Number("eta", "1/K", "topic-word Dirichlet prior").Above(0).AtMost(1e100).Derived(),
    sdk::Number("class_prior", "1", "prior count of every class").Above(0).AtMost(1e100),
    sdk::Choice("train", "cvb0|map", "cvb0", "estimation: collapsed variational (eq. 7) or MAP (eq. 3-4)"),
    sdk::Choice("classifier", "cvb0-2|cvb0-1|map", "cvb0-2",
                "score: one CVB0 run with the class-mixed prior (eq. 16), the bound per class (eq. 9) or MAP (eq. 15)"),
    sdk::Boolean("learn_alpha", "1", "1: each class's alpha fitted to its documents' E[log theta]; 0: alpha fixed"),
    sdk::Integer("cvb0_max_iter", "20", "cvb0 training: sweeps per document at most").AtLeast(1).AtMost(100000),
    sdk::Number("cvb0_tol", "0.01", "cvb0 training: stop when no topic count moves by more (tokens)").AtLeast(0),
    sdk::Integer("classify_iter", "20", "cvb0-1, cvb0-2: sweeps per class / document at most")
        .AtLeast(1)
        .AtMost(100000),
    sdk::Number("classify_tol", "0.01", "cvb0-1, cvb0-2: tolerance (tokens)").AtLeast(0),
    sdk::Integer("map_iter", "50", "map: EM iterations per document at most").AtLeast(1).AtMost(100000),
    sdk::Number("map_tol", "0.0001", "map: stop when sum_k |change of theta_k| is below").AtLeast(0),
    sdk::Number("burnin", "0", "training documents over which the local alpha falls to alpha_y").AtLeast(0),
    sdk::Number("burnin_alpha", "30/K", "the local alpha at the first document").Above(0).AtMost(1e100).Derived(),
    sdk::Boolean("learn_eta", "0", "1: the topic-word prior eta fitted to the topics every eta_every documents"),
    sdk::Integer("eta_every", "1000", "learn_eta: documents between two fits of eta").AtLeast(1).AtMost(1000000000),
    sdk::Number("init_mass", "1", "mass of the random start (tokens per document)").Above(0).AtMost(1e100),
    sdk::Number("init_shape", "100", "shape of the random start's noise (variance 1/shape)").Above(0).AtMost(1e100),
    {},
};

int Create(const trib_schema* schema, const trib_option* opts, size_t num, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0)
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "slda needs a vocabulary (vocab_size is 0)");
    if (schema->num_classes < 2) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "slda needs >= 2 classes in the schema, found %u",
                  schema->num_classes);
    }
    auto m = std::make_unique<Model>();
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "slda", opts, num, &o, err); rc != TRIB_OK) return rc;
    lda::Model& t = m->topics;
    t.V = schema->vocab_size;
    t.K = o.Integer<uint32_t>("topics");
    t.inference = lda::Inference::kCvb0;
    t.cvb0_max_iter = o.Integer<uint32_t>("cvb0_max_iter");
    t.cvb0_tol = o.Number("cvb0_tol");
    t.burnin = o.Number("burnin");
    t.init_mass = o.Number("init_mass");
    t.init_shape = o.Number("init_shape");
    if (t.V > UINT64_MAX / t.K / 2) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "topics x vocabulary (%u x %llu) is too large", t.K,
                  static_cast<unsigned long long>(t.V));
    }
    t.alpha = o.HasValue("alpha") ? o.Number("alpha") : 1.0 / t.K;
    t.eta = o.HasValue("eta") ? o.Number("eta") : 1.0 / t.K;
    t.burnin_alpha = o.HasValue("burnin_alpha") ? o.Number("burnin_alpha") : 30.0 / t.K;
    t.raw_total.assign(t.K, 0.0);
    m->C = schema->num_classes;
    m->class_prior = o.Number("class_prior");
    m->train = o.Is("train", "map") ? Train::kMap : Train::kCvb0;
    m->classifier = o.Is("classifier", "cvb0-1") ? Classifier::kCvb01
                    : o.Is("classifier", "map")  ? Classifier::kMap
                                                 : Classifier::kCvb02;
    m->learn_alpha = o.Flag("learn_alpha") && t.K >= 2;
    m->learn_eta = o.Flag("learn_eta");
    m->eta_every = o.Integer<uint32_t>("eta_every");
    m->classify_iter = o.Integer<uint32_t>("classify_iter");
    m->classify_tol = o.Number("classify_tol");
    m->map_iter = o.Integer<uint32_t>("map_iter");
    m->map_tol = o.Number("map_tol");
    m->alpha0 = t.alpha;
    if (m->train == Train::kMap && m->learn_alpha && m->alpha0 < 1) m->alpha0 = 1.0;  // (alpha >= 1 for map)
    m->alpha.assign(size_t{m->C} * t.K, m->alpha0);
    m->alpha_sum.assign(m->C, 0.0);
    m->log_norm.assign(m->C, 0.0);
    for (uint32_t c = 0; c < m->C; ++c) m->Derive(c);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t n = m->learn_alpha ? 3 : 2;
  if (blocks == nullptr) {
    *num = n;
    return TRIB_OK;
  }
  if (*num < n) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", n);
  blocks[0] = trib_block{0, m->topics.V * m->topics.K, 0.0, m->topics.eta, 1.0, 1.0};
  blocks[1] = trib_block{m->Counts(), m->C, 0.0, m->class_prior, 1.0, 1.0};
  if (m->learn_alpha) {
    blocks[2] = trib_block{m->LogTheta(), uint64_t{m->C} * m->K(), 0.0, m->class_prior * m->T0(), 1.0, 1.0};
  }
  *num = n;
  return TRIB_OK;
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_CLASSES;
  *count = M(mm)->C;
  return TRIB_OK;
}

int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    lda::InitTopics(m->topics, s->raw, seed);
    for (uint64_t i = m->Counts(); i < s->size; ++i) s->raw[i] = 0.0;  // class counts and S: their prior
    return TRIB_OK;
  });
}

inline double ClassCount(const Model& m, const trib_stats& s, uint32_t c) { return sdk::Mu(s, 1, m.Counts() + c); }

// alpha_c refitted to t_c = S_c / N_c (made feasible first: t_ck < 0 and
// log sum_k exp(t_ck) < 0, which a mean of documents' values always is; only
// negative weights (NCLL, hinge) can take it out), warm-started from the
// current alpha_c (`fresh`: from alpha0, as rebuild does).
int RefitClass(Model* m, const trib_stats& s, uint32_t c, bool fresh, trib_error* err) {
  const uint32_t K = m->K();
  std::vector<double> t(K);
  const double N = ClassCount(*m, s, c);
  for (uint32_t k = 0; k < K; ++k) {
    t[k] = sdk::Mu(s, 2, m->LogTheta() + uint64_t{c} * K + k) / N;
    if (!std::isfinite(t[k])) {
      return Fail(err, TRIB_ERR_NUMERIC, "E[log theta] statistic of class %u, topic %u is %g", c, k, t[k]);
    }
  }
  tributary::dirichlet::MakeFeasible(t.data(), K, 1e-6);
  std::vector<double> a(m->alpha.begin() + size_t{c} * K, m->alpha.begin() + size_t{c + 1} * K);
  if (fresh) a.assign(K, m->alpha0);
  if (m->train == Train::kMap) {  // §6.1.1: alpha >= 1 for MAP (the constrained optimum)
    tributary::dirichlet::FitDirichletAtLeast(t.data(), K, 1.0, sdk::Digamma, sdk::Trigamma, &a);
  } else {
    tributary::dirichlet::FitDirichletFrom(t.data(), K, sdk::Digamma, sdk::Trigamma, &a);
  }
  for (uint32_t k = 0; k < K; ++k) {
    if (!(a[k] > 0) || !std::isfinite(a[k])) {
      return Fail(err, TRIB_ERR_NUMERIC, "learned alpha of class %u, topic %u is %g", c, k, a[k]);
    }
  }
  std::copy(a.begin(), a.end(), m->alpha.begin() + size_t{c} * K);
  m->Derive(c);
  return TRIB_OK;
}

// learn_eta: one EM step of eta (see the header), if the block's prior mass
// has settled (n shift <= 1.5); the fit's start is the current eta.
int RefitEta(Model* m, const trib_stats& s, trib_error* err) {
  lda::Model& t = m->topics;
  const trib_block& blk = s.blocks[0];
  if (!(t.n * blk.shift <= 1.5)) return TRIB_OK;
  const lda::LambdaMap f = lda::MapOf(t, s);
  const uint32_t K = t.K;
  std::vector<double> psi_total(K);
  for (uint32_t k = 0; k < K; ++k) {
    psi_total[k] = sdk::Digamma(lda::Positive(f.a * t.raw_total[k] + f.b * static_cast<double>(t.V)));
  }
  double sum = 0;
  for (uint64_t w = 0; w < t.V; ++w) {
    const double* raw = s.raw + w * K;
    for (uint32_t k = 0; k < K; ++k) sum += sdk::Digamma(lda::Positive(f.a * raw[k] + f.b)) - psi_total[k];
  }
  const double V = static_cast<double>(t.V);
  double tbar = sum / (V * K);
  const double cap = -std::log(V) - 1e-9;  // (a mean of distributions' E[log phi] is below -log V)
  if (!std::isfinite(tbar)) return Fail(err, TRIB_ERR_NUMERIC, "mean E[log phi] of the topics is %g", tbar);
  tbar = std::min(tbar, cap);
  const double start = t.eta_point > 0 ? t.eta_point : t.eta;
  const double eta = tributary::dirichlet::FitSymmetricDirichlet(
      tbar, static_cast<uint32_t>(std::min<uint64_t>(t.V, UINT32_MAX)), start, sdk::Digamma, sdk::Trigamma);
  if (!(eta > 0) || !std::isfinite(eta))
    return Fail(err, TRIB_ERR_NUMERIC, "learned eta is %g (mean E[log phi] %g)", eta, tbar);
  t.eta_point = eta;
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (int rc = lda::RebuildTopics(&m->topics, s, *step, err); rc != TRIB_OK) return rc;
    const trib_block& cb = s->blocks[1];
    for (uint32_t c = 0; c < m->C; ++c) {
      double& r = s->raw[m->Counts() + c];
      if (!std::isfinite(r)) return Fail(err, TRIB_ERR_NUMERIC, "count statistic of class %u is %g", c, r);
      if (!(cb.scale * r + cb.shift * cb.alpha_bar > 0)) r = lda::RawForFloor(cb, lda::FloorFor(m->class_prior, *step));
    }
    m->topics.t = step->rho > 0 ? step->t + 1 : step->t;
    // alpha_c is the fit at class c's last document (commit), carried in the
    // cache; a model that has none yet (just created, or a snapshot without
    // a cache) fits every class to the statistics.
    if (m->learn_alpha && !m->fitted) {
      for (uint32_t c = 0; c < m->C; ++c) {
        if (int rc = RefitClass(m, *s, c, /*fresh=*/true, err); rc != TRIB_OK) return rc;
      }
      m->fitted = true;
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->base.rng.seed(seed);
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

// ---- Local steps ------------------------------------------------------------------

double LogSumExp(const double* x, uint32_t n) {
  double top = -HUGE_VAL;
  for (uint32_t i = 0; i < n; ++i) top = std::max(top, x[i]);
  if (!std::isfinite(top)) return top;
  double z = 0;
  for (uint32_t i = 0; i < n; ++i) z += std::exp(x[i] - top);
  return top + std::log(z);
}

inline double LogPrior(const Model& m, const trib_stats& s, uint32_t c, double log_total) {
  return std::log(ClassCount(m, s, c)) - log_total;
}
double LogTotal(const Model& m, const trib_stats& s) {
  double total = 0;
  for (uint32_t c = 0; c < m.C; ++c) total += ClassCount(m, s, c);
  return std::log(total);
}

// The training step's alpha for class c: alpha_c, or during the burn-in
// alpha_c moved linearly towards burnin_alpha (1 - t / burnin of the way).
const double* TrainAlpha(const Model& m, uint32_t c, State* st, bool* burnin) {
  const uint32_t K = m.K();
  const double* a = m.alpha.data() + size_t{c} * K;
  const double t = static_cast<double>(m.topics.t);
  *burnin = t < m.topics.burnin;
  if (!*burnin) return a;
  const double f = 1.0 - t / m.topics.burnin;
  st->local_alpha.resize(K);
  for (uint32_t k = 0; k < K; ++k) st->local_alpha[k] = a[k] + (m.topics.burnin_alpha - a[k]) * f;
  return st->local_alpha.data();
}

// CVB0 with the vector prior `a` on base.rows (phi_kw of the document's
// terms) into slot c (gamma J x K, n K), from zero (the sequential start).
void Cvb0Slot(const Model& m, const trib_document& d, const double* a, uint32_t iters, double tol, uint32_t c,
              State* st) {
  const uint32_t K = m.K(), J = d.num_terms;
  double* gamma = st->gamma.data() + size_t{c} * J * K;
  double* nk = st->nk.data() + size_t{c} * K;
  std::fill(gamma, gamma + size_t{J} * K, 0.0);
  std::fill(nk, nk + K, 0.0);
  st->base.last_nk.resize(K);
  st->base.phinorm.resize(J);
  lda::Cvb0SweepsVec(st->base.rows.data(), gamma, nk, st->base.last_nk.data(), st->base.phinorm.data(), d.term_counts,
                     J, K, a, iters, tol);
  for (uint32_t k = 0; k < K; ++k) nk[k] = std::max(nk[k], 0.0);
}

// MAP EM for theta (eq. 3-4 with the prior term prior_k - 1 = a_k - 1, or
// eq. 15's class-weighted term when `mix` is set: prior recomputed each
// iteration from P(c | theta^)) into st->theta; leaves in base.phinorm the
// normalisers sum_k phi_kw theta_k of the final theta.
void MapTheta(const Model& m, const trib_stats& s, const trib_document& d, const double* a, bool mix, State* st) {
  const uint32_t K = m.K(), J = d.num_terms, C = m.C;
  std::vector<double>& th = st->theta;
  std::vector<double>& g = st->work;
  th.assign(K, 1.0 / K);
  g.resize(K);
  st->base.phinorm.resize(J);
  st->mix.resize(K);
  const double* rows = st->base.rows.data();
  st->post.resize(C);
  std::vector<double>& prior = st->log_prior;  // log P(c), once per document
  if (mix) {
    const double log_total = LogTotal(m, s);
    prior.resize(C);
    for (uint32_t c = 0; c < C; ++c) prior[c] = LogPrior(m, s, c, log_total);
  }
  auto norms = [&] {
    for (uint32_t j = 0; j < J; ++j) {
      const double* r = rows + size_t{j} * K;
      double p = 0;
      for (uint32_t k = 0; k < K; ++k) p += r[k] * th[k];
      st->base.phinorm[j] = p > 1e-300 ? p : 1e-300;
    }
  };
  auto class_posterior = [&] {  // P(c | theta) propto P(c) Dir(theta | alpha_c)
    for (uint32_t c = 0; c < C; ++c) {
      const double* ac = m.alpha.data() + size_t{c} * K;
      double lp = prior[c] + m.log_norm[c];
      for (uint32_t k = 0; k < K; ++k) lp += (ac[k] - 1) * std::log(std::max(th[k], 1e-12));
      st->post[c] = lp;
    }
    const double z = LogSumExp(st->post.data(), C);
    for (uint32_t c = 0; c < C; ++c) st->post[c] = std::exp(st->post[c] - z);
  };
  // eq. 15 leaves theta's start open. From the uniform theta the prior term
  // of a sharp alpha (hundreds once the training documents' theta* are
  // nearly fixed by their class) pulls every document to whichever class's
  // Dirichlet is densest at the uniform point; so theta starts at the
  // document's own maximum-likelihood proportions (the same EM without the
  // prior term, alpha = 1: PLSA's fold-in), then the class-weighted prior
  // joins.
  std::vector<double>& ones = st->ones;
  ones.assign(K, 1.0);
  const uint32_t phases = mix ? 2 : 1;
  for (uint32_t phase = 0; phase < phases; ++phase) {
    const bool mixing = mix && phase == 1;
    if (mix && phase == 0) a = ones.data();
    for (uint32_t it = 0; it < m.map_iter; ++it) {
      norms();
      if (mixing) {
        class_posterior();
        std::fill(st->mix.begin(), st->mix.end(), 0.0);
        for (uint32_t c = 0; c < C; ++c) {
          for (uint32_t k = 0; k < K; ++k) st->mix[k] += st->post[c] * m.alpha[size_t{c} * K + k];
        }
        a = st->mix.data();
      }
      std::fill(g.begin(), g.end(), 0.0);
      for (uint32_t j = 0; j < J; ++j) {
        const double* r = rows + size_t{j} * K;
        const double f = d.term_counts[j] / st->base.phinorm[j];
        for (uint32_t k = 0; k < K; ++k) g[k] += f * r[k];
      }
      double sum = 0;
      for (uint32_t k = 0; k < K; ++k) {
        g[k] = std::max(th[k] * g[k] + (a[k] - 1), 0.0);
        sum += g[k];
      }
      if (!(sum > 0)) break;  // every g_k <= 0 (a document shorter than the prior's pull): keep theta
      double change = 0;
      for (uint32_t k = 0; k < K; ++k) {
        const double v = g[k] / sum;
        change += std::fabs(v - th[k]);
        th[k] = v;
      }
      if (change < m.map_tol) break;
    }
  }
  norms();
  if (mix) class_posterior();
}

// The local step given class c for training (cvb0: slot c; map: theta) and
// this document's E[log theta | x, c] into e (K).
void TrainStep(const Model& m, const trib_stats& s, const trib_document& d, uint32_t c, State* st, double* e,
               bool* burnin) {
  const uint32_t K = m.K();
  const double* a = TrainAlpha(m, c, st, burnin);
  if (m.train == Train::kMap) {
    MapTheta(m, s, d, a, /*mix=*/false, st);
    for (uint32_t k = 0; k < K; ++k) e[k] = std::log(std::max(st->theta[k], 1e-12));
    return;
  }
  Cvb0Slot(m, d, a, m.topics.cvb0_max_iter, m.topics.cvb0_tol, c, st);
  const double* nk = st->nk.data() + size_t{c} * K;
  double A = 0;
  for (uint32_t k = 0; k < K; ++k) A += a[k];
  const double ps = sdk::Digamma(A + d.total_count);
  for (uint32_t k = 0; k < K; ++k) e[k] = sdk::Digamma(nk[k] + a[k]) - ps;
}

void Prepare(const Model& m, const trib_stats& s, const trib_document& d, State* st) {
  const uint32_t K = m.K(), J = d.num_terms;
  lda::MeanBeta(m.topics, s, d.term_ids, J, &st->base);  // rows = phi_kw of the document's terms
  st->gamma.resize(size_t{m.C} * J * K);
  st->nk.resize(size_t{m.C} * K);
}

// Plug-in log p(x) of the last CVB0 sweep with prior sum A (lda's Cvb0LogPx,
// alpha a vector): sum_w n_w log(norm_w / (L - u_w + A)).
double PlugInLogPx(const trib_document& d, const double* norm, double A) {
  double lp = 0;
  for (uint32_t j = 0; j < d.num_terms; ++j) {
    const double c = d.term_counts[j], u = c < 1 ? c : 1.0;
    lp += c * std::log(std::max(norm[j], 1e-300) / (d.total_count - u + A));
  }
  return lp;
}

// ---- Score: the classifiers -------------------------------------------------------

// log P(c) + log Polya(n | alpha_c) up to a constant common to every class.
inline double LogClassJoint(const Model& m, uint32_t c, double log_prior, const double* nk, double L) {
  const uint32_t K = m.K();
  const double* ac = m.alpha.data() + size_t{c} * K;
  return log_prior + m.log_norm[c] - lda::LogGammaPositive(m.alpha_sum[c] + L) + lda::LogGammaSum(ac, nk, K);
}

// Classes whose posterior falls below e^-kPrune of the best leave the
// mixture for the document's later sweeps (their weight moves alpha^mix by
// less than 1e-13 of itself); the final scores use every class.
constexpr double kPrune = 30;

void ScoreCvb02(const Model& m, const trib_stats& s, const trib_document& d, State* st, double* out) {
  const uint32_t K = m.K(), J = d.num_terms, C = m.C;
  const double log_total = LogTotal(m, s);
  std::vector<double>& prior = st->log_prior;
  prior.resize(C);
  for (uint32_t c = 0; c < C; ++c) prior[c] = LogPrior(m, s, c, log_total);
  st->post.assign(prior.begin(), prior.end());
  st->active.resize(C);
  for (uint32_t c = 0; c < C; ++c) st->active[c] = c;
  st->mix.assign(K, 0.0);
  double* gamma = st->gamma.data();  // slot 0 as scratch
  double* nk = st->nk.data();
  std::fill(gamma, gamma + size_t{J} * K, 0.0);
  std::fill(nk, nk + K, 0.0);
  st->base.last_nk.resize(K);
  st->base.phinorm.resize(J);
  st->work.resize(K);
  double A = 0;
  for (uint32_t it = 0; it < m.classify_iter; ++it) {
    // alpha^mix from P(c | n^) (st->post: log P(c) + log Polya(n^ | alpha_c)).
    double top = -HUGE_VAL;
    for (uint32_t c : st->active) top = std::max(top, st->post[c]);
    double z = 0;
    std::fill(st->mix.begin(), st->mix.end(), 0.0);
    size_t kept = 0;
    for (uint32_t c : st->active) {
      const double e = st->post[c] - top;
      if (e < -kPrune) continue;
      st->active[kept++] = c;
      const double p = std::exp(e);
      z += p;
      const double* ac = m.alpha.data() + size_t{c} * K;
      for (uint32_t k = 0; k < K; ++k) st->mix[k] += p * ac[k];
    }
    st->active.resize(kept);
    A = 0;
    for (uint32_t k = 0; k < K; ++k) A += (st->mix[k] /= z);
    std::memcpy(st->work.data(), nk, K * sizeof(double));
    lda::Cvb0SweepsVec(st->base.rows.data(), gamma, nk, st->base.last_nk.data(), st->base.phinorm.data(), d.term_counts,
                       J, K, st->mix.data(), 1, 0.0);
    double change = 0;
    for (uint32_t k = 0; k < K; ++k) {
      nk[k] = std::max(nk[k], 0.0);
      change = std::max(change, std::fabs(nk[k] - st->work[k]));
    }
    for (uint32_t c : st->active) st->post[c] = LogClassJoint(m, c, prior[c], nk, d.total_count);
    if (it > 0 && change < m.classify_tol) break;
  }
  // Every class at the final counts (the pruned ones too).
  st->have_post.assign(C, 0);
  for (uint32_t c : st->active) st->have_post[c] = 1;
  for (uint32_t c = 0; c < C; ++c) {
    if (!st->have_post[c]) st->post[c] = LogClassJoint(m, c, prior[c], nk, d.total_count);
  }
  const double z = LogSumExp(st->post.data(), C);
  const double logpx = PlugInLogPx(d, st->base.phinorm.data(), A);
  for (uint32_t c = 0; c < C; ++c) out[c] = (st->post[c] - z) + logpx;
}

void ScoreCvb01(const Model& m, const trib_stats& s, const trib_document& d, State* st, double* out) {
  const uint32_t K = m.K(), J = d.num_terms, C = m.C;
  const double log_total = LogTotal(m, s);
  // sum_w n_w sum_k gamma_wk log phi_kw needs log phi once for every class.
  std::vector<double>& lrow = st->base.acc;
  lrow.resize(size_t{J} * K);
  for (size_t i = 0; i < lrow.size(); ++i) lrow[i] = std::log(std::max(st->base.rows[i], 1e-300));
  for (uint32_t c = 0; c < C; ++c) {
    const double* ac = m.alpha.data() + size_t{c} * K;
    Cvb0Slot(m, d, ac, m.classify_iter, m.classify_tol, c, st);
    const double* gamma = st->gamma.data() + size_t{c} * J * K;
    const double* nk = st->nk.data() + size_t{c} * K;
    double L = LogClassJoint(m, c, LogPrior(m, s, c, log_total), nk, d.total_count);
    for (uint32_t j = 0; j < J; ++j) {
      const double* g = gamma + size_t{j} * K;
      const double* lr = lrow.data() + size_t{j} * K;
      double acc = 0;
      for (uint32_t k = 0; k < K; ++k) {
        if (g[k] > 0) acc += g[k] * (lr[k] - std::log(g[k]));
      }
      L += d.term_counts[j] * acc;
    }
    out[c] = L;
  }
}

void ScoreMap(const Model& m, const trib_stats& s, const trib_document& d, State* st, double* out) {
  MapTheta(m, s, d, nullptr, /*mix=*/true, st);
  double logpx = 0;
  for (uint32_t j = 0; j < d.num_terms; ++j) logpx += d.term_counts[j] * std::log(st->base.phinorm[j]);
  for (uint32_t c = 0; c < m.C; ++c) out[c] = std::log(std::max(st->post[c], 1e-300)) + logpx;
}

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    Prepare(*m, *s, *d, st);
    if (m->classifier == Classifier::kCvb01) {
      ScoreCvb01(*m, *s, *d, st, out);
    } else if (m->classifier == Classifier::kMap) {
      ScoreMap(*m, *s, *d, st, out);
    } else {
      ScoreCvb02(*m, *s, *d, st, out);
    }
    for (uint32_t c = 0; c < m->C; ++c) {
      if (!std::isfinite(out[c])) return Fail(err, TRIB_ERR_NUMERIC, "score of class %u is %g", c, out[c]);
    }
    st->base.scored.Remember(*d, m->topics.t);
    return TRIB_OK;
  });
}

// ABI 1.8: the topics are the model's components (component_terms ranges
// over them, `tributary topics` lists them) and a document's topic
// proportions its supervised low-dimensional description (§5.2: one theta
// for a test document rather than C): train=map, MAP's theta* of eq. 15;
// otherwise CVB0-2's run, theta_k = (n_k + alpha^mix_k) / (L + A^mix).
int Components(const trib_family_model* mm, uint32_t* count, trib_error*) {
  *count = M(mm)->K();
  return TRIB_OK;
}

int Proportions(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
                double* out, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K();
    st->base.scored.valid = false;
    if (d->num_terms == 0) {  // the prior's mean under P(c)
      const double log_total = LogTotal(*m, *s);
      std::fill(out, out + K, 0.0);
      for (uint32_t c = 0; c < m->C; ++c) {
        const double p = std::exp(LogPrior(*m, *s, c, log_total)) / m->alpha_sum[c];
        for (uint32_t k = 0; k < K; ++k) out[k] += p * m->alpha[size_t{c} * K + k];
      }
      return TRIB_OK;
    }
    Prepare(*m, *s, *d, st);
    st->scratch.resize(m->C);
    if (m->train == Train::kMap) {
      ScoreMap(*m, *s, *d, st, st->scratch.data());
      std::copy(st->theta.begin(), st->theta.end(), out);
      return TRIB_OK;
    }
    ScoreCvb02(*m, *s, *d, st, st->scratch.data());
    double sum = 0;
    for (uint32_t k = 0; k < K; ++k) sum += (out[k] = st->nk[k] + st->mix[k]);  // ~ L + A
    for (uint32_t k = 0; k < K; ++k) out[k] /= sum;
    return TRIB_OK;
  });
}

// p(w | topic k) = E[phi_kw].
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] { return lda::TopicTerms(M(mm)->topics, *s, k, out, err); });
}

// sum_c w_c E[s | x, c]: the topic rows sum_c w_c n_w gamma^(c)_wk (cvb0) or
// the responsibilities (map), w_c into N_c and w_c E[log theta | x, c] into S_c.
int Accumulate(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K(), J = d->num_terms, C = m->C;
    if (!st->base.scored.Matches(*d, m->topics.t)) {
      Prepare(*m, *s, *d, st);  // not right after score() on this document
    }
    st->base.scored.valid = false;
    const size_t need = delta->size + size_t{J} * K + C + (m->learn_alpha ? size_t{C} * K : 0);
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
    }
    uint64_t* index = delta->index;
    double* value = delta->value;
    size_t p = delta->size;
    const size_t rows = p;
    for (uint32_t j = 0; j < J; ++j) {
      const uint64_t base = static_cast<uint64_t>(d->term_ids[j]) * K;
      for (uint32_t k = 0; k < K; ++k) {
        index[p + k] = base + k;
        value[p + k] = 0.0;
      }
      p += K;
    }
    std::vector<double>& e = st->e_log_theta;  // (per-document scratch: no allocation per step)
    std::vector<double>& ebar = st->e_log_theta_by_class;
    std::vector<char>& burn = st->burn;
    e.resize(K);
    ebar.assign(size_t{C} * K, 0.0);
    burn.assign(C, 0);
    for (uint32_t c = 0; c < C; ++c) {
      if (w[c] == 0) continue;
      bool burnin = false;
      TrainStep(*m, *s, *d, c, st, e.data(), &burnin);
      burn[c] = burnin;
      for (uint32_t k = 0; k < K; ++k) ebar[size_t{c} * K + k] = e[k];
      double* v = value + rows;
      if (m->train == Train::kMap) {  // n_v phi_kv theta_k / sum_k' phi_k'v theta_k'
        for (uint32_t j = 0; j < J; ++j) {
          const double f = w[c] * d->term_counts[j] / st->base.phinorm[j];
          const double* r = st->base.rows.data() + size_t{j} * K;
          for (uint32_t k = 0; k < K; ++k) v[size_t{j} * K + k] += f * r[k] * st->theta[k];
        }
      } else {  // n_w gamma_wk
        const double* gamma = st->gamma.data() + size_t{c} * J * K;
        for (uint32_t j = 0; j < J; ++j) {
          const double f = w[c] * d->term_counts[j];
          for (uint32_t k = 0; k < K; ++k) v[size_t{j} * K + k] += f * gamma[size_t{j} * K + k];
        }
      }
    }
    for (uint32_t c = 0; c < C; ++c) {
      index[p] = m->Counts() + c;
      value[p++] = w[c];
    }
    if (m->learn_alpha) {
      for (uint32_t c = 0; c < C; ++c) {
        const double N = ClassCount(*m, *s, c);
        for (uint32_t k = 0; k < K; ++k) {
          const uint64_t i = m->LogTheta() + uint64_t{c} * K + k;
          // A burn-in document counts at the class's current mean (alpha stays).
          const double ek = burn[c] ? sdk::Mu(*s, 2, i) / N : ebar[size_t{c} * K + k];
          index[p] = i;
          value[p++] = w[c] * ek;
        }
      }
    }
    delta->size = p;
    return TRIB_OK;
  });
}

// Check-step: topics (lda_topics.h), class counts > 0, alpha refitted for
// every class whose S moved.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err) {
  Model* m = M(mm);
  std::vector<char> touched(m->C, 0);
  bool any = false;
  const trib_block& cb = s->blocks[1];
  lda::CommitTopics(&m->topics, s, idx, old_raw, count, *step, [&](uint64_t i, size_t j) {
    if (i < m->LogTheta()) {  // a class count
      if (!(cb.scale * s->raw[i] + cb.shift * cb.alpha_bar > 0)) {
        s->raw[i] = lda::RawForFloor(cb, lda::FloorFor(m->class_prior, *step));
      }
      return;
    }
    if (s->raw[i] == old_raw[j]) return;  // (rho = 0, or w_c = 0: alpha_c stays bit for bit)
    touched[(i - m->LogTheta()) / m->K()] = 1;
    any = true;
  });
  if (m->learn_eta && step->rho > 0 && m->topics.t % m->eta_every == 0) {
    if (int rc = Guard(err, [&] { return RefitEta(m, *s, err); }); rc != TRIB_OK) return rc;
  }
  if (!any) return TRIB_OK;
  const std::vector<double> before = m->alpha;  // (a failed step leaves alpha as it was)
  const int rc = Guard(err, [&] {
    for (uint32_t c = 0; c < m->C; ++c) {
      if (!touched[c]) continue;
      if (int r = RefitClass(m, *s, c, /*fresh=*/false, err); r != TRIB_OK) return r;
    }
    return TRIB_OK;
  });
  if (rc != TRIB_OK) {
    m->alpha = before;
    for (uint32_t c = 0; c < m->C; ++c) m->Derive(c);
  }
  return rc;
}

// R_k (running sums kept by commit) and alpha (the warm-started fits), so a
// snapshot resumes bit for bit.
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return sdk::ExportCache(out, size, M(mm)->topics.raw_total, M(mm)->alpha, M(mm)->topics.eta_point);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model* m = M(mm);
  std::vector<double> total(m->K()), alpha(m->alpha.size());  // (a refused cache changes nothing)
  double eta_point = -1;
  // 1.0.0's cache had no eta (its models never learn it).
  const bool old = size == total.size() + alpha.size();
  const int rc = old ? sdk::ImportCache(in, size, err, "topics + classes x topics", total, alpha)
                     : sdk::ImportCache(in, size, err, "topics + classes x topics + eta", total, alpha, eta_point);
  if (rc != TRIB_OK) return rc;
  for (double a : alpha) {
    if (!(a > 0)) return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cached alpha %g is not > 0", a);
  }
  if (m->learn_eta && !(eta_point > 0) && eta_point != -1) {
    return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cached eta %g is not > 0 (or -1: not fitted yet)", eta_point);
  }
  m->topics.raw_total = std::move(total);
  m->alpha = std::move(alpha);
  m->topics.eta_point = m->learn_eta ? eta_point : -1;
  for (uint32_t c = 0; c < m->C; ++c) m->Derive(c);
  m->fitted = true;
  return TRIB_OK;
}

}  // namespace

#ifndef TRIB_SLDA_VERSION
#define TRIB_SLDA_VERSION "1.1.0"
#endif
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "slda", TRIB_SLDA_VERSION,
                             "supervised LDA (class-dependent alpha), online; CVB0 or MAP; classifiers CVB0-2, "
                             "CVB0-1, MAP");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (int rc = sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  lda::SelectCvb0Kernel();  // (and lda::LogGammaSum's lanes)
  trib_family_vtable& v = out->family;
  v.create = Create;
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
  v.components = Components;
  v.proportions = Proportions;
  v.random_start = 1;  // the topics start at random (InitTopics): the latent schedule by default
  return TRIB_OK;
}
