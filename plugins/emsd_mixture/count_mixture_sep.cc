// The SEP hooks other than moment matching (sep_abi.h): support, feasibility,
// commit (which keeps the totals, count_mixture_totals.h), summary.
#include <algorithm>
#include <cmath>
#include <vector>

#include "count_mixture.h"
#include "count_mixture_totals.h"

namespace tributary::count_mixture {

// ---- SEP hooks ---------------------------------------------------------------

uint64_t NumParams(const trib_family_model* mm) { return M(mm)->P; }

int Support(const trib_family_model* mm, const trib_stats*, const trib_document* d, trib_delta* out, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    int rc = CheckDocument(m, d, err);
    if (rc != TRIB_OK) return rc;
    const size_t need = out->size + m.K + static_cast<size_t>(d->num_terms) * m.K * m.G;
    if (need > out->capacity && out->grow(out, need) != 0) return Fail(err, TRIB_ERR_NO_MEMORY, "support");
    size_t p = out->size;
    for (uint32_t k = 0; k < m.K; ++k) {
      out->index[p] = k;
      out->value[p++] = m.Prior(k);
    }
    for (uint32_t t = 0; t < d->num_terms; ++t) {
      for (uint32_t k = 0; k < m.K; ++k) {
        for (uint32_t c = 0; c < m.G; ++c) {
          const uint64_t i = m.Gauss(d->term_ids[t], k, c);
          out->index[p] = i;
          out->value[p++] = m.Prior(i);
        }
      }
    }
    out->size = p;
    return TRIB_OK;
  });
}

int Feasible(const trib_family_model* mm, const uint64_t* index, const double* lambda, size_t count, trib_error* err) {
  const Model& m = *M(mm);
  for (size_t j = 0; j < count; ++j) {
    const uint64_t i = index[j];
    const double v = lambda[j];
    if (!std::isfinite(v)) {
      return Fail(err, TRIB_ERR_NUMERIC, "natural parameter %llu is not finite", static_cast<unsigned long long>(i));
    }
    if (i < m.K) {
      if (!(v + 1.0 > 0))
        return Fail(err, TRIB_ERR_NUMERIC, "Dirichlet parameter of component %llu would be %g",
                    static_cast<unsigned long long>(i), v + 1.0);
      continue;
    }
    const uint64_t kc = (i - m.K) / m.V;
    const uint32_t c = static_cast<uint32_t>(kc % m.G);
    const bool shape = c % 2 == 0;
    if (shape ? !(v + 1.0 > 0) : !(v < 0)) {
      return Fail(err, TRIB_ERR_NUMERIC, "Gamma %s of the %s of component %llu, term %llu would be %g",
                  shape ? "shape" : "rate", c < 2 ? "shape" : "scale", static_cast<unsigned long long>(kc / m.G),
                  static_cast<unsigned long long>((i - m.K) % m.V), shape ? v + 1.0 : -v);
    }
  }
  return TRIB_OK;
}

int SepCommit(trib_family_model* mm, const trib_stats* s, const uint64_t* index, const double* old_mu, size_t count,
              const trib_sep_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    ++m->commits;
    if (step->n > 0 && step->n != m->n) {
      m->n = step->n;
      return RefreshTotals(m, *s, err);
    }
    // Periodic full recomputation, a safety net against rounding only (the
    // frames bound the truncation error): at least every max(refresh, V)
    // updates, O(K) amortised per update.
    if (m->refresh > 0 && m->commits % std::max<uint64_t>(m->refresh, m->V) == 0) return RefreshTotals(m, *s, err);
    const uint32_t K = m->K, G = m->G;
    if (count < K || (count - K) % (static_cast<size_t>(K) * G) != 0) return RefreshTotals(m, *s, err);
    // The support lists, per term, the G entries of each component in order,
    // so (shape, -rate) of a shape are adjacent (their indices differ by V).
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (index[j + 1] != i + m->V || i != m->Gauss((i - K) % m->V, k, 0)) return RefreshTotals(m, *s, err);
    }
    // 1. Remove the support terms' old values in the old frames. A term the
    //    series cannot represent marks its component for a refresh.
    std::vector<unsigned char>& stale = m->stale;  // 1: refresh component k
    stale.assign(K, 0);
    std::vector<double>& prior_mean = m->support_m0;  // per j / G
    prior_mean.resize(count / G + 1);
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      const uint64_t w = (i - K) % m->V;
      const double m0 = prior_mean[j / G] = m->ShapePriorMean(k, w);
      if (stale[k] != 0) continue;
      if (const int slot = ExactSlot(*m, k, w); slot >= 0) {
        ExactRemove(m, k, slot);
        continue;
      }
      const double pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
      const double ao = pa + m->n * old_mu[j], bo = pb - m->n * old_mu[j + 1];
      if (!SeriesTerm(m, k, RefOf(*m, k, ao, bo, pa, pb), -1.0)) stale[k] = 1;
    }
    // 2. Advance the frames: every other entry decayed (a - a0 and b - b0 by
    //    the factor `decay`) and the rates moved by the block delta.
    for (uint32_t k = 0; k < K; ++k) {
      m->frame_decay[k] *= step->decay;
      m->frame_shift[k] *= step->decay;
      const uint32_t b = m->GaussBlock(k, 1);
      if (step->block_delta != nullptr && b < step->num_blocks) m->frame_shift[k] -= step->block_delta[b];
      if (!(m->frame_decay[k] > 0.5)) stale[k] = 1;
    }
    // 3. Add the support terms' new values in the new frames.
    for (size_t j = K; j + 1 < count; j += G) {
      const uint64_t i = index[j];
      const uint32_t k = static_cast<uint32_t>(((j - K) / G) % K);
      if (stale[k] != 0) continue;
      const uint64_t w = (i - K) % m->V;
      const double m0 = prior_mean[j / G], pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
      const double an = pa + m->n * MuAt(*s, i, m->GaussBlock(k, 0));
      const double bn = pb - m->n * MuAt(*s, i + m->V, m->GaussBlock(k, 1));
      if (!AddTerm(m, k, w, an, bn, pa, pb)) stale[k] = 1;
    }
    // 4. The totals, or a refresh of the components whose bound is exceeded.
    for (uint32_t k = 0; k < K; ++k) {
      if (stale[k] == 0 && FrameTotals(m, k)) continue;
      ++m->drift_refreshes;
      if (int rc = RefreshComponent(m, *s, k, err); rc != TRIB_OK) return rc;
    }
    return TRIB_OK;
  });
}

int Summary(const trib_family_model* mm, const trib_stats* s, trib_sep_summary_sink* sink, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    const bool emsd = m.flavor == Flavor::kEmsd;
    std::vector<double> v(m.K);
    double A = 0;
    for (uint32_t k = 0; k < m.K; ++k) A += Posterior(m, *s, k) + 1.0;
    for (uint32_t k = 0; k < m.K; ++k) v[k] = (Posterior(m, *s, k) + 1.0) / A;  // E[pi_k] (§3.4.1)
    if (sink->put(sink, "mixing_weights", UINT32_MAX, v.data(), v.size()) != 0) return TRIB_ERR_INTERNAL;
    std::vector<double> mean(m.V), var(m.V);
    // EDCM's single parameter is beta in ch. 2's notation; EMSD's shape is alpha.
    const char* shape_mean = emsd ? "alpha_mean" : "beta_mean";
    const char* shape_var = emsd ? "alpha_variance" : "beta_variance";
    for (uint32_t k = 0; k < m.K; ++k) {
      for (uint64_t w = 0; w < m.V; ++w) {
        double a, b;
        GammaAt(m, *s, m.Gauss(w, k, 0), &a, &b);
        mean[w] = a / b;
        var[w] = a / (b * b);
      }
      if (sink->put(sink, shape_mean, k, mean.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (sink->put(sink, shape_var, k, var.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      if (emsd) {
        for (uint64_t w = 0; w < m.V; ++w) {
          if (m.learn_scale) {
            double a, b;
            GammaAt(m, *s, m.Gauss(w, k, 2), &a, &b);
            mean[w] = a / b;
            var[w] = a / (b * b);
          } else {
            mean[w] = 1.0;
            var[w] = 0.0;
          }
        }
        if (sink->put(sink, "beta_mean", k, mean.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
        if (sink->put(sink, "beta_variance", k, var.data(), m.V) != 0) return TRIB_ERR_INTERNAL;
      }
    }
    return TRIB_OK;
  });
}

// block_feasible (sep_abi.h): the only block sites are on the -rate block
// of each component's shapes (absent terms' evidence, "Moment matching").
// The new rate of an off-support term is b0 + decay (b - b0) - delta >=
// decay b - delta (b0 > 0), and b >= L_k, a lower bound on component k's
// current rates from the totals' frame ("Totals"): a series term has b =
// b0 + D y + Delta = D b' + (1 - D) b0 + Delta >= D min b' + Delta, with
// frame_min_rate[k] <= min b' (never raised between refreshes); the exact
// terms are evaluated one by one (O(E)). Conservative: a refused update
// might have been feasible; it is counted as skipped. Needed for EP, where
// a replaced block site can shrink (SEP and ADF only add r c < 0 to -rate,
// i.e. raise every rate).
int BlockFeasible(const trib_family_model* mm, const trib_stats*, uint32_t block, double decay, double delta,
                  trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    if (delta == 0.0) return TRIB_OK;
    for (uint32_t k = 0; k < m.K; ++k) {
      if (block != m.GaussBlock(k, 1)) continue;
      if (delta <= 0.0) return TRIB_OK;  // -rate falls: every rate grows (decay moves towards the prior)
      const double D = m.frame_decay[k], dl = m.frame_shift[k];
      double lower = D * m.frame_min_rate[k] + dl;
      const Model::Exact& ex = m.exact[k];
      for (size_t i = 0; i < ex.w.size(); ++i) {
        const double* q = &ex.p[4 * i];
        lower = std::min(lower, q[2] + D * q[3] + dl);
      }
      if (!(decay * lower - delta > 0)) {
        return Fail(err, TRIB_ERR_NUMERIC,
                    "the block site would lower every absent term's rate in component %u by %g, but a rate may be as "
                    "small as %g",
                    k, delta, decay * lower);
      }
      return TRIB_OK;
    }
    return Fail(err, TRIB_ERR_NUMERIC, "unexpected block site %g on block %u", delta, block);
  });
}

// move (sep_abi.h, ABI 1.9): revive a dead component by splitting the
// heaviest (count_mixture.h, "Revival"). Every N updates after the burn-in
// (N: the effective data-set size, i.e. once a pass, in its middle), from the
// family's own update count, so a resumed snapshot moves at the same points.
int Move(trib_family_model* mm, trib_stats* s, const trib_sep_step* step, uint32_t* moved, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    *moved = 0;
    const uint64_t period = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(m->n)));
    // Mid-pass (commits = N / 2, 3 N / 2, ...): half a pass is left to settle
    // the split before a pass, and a one-pass training, ends.
    if (!m->revive || m->K < 2 || step->engine != TRIB_SEP_ENGINE_SEP || m->Burning() ||
        m->commits % period != period / 2)
      return TRIB_OK;
    const uint32_t K = m->K;
    // The weights E[pi_k] = a_k / A; dead: below prune / K (pruned by score()).
    uint32_t h = 0, d = 0;
    double A = 0, a_h = -INFINITY, a_d = INFINITY;
    for (uint32_t k = 0; k < K; ++k) {
      const double a = Posterior(*m, *s, k) + 1.0;
      A += a;
      if (a > a_h) a_h = a, h = k;
      if (a < a_d) a_d = a, d = k;
    }
    if (h == d || !(a_d < m->prune * A / K)) return TRIB_OK;
    // mu at entry i of block b is written through the block's map.
    auto set = [&](uint64_t i, uint32_t b, double mu) {
      const trib_block& blk = s->blocks[b];
      s->raw[i] = (mu - blk.shift * blk.alpha_bar) / blk.scale;
    };
    // The weight: a_h and a_d become their mean (the same pi prior, so mu's).
    const double mp = 0.5 * (MuAt(*s, h, kBlockPi) + MuAt(*s, d, kBlockPi));
    // The shapes (and scales): each half gets half of h's evidence, lambda -
    // lambda0 = N mu halved, the shape's part scaled by exp(-+jitter u_w) in
    // h and d (u_w uniform in [-1, 1], a hash of (seed, revival, w); capped at
    // log 1.9): the two means move apart by about that factor. The priors
    // differ between components (their jitter), so the evidence is clamped to
    // keep every Gamma proper: shape >= a0 / 2, rate >= b0 / 2 of the
    // component's own prior (a0 = Prior + 1, b0 = -Prior). Checked before
    // anything is written.
    for (uint64_t w = 0; w < m->V; ++w) {
      for (uint32_t c = 0; c < m->G; ++c) {
        if (!std::isfinite(MuAt(*s, m->Gauss(w, h, c), m->GaussBlock(h, c)))) {
          return Fail(err, TRIB_ERR_NUMERIC, "revival: statistic %u of component %u, term %llu is not finite", c, h,
                      static_cast<unsigned long long>(w));
        }
      }
    }
    const uint64_t salt = SplitMix64(SplitMix64(m->seed ^ 0x7265766976ull) + m->revivals);
    const double cap = std::log(1.9), n = m->n;
    for (uint64_t w = 0; w < m->V; ++w) {
      const uint64_t hw = SplitMix64(salt ^ (w + 1));
      const double u = static_cast<double>(hw >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      const double e = std::exp(std::clamp(m->jitter * u, -cap, cap));
      for (uint32_t c = 0; c < m->G; ++c) {
        const double half = 0.5 * MuAt(*s, m->Gauss(w, h, c), m->GaussBlock(h, c));
        for (const uint32_t k : {h, d}) {
          const uint64_t i = m->Gauss(w, k, c);
          const double lambda0 = m->Prior(i);
          double mu;
          if (c % 2 == 0) {  // shape - 1: shape = a0 + N mu >= a0 / 2
            mu = std::max(c == 0 ? (k == d ? half * e : half / e) : half, -0.5 * (lambda0 + 1.0) / n);
          } else {  // -rate: rate = b0 - N mu >= b0 / 2
            mu = std::min(half, -0.5 * lambda0 / n);
          }
          set(i, m->GaussBlock(k, c), mu);
        }
      }
    }
    set(h, kBlockPi, mp);
    set(d, kBlockPi, mp);
    ++m->revivals;
    *moved = 1;
    return RefreshTotals(m, *s, err);
  });
}

const trib_sep_hooks kSepHooks = {
    sizeof(trib_sep_hooks), NumParams, Support, MomentMatch, Feasible, SepCommit, Summary, BlockFeasible, Move,
};

}  // namespace tributary::count_mixture
