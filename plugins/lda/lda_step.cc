// The "lda" family's sdEM step (lda.cc's header comment): accumulate (the
// document's expected statistics: the topic rows, DLDA's label statistics,
// learn_alpha's E[log theta]), commit (the check-step on the touched entries)
// and learn_alpha's refit of alpha, which rebuild calls too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../shared/dirichlet_fit.h"
#include "lda_cvb0.h"
#include "lda_family.h"
#include "lda_model.h"
#include "lda_topics.h"
#include "tributary/plugin_sdk.h"

namespace tributary::lda {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

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

}  // namespace

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

namespace {

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

}  // namespace

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

// Check-step on the touched entries (CommitTopics: mu > 0, the totals
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

}  // namespace tributary::lda
