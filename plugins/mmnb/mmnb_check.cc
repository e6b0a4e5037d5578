// The "mmnb" family's check-step (sdEM Algorithm 2's, for the family's
// statistics): rebuild checks every statistic and recomputes the categorical
// totals, commit the touched entries and keeps the totals; both keep each
// Gaussian variance positive, every count >= 0 and learn_alpha's E[log pi]
// feasible, then refit alpha (mmnb.cc's header comment explains the
// statistics and their layout).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mmnb_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::mmnb {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Guard;
using tributary::sdk::Mu;
using tributary::sdk::RawFor;

constexpr double kAcceptRel = 5e-14;
constexpr double kTargetRel = 1e-13;
constexpr double kRepairVarGap = 1e-8;

// A few ulps of the largest magnitude involved in mu = scale*raw + shift*abar.
inline double Ulps(const trib_stats& s, uint32_t b, double target) {
  const trib_block& blk = s.blocks[b];
  return 16.0 * DBL_EPSILON * (2.0 * std::fabs(blk.shift * blk.alpha_bar) + std::fabs(target));
}

// The Gaussian check of (g, c): N already non-negative in raw; V against S.
int CheckGauss(const Model& m, trib_stats* s, uint64_t gc, double r, trib_error* err) {
  const uint32_t bn = B(m, kGN), bs = B(m, kGS), bv = B(m, kGV);
  const double n = Mu(*s, bn, m.off[kGN] + gc);
  const double sv = Mu(*s, bs, m.off[kGS] + gc);
  const double v = Mu(*s, bv, m.off[kGV] + gc);
  const double q = sv * sv / n;
  if (!std::isfinite(n) || !std::isfinite(sv) || !std::isfinite(v) || !std::isfinite(q) || !(n > 0)) {
    return Fail(err, TRIB_ERR_NUMERIC,
                "statistics of Gaussian feature %llu, component %llu are not finite or N <= 0 (N = %g, S = %g, V = %g)",
                static_cast<unsigned long long>(gc / m.K), static_cast<unsigned long long>(gc % m.K), n, sv, v);
  }
  const double rv = r * s->blocks[bv].alpha_bar;
  if (!(v >= q + kAcceptRel * q + rv) || !(v > q)) {
    const double gap = rv > 0 ? rv : kRepairVarGap * n;
    const double target = q + kTargetRel * q + gap;
    const uint64_t i = m.off[kGV] + gc;
    s->raw[i] = RawFor(*s, bv, target + Ulps(*s, bv, target));
    const double nv = Mu(*s, bv, i);
    if (!(nv > q) || !std::isfinite(nv)) {
      return Fail(err, TRIB_ERR_NUMERIC,
                  "cannot restore a positive variance for Gaussian feature %llu (N = %g, V = %g)",
                  static_cast<unsigned long long>(gc / m.K), n, nv);
    }
  }
  return TRIB_OK;
}

inline uint32_t KindOf(const Model& m, uint64_t i) {
  uint32_t k = 0;
  while (k + 1 < kNumKinds && i >= m.off[k + 1]) ++k;
  return k;
}

// Categorical feature of an index in the categorical block.
inline uint32_t CatFeatureOf(const Model& m, uint64_t i) {
  auto it = std::upper_bound(m.cat_off.begin(), m.cat_off.end(), i);
  return static_cast<uint32_t>((it - m.cat_off.begin()) - 1);
}

inline void ClampRaw(double* raw) {
  if (!(*raw >= 0)) *raw = std::isnan(*raw) ? *raw : 0.0;
}

// learn_alpha: the check-step of the E[log pi] statistics (a Dirichlet's
// mean log-memberships satisfy t_c < 0 and log sum_c exp(t_c) < 0, which
// running averages of documents keep under nll; a loss with negative weights
// may leave the set, and then every t_c is lowered until it is back), then
// alpha refitted (FitAlpha, eq. 21 / 52).
int RefitAlpha(Model* m, trib_stats* s, trib_error* err) {
  if (!m->learn_alpha) return TRIB_OK;
  const uint32_t K = m->K, b = B(*m, kLogPi);
  std::vector<double> t(K);
  double top = -HUGE_VAL;
  for (uint32_t c = 0; c < K; ++c) {
    t[c] = Mu(*s, b, m->off[kLogPi] + c);
    if (!std::isfinite(t[c])) return Fail(err, TRIB_ERR_NUMERIC, "E[log pi] statistic of component %u is %g", c, t[c]);
    top = std::max(top, t[c]);
  }
  double z = 0;
  for (uint32_t c = 0; c < K; ++c) z += std::exp(t[c] - top);
  const double lse = top + std::log(z);
  constexpr double kMargin = 1e-6;
  if (!(lse < -kMargin)) {
    for (uint32_t c = 0; c < K; ++c) {
      t[c] -= lse + 2 * kMargin;
      s->raw[m->off[kLogPi] + c] = RawFor(*s, b, t[c]);
    }
  }
  FitAlpha(*m, t.data(), &m->alpha_vec);
  for (uint32_t c = 0; c < K; ++c) {
    if (!(m->alpha_vec[c] > 0) || !std::isfinite(m->alpha_vec[c])) {
      return Fail(err, TRIB_ERR_NUMERIC, "learned alpha of component %u is %g", c, m->alpha_vec[c]);
    }
  }
  return TRIB_OK;
}

// rebuild() gets t = updates so far (creation, load) or the step's t (a
// re-materialised step), commit() the step's t: after the step, t + 1 steps.
void CacheStep(Model* m, const trib_step* step, bool after_step) {
  if (!step) return;
  if (step->n > 0 && std::isfinite(step->n)) m->n = step->n;
  m->updates = step->t + (after_step ? 1 : 0);
}

}  // namespace

// Check-step on everything and the totals, O(model).
int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    CacheStep(m, step, step && step->rho > 0);
    const double r = (step && step->n > 0 && step->rho > 0) ? step->rho / step->n : 0.0;
    for (uint64_t i = 0; i < s->size; ++i) {
      if (!std::isfinite(s->raw[i])) {
        return Fail(err, TRIB_ERR_NUMERIC, "statistic %llu is not finite (%g)", static_cast<unsigned long long>(i),
                    s->raw[i]);
      }
    }
    for (uint32_t k : {kGN, kPN, kPS, kCat, kLA, kLB}) {
      for (uint64_t i = m->off[k]; i < m->off[k + 1]; ++i) ClampRaw(&s->raw[i]);
    }
    const uint64_t K = m->K;
    for (uint64_t gc = 0; gc < K * m->G; ++gc) {
      int rc = CheckGauss(*m, s, gc, r, err);
      if (rc != TRIB_OK) return rc;
    }
    std::fill(m->cat_total.begin(), m->cat_total.end(), 0.0);
    for (uint32_t j = 0; j < m->C; ++j) {
      double* tot = m->cat_total.data() + static_cast<size_t>(j) * K;
      for (uint32_t rr = 0; rr < m->card[j]; ++rr) {
        const double* row = s->raw + m->cat_off[j] + rr * K;
        for (uint64_t c = 0; c < K; ++c) tot[c] += row[c];
      }
    }
    return RefitAlpha(m, s, err);
  });
}

// Check-step on the touched entries and the categorical totals, O(count).
// Accumulate writes each Gaussian feature's N run before its V run, so V is
// checked against the N of this step's check.
int Commit(trib_family_model* mm, trib_stats* s, const uint64_t* idx, const double* old_raw, size_t count,
           const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    CacheStep(m, step, true);
    const double r = (step && step->n > 0 && step->rho > 0) ? step->rho / step->n : 0.0;
    const uint64_t K = m->K;
    uint64_t cat_lo = 1, cat_hi = 0;  // current categorical feature's range
    double* tot = nullptr;
    bool log_pi = false;
    for (size_t t = 0; t < count; ++t) {
      const uint64_t i = idx[t];
      const uint32_t kind = KindOf(*m, i);
      switch (kind) {
        case kGS:
          break;
        case kLogPi:  // negative by nature; checked as a whole below
          log_pi = true;
          break;
        case kGV: {
          int rc = CheckGauss(*m, s, i - m->off[kGV], r, err);
          if (rc != TRIB_OK) return rc;
          break;
        }
        case kCat: {
          if (i < cat_lo || i >= cat_hi) {
            const uint32_t j = CatFeatureOf(*m, i);
            cat_lo = m->cat_off[j];
            cat_hi = m->cat_off[j + 1];
            tot = m->cat_total.data() + static_cast<size_t>(j) * K;
          }
          ClampRaw(&s->raw[i]);
          tot[(i - cat_lo) % K] += s->raw[i] - old_raw[t];
          break;
        }
        default:
          ClampRaw(&s->raw[i]);
          break;
      }
      if (!std::isfinite(s->raw[i])) {
        return Fail(err, TRIB_ERR_NUMERIC, "statistic %llu became %g", static_cast<unsigned long long>(i), s->raw[i]);
      }
    }
    return log_pi ? RefitAlpha(m, s, err) : TRIB_OK;
  });
}

}  // namespace tributary::mmnb
