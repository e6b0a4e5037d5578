// The "slda" family's local steps (slda.cc's header comment, "Estimation"):
// per document, with the topics at their point estimate, the step given a
// class (CVB0 with the class's alpha row, or MAP EM for theta) that
// accumulate pushes and the classifiers (slda_classify.cc) reuse.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../lda/lda_model.h"
#include "slda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::slda {

double LogSumExp(const double* x, uint32_t n) {
  double top = -HUGE_VAL;
  for (uint32_t i = 0; i < n; ++i) top = std::max(top, x[i]);
  if (!std::isfinite(top)) return top;
  double z = 0;
  for (uint32_t i = 0; i < n; ++i) z += std::exp(x[i] - top);
  return top + std::log(z);
}
double LogTotal(const Model& m, const trib_stats& s) {
  double total = 0;
  for (uint32_t c = 0; c < m.C; ++c) total += ClassCount(m, s, c);
  return std::log(total);
}

namespace {

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

}  // namespace

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

}  // namespace tributary::slda
