// The model: create (options, layout of the natural parameters, the
// quadrature for s), layout, init_stats, rebuild, state_create, and the
// sdEM entry points the family does not have.
#include <algorithm>
#include <cmath>
#include <memory>

#include "count_mixture.h"
#include "count_mixture_options.h"
#include "count_mixture_totals.h"

namespace tributary::count_mixture {

int Create(Flavor flavor, const trib_schema* schema, const trib_option* opts, size_t num, trib_family_model** out,
           trib_error* err) {
  return Guard(err, [&] {
    auto m = std::make_unique<Model>();
    m->flavor = flavor;
    m->name = flavor == Flavor::kEmsd ? "emsd-mixture" : "edcm-mixture";
    if (schema->vocab_size == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s needs a vocabulary of count features (vocab_size is 0)", m->name);
    }
    m->V = schema->vocab_size;
    sdk::OptionValues o;
    const trib_option_spec* table = flavor == Flavor::kEmsd ? kEmsdOptions : kEdcmOptions;
    if (int rc = sdk::ParseOptions(table, TRIB_KIND_FAMILY, m->name, opts, num, &o, err); rc != TRIB_OK) return rc;
    m->K = o.Integer<uint32_t>("components");
    m->samples_given = o.IsSet("samples");
    if (m->samples_given) m->S = o.Integer<uint32_t>("samples");
    m->monte_carlo = o.Is("integration", "montecarlo");
    m->refresh = o.Integer<uint64_t>("refresh");
    m->burn_in = o.Is("burn_in", "auto") ? -1 : o.Number("burn_in");
    m->absent = o.Is("absent", "propagate");
    m->dcm = o.Is("likelihood", "dcm");
    m->prune = o.Number("prune");
    m->kmeans_init = o.Is("init", "kmeans");
    m->revive = o.Is("revive", "split");
    m->pi_prior = o.Number("pi_prior");
    m->shape_mean = o.Number("shape_prior_mean");
    m->shape_var = o.HasValue("shape_prior_variance") ? o.Number("shape_prior_variance") : m->shape_mean;
    m->jitter = o.Number("init_jitter");
    if (flavor == Flavor::kEmsd) {
      m->learn_scale = o.Is("scale", "learn");
      m->scale_mean = o.Number("scale_prior_mean");
      m->scale_var = o.Number("scale_prior_variance");
    }
    m->G = m->learn_scale ? 4 : 2;
    const long double p = static_cast<long double>(m->K) * m->G * static_cast<long double>(m->V) + m->K;
    if (p > 1e10L) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "%s with %u components over %llu terms needs %.3Lg parameters (max 1e10)", m->name, m->K,
                  static_cast<unsigned long long>(m->V), p);
    }
    m->P = m->K + static_cast<uint64_t>(m->G) * m->K * m->V;
    m->total_mean.assign(m->K, 0.0);
    m->total_var.assign(m->K, 0.0);
    m->moments.assign(static_cast<size_t>(m->K) * kMoments, 0.0);
    m->frame_decay.assign(m->K, 1.0);
    m->frame_shift.assign(m->K, 0.0);
    m->frame_min_rate.assign(m->K, INFINITY);
    m->exact.assign(m->K, Model::Exact{});
    m->exact_count.assign(m->V, 0);
    m->exact_cap = static_cast<uint32_t>(std::clamp<uint64_t>(m->V / 64, 16, 256));
    // Quadrature for s: the S quantile midpoints of N(0, 1), equal weights
    // (Monte Carlo draws its points per document, in the state).
    if (m->monte_carlo && !m->samples_given) m->S = 100;  // the thesis's S (§3.3)
    m->z.resize(m->S);
    for (uint32_t i = 0; i < m->S; ++i) {
      m->z[i] = std::sqrt(2.0) * sdk::ErfInv(2.0 * (i + 0.5) / m->S - 1.0);
    }
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  const uint32_t nb = 2 + m->K * m->G;
  if (blocks == nullptr) {
    *num = nb;
    return TRIB_OK;
  }
  if (*num < nb) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", nb);
  blocks[kBlockPi] = trib_block{0, m->K, 0.0, 0.0, 1.0, 0.0};
  for (uint32_t k = 0; k < m->K; ++k) {
    for (uint32_t c = 0; c < m->G; ++c) {
      // alpha_bar = 1 on -rate of alpha: the block-uniform site of the terms
      // a document does not contain (see the header comment) is its shift.
      blocks[m->GaussBlock(k, c)] = trib_block{m->Gauss(0, k, c), m->V, 0.0, c == 1 ? 1.0 : 0.0, 1.0, 0.0};
    }
  }
  blocks[m->SeedBlock()] = trib_block{m->P, 1, 0.0, 0.0, 1.0, 0.0};
  *num = nb;
  return TRIB_OK;
}

int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    const Model& m = *M(mm);
    // The model starts at the prior: raw = 0 and no shift (Init sets shift = 1).
    for (uint32_t b = 0; b < s->num_blocks; ++b) const_cast<trib_block&>(s->blocks[b]).shift = 0.0;
    // The seed, stored exactly as a double (< 2^53).
    s->raw[m.P] = static_cast<double>(seed & ((UINT64_C(1) << 52) - 1)) / s->blocks[m.SeedBlock()].scale;
    return TRIB_OK;
  });
}

int Rebuild(trib_family_model* mm, trib_stats* s, const trib_step* step, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    if (step && step->n > 0 && std::isfinite(step->n)) m->n = step->n;
    const double seed = MuAt(*s, m->P, m->SeedBlock());
    if (!(seed >= 0) || seed > 0x1.0p53) return Fail(err, TRIB_ERR_NUMERIC, "stored seed %g is invalid", seed);
    m->seed = static_cast<uint64_t>(seed);
    for (uint32_t k = 0; k < m->K; ++k) {
      const double a = Posterior(*m, *s, k) + 1.0;
      if (!(a > 0) || !std::isfinite(a)) {
        return Fail(err, TRIB_ERR_NUMERIC, "posterior Dirichlet parameter of component %u is %g", k, a);
      }
    }
    if (m->learn_scale) {
      for (uint64_t i = 0; i < static_cast<uint64_t>(m->K) * m->V; ++i) {
        double a, b;
        GammaAt(*m, *s, m->Gauss(i % m->V, static_cast<uint32_t>(i / m->V), 2), &a, &b);
        if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
          return Fail(err, TRIB_ERR_NUMERIC, "posterior Gamma of a scale parameter is (%g, %g)", a, b);
        }
      }
    }
    return RefreshTotals(m, *s, err);
  });
}

int StateCreate(const trib_family_model*, uint64_t seed, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    auto* st = new State();
    st->rng.seed(SplitMix64(seed ^ 0x6d6f6e7465ull));
    *out = reinterpret_cast<trib_family_state*>(st);
    return TRIB_OK;
  });
}

int Accumulate(const trib_family_model* mm, const trib_stats*, trib_family_state*, const trib_document*, const double*,
               trib_delta*, trib_error* err) {
  return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s is trained with --engine sep, ep or adf (it has no sdEM update)",
              M(mm)->name);
}

int Commit(trib_family_model* mm, trib_stats*, const uint64_t*, const double*, size_t, const trib_step*,
           trib_error* err) {
  return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "%s is trained with --engine sep, ep or adf (it has no sdEM update)",
              M(mm)->name);
}

}  // namespace tributary::count_mixture
