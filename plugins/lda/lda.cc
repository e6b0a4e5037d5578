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
#include <memory>
#include <vector>

#include "lda_family.h"
#include "lda_model.h"
#include "lda_topics.h"
#include "tributary/plugin_sdk.h"
#include "tributary/simd.h"

// The family's entry points; the step's (accumulate, commit) are in
// lda_step.cc and the fused step in lda_fused.cc (lda_family.h). The model,
// the state and the local steps (the inference options above) are shared
// with lda_local.cc through lda_model.h.
namespace {

using tributary::lda::Accumulate;
using tributary::lda::Commit;
using tributary::lda::Cvb0LogPx;
using tributary::lda::DocumentElbo;
using tributary::lda::FastElbo;
using tributary::lda::FloorFor;
using tributary::lda::FusedStep;
using tributary::lda::Inference;
using tributary::lda::LabelledStep;
using tributary::lda::LambdaMap;
using tributary::lda::LocalStep;
using tributary::lda::M;
using tributary::lda::MapOf;
using tributary::lda::Model;
using tributary::lda::Positive;
using tributary::lda::RawForFloor;
using tributary::lda::RefitAlpha;
using tributary::lda::State;
using tributary::sdk::Fail;
using tributary::sdk::Guard;

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
