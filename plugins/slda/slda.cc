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
#include <memory>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "../lda/lda_topics.h"
#include "../shared/dirichlet_fit.h"
#include "slda_model.h"
#include "tributary/plugin_sdk.h"

// The family's entry points; the local steps are in slda_local.cc and the
// classifiers in slda_classify.cc (slda_model.h).
namespace {

namespace sdk = tributary::sdk;
namespace lda = tributary::lda;
using sdk::Fail;
using sdk::Guard;
using tributary::slda::ClassCount;
using tributary::slda::Classifier;
using tributary::slda::Components;
using tributary::slda::M;
using tributary::slda::Model;
using tributary::slda::Prepare;
using tributary::slda::Proportions;
using tributary::slda::Score;
using tributary::slda::State;
using tributary::slda::Train;
using tributary::slda::TrainStep;

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
