// Family "lda": latent Dirichlet allocation learned online from an unlabelled
// stream by sdEM with latent variables (Masegosa et al. 2014, §3.4-3.5 and
// Table 2, NLL row), which for LDA is Hoffman et al.'s online variational
// Bayes with one document per step.
//
// Model (Blei's notes 2013, §3): K topics beta_k ~ Dir_V(eta); per document
// theta ~ Dir_K(alpha), z_i ~ Mult(theta), w_i ~ Mult(beta_{z_i}).
//
// Statistics: one block of K x V expected topic-word counts per document,
// term-major (mu[w*K + k]) so that a document touches |d| runs of K doubles:
//   block 0  mu_kw   nu = 0, abar = eta.
// The variational Dirichlet of topic k (eq. 35) is lambda_kw = n mu_kw, n the
// effective corpus size (trib_step.n, cached by rebuild/commit): with the NLL
// loss (c = 1, w = softmax(scores), sum 1) the engine's step
//   mu <- (1 - rho) mu + rho (sum_i n_w phi_wk + eta/n)
// is, multiplied by n, lambda <- (1 - rho) lambda + rho (eta + n E[s_d]):
// Hoffman's online update, and with rho_t = 1/(1+t) and n = D the average of
// eq. 35's document terms plus the prior. The block's lazy map
// mu = scale raw + shift eta keeps the decay O(1) per step; the per-topic
// totals lambda_k = n (scale R_k + shift eta V), R_k = sum_w raw_kw, are kept
// incrementally in commit() (O(entries touched)) and saved in snapshots
// (export_cache / import_cache).
//
// Local step (score; lda_local.cc), option inference:
//  cvb0   (default) stochastic CVB0 (Foulds et al. 2013; the zero-order
//         collapsed update, eq. 7 of the supervised-LDA paper with one class)
//         with the topics fixed at the point estimate beta_kw = lambda_kw /
//         lambda_k = (n mu_kw) / (n M_k), i.e. (N_kw + eta) / (N_k + V eta)
//         in the expected counts N = lambda - eta:
//           phi_wk propto beta_kw (N_dk^{-w} + alpha),  N_dk = sum_w n_w phi_wk,
//         Gauss-Seidel sweeps over the distinct terms, four at a time, in
//         single precision (lda_cvb0.h; alpha_shape=asymmetric: two at a
//         time, double) from a sequential first sweep, until max_k |change of
//         N_dk| < cvb0_tol or cvb0_max_iter sweeps. E_z[s] = n_w phi_wk (Table 2). No special
//         function: beta for the document's terms costs one multiply by the
//         per-topic reciprocal total. score() writes log theta_k, theta_k =
//         (N_dk + alpha) / (L + K alpha), + a plug-in estimate of log p(x):
//         every token's probability given the rest of the document,
//         sum_w n_w log(sum_k beta_kw (N_dk^{-w} + alpha) / (L - 1 + K alpha)).
//         Completion estimates theta from the observed half with up to
//         cvb0_predict_iter sweeps (tolerance cvb0_predict_tol).
//  vi     mean-field fixed point (eq. 34, 37):
//           gamma_k = alpha + sum_w n_w phi_wk,
//           phi_wk propto exp(psi(gamma_k)) exp(psi(lambda_kw) - psi(lambda_k)),
//         in the product form of Hoffman's code (phi is never stored during
//         the iterations: two K x |d| products per iteration), from
//         gamma = alpha + |d|/K until the mean |change of gamma| < vi_tol or
//         vi_max_iter iterations. score() writes log E[theta_k] + the
//         document's ELBO (a lower bound on log p(x)).
//  gibbs  collapsed Gibbs over the document's topic assignments with the
//         topics fixed at E[beta_kw] = lambda_kw / lambda_k (eq. 30 with theta
//         collapsed; sdEM Appendix B, eq. 19): the first sweep samples
//         sequentially from the counts so far (Appendix B's initialisation),
//         then gibbs_burnin sweeps, then gibbs_samples sweeps whose topic
//         counts are averaged into E_z[s]. score() writes log E[theta_k] +
//         sum_w n_w log sum_k E[theta_k] E[beta_kw].
//  fast   Fast LDA (Shan & Banerjee 2010, §5.3 eq. 29-32, App. A.3): one
//         topic distribution phi per document shared by its m tokens,
//           gamma_k = alpha + m phi_k,
//           phi_k propto exp(psi(gamma_k) + (1/m) sum_w n_w E[log beta_kw]),
//         E[log beta] = psi(lambda_kw) - psi(lambda_k) (the paper's log beta
//         with our variational topics); the sum over the document's terms
//         is made once, then each iteration is O(K) (vi_max_iter, vi_tol).
//         E_z[s] = n_w phi_k (eq. 32). score() writes log E[theta_k] + the
//         fast bound (eq. 60). Cheaper than vi per document (no |d| x K work
//         per iteration); a document is given to fewer topics (one phi).
// Burn-in (every local step): over the first `burnin` training documents the
// local step's alpha falls linearly from burnin_alpha to alpha. A larger
// alpha early spreads each document over several topics instead of giving it
// to whichever random topic leads, which is how one-document steps end in a
// local optimum that merges two topics and splits another (bench/LDA_RESULTS.md:
// with it, recovery reaches the same optimum from every random start). The
// step count comes from commit / rebuild (trib_step.t), so a model resumed from
// a snapshot continues the burn-in where it stopped. Completion uses alpha.
// The burn-in documents' blurred statistics must be forgotten afterwards:
// under rho_t = 1/(1+t) (which never forgets) use burnin=0.
// Recommended schedule: --schedule poly --tau0 256 --kappa 0.7 (forgetting
// the early, poorly informed documents; the default 1/(1+t) averages them in
// for good and recovers the topics only from some random starts).
// Per document the cost is O(|d| K) per iteration / sweep; the vocabulary
// never enters (E[log beta] needs psi(lambda_k), K values, and psi(lambda_kw)
// only for the document's terms).
//
// Check-step: mu > 0 for every entry (a touched entry that is not is set to
// the step's prior mass rho eta / n, as Algorithm 2's N = max(N, 0) but with
// the prior kept); untouched entries move by the map mu' = f mu + rho eta / n
// with f > 0, which keeps them > 0 (a step with f <= 0 re-materialises the
// block and calls rebuild, which checks everything). Under NLL the deltas are
// >= 0, so the check only ever repairs rounding.
//
// Options: topics=K (default 10), alpha (document-topic prior, default 1/K),
// eta or prior (topic-word prior, default 1/K), inference=cvb0|vi|gibbs|fast
// (cvb0), cvb0_max_iter (5), cvb0_tol (0.5 tokens), cvb0_predict_iter (100),
// cvb0_predict_tol (0.01), vi_max_iter (50), vi_tol (1e-3), gibbs_burnin (10),
// gibbs_samples (10), burnin (3000 documents), burnin_alpha (30/K), init_mass
// (1) and init_shape (100): the random start (see InitStats); discriminative
// 0|1 and label_prior (1): DLDA, below; learn_alpha 0|1 (0): alpha learned;
// alpha_shape symmetric|asymmetric (symmetric).
//
// Version 1.1.0: cvb0 (the new default), the burn-in and a new random start;
// snapshots of 1.0.0 (whose default local step was vi) are refused.
// Version 1.2.0: inference=fast, discriminative=1 and learn_alpha=1 (without
// them the statistics are unchanged: 1.1.0 snapshots load). Version 1.3.0:
// alpha_shape=asymmetric (1.2.0 snapshots load). Version 1.4.0: cvb0 with a
// scalar alpha sweeps in single precision, four terms per group (the same
// statistics and options; models learn to within a local step's rounding of
// what 1.3.0 learned, not bit for bit; 1.3.0 snapshots load).
// Only the terms of a document are used: its reals and categoricals are
// ignored. The schema's classes only label documents for evaluation, except
// under discriminative=1:
//
// DLDA (discriminative=1; Shan & Banerjee 2010 §6.2-6.3, Table 2, App. A.4):
// the outputs are the schema's T classes; y ~ softmax(eta_1' zbar, ...,
// eta_{T-1}' zbar, 0), zbar the mean of the document's z. The label's
// expected log-likelihood is bounded with the variational xi (eq. 41 for
// inference=vi: DLDA; eq. 43 for inference=fast: Fast DLDA) and enters phi
// as (1/m)(eta_yc - sum_h exp(eta_hc) / xi). eta has §6.3's closed form
// eta_hc = log(A_hc / B_c), A_hc = E[sum zbar_c 1(y = h)] (h < T - 1),
// B_c = E[sum zbar_c / xi]: blocks 1 and 2 after the topics (prior
// label_prior each, so eta starts at 0). score(y) runs the local step
// conditioned on y and writes its bound on log p(x, y); accumulate pushes
// sum_y w_y E[s | x, y] (NLL on labelled documents: the paper's variational
// EM for DLDA, online; NCLL / hinge work too, the check-step keeping A, B > 0).
// Cost: T local steps per document. cvb0 and gibbs have no DLDA form here.
//
// learn_alpha=1 (Shan & Banerjee eq. 21, the paper's M-step for alpha, with
// all components equal; online): one more statistic after the others, the
// running mean over documents of (1/K) sum_k E[log theta_k] (gamma_k =
// theta_k (K alpha + L) of whichever local step ran: the Dirichlet of VI / fast,
// N_dk + alpha for CVB0 and Gibbs), prior psi(alpha0) - psi(K alpha0); rebuild
// and commit refit alpha to it (FitSymmetricDirichlet: psi(alpha) - psi(K alpha)
// = t, Newton, O(1) per step), from the option's alpha each time (alpha is a
// function of the statistics: no cache). Symmetric because every local step
// (the CVB0 kernels especially) takes one alpha; mmnb learns one per component.
// During the burn-in a document counts as the value at the current alpha.
// alpha_shape=asymmetric (with learn_alpha, inference=cvb0; version 1.3.0):
// eq. 21 in full, one alpha_k per topic. The last block holds K running means
// E[log theta_k] (psi(N_dk + alpha_k) - psi(L + A) of the CVB0 step), the
// Dirichlet fit (FitDirichletFrom) is warm-started from the current alpha_k
// and so kept in the cache (slda's alpha the same way), and the CVB0 sweeps
// run the vector-alpha kernel (lda_cvb0.h: the scalar kernel's arithmetic).
// Measured (validation splits, last 20 % of the training files, K = 20):
// learning alpha, either shape, loses to the fixed 1/K on short documents
// (KJV verses 383.7 symmetric, 378.4 asymmetric vs 327.8; fortunes 1336,
// 1331 vs 1222); synthetic documents with unequal topic use: alpha_k ranked
// as the truth, perplexity 0.1 % better than the symmetric fit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../shared/dirichlet_fit.h"
#include "lda_cvb0.h"
#include "lda_model.h"
#include "lda_topics.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

// The family's entry points. The model, the state and the local steps (the
// inference options above) are shared with lda_local.cc through lda_model.h.
namespace {

using tributary::lda::Cvb0LogPx;
using tributary::lda::DocumentElbo;
using tributary::lda::FastElbo;
using tributary::lda::FloorFor;
using tributary::lda::Inference;
using tributary::lda::LabelledLocalSteps;
using tributary::lda::LabelParameters;
using tributary::lda::LambdaMap;
using tributary::lda::LocalStep;
using tributary::lda::MapOf;
using tributary::lda::Model;
using tributary::lda::Positive;
using tributary::lda::RawForFloor;
using tributary::lda::State;
using tributary::sdk::Fail;
using tributary::sdk::Guard;
using tributary::sdk::NonFiniteBit;

inline Model* M(trib_family_model* m) { return tributary::sdk::As<Model>(m); }
inline const Model* M(const trib_family_model* m) { return tributary::sdk::As<Model>(m); }

namespace sdk = tributary::sdk;

// The options (`tributary plugins --options lda`); see the header comment.
constexpr trib_option_spec kOptions[] = {
    sdk::Integer("topics", "10", "number of topics K").AtLeast(1).AtMost(100000),
    sdk::Number("alpha", "1/K", "document-topic Dirichlet prior; learn: learned from 1/K (learn_alpha=1)")
        .Above(0)
        .AtMost(1e100)
        .Words("learn")
        .Derived(),
    sdk::Number("eta", "1/K", "topic-word Dirichlet prior").Above(0).AtMost(1e100).Derived(),
    sdk::Alias("prior", "eta"),
    sdk::Choice("inference", "cvb0|vi|gibbs|fast", "cvb0",
                "the local step: stochastic CVB0, mean-field VI, Gibbs or Fast LDA (one phi per document)"),
    sdk::Integer("cvb0_max_iter", "5", "cvb0: sweeps per training document at most").AtLeast(1).AtMost(100000),
    sdk::Number("cvb0_tol", "0.5", "cvb0: stop when no topic count moves by more (tokens)").AtLeast(0),
    sdk::Integer("cvb0_predict_iter", "100", "cvb0: sweeps per completion at most").AtLeast(1).AtMost(100000),
    sdk::Number("cvb0_predict_tol", "0.01", "cvb0: completion tolerance (tokens)").AtLeast(0),
    sdk::Integer("vi_max_iter", "50", "vi, fast: iterations per document at most").AtLeast(1).AtMost(100000),
    sdk::Number("vi_tol", "0.001", "vi, fast: stop when the mean change of gamma is below").AtLeast(0),
    sdk::Integer("gibbs_burnin", "10", "gibbs: burn-in sweeps per document").AtLeast(0).AtMost(100000),
    sdk::Integer("gibbs_samples", "10", "gibbs: sweeps averaged per document").AtLeast(1).AtMost(100000),
    sdk::Number("burnin", "3000", "training documents over which the local alpha falls to alpha").AtLeast(0),
    sdk::Number("burnin_alpha", "30/K", "the local alpha at the first document").Above(0).AtMost(1e100).Derived(),
    sdk::Number("init_mass", "1", "mass of the random start (tokens per document)").Above(0).AtMost(1e100),
    sdk::Number("init_shape", "100", "shape of the random start's noise (variance 1/shape)").Above(0).AtMost(1e100),
    sdk::Boolean("discriminative", "0", "1: DLDA, the outputs are the schema's classes (inference vi or fast)"),
    sdk::Number("label_prior", "1", "DLDA: prior of the label statistics").Above(0).AtMost(1e100),
    sdk::Boolean(
        "learn_alpha", "0",
        "1: learn alpha (symmetric) online from the documents' E[log theta] (eq. 21); the option alpha starts it"),
    sdk::Choice("alpha_shape", "symmetric|asymmetric", "symmetric",
                "learn_alpha: one alpha for every topic, or one per topic (eq. 21 in full; inference=cvb0)"),
    {},
};

int Create(const trib_schema* schema, const trib_option* opts, size_t num, trib_family_model** out, trib_error* err) {
  return Guard(err, [&] {
    if (schema->vocab_size == 0)
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "lda needs a vocabulary (vocab_size is 0)");
    auto m = std::make_unique<Model>();
    m->V = schema->vocab_size;
    sdk::OptionValues o;
    if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "lda", opts, num, &o, err); rc != TRIB_OK) return rc;
    m->K = o.Integer<uint32_t>("topics");
    if (o.Is("inference", "vi")) m->inference = Inference::kVi;
    if (o.Is("inference", "gibbs")) m->inference = Inference::kGibbs;
    if (o.Is("inference", "fast")) m->inference = Inference::kFast;
    m->cvb0_max_iter = o.Integer<uint32_t>("cvb0_max_iter");
    m->cvb0_tol = o.Number("cvb0_tol");
    m->cvb0_predict_iter = o.Integer<uint32_t>("cvb0_predict_iter");
    m->cvb0_predict_tol = o.Number("cvb0_predict_tol");
    m->vi_max_iter = o.Integer<uint32_t>("vi_max_iter");
    m->vi_tol = o.Number("vi_tol");
    m->gibbs_burnin = o.Integer<uint32_t>("gibbs_burnin");
    m->gibbs_samples = o.Integer<uint32_t>("gibbs_samples");
    m->burnin = o.Number("burnin");
    m->init_mass = o.Number("init_mass");
    m->init_shape = o.Number("init_shape");
    m->discriminative = o.Flag("discriminative");
    m->label_prior = o.Number("label_prior");
    if (m->discriminative) {
      m->T = schema->num_classes;
      if (m->T < 2) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "lda discriminative=1 needs >= 2 classes in the schema (the label term of DLDA), found %u", m->T);
      }
      if (m->inference != Inference::kVi && m->inference != Inference::kFast) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                    "lda discriminative=1 needs inference=vi (DLDA) or inference=fast (Fast DLDA), found %s",
                    m->inference == Inference::kCvb0 ? "cvb0" : "gibbs");
      }
    }
    if (m->V > UINT64_MAX / m->K / 2) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "topics x vocabulary (%u x %llu) is too large", m->K,
                  static_cast<unsigned long long>(m->V));
    }
    const bool alpha_learn = o.HasValue("alpha") && o.Is("alpha", "learn");  // alpha=learn: learn_alpha=1 from 1/K
    m->alpha = o.HasValue("alpha") && !alpha_learn ? o.Number("alpha") : 1.0 / m->K;
    m->alpha0 = m->alpha;
    m->learn_alpha = (o.Flag("learn_alpha") || alpha_learn) && m->K >= 2;  // (one topic: alpha changes nothing)
    if (o.Is("alpha_shape", "asymmetric")) {
      if (!o.Flag("learn_alpha") && !alpha_learn) {
        return Fail(
            err, TRIB_ERR_INVALID_ARGUMENT,
            "lda alpha_shape=asymmetric is the shape of a learned alpha: it needs learn_alpha=1 (or alpha=learn)");
      }
      if (m->inference != Inference::kCvb0) {
        return Fail(
            err, TRIB_ERR_INVALID_ARGUMENT,
            "lda alpha_shape=asymmetric needs inference=cvb0 (the local step with an alpha per topic), found %s",
            m->inference == Inference::kVi     ? "vi"
            : m->inference == Inference::kFast ? "fast"
                                               : "gibbs");
      }
      m->asymmetric = m->learn_alpha;
      m->alpha_vec.assign(m->K, m->alpha0);
    }
    m->eta = o.HasValue("eta") ? o.Number("eta") : 1.0 / m->K;
    m->burnin_alpha = o.HasValue("burnin_alpha") ? o.Number("burnin_alpha") : 30.0 / m->K;
    m->raw_total.assign(m->K, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t n = 1 + m->LabelBlocks() + (m->learn_alpha ? 1 : 0);
  if (blocks == nullptr) {
    *num = n;
    return TRIB_OK;
  }
  if (*num < n) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", n);
  blocks[0] = trib_block{0, m->V * m->K, 0.0, m->eta, 1.0, 1.0};
  if (m->discriminative) {
    // DLDA's label statistics (§6.3): A (H x K) and B (K), prior label_prior
    // each, so eta = log(A / B) starts at 0 (uniform classes).
    blocks[1] = trib_block{m->LabelA(), uint64_t{m->H()} * m->K, 0.0, m->label_prior, 1.0, 1.0};
    blocks[2] = trib_block{m->LabelB(), m->K, 0.0, m->label_prior, 1.0, 1.0};
  }
  if (m->learn_alpha) {
    // (1/K) sum_k E[log theta_k] (asymmetric: each E[log theta_k]) under
    // Dirichlet(alpha0): alpha starts at alpha0.
    const double t0 = sdk::Digamma(m->alpha0) - sdk::Digamma(m->K * m->alpha0);
    blocks[n - 1] = trib_block{m->LogTheta(), m->asymmetric ? m->K : 1, 0.0, t0, 1.0, 1.0};
  }
  *num = n;
  return TRIB_OK;
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  const Model* m = M(mm);
  *kind = m->discriminative ? TRIB_OUTPUTS_CLASSES : TRIB_OUTPUTS_LATENT;
  *count = m->discriminative ? m->T : m->K;
  return TRIB_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
const bool kInitTopicsAvx512 = tributary::simd::Avx512With(tributary::simd::Feature::kAvx512Dq);
#endif

// The random start of the topics (InitTopics, lda_topics.h); DLDA's A and B
// and learn_alpha's statistic start at their prior (raw 0).
int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
#if defined(__x86_64__) && defined(__GNUC__)
    if (kInitTopicsAvx512) {
      tributary::lda::InitTopicsAvx512(*m, s->raw, seed);
    } else {
      tributary::lda::InitTopics(*m, s->raw, seed);
    }
#else
    tributary::lda::InitTopics(*m, s->raw, seed);
#endif
    for (uint64_t i = m->V * m->K; i < s->size; ++i) s->raw[i] = 0.0;
    return TRIB_OK;
  });
}

// learn_alpha: the check-step of the E[log theta] statistic (a symmetric
// Dirichlet's mean log-component is below -log K; a running mean of
// documents' values stays there, and is put back a little below it if
// rounding took it out) and alpha refitted to it (FitSymmetricDirichlet,
// plugins/shared/dirichlet_fit.h: eq. 21 with equal components), from alpha0
// each time, so alpha is a function of the statistics (no cache).
// alpha_shape=asymmetric: alpha_k is the Dirichlet fit to the K means
// t_k (FitDirichletFrom, warm-started from the current alpha_k, or from
// alpha0 when `fresh`), the means made feasible for the fit first (t_k < 0,
// log sum_k exp t_k < 0) in a copy: a cache, like slda's alpha.
int RefitAlphaVector(Model* m, const trib_stats& s, bool fresh, trib_error* err) {
  const uint32_t K = m->K, b = s.num_blocks - 1;
  std::vector<double> t(K), a = fresh ? std::vector<double>(K, m->alpha0) : m->alpha_vec;
  for (uint32_t k = 0; k < K; ++k) {
    t[k] = sdk::Mu(s, b, m->LogTheta() + k);
    if (!std::isfinite(t[k])) return Fail(err, TRIB_ERR_NUMERIC, "E[log theta] statistic of topic %u is %g", k, t[k]);
  }
  tributary::dirichlet::MakeFeasible(t.data(), K, 1e-6);
  tributary::dirichlet::FitDirichletFrom(t.data(), K, sdk::Digamma, sdk::Trigamma, &a);
  double sum = 0;
  for (uint32_t k = 0; k < K; ++k) {
    if (!(a[k] > 0) || !std::isfinite(a[k])) {
      return Fail(err, TRIB_ERR_NUMERIC, "learned alpha of topic %u is %g (E[log theta] %g)", k, a[k], t[k]);
    }
    sum += a[k];
  }
  m->alpha_vec = std::move(a);
  m->alpha = sum / K;
  m->alpha_fitted = true;
  return TRIB_OK;
}

int RefitAlpha(Model* m, trib_stats* s, trib_error* err) {
  if (!m->learn_alpha) return TRIB_OK;
  if (m->asymmetric) return m->alpha_fitted ? TRIB_OK : RefitAlphaVector(m, *s, /*fresh=*/true, err);
  const uint32_t b = s->num_blocks - 1;
  const uint64_t i = m->LogTheta();
  double t = sdk::Mu(*s, b, i);
  if (!std::isfinite(t)) return Fail(err, TRIB_ERR_NUMERIC, "E[log theta] statistic is %g", t);
  const double cap = -std::log(static_cast<double>(m->K)) - 1e-6;
  if (!(t < cap)) {
    t = cap;
    s->raw[i] = sdk::RawFor(*s, b, t);
  }
  m->alpha = tributary::dirichlet::FitSymmetricDirichlet(t, m->K, m->alpha0, sdk::Digamma, sdk::Trigamma);
  if (!(m->alpha > 0) || !std::isfinite(m->alpha)) {
    return Fail(err, TRIB_ERR_NUMERIC, "learned alpha is %g (E[log theta] %g)", m->alpha, t);
  }
  return TRIB_OK;
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (int rc = tributary::lda::RebuildTopics(m, s, *step, err); rc != TRIB_OK) return rc;
    for (uint32_t b = 1; b <= m->LabelBlocks(); ++b) {  // DLDA's A and B: > 0 (eta = log(A / B))
      const trib_block& lb = s->blocks[b];
      const double lfloor = FloorFor(m->label_prior, *step);
      for (uint64_t i = lb.offset; i < lb.offset + lb.size; ++i) {
        if (!std::isfinite(s->raw[i])) {
          return Fail(err, TRIB_ERR_NUMERIC, "label statistic %llu is %g",
                      static_cast<unsigned long long>(i - m->LabelA()), s->raw[i]);
        }
        if (!(lb.scale * s->raw[i] + lb.shift * lb.alpha_bar > 0)) s->raw[i] = RawForFloor(lb, lfloor);
      }
    }
    m->t = step->rho > 0 ? step->t + 1 : step->t;
    return RefitAlpha(m, s, err);
  });
}

// DLDA's local steps for every class (LabelledLocalSteps), after the label
// parameters of the current statistics.
int LabelledStep(const Model& m, const trib_stats& s, const trib_document& d, State* st, trib_error* err) {
  st->scored.valid = false;
  uint32_t bad = 0;
  if (!LabelParameters(m, s, st, &bad)) {
    return Fail(err, TRIB_ERR_NUMERIC, "label statistics of topic %u are not positive and finite", bad);
  }
  LabelledLocalSteps(m, s, d, st);
  return TRIB_OK;
}

int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->rng.seed(seed);
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

// log E[theta_k] + an estimate of log p(x): their softmax is the document's
// topic proportions and their log-sum-exp the estimate (ABI LATENT contract).
int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    if (m->discriminative) {
      // DLDA: per class y the bound on log p(x, y) of the local step
      // conditioned on y (eq. 40 with eq. 41 / 43).
      if (int rc = LabelledStep(*m, *s, *d, st, err); rc != TRIB_OK) return rc;
      for (uint32_t y = 0; y < m->T; ++y) out[y] = st->slot_bound[y];
      st->scored.Remember(*d, m->t);
      return TRIB_OK;
    }
    LocalStep(*m, *s, *d, st);
    double logpx = 0;
    if (m->inference == Inference::kVi) {
      logpx = DocumentElbo(*m, *d, *st);
    } else if (m->inference == Inference::kCvb0) {
      logpx = Cvb0LogPx(*m, *d, st);
    } else if (m->inference == Inference::kFast) {
      logpx = FastElbo(*m, *d, *st);
    } else {
      for (uint32_t j = 0; j < d->num_terms; ++j) logpx += d->term_counts[j] * std::log(st->phinorm[j]);
    }
    bool normal = true;  // (LogEach's domain; else, and for NaN, the library's log)
    for (uint32_t k = 0; k < m->K; ++k) normal &= st->theta[k] >= 0x1p-1022 && st->theta[k] < 1e300;
    if (normal) {
      tributary::lda::LogEach(st->theta.data(), out, m->K);
    } else {
      for (uint32_t k = 0; k < m->K; ++k) out[k] = std::log(st->theta[k]);
    }
    for (uint32_t k = 0; k < m->K; ++k) out[k] += logpx;
    st->scored.Remember(*d, m->t);
    return TRIB_OK;
  });
}

// (1/K) sum_k E[log theta_k] = (1/K) sum_k psi(gamma_k) - psi(sum gamma):
// one document's value of learn_alpha's statistic.
// During the burn-in (the local alpha is not alpha) a document's posterior
// was made under another prior and says nothing of alpha: it counts as the
// statistic's value at the current alpha (which leaves alpha where it is).
double NeutralElogTheta(const Model& m) { return sdk::Digamma(m.alpha) - sdk::Digamma(m.K * m.alpha); }

double MeanElogTheta(const double* gamma, uint32_t K) {
  double sum = 0, acc = 0;
  for (uint32_t k = 0; k < K; ++k) {
    sum += gamma[k];
    acc += sdk::Digamma(gamma[k]);
  }
  return acc / K - sdk::Digamma(sum);
}

// DLDA: sum_y w_y E[s | x, y]: the topic rows sum_y w_y n_w phi^(y)_wk, then
// A_hc += w_h zbar^(h)_c (h < T - 1) and B_c += sum_y w_y zbar^(y)_c / xi^(y)
// (§6.3's sums, as running averages).
int AccumulateLabelled(const Model& m, const trib_stats& s, State* st, const trib_document& d, const double* w,
                       trib_delta* delta, trib_error* err) {
  const uint32_t K = m.K, T = m.T, H = m.H(), J = d.num_terms;
  if (!st->scored.Matches(d, m.t)) {
    if (int rc = LabelledStep(m, s, d, st, err); rc != TRIB_OK) return rc;
  }
  st->scored.valid = false;
  const size_t need = delta->size + static_cast<size_t>(J) * K + static_cast<size_t>(H + 1) * K + 1;
  if (need > delta->capacity && delta->grow(delta, need) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
  }
  uint64_t* index = delta->index;
  double* value = delta->value;
  size_t p = delta->size;
  const bool fast = m.inference == Inference::kFast;
  for (uint32_t j = 0; j < J; ++j) {
    const uint64_t base = static_cast<uint64_t>(d.term_ids[j]) * K;
    for (uint32_t k = 0; k < K; ++k) {
      index[p + k] = base + k;
      value[p + k] = 0.0;
    }
    for (uint32_t y = 0; y < T; ++y) {
      if (w[y] == 0) continue;
      if (fast) {  // n_w phi^(y)_k
        const double c = w[y] * d.term_counts[j];
        const double* phi = st->slot_phi.data() + static_cast<size_t>(y) * K;
        for (uint32_t k = 0; k < K; ++k) value[p + k] += c * phi[k];
      } else {  // n_w et^(y)_k row_wk / phinorm^(y)_w
        const double c = w[y] * d.term_counts[j] / st->slot_phinorm[static_cast<size_t>(y) * J + j];
        const double* et = st->slot_et.data() + static_cast<size_t>(y) * K;
        const double* row = st->rows.data() + static_cast<size_t>(j) * K;  // (empty under fast)
        for (uint32_t k = 0; k < K; ++k) value[p + k] += c * et[k] * row[k];
      }
    }
    p += K;
  }
  for (uint32_t h = 0; h < H; ++h) {
    const double* zb = st->slot_zbar.data() + static_cast<size_t>(h) * K;
    for (uint32_t k = 0; k < K; ++k) {
      index[p + k] = m.LabelA() + uint64_t{h} * K + k;
      value[p + k] = w[h] * zb[k];
    }
    p += K;
  }
  for (uint32_t k = 0; k < K; ++k) {
    double b = 0;
    for (uint32_t y = 0; y < T; ++y) {
      if (w[y] != 0) b += w[y] * st->slot_zbar[static_cast<size_t>(y) * K + k] / st->slot_xi[y];
    }
    index[p + k] = m.LabelB() + k;
    value[p + k] = b;
  }
  p += K;
  if (m.learn_alpha) {  // sum_y w_y (1/K) sum_k E[log theta_k | x, y]
    double t = 0;
    for (uint32_t y = 0; y < T; ++y) {
      if (w[y] == 0) continue;
      t += w[y] * (st->local_alpha != m.alpha ? NeutralElogTheta(m)
                                              : MeanElogTheta(st->slot_gamma.data() + static_cast<size_t>(y) * K, K));
    }
    index[p] = m.LogTheta();
    value[p++] = t;
  }
  delta->size = p;
  return TRIB_OK;
}

// sum_k w_k times the document's E[s]: (sum_k w_k) n_w phi_wk into the row of
// each term (Table 2, NLL with latent topics; eq. 35's document term).
int Accumulate(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    if (m->discriminative) return AccumulateLabelled(*m, *s, st, *d, w, delta, err);
    const uint32_t K = m->K;
    double wsum = 0;
    for (uint32_t k = 0; k < K; ++k) wsum += w[k];
    if (wsum == 0 || d->num_terms == 0) return TRIB_OK;
    if (!st->scored.Matches(*d, m->t)) {
      LocalStep(*m, *s, *d, st);  // not right after score() on this document
    }
    st->scored.valid = false;
    const size_t need = delta->size + static_cast<size_t>(d->num_terms) * K + K;
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
    }
    uint64_t* index = delta->index;
    double* value = delta->value;
    size_t p = delta->size;
    const uint32_t Kp = tributary::lda::Cvb0Stride(K);
    for (uint32_t j = 0; j < d->num_terms; ++j) {
      const uint64_t base = static_cast<uint64_t>(d->term_ids[j]) * K;
      const double* row = st->rows.data() + static_cast<size_t>(j) * K;
      if (st->phi_float) {  // cvb0: phi in fphi
        const double c = wsum * d->term_counts[j];
        const float* f = st->fphi.data() + static_cast<size_t>(j) * Kp;
        for (uint32_t k = 0; k < K; ++k) {
          index[p + k] = base + k;
          value[p + k] = c * static_cast<double>(f[k]);
        }
      } else if (st->phi_ready) {  // gibbs, asymmetric cvb0: rows are phi
        const double c = wsum * d->term_counts[j];
        for (uint32_t k = 0; k < K; ++k) {
          index[p + k] = base + k;
          value[p + k] = c * row[k];
        }
      } else {  // vi: phi_wk = et_k row_k / phinorm_w
        const double c = wsum * d->term_counts[j] / st->phinorm[j];
        for (uint32_t k = 0; k < K; ++k) {
          index[p + k] = base + k;
          value[p + k] = c * st->et[k] * row[k];
        }
      }
      p += K;
    }
    if (m->asymmetric) {
      // (sum_k w_k) E[log theta_k] for each k: psi(N_dk + alpha_k) - psi(L + A)
      // (a burn-in document: the value at the current alpha, psi(alpha_k) - psi(A)).
      const double A = st->local_alpha_sum, total = A + d->total_count;
      double asum = 0;
      for (uint32_t k = 0; k < K; ++k) asum += m->alpha_vec[k];
      const double ps = sdk::Digamma(st->burn ? asum : total);
      for (uint32_t k = 0; k < K; ++k) {
        index[p] = m->LogTheta() + k;
        const double g = st->burn ? m->alpha_vec[k] : std::max(st->theta[k] * total, 1e-300);
        value[p++] = wsum * (sdk::Digamma(g) - ps);
      }
    } else if (m->learn_alpha) {
      // (sum_k w_k) (1/K) sum_k E[log theta_k], gamma_k = theta_k (K alpha + L):
      // every local step leaves theta = gamma / sum gamma with sum gamma = K alpha + L
      // (cvb0 and gibbs: the Dirichlet (N_dk + alpha) of the topic counts).
      std::vector<double>& g = st->acc;
      g.resize(K);
      const double total = K * st->local_alpha + d->total_count;
      for (uint32_t k = 0; k < K; ++k) g[k] = std::max(st->theta[k] * total, 1e-300);
      index[p] = m->LogTheta();
      value[p++] = wsum * (st->local_alpha != m->alpha ? NeutralElogTheta(*m) : MeanElogTheta(g.data(), K));
    }
    delta->size = p;
    return TRIB_OK;
  });
}

// Check-step on the touched entries (CommitTopics: raw >= 0, the totals
// R_k), DLDA's A and B (> 0) and learn_alpha's refit.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err) {
  Model* m = M(mm);
  bool refit = false;
  tributary::lda::CommitTopics(m, s, idx, old_raw, count, *step, [&](uint64_t i, size_t) {
    if (m->learn_alpha && i >= m->LogTheta()) {  // refitted below
      refit = true;
      return;
    }
    // DLDA's A and B (Accumulate writes them last): > 0
    const trib_block& lb = s->blocks[i >= m->LabelB() ? 2 : 1];
    if (!(lb.scale * s->raw[i] + lb.shift * lb.alpha_bar > 0)) {
      s->raw[i] = RawForFloor(lb, FloorFor(m->label_prior, *step));
    }
  });
  if (!refit) return TRIB_OK;
  if (!m->asymmetric) return RefitAlpha(m, s, err);
  const std::vector<double> before = m->alpha_vec;  // (a failed step leaves alpha as it was)
  const double alpha = m->alpha;
  const int rc = Guard(err, [&] { return RefitAlphaVector(m, *s, /*fresh=*/false, err); });
  if (rc != TRIB_OK) {
    m->alpha_vec = before;
    m->alpha = alpha;
  }
  return rc;
}

// ---- The fused step (ABI 1.7) ---------------------------------------------

// (clang: no contraction in the fused step's kernels below, whose AVX-512
// build could otherwise fuse; GCC: TRIB_NO_FP_CONTRACT on that build.)
#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#endif
// One topic row of the fused step, W lanes at a time (no fused multiply-add,
// so every width gives the bits of the scalar expressions): dv_k = c row_k
// (vi: (c et_k) row_k, Accumulate's order), old_k = r_k, r_k = old_k + dv_k
// mult. Returns the non-finite bits of the dv_k; *feasible = every
// scale r_k + prior > 0 (NaN fails it). When feasible, the row's change joins
// the totals here, total_k += r_k - old_k (the caller's scalar loop's
// bits); otherwise the caller clamps the row first and adds it itself.
template <int W, typename R = double>
__attribute__((always_inline)) inline uint64_t FusedRowT(double* __restrict r, double* __restrict old,
                                                         double* __restrict total, const R* __restrict row,
                                                         const double* __restrict et, double c, double mult,
                                                         double scale, double prior, uint32_t K, bool* feasible) {
  using V = typename tributary::lda::VecOf<W>::type;
  using L = typename tributary::lda::VecOf<W>::mask;
  const V vz = {};
  const L lz = {};
  const V vc = vz + c, vm = vz + mult, vs = vz + scale, vp = vz + prior;
  const L exp_bits = lz + static_cast<int64_t>(0x7ff0000000000000ull);
  const L exp_one = lz + static_cast<int64_t>(0x0010000000000000ull);
  L bad = lz, ok = lz - 1;
  uint32_t k = 0;
  for (; k + W <= K; k += W) {
    V x, o;
    if constexpr (std::is_same_v<R, float>) {  // (float to double: exact)
      typedef float F __attribute__((vector_size(4 * W)));
      F f;
      std::memcpy(&f, row + k, sizeof(F));
      x = __builtin_convertvector(f, V);
    } else {
      std::memcpy(&x, row + k, sizeof(V));
    }
    std::memcpy(&o, r + k, sizeof(V));
    V dv;
    if (et != nullptr) {
      V e;
      std::memcpy(&e, et + k, sizeof(V));
      dv = (vc * e) * x;
    } else {
      dv = vc * x;
    }
    const V v = o + dv * vm;
    std::memcpy(old + k, &o, sizeof(V));
    std::memcpy(r + k, &v, sizeof(V));
    L bits;
    std::memcpy(&bits, &dv, sizeof(V));
    bad |= (bits & exp_bits) + exp_one;
    ok &= (vs * v + vp) > vz;
  }
  uint64_t nonfinite = 0;
  bool all = true;
  for (int l = 0; l < W; ++l) {
    nonfinite |= static_cast<uint64_t>(bad[l]);
    all &= ok[l] != 0;
  }
  for (; k < K; ++k) {
    const double x = row[k];
    const double dv = et != nullptr ? c * et[k] * x : c * x;
    const double o = r[k];
    const double v = o + dv * mult;
    old[k] = o;
    r[k] = v;
    nonfinite |= NonFiniteBit(dv);
    all &= scale * v + prior > 0;
  }
  *feasible = all;
  if (all) {
    uint32_t q = 0;
    for (; q + W <= K; q += W) {
      V t, v, o;
      std::memcpy(&t, total + q, sizeof(V));
      std::memcpy(&v, r + q, sizeof(V));
      std::memcpy(&o, old + q, sizeof(V));
      t += v - o;
      std::memcpy(total + q, &t, sizeof(V));
    }
    for (; q < K; ++q) total[q] += r[q] - old[q];
  }
  return nonfinite;
}

using FusedRowFn = uint64_t (*)(double*, double*, double*, const double*, const double*, double, double, double, double,
                                uint32_t, bool*);
TRIB_KEEP_LOOPS uint64_t FusedRowSse2(double* r, double* old, double* total, const double* row, const double* et,
                                      double c, double mult, double scale, double prior, uint32_t K, bool* feasible) {
  return FusedRowT<2>(r, old, total, row, et, c, mult, scale, prior, K, feasible);
}
#ifdef TRIB_LDA_HAVE_AVX2
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowAvx2(double* r, double* old, double* total,
                                                                      const double* row, const double* et, double c,
                                                                      double mult, double scale, double prior,
                                                                      uint32_t K, bool* feasible) {
  return FusedRowT<4>(r, old, total, row, et, c, mult, scale, prior, K, feasible);
}
#endif
const FusedRowFn g_fused_row =
#ifdef TRIB_LDA_HAVE_AVX2
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? FusedRowAvx2 :
#endif
                                                          FusedRowSse2;
// The same with phi as floats (cvb0's float kernel; et unused).
using FusedRowFloatFn = uint64_t (*)(double*, double*, double*, const float*, double, double, double, double, uint32_t,
                                     bool*);
TRIB_KEEP_LOOPS uint64_t FusedRowFloatSse2(double* r, double* old, double* total, const float* row, double c,
                                           double mult, double scale, double prior, uint32_t K, bool* feasible) {
  return FusedRowT<2, float>(r, old, total, row, nullptr, c, mult, scale, prior, K, feasible);
}
#ifdef TRIB_LDA_HAVE_AVX2
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowFloatAvx2(double* r, double* old, double* total,
                                                                           const float* row, double c, double mult,
                                                                           double scale, double prior, uint32_t K,
                                                                           bool* feasible) {
  return FusedRowT<4, float>(r, old, total, row, nullptr, c, mult, scale, prior, K, feasible);
}
#endif
const FusedRowFloatFn g_fused_row_float =
#ifdef TRIB_LDA_HAVE_AVX2
    tributary::simd::MaxLevel() >= tributary::simd::kAvx2 ? FusedRowFloatAvx2 :
#endif
                                                          FusedRowFloatSse2;

// All T topic rows of a document whose phi is cvb0's floats (rows of Kp),
// K = NV W: FusedRowT row after row (old values to old, T x K), with the
// totals held in registers across the rows; an infeasible row is clamped
// to clamp_raw where scale r + prior <= 0 and then added, as FusedStep's
// scalar loop does. The same bits as FusedRowT and that loop.
template <int W, int NV>
__attribute__((always_inline)) inline uint64_t FusedRowsFloatT(double* __restrict raw, double* __restrict old,
                                                               double* __restrict total, const uint32_t* ids,
                                                               const double* counts, uint32_t T,
                                                               const float* __restrict phi, uint32_t Kp, double wsum,
                                                               double mult, double scale, double prior,
                                                               double clamp_raw) {
  using V = typename tributary::lda::VecOf<W>::type;
  using L = typename tributary::lda::VecOf<W>::mask;
  typedef float F __attribute__((vector_size(4 * W)));
  constexpr uint32_t K = NV * W;
  const V vz = {};
  const L lz = {};
  const V vm = vz + mult, vs = vz + scale, vp = vz + prior;
  const L exp_bits = lz + static_cast<int64_t>(0x7ff0000000000000ull);
  const L exp_one = lz + static_cast<int64_t>(0x0010000000000000ull);
  L bad = lz;
  V tot[NV];
  for (int v = 0; v < NV; ++v) std::memcpy(&tot[v], total + v * W, sizeof(V));
  for (uint32_t j = 0; j < T; ++j) {
    double* r = raw + static_cast<uint64_t>(ids[j]) * K;
    double* o = old + static_cast<size_t>(j) * K;
    const float* x = phi + static_cast<size_t>(j) * Kp;
    const V vc = vz + wsum * counts[j];
    L ok = lz - 1;
    V next[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      F f;
      std::memcpy(&f, x + v * W, sizeof(F));
      V was;
      std::memcpy(&was, r + v * W, sizeof(V));
      const V dv = vc * __builtin_convertvector(f, V);
      const V now = was + dv * vm;
      std::memcpy(o + v * W, &was, sizeof(V));
      std::memcpy(r + v * W, &now, sizeof(V));
      L bits;
      std::memcpy(&bits, &dv, sizeof(V));
      bad |= (bits & exp_bits) + exp_one;
      ok &= (vs * now + vp) > vz;
      next[v] = tot[v] + (now - was);
    }
    bool all = true;
    for (int l = 0; l < W; ++l) all &= ok[l] != 0;
    if (all) {
      for (int v = 0; v < NV; ++v) tot[v] = next[v];
    } else {  // (NLL steps only add: rounding, or a loss with negative weights)
      double t[K];
      std::memcpy(t, tot, sizeof t);
      for (uint32_t k = 0; k < K; ++k) {
        if (!(scale * r[k] + prior > 0)) r[k] = clamp_raw;
      }
      for (uint32_t k = 0; k < K; ++k) t[k] += r[k] - o[k];
      std::memcpy(tot, t, sizeof t);
    }
  }
  for (int v = 0; v < NV; ++v) std::memcpy(total + v * W, &tot[v], sizeof(V));
  uint64_t nonfinite = 0;
  for (int l = 0; l < W; ++l) nonfinite |= static_cast<uint64_t>(bad[l]);
  return nonfinite;
}

#define TRIB_FUSED_ROWS_ARGS                                                                                        \
  double *raw, double *old, double *total, const uint32_t *ids, const double *counts, uint32_t T, const float *phi, \
      uint32_t Kp, double wsum, double mult, double scale, double prior, double clamp_raw
#define TRIB_FUSED_ROWS_PASS raw, old, total, ids, counts, T, phi, Kp, wsum, mult, scale, prior, clamp_raw
using FusedRowsFloatFn = uint64_t (*)(TRIB_FUSED_ROWS_ARGS);
template <int NV>
TRIB_KEEP_LOOPS uint64_t FusedRowsFloatSse2(TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<2, NV>(TRIB_FUSED_ROWS_PASS);
}
#ifdef TRIB_LDA_HAVE_AVX2
template <int NV>
TRIB_KEEP_LOOPS __attribute__((target("avx2"))) uint64_t FusedRowsFloatAvx2(TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<4, NV>(TRIB_FUSED_ROWS_PASS);
}
// The AVX2 build where the CPU has AVX-512 VL: the same 256-bit operations
// with 32 vector registers (the totals, the row and its masks without
// spilling), not contracted into FMA.
template <int NV>
TRIB_KEEP_LOOPS __attribute__((target("avx2,avx512f,avx512vl") TRIB_NO_FP_CONTRACT)) uint64_t FusedRowsFloatAvx512(
    TRIB_FUSED_ROWS_ARGS) {
  return FusedRowsFloatT<4, NV>(TRIB_FUSED_ROWS_PASS);
}
#endif
#undef TRIB_FUSED_ROWS_ARGS
#undef TRIB_FUSED_ROWS_PASS
#if defined(__clang__)
#pragma float_control(pop)
#endif

// FusedRowsFloatT for K topics on this CPU, or nullptr when K is not a
// multiple of the lanes or its totals need more than eight vectors (then
// FusedRowT row by row).
FusedRowsFloatFn FusedRowsFloatFor(uint32_t K) {
  static const FusedRowsFloatFn kSse2[8] = {FusedRowsFloatSse2<1>, FusedRowsFloatSse2<2>, FusedRowsFloatSse2<3>,
                                            FusedRowsFloatSse2<4>, FusedRowsFloatSse2<5>, FusedRowsFloatSse2<6>,
                                            FusedRowsFloatSse2<7>, FusedRowsFloatSse2<8>};
  const FusedRowsFloatFn* table = kSse2;
  uint32_t W = 2;
#ifdef TRIB_LDA_HAVE_AVX2
  static const FusedRowsFloatFn kAvx2[8] = {FusedRowsFloatAvx2<1>, FusedRowsFloatAvx2<2>, FusedRowsFloatAvx2<3>,
                                            FusedRowsFloatAvx2<4>, FusedRowsFloatAvx2<5>, FusedRowsFloatAvx2<6>,
                                            FusedRowsFloatAvx2<7>, FusedRowsFloatAvx2<8>};
  static const FusedRowsFloatFn kAvx512[8] = {FusedRowsFloatAvx512<1>, FusedRowsFloatAvx512<2>, FusedRowsFloatAvx512<3>,
                                              FusedRowsFloatAvx512<4>, FusedRowsFloatAvx512<5>, FusedRowsFloatAvx512<6>,
                                              FusedRowsFloatAvx512<7>, FusedRowsFloatAvx512<8>};
  if (tributary::simd::MaxLevel() >= tributary::simd::kAvx2) {
    table = kAvx2;
    W = 4;
  }
  if (tributary::simd::Avx512With(tributary::simd::Feature::kAvx512Vl)) table = kAvx512;
#endif
  if (K == 0 || K % W != 0 || K / W > 8) return nullptr;
  return table[K / W - 1];
}

int GrowFusedDelta(trib_delta* d, size_t min_capacity) {
  auto* st = static_cast<State*>(d->host);
  const size_t cap = std::max(min_capacity, d->capacity * 2);
  try {
    st->fused_index.resize(cap);
    st->fused_value.resize(cap);
  } catch (...) {
    return TRIB_ERR_NO_MEMORY;
  }
  d->index = st->fused_index.data();
  d->value = st->fused_value.data();
  d->capacity = cap;
  return TRIB_OK;
}

// The general path (DLDA's labelled rows and label statistics, learn_alpha's
// entries): Accumulate's delta, applied entry by entry as the engine applies
// it (raw += value * rho / scale of the entry's block, each run logged before
// it is written), then Commit on the same indices and old values.
int FusedGeneral(trib_family_model* mm, trib_stats* s, trib_family_state* ss, const trib_document* d, const double* w,
                 const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err) {
  auto* st = reinterpret_cast<State*>(ss);
  if (st->fused_index.empty()) {
    st->fused_index.resize(1024);
    st->fused_value.resize(1024);
  }
  trib_delta delta{st->fused_index.data(), st->fused_value.data(), 0, st->fused_index.size(), st, &GrowFusedDelta};
  if (int rc = Accumulate(mm, s, ss, d, w, &delta, err); rc != TRIB_OK) return rc;
  const size_t n = delta.size;
  if ((log->runs + n > log->run_capacity || log->values + n > log->value_capacity) &&
      log->grow(log, log->runs + n, log->values + n) != 0) {
    return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the step log to %zu entries", log->values + n);
  }
  double* old = log->old_raw + log->values;
  uint32_t b = 0;
  for (size_t e = 0; e < n; ++e) {
    const uint64_t i = delta.index[e];
    if (i >= s->size) {
      return Fail(err, TRIB_ERR_INTERNAL, "statistic index %llu >= %llu", static_cast<unsigned long long>(i),
                  static_cast<unsigned long long>(s->size));
    }
    if (!std::isfinite(delta.value[e])) {
      return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (entry %llu)",
                  static_cast<unsigned long long>(i));
    }
    while (!(i >= s->blocks[b].offset && i - s->blocks[b].offset < s->blocks[b].size)) {
      b = b + 1 < s->num_blocks ? b + 1 : 0;  // (the delta runs through one block at a time)
    }
    // One run per stretch of consecutive indices (a term's row).
    if (e > 0 && delta.index[e - 1] + 1 == i) {
      ++log->length[log->runs - 1];
    } else {
      log->start[log->runs] = i;
      log->length[log->runs++] = 1;
    }
    old[e] = s->raw[i];
    ++log->values;
    s->raw[i] += delta.value[e] * block_mult[b];
  }
  return Commit(mm, s, delta.index, old, n, step, err);
}

// Accumulate, the engine's apply and Commit in one pass over the document's
// topic rows: raw_wk += ((sum_k w_k) n_w phi_wk) * rho / scale (vi: phi_wk =
// et_k row_wk / phinorm_w, Accumulate's products in its order), the check-step
// mu_wk > 0 and the totals R_k += raw_new - raw_old, row after row as Commit
// takes them: the same bits as the three calls (plugin-check 'fused-step'),
// without the (index, value) delta, the engine's second read of it and its
// copy of the old values that Commit reads back (together a fifth of a CVB0
// training step at K = 20). DLDA and learn_alpha take FusedGeneral.
int FusedStep(trib_family_model* mm, trib_stats* s, trib_family_state* ss, const trib_document* d, const double* w,
              const double* block_mult, const trib_step* step, trib_step_log* log, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (m->discriminative || m->learn_alpha) return FusedGeneral(mm, s, ss, d, w, block_mult, step, log, err);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K, T = d->num_terms;
    double wsum = 0;
    for (uint32_t k = 0; k < K; ++k) wsum += w[k];
    if (wsum != 0 && T != 0) {
      if (!st->scored.Matches(*d, m->t)) LocalStep(*m, *s, *d, st);  // not right after score() on this document
      st->scored.valid = false;
      const size_t values = static_cast<size_t>(T) * K;
      if ((log->runs + T > log->run_capacity || log->values + values > log->value_capacity) &&
          log->grow(log, log->runs + T, log->values + values) != 0) {
        return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow the step log to %zu entries", log->values + values);
      }
      const trib_block& blk = s->blocks[0];
      const double mult = block_mult[0], scale = blk.scale, prior = blk.shift * blk.alpha_bar;
      const double floor = tributary::lda::Floor(*m, *step);
      st->fused_total = m->raw_total;  // (written back only when every entry was finite)
      double* __restrict total = st->fused_total.data();
      double* __restrict raw = s->raw;
      uint64_t nonfinite = 0;
      const uint32_t Kp = tributary::lda::Cvb0Stride(K);
      const FusedRowsFloatFn rows_fn = st->phi_float ? FusedRowsFloatFor(K) : nullptr;
      if (rows_fn != nullptr) {  // every row at once, the totals in registers
        for (uint32_t j = 0; j < T; ++j) {
          log->start[log->runs] = static_cast<uint64_t>(d->term_ids[j]) * K;
          log->length[log->runs++] = K;
        }
        double* __restrict old = log->old_raw + log->values;
        log->values += static_cast<size_t>(T) * K;
        nonfinite |= rows_fn(raw, old, total, d->term_ids, d->term_counts, T, st->fphi.data(), Kp, wsum, mult, scale,
                             prior, RawForFloor(blk, floor));
      } else {  // row by row
        for (uint32_t j = 0; j < T; ++j) {
          const uint64_t base = static_cast<uint64_t>(d->term_ids[j]) * K;
          log->start[log->runs] = base;
          log->length[log->runs++] = K;
          double* __restrict old = log->old_raw + log->values;
          log->values += K;
          double* __restrict r = raw + base;
          bool feasible = true;
          if (st->phi_float) {  // cvb0: phi in fphi
            nonfinite |= g_fused_row_float(r, old, total, st->fphi.data() + static_cast<size_t>(j) * Kp,
                                           wsum * d->term_counts[j], mult, scale, prior, K, &feasible);
          } else {
            const double* __restrict row = st->rows.data() + static_cast<size_t>(j) * K;
            const double c = st->phi_ready ? wsum * d->term_counts[j] : wsum * d->term_counts[j] / st->phinorm[j];
            nonfinite |= g_fused_row(r, old, total, row, st->phi_ready ? nullptr : st->et.data(), c, mult, scale, prior,
                                     K, &feasible);
          }
          if (!feasible) {  // (NLL steps only add: rounding, or a loss with negative weights)
            for (uint32_t k = 0; k < K; ++k) {
              if (!(scale * r[k] + prior > 0)) r[k] = RawForFloor(blk, floor);
            }
            for (uint32_t k = 0; k < K; ++k) total[k] += r[k] - old[k];
          }
        }
      }
      if ((nonfinite >> 63) != 0) {
        return Fail(err, TRIB_ERR_NUMERIC, "expected statistics are not finite (a topic row of the document)");
      }
      m->raw_total.swap(st->fused_total);
    }
    m->n = step->n;
    m->t = step->t + 1;
    return TRIB_OK;
  });
}

// ABI 1.8: the topics are the components, also under discriminative=1,
// whose outputs are the classes (`tributary topics` lists the K topics).
int Components(const trib_family_model* mm, uint32_t* count, trib_error*) {
  *count = M(mm)->K;
  return TRIB_OK;
}

// p(w | topic k) = E[beta_kw] = lambda_kw / lambda_k.
int ComponentTerms(const trib_family_model* mm, const trib_stats* s, uint32_t k, double* out, trib_error* err) {
  return Guard(err, [&] { return tributary::lda::TopicTerms(*M(mm), *s, k, out, err); });
}

// Document completion: theta from the observed half (the configured local
// step), then sum over held-out tokens of log sum_k theta_k E[beta_kw].
int Completion(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* observed,
               const trib_document* heldout, double* log_prob, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    auto* st = reinterpret_cast<State*>(ss);
    const uint32_t K = m->K;
    if (observed->num_terms > 0) {
      LocalStep(*m, *s, *observed, st, /*predict=*/true);
    } else {
      st->theta.assign(K, 1.0 / K);
    }
    st->scored.valid = false;
    const LambdaMap f = MapOf(*m, *s);
    st->inv_total.resize(K);
    for (uint32_t k = 0; k < K; ++k) {
      st->inv_total[k] = st->theta[k] / Positive(f.a * m->raw_total[k] + f.b * static_cast<double>(m->V));
    }
    double lp = 0;
    for (uint32_t j = 0; j < heldout->num_terms; ++j) {
      const double* raw = s->raw + static_cast<uint64_t>(heldout->term_ids[j]) * K;
      double p = 0;
      for (uint32_t k = 0; k < K; ++k) p += Positive(f.a * raw[k] + f.b) * st->inv_total[k];
      lp += heldout->term_counts[j] * std::log(p);
    }
    *log_prob = lp;
    return TRIB_OK;
  });
}

// R_k is a running sum kept by Commit; recomputing it in Rebuild sums in
// another order, so snapshots carry it for bit-exact resumption.
// (alpha_shape=asymmetric: and the fitted alpha_k, warm-started.)
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  const Model* m = M(mm);
  if (m->asymmetric) return tributary::sdk::ExportCache(out, size, m->raw_total, m->alpha_vec);
  return tributary::sdk::ExportCache(out, size, m->raw_total);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  Model* m = M(mm);
  if (!m->asymmetric) return tributary::sdk::ImportCache(in, size, err, "topics", m->raw_total);
  std::vector<double> total(m->K), alpha(m->K);  // (a refused cache changes nothing)
  if (int rc = tributary::sdk::ImportCache(in, size, err, "topics + topics", total, alpha); rc != TRIB_OK) return rc;
  double sum = 0;
  for (uint32_t k = 0; k < m->K; ++k) {
    if (!(alpha[k] > 0))
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "cached alpha of topic %u is %g, expected > 0", k, alpha[k]);
    sum += alpha[k];
  }
  m->raw_total = std::move(total);
  m->alpha_vec = std::move(alpha);
  m->alpha = sum / m->K;
  m->alpha_fitted = true;
  return TRIB_OK;
}

}  // namespace

#ifndef TRIB_LDA_VERSION
#define TRIB_LDA_VERSION "1.4.0"
#endif
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "lda", TRIB_LDA_VERSION,
                             "latent Dirichlet allocation, online (sdEM; local step CVB0, VI or collapsed Gibbs)");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (int rc = tributary::sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  tributary::lda::SelectCvb0Kernel();  // the CVB0 sweep kernel for this CPU (lda_cvb0.h)
  trib_family_vtable& v = out->family;
  v.create = Create;
  v.layout = Layout;
  v.init_stats = InitStats;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.fused_step = FusedStep;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.outputs = Outputs;
  v.component_terms = ComponentTerms;
  v.components = Components;
  v.completion = Completion;
  return TRIB_OK;
}
