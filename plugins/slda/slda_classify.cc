// The "slda" family's classifiers (slda.cc's header comment,
// "Classification"): score(c) for every class by cvb0-2 (eq. 16), cvb0-1
// (eq. 9) or map (eq. 15), and the topic proportions (ABI 1.8) of the same
// runs. They only score: the statistics never depend on them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../lda/lda_math.h"
#include "../lda/lda_model.h"
#include "slda_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::slda {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;

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

}  // namespace

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

}  // namespace tributary::slda
