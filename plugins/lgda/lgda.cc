// Family "lgda": latent generalized Dirichlet allocation (ep-sep-count-data-
// thesis-2020, ch. 4) with the thesis's per-document expectation propagation
// (Algorithm 3, eq. 78-93), learned online from an unlabelled stream.
//
// Model (§4.4.1, eq. 74-76): T topics beta_t ~ Dir_V(eta) (the thesis's
// K + 1 rows of beta: option topics = T = K + 1); per document
// theta ~ GenDir(alpha, kappa) over the T topics (eq. 70: K = T - 1 pairs),
// z_n ~ Mult(theta), w_n ~ Mult(beta_{z_n}). The generalized Dirichlet is a
// stick-breaking of independent Beta(alpha_k, kappa_k) sticks V_k:
//   theta_k = V_k prod_{j<k} (1 - V_j) (k < T),  theta_T = prod_{j<T} (1 - V_j),
// which is how this file computes with it: eq. 71's mean is the product of
// the sticks' means, and eq. 81-83's conjugate update adds a site's
// exponents to the sticks' Beta parameters. A Dirichlet is the special case
// kappa_k = alpha_{k+1} + kappa_{k+1} (§4.2.2); the prior starts there
// (symmetric Dirichlet(alpha) over the T topics) and is learned.
//
// Local step: EP over theta with the topics at their point estimate (the
// thesis's Algorithm 3 for one document). One site per distinct term w of
// the document, used n_w times (eq. 79-81: the posterior is prior x prod_w
// t~_w^{n_w}; the delete step removes one copy, eq. 84-85, and the
// incorporate step puts back n_w copies of the new site, eq. 92: power EP).
// q(theta) = prod_k Beta(V_k | alpha'_k, kappa'_k). For term w:
//   cavity    (a, b) = (alpha', kappa') - site_w                (eq. 84-85)
//   z_w       = sum_t beta_tw E_cav[theta_t]                     (eq. 87)
//   tilted    = t_w(theta) q\w(theta) / z_w                      (eq. 86):
//     a mixture over t of the cavity with theta_t's exponent raised: weight
//     r_t = beta_tw E_cav[theta_t] / z_w, stick k gets (a_k + 1, b_k) when
//     t = k, (a_k, b_k + 1) when t > k, (a_k, b_k) when t < k.
//   match     stick k's Beta to the tilted (option match):
//     logs  (the thesis's eq. 88-89, KL projection: E[log V_k], E[log(1 - V_k)]
//           of the tilted,
//             psi(a) - psi(s) + r_k / a - (r_k + R_k) / s,
//             psi(b) - psi(s) + R_k / b - (r_k + R_k) / s,   s = a + b,
//           R_k = sum_{t>k} r_t, by psi(x + 1) = psi(x) + 1 / x; then the
//           Beta with those expected logs by Newton, dirichlet_fit.h);
//     moments (default; Minka and Lafferty's EP for the aspect model, the
//           thesis's ref. [59]: the Beta with the tilted's mean and variance
//           of V_k, closed form: no special function). Measured
//           (bench/LGDA_RESULTS.md): the same evidence to ~1e-3 nats a
//           document and the same topics, ~20x cheaper.
//   update    site_w <- mu (new - cavity) + (1 - mu) site_w       (eq. 91)
//   incorporate (alpha', kappa') += n_w (site_w' - site_w)       (eq. 92)
// Sweeps over the document's terms until no alpha'_k, kappa'_k moves by more
// than ep_tol of itself, or ep_iter sweeps. Algorithm 3 lines 7-8 and 13-14
// skip a term whose cavity or new posterior has a parameter <= 0; here an
// infeasible incorporate first halves the step (up to 10 times: a long
// document's n_w copies overshoot) and only then skips: DEVIATION, measured
// (a 2000-token document: 48 skips and the same fixed point as damping 0.5).
// DEVIATION (site family): eq. 80's site prod_t theta_t^{phi_wt} has T
// parameters, but the approximating family has 2K = 2T - 2 (a Beta per
// stick), so eq. 91 cannot make q^new = cavity x site exactly and the thesis
// updates phi_{w,K+1} by an ad-hoc average of the sticks' kappa changes
// (eq. 91, second line). Here a site is in the approximating family's own
// parameters, prod_k V_k^{a_wk} (1 - V_k)^{b_wk} (2K per term; eq. 80 is the
// special case b_wk = sum_{t>k} phi_wt), so each update is the exact EP step.
// Evidence (eq. 90, 93) after the sweeps:
//   log p(x) ~ sum_k [log B(alpha'_k, kappa'_k) - log B(alpha_k, kappa_k)]
//             + sum_w n_w log s_w,
//   log s_w  = log z_w + sum_k [log B(cavity_k) - log B(cavity_k + site_wk)],
// B the Beta function (tests/lgda_family_test.cc: within 0.005 nats of the
// exact evidence by quadrature, where VI's bound is 0.2 below).
//
// Statistics (block, entries, prior):
//   0  mu_tw   T x V term-major expected topic-word counts, eta (lda's topic
//              block, plugins/lda/lda_topics.h: the same map, random start,
//              check-step and topic point estimate beta_tw = lambda_tw / lambda_t)
//   1  d_k     2K (learn_prior): the running mean over documents of
//              E_q[log V_k] - e_k and E_q[log(1 - V_k)] - f_k, (e, f) the
//              prior's values at the start (alpha0, kappa0); prior 0.
// E_z[s] of a document (eq. 96): n_w E_tilted[theta_t beta_tw / sum_t'
// theta_t' beta_t'w] = n_w r_wt, the tilted responsibilities at the final
// cavity (exact under EP's approximation of the word's posterior: no
// Taylor expansion needed). With NLL the engine's step is then online VB
// for the topics, as in lda; SEP for the topics: one global site for all
// documents, each document's site (its E_z[s]) entering damped by rho_t, so
// memory does not grow with the stream (the thesis's batch EM keeps every
// document's sites; here a document's sites live for its local step only).
// Hyperparameters (learn_prior=1; eq. 94-95, §4.4.3): each stick's
// Beta(alpha_k, kappa_k) is the maximum-likelihood fit to the documents'
// mean E_q[log V_k], E_q[log(1 - V_k)] (eq. 95 divided by D: Newton,
// warm-started; dirichlet_fit.h), refitted in commit; kept in the cache so
// snapshots resume bit for bit. With every alpha_k, kappa_k >= prior_floor
// (default 1/T; the constrained optimum, FitDirichletAtLeast): unconstrained,
// on KJV verses the sticks of rarely used topics went to Beta(1e-27, 1e-28)
// (a prior that puts each such stick at 0 or 1: empirical Bayes collapsing,
// held-out perplexity 378 against 329). Default learn_prior=0, chosen on
// validation splits of the training files (the last 20 %; bible verses
// 328.6 fixed vs 332.2 learned, fortunes 1223 vs 1232 at T = 10): the prior
// stays the symmetric Dirichlet(alpha) in GD form, i.e. LDA with EP
// inference, unless the user asks for the fit. On documents drawn from a GD
// prior the fit recovers it (tests: stick means within 0.003) and explains
// held-out documents better. alpha's default 3/T: validation perplexity
// 330.3 vs 328.6 (bible) and 1216 vs 1223 (fortunes) against 1/T, and
// 1/T merges topics on the synthetic recovery test (matched L1 0.62 vs 0.14).
// Burn-in (training only, lda's remedy for merged topics from the random
// start): over the first `burnin` documents the local prior moves linearly
// from the symmetric Dirichlet(burnin_alpha) to (alpha, kappa); those
// documents count in block 1 at the current prior's value.
//
// score() writes log E_q[theta_t] + the evidence estimate (the ABI's LATENT
// contract: softmax = the topic proportions, log-sum-exp = log p(x));
// completion estimates theta by EP on the observed half. Options: topics
// (10), alpha (3/T: a symmetric Dirichlet in GD form, the prior or the fit's
// start), eta (1/T), match (moments|logs), damping (1), ep_iter (10: on
// validation splits the same perplexity as 50, KJV chunks 299.0 vs 303.4,
// verses 330.2 vs 330.3, fortunes 1217 vs 1216, in 0.7-0.9x the time), ep_tol
// (1e-3; 1e-4 gave the same validation perplexity), learn_prior (0),
// prior_floor (1/T), burnin (0; 1000 helped on bible verses and hurt on
// fortunes), burnin_alpha (30/T), init_mass (1), init_shape (100). Only the
// terms of a document are used.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "../lda/lda_topics.h"
#include "../shared/dirichlet_fit.h"
#include "lgda_model.h"
#include "tributary/plugin_sdk.h"

// The family's entry points; the local step is in lgda_local.cc (lgda_model.h).
namespace {

namespace sdk = tributary::sdk;
namespace lda = tributary::lda;
using sdk::Fail;
using sdk::Guard;
using tributary::lgda::M;
using tributary::lgda::Match;
using tributary::lgda::Model;
using tributary::lgda::Run;
using tributary::lgda::State;
using tributary::lgda::StickMeans;

// The GD form of a symmetric Dirichlet(a) over T = K + 1 topics: alpha_k = a,
// kappa_k = (T - 1 - k) a (0-based k; kappa_k = alpha_{k+1} + kappa_{k+1}).
void SymmetricDirichlet(uint32_t K, double a, std::vector<double>* alpha, std::vector<double>* kappa) {
  alpha->assign(K, a);
  kappa->resize(K);
  for (uint32_t k = 0; k < K; ++k) (*kappa)[k] = static_cast<double>(K - k) * a;
}

constexpr trib_option_spec kOptions[] = {
    sdk::Integer("topics", "10", "number of topics T (the thesis's K + 1)").AtLeast(2).AtMost(100000),
    sdk::Number("alpha", "3/T", "the prior (its start with learn_prior=1): a symmetric Dirichlet(alpha) in GD form")
        .Above(0)
        .AtMost(1e100)
        .Derived(),
    sdk::Number("eta", "1/T", "topic-word Dirichlet prior").Above(0).AtMost(1e100).Derived(),
    sdk::Choice("match", "moments|logs", "moments",
                "EP's projection: the Beta with the tilted's mean and variance, or its E[log] (eq. 88-89)"),
    sdk::Number("damping", "1", "EP step size mu (eq. 91; 1: no damping)").Above(0).AtMost(1),
    sdk::Integer("ep_iter", "10", "EP sweeps per document at most").AtLeast(1).AtMost(100000),
    sdk::Number("ep_tol", "0.001", "stop when no posterior parameter moves by more (relative)").AtLeast(0),
    sdk::Boolean("learn_prior", "0", "1: GenDir(alpha, kappa) fitted to the documents (eq. 95); 0: fixed"),
    sdk::Number("prior_floor", "1/T", "learn_prior: every alpha_k, kappa_k kept >= this (0: unconstrained)")
        .AtLeast(0)
        .AtMost(1e100)
        .Derived(),
    sdk::Number("burnin", "0", "training documents over which the local prior moves from burnin_alpha").AtLeast(0),
    sdk::Number("burnin_alpha", "30/T", "the burn-in's symmetric Dirichlet").Above(0).AtMost(1e100).Derived(),
    sdk::Number("init_mass", "1", "mass of the random start (tokens per document)").Above(0).AtMost(1e100),
    sdk::Number("init_shape", "100", "shape of the random start's noise (variance 1/shape)").Above(0).AtMost(1e100),
    {},
};

int Create(const trib_schema* schema, const trib_option* opts, size_t num, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0)
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "lgda needs a vocabulary (vocab_size is 0)");
    auto m = std::make_unique<Model>();
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "lgda", opts, num, &o, err); rc != TRIB_OK) return rc;
    lda::Model& t = m->topics;
    t.V = schema->vocab_size;
    t.K = o.Integer<uint32_t>("topics");
    if (t.V > UINT64_MAX / t.K / 2) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "topics x vocabulary (%u x %llu) is too large", t.K,
                  static_cast<unsigned long long>(t.V));
    }
    t.init_mass = o.Number("init_mass");
    t.init_shape = o.Number("init_shape");
    t.eta = o.HasValue("eta") ? o.Number("eta") : 1.0 / t.K;
    t.raw_total.assign(t.K, 0.0);
    m->K = t.K - 1;
    m->alpha0 = o.HasValue("alpha") ? o.Number("alpha") : 3.0 / t.K;
    m->match = o.Is("match", "logs") ? Match::kLogs : Match::kMoments;
    m->damping = o.Number("damping");
    m->ep_iter = o.Integer<uint32_t>("ep_iter");
    m->ep_tol = o.Number("ep_tol");
    m->learn_prior = o.Flag("learn_prior");
    m->prior_floor = o.HasValue("prior_floor") ? o.Number("prior_floor") : 1.0 / t.K;
    m->burnin = o.Number("burnin");
    m->burnin_alpha = o.HasValue("burnin_alpha") ? o.Number("burnin_alpha") : 30.0 / t.K;
    SymmetricDirichlet(m->K, m->alpha0, &m->start_alpha, &m->start_kappa);
    SymmetricDirichlet(m->K, m->burnin_alpha, &m->burn_alpha, &m->burn_kappa);
    m->alpha = m->start_alpha;
    m->kappa = m->start_kappa;
    m->e0.resize(m->K);
    m->f0.resize(m->K);
    for (uint32_t k = 0; k < m->K; ++k) {
      const double ps = sdk::Digamma(m->alpha[k] + m->kappa[k]);
      m->e0[k] = sdk::Digamma(m->alpha[k]) - ps;
      m->f0[k] = sdk::Digamma(m->kappa[k]) - ps;
    }
    m->Derive();
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t n = m->learn_prior ? 2 : 1;
  if (blocks == nullptr) {
    *num = n;
    return TRIB_OK;
  }
  if (*num < n) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", n);
  blocks[0] = trib_block{0, m->PriorStats(), 0.0, m->topics.eta, 1.0, 1.0};
  if (m->learn_prior) blocks[1] = trib_block{m->PriorStats(), 2 * uint64_t{m->K}, 0.0, 0.0, 1.0, 1.0};
  *num = n;
  return TRIB_OK;
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  *kind = TRIB_OUTPUTS_LATENT;
  *count = M(mm)->T();
  return TRIB_OK;
}

int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    lda::InitTopics(m->topics, s->raw, seed ^ 0x6c676461u);  // ("lgda": not lda's start for the same seed)
    for (uint64_t i = m->PriorStats(); i < s->size; ++i) s->raw[i] = 0.0;
    return TRIB_OK;
  });
}

// eq. 95: each stick's Beta fitted to the mean E[log V_k], E[log(1 - V_k)]
// (made feasible first: both < 0 and log(e^t1 + e^t2) < 0, which a mean of
// documents' values always is), warm-started from the current prior
// (`fresh`: from the start, as rebuild does for a model without a cache).
int RefitPrior(Model* m, const trib_stats& s, bool fresh, trib_error* err) {
  double t[2], a[2], scratch[6];
  for (uint32_t k = 0; k < m->K; ++k) {
    const uint64_t i = m->PriorStats() + 2 * uint64_t{k};
    t[0] = m->e0[k] + sdk::Mu(s, 1, i);
    t[1] = m->f0[k] + sdk::Mu(s, 1, i + 1);
    if (!std::isfinite(t[0]) || !std::isfinite(t[1])) {
      return Fail(err, TRIB_ERR_NUMERIC, "E[log V] statistics of stick %u are %g, %g", k, t[0], t[1]);
    }
    tributary::dirichlet::MakeFeasible(t, 2, 1e-9);
    a[0] = fresh ? m->start_alpha[k] : m->alpha[k];
    a[1] = fresh ? m->start_kappa[k] : m->kappa[k];
    if (m->prior_floor > 0) {
      std::vector<double> av = {std::max(a[0], m->prior_floor), std::max(a[1], m->prior_floor)};
      tributary::dirichlet::FitDirichletAtLeast(t, 2, m->prior_floor, sdk::Digamma, sdk::Trigamma, &av);
      a[0] = av[0];
      a[1] = av[1];
    } else {
      tributary::dirichlet::FitDirichletIn(t, 2, sdk::Digamma, sdk::Trigamma, a, scratch);
    }
    if (!(a[0] > 0) || !(a[1] > 0) || !std::isfinite(a[0]) || !std::isfinite(a[1])) {
      return Fail(err, TRIB_ERR_NUMERIC, "learned prior of stick %u is alpha %g, kappa %g", k, a[0], a[1]);
    }
    m->alpha[k] = a[0];
    m->kappa[k] = a[1];
  }
  m->Derive();
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (int rc = lda::RebuildTopics(&m->topics, s, *step, err); rc != TRIB_OK) return rc;
    m->topics.t = step->rho > 0 ? step->t + 1 : step->t;
    for (uint64_t i = m->PriorStats(); i < s->size; ++i) {
      if (!std::isfinite(s->raw[i])) {
        return Fail(err, TRIB_ERR_NUMERIC, "%s statistic of stick %llu is %g",
                    (i - m->PriorStats()) % 2 ? "E[log (1 - V)]" : "E[log V]",
                    static_cast<unsigned long long>((i - m->PriorStats()) / 2), s->raw[i]);
      }
    }
    if (m->learn_prior && !m->fitted) {
      if (int rc = RefitPrior(m, *s, /*fresh=*/true, err); rc != TRIB_OK) return rc;
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

// log E_q[theta_t] + the evidence estimate.
int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    Run(*m, *s, *d, /*training=*/true, st);
    StickMeans(st->qa.data(), st->qb.data(), m->K, st->theta.data());
    for (uint32_t t = 0; t < m->T(); ++t) {
      out[t] = std::log(std::max(st->theta[t], 1e-300)) + st->log_evidence;
      if (!std::isfinite(out[t])) return Fail(err, TRIB_ERR_NUMERIC, "score of topic %u is %g", t, out[t]);
    }
    st->base.scored.Remember(*d, m->topics.t);
    return TRIB_OK;
  });
}

// The topic rows sum_w n_w r_wt (times the document's weight, sum w) and
// block 1's E_q[log V_k] - e_k, E_q[log(1 - V_k)] - f_k (a burn-in
// document: the current prior's value).
int Accumulate(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K, T = m->T(), J = d->num_terms;
    if (!st->base.scored.Matches(*d, m->topics.t)) {
      Run(*m, *s, *d, /*training=*/true, st);
    }
    st->base.scored.valid = false;
    double weight = 0;
    for (uint32_t t = 0; t < T; ++t) weight += w[t];
    if (!std::isfinite(weight)) return Fail(err, TRIB_ERR_NUMERIC, "document weight is %g", weight);
    const size_t need = delta->size + size_t{J} * T + (m->learn_prior ? 2 * size_t{K} : 0);
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
    }
    uint64_t* index = delta->index;
    double* value = delta->value;
    size_t p = delta->size;
    for (uint32_t j = 0; j < J; ++j) {
      const uint64_t base = static_cast<uint64_t>(d->term_ids[j]) * T;
      const double f = weight * d->term_counts[j];
      const double* rj = st->resp.data() + size_t{j} * T;
      for (uint32_t t = 0; t < T; ++t) {
        index[p] = base + t;
        value[p++] = f * rj[t];
      }
    }
    if (m->learn_prior) {
      const double* qa = st->burnin ? m->alpha.data() : st->qa.data();
      const double* qb = st->burnin ? m->kappa.data() : st->qb.data();
      for (uint32_t k = 0; k < K; ++k) {
        const double ps = sdk::Digamma(qa[k] + qb[k]);
        index[p] = m->PriorStats() + 2 * uint64_t{k};
        value[p++] = weight * (sdk::Digamma(qa[k]) - ps - m->e0[k]);
        index[p] = m->PriorStats() + 2 * uint64_t{k} + 1;
        value[p++] = weight * (sdk::Digamma(qb[k]) - ps - m->f0[k]);
      }
    }
    delta->size = p;
    return TRIB_OK;
  });
}

// Check-step of the topics (lda_topics.h); the prior refitted when block 1 moved.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err) {
  Model* m = M(mm);
  bool moved = false;
  lda::CommitTopics(&m->topics, s, idx, old_raw, count, *step, [&](uint64_t i, size_t j) {
    if (s->raw[i] != old_raw[j]) moved = true;
  });
  if (!moved || !m->learn_prior) return TRIB_OK;
  const std::vector<double> alpha = m->alpha, kappa = m->kappa;  // (a failed step leaves the prior as it was)
  const int rc = Guard(err, [&] { return RefitPrior(m, *s, /*fresh=*/false, err); });
  if (rc != TRIB_OK) {
    m->alpha = alpha;
    m->kappa = kappa;
    m->Derive();
  }
  return rc;
}

// p(w | topic t) = E[beta_tw].
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] { return lda::TopicTerms(M(mm)->topics, *s, k, out, err); });
}

// Document completion: q(theta) by EP on the observed half, then the
// held-out tokens' sum_w n_w log sum_t E_q[theta_t] beta_tw.
int Completion(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* observed,
               const trib_document* heldout, double* log_prob, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t T = m->T();
    st->base.scored.valid = false;
    Run(*m, *s, *observed, /*training=*/false, st);
    StickMeans(st->qa.data(), st->qb.data(), m->K, st->theta.data());
    lda::MeanBeta(m->topics, *s, heldout->term_ids, heldout->num_terms, &st->base);
    double lp = 0;
    for (uint32_t j = 0; j < heldout->num_terms; ++j) {
      const double* row = st->base.rows.data() + size_t{j} * T;
      double p = 0;
      for (uint32_t t = 0; t < T; ++t) p += st->theta[t] * row[t];
      lp += heldout->term_counts[j] * std::log(std::max(p, 1e-300));
    }
    *log_prob = lp;
    return TRIB_OK;
  });
}

// R_t (commit's running sums) and the fitted prior, so a snapshot resumes bit for bit.
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return sdk::ExportCache(out, size, M(mm)->topics.raw_total, M(mm)->alpha, M(mm)->kappa);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model* m = M(mm);
  std::vector<double> total(m->T()), alpha(m->K), kappa(m->K);  // (a refused cache changes nothing)
  if (int rc = sdk::ImportCache(in, size, err, "topics + 2 x sticks", total, alpha, kappa); rc != TRIB_OK) return rc;
  for (uint32_t k = 0; k < m->K; ++k) {
    if (!(alpha[k] > 0) || !(kappa[k] > 0)) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cached prior of stick %u is alpha %g, kappa %g, expected > 0", k,
                  alpha[k], kappa[k]);
    }
  }
  m->topics.raw_total = std::move(total);
  m->alpha = std::move(alpha);
  m->kappa = std::move(kappa);
  m->Derive();
  m->fitted = true;
  return TRIB_OK;
}

}  // namespace

#ifndef TRIB_LGDA_VERSION
#define TRIB_LGDA_VERSION "1.0.0"
#endif
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "lgda", TRIB_LGDA_VERSION,
                             "latent generalized Dirichlet allocation, online; EP per document (thesis ch. 4)");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (int rc = sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  lda::SelectCvb0Kernel();  // (lda::LogGammaSum's lanes)
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
  v.completion = Completion;
  v.random_start = 1;
  return TRIB_OK;
}
