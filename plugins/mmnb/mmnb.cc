// Family "mmnb": mixed-membership naive Bayes (Shan & Banerjee 2010) over the
// dense features of the schema, learned online by sdEM.
//
// Model (§3, eq. 5): per document, memberships pi ~ Dirichlet(alpha); every
// non-missing feature j draws its own component z_j ~ discrete(pi) and its
// value from that component's distribution for feature j:
//   REAL feature         Gaussian  N(x; m_jc, s2_jc)           (MMNB-Gaussian, eq. 7)
//   COUNT feature        Poisson   x log l_jc - l_jc - log x!  (MMNB-Poisson, §7.2.1)
//   CATEGORICAL feature  discrete  p_jc(r)                     (MMNB-Discrete, eq. 8)
// Missing features are left out of the document's likelihood, of its local
// step and of its statistics (the paper's "marginal" NB, eq. 4). Terms of a
// bag of words are ignored.
//
// Local step per document (variational, §4.1 / §5.1; mmnb_local.cc), one of
//   inference=standard  eq. 13-14: gamma_c = alpha + sum_j phi_jc,
//                       phi_jc ∝ exp(Psi(gamma_c)) p(x_j | theta_jc);
//   inference=fast      eq. 23-24: gamma_c = alpha + m phi_c,
//                       phi_c ∝ exp(Psi(gamma_c)) (prod_j p(x_j | theta_jc))^(1/m),
// iterated from gamma = alpha + m/K until max_c |d gamma_c| < tol or
// max_iters. (Psi(sum_l gamma_l) is common to every c and cancels.)
//
// Statistics (sdEM, Table 2 with the variational expectations standing in
// for E_z[s], §3.5): per feature j and component c the expected sufficient
// statistics of the feature's distribution, with phi_jc (standard) or phi_c
// (fast) as the weight of the document's value in component c:
//   Gaussian  N_jc = E[sum phi], S_jc = E[sum phi x], V_jc = E[sum phi x^2]
//   Poisson   N_jc, S_jc
//   discrete  M_jcr = E[sum phi 1(x = r)]
// (eq. 16-20 / 25-28 as running averages). theta(mu):
//   m = S/N, s2 = V/N - m^2;  l = S/N;  p_jc(r) = M_jcr / T_jc, T_jc = sum_r M_jcr.
// Every block has nu = 0; the priors are pseudo-statistics abar (Dirichlet
// eq. 20 smoothing eps for M; Normal-Gamma with s pseudo-observations of
// mean 0 and variance v for (N, S, V); Gamma with s pseudo-observations of
// rate r for the Poisson (N, S)), so under nll with rho_t = 1/(1+t) and
// n = number of documents the statistics are the MAP estimates' averages.
// Layout: one block per statistic kind, feature-major, each (feature,
// category) a run of K components, so a document touches (3G + 2P + C) runs
// of K entries.
//
// Outputs. Default: TRIB_OUTPUTS_LATENT with K outputs, trained with nll on
// unlabelled documents (labels ignored): score_c = log(gamma_c / sum gamma) +
// L, where L is the evidence lower bound (eq. 47 / 54) estimating log p(x);
// accumulate weights the document by the sum of the loss's weights.
//
// discriminative=1 (DMMNB, §6.2-6.3, App. A.4): outputs are the schema's T
// classes; y ~ softmax(eta_1' zbar, ..., eta_{T-1}' zbar, 0) with zbar the
// mean of the z_j. The label's expected log-likelihood is bounded by eq. 42
// / 43 with the variational xi (Table 2 (c)), and enters the local step as the
// extra term (1/m) (eta_yc - sum_h exp(eta_hc) / xi) of phi (Table 2 (a)).
// eta has the closed form of §6.3, eta_hc = log(A_hc / B_c) with
//   A_hc = E[sum zbar_c 1(y = h)]  (h < T - 1),   B_c = E[sum zbar_c / xi],
// two more blocks of statistics (abar = label_prior each, so eta starts at 0:
// uniform classes). score_y runs the local step conditioned on y and writes
// its lower bound on log p(x, y); accumulate pushes sum_y w_y E[s | x, y].
// Trained with nll on labelled documents this is the paper's variational EM
// for DMMNB, online; ncll / hinge also work (the check-step absorbs negative
// weights).
//
// Check-step (sdEM Algorithm 1): the data part of every count-like statistic
// stays >= 0 (raw >= 0, i.e. mu >= shift * abar > 0: N, Poisson S, M, A, B),
// as Algorithm 2 does for word counts; for the Gaussian, after N,
//   V_jc >= (1 + 5e-14) S_jc^2 / N_jc + (rho/n) s v
// as in the "gaussian" family (repaired a few ulps above the bound). With
// nu = 0 an untouched entry moves only to f mu + rho abar / n, 0 < f <= 1,
// which keeps all of these (V - (1+e) S^2/N grows by rho s v/n at least).
// With rho = 0 (creation, snapshot load) feasible statistics are unchanged.
//
// learn_alpha=1 (Shan & Banerjee eq. 21 / 52, online): the membership prior
// becomes one alpha_c per component, learned. Its sufficient statistic is the
// documents' mean E[log pi_c] = psi(gamma_c) - psi(sum gamma) (eq. 21's data
// term): one more block of K statistics (nu = 0, starting at the value under
// the option alpha), accumulated as the others (sum_y w_y over the slots);
// rebuild and commit refit alpha to it by eq. 51's Newton step with eq. 52's
// line search, to convergence from the option's alpha (so alpha is a function
// of the statistics: no cache, resumed models continue bit for bit). This is
// the paper's M-step for alpha with the E-step's sums replaced by running
// averages, sdEM's reading of online EM. The check-step keeps the block a
// Dirichlet's possible mean log-memberships (t_c < 0, log sum exp t < 0).
//
// Options: components (alias topics) K >= 1 (default 5); inference
// standard|fast; max_iters (default 100); tol (default 1e-4); alpha (> 0,
// default 1/K); prior s (> 0, default 1); prior_variance v (default 1);
// prior_rate r (default 1); smoothing eps (default 1); discriminative 0|1;
// learn_alpha 0|1 (default 0; the option alpha is then its start);
// label_prior (default 1); init_spread (default 1: the spread of the random
// initial component means and proportions, in prior standard deviations);
// warmup W (default 0): the first W sdEM steps use the fast local step even
// with inference=standard. Fast's single phi per document ties a document's
// features to the same components, which avoids the local optimum where the
// standard step matches components differently in different features (seen
// on 2 of 5 initialisation seeds in tests/mmnb_family_test.cc without it).
// Schedules: with rho_0 = 1 (the nll default) the first document overwrites
// the random initialisation and every component starts from it; use e.g.
// --schedule poly --tau0 10 --kappa 0.7.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mmnb_model.h"
#include "tributary/plugin_sdk.h"

// The family's entry points; the check-step (rebuild, commit) is in
// mmnb_check.cc. The model, the state and the local step are shared with
// mmnb_local.cc through mmnb_model.h.
namespace {

using enum tributary::mmnb::Kind;
using enum tributary::mmnb::FeatureType;
using tributary::mmnb::Alpha;
using tributary::mmnb::B;
using tributary::mmnb::Commit;
using tributary::mmnb::Feature;
using tributary::mmnb::Infer;
using tributary::mmnb::M;
using tributary::mmnb::Model;
using tributary::mmnb::Prepare;
using tributary::mmnb::Rebuild;
using tributary::mmnb::State;
using tributary::sdk::Digamma;
using tributary::sdk::Fail;
using tributary::sdk::Guard;

namespace sdk = tributary::sdk;

// The options (`tributary plugins --options mmnb`); see the header comment.
constexpr trib_option_spec kOptions[] = {
    sdk::Integer("components", "5", "number of components K").AtLeast(1).AtMost(100000),
    sdk::Integer("topics", nullptr, "same as components (when both are given they must agree)")
        .AtLeast(1)
        .AtMost(100000),
    sdk::Choice("inference", "standard|fast", "standard", "the local step: standard (eq. 13-14) or fast (eq. 23-24)"),
    sdk::Integer("max_iters", "100", "local step: iterations at most").AtLeast(1).AtMost(100000),
    sdk::Number("tol", "0.0001", "local step: stop when no gamma moves by more").Above(0).AtMost(1e100),
    sdk::Number("alpha", "1/K", "Dirichlet prior of the memberships; learn: learned from 1/K (learn_alpha=1)")
        .Above(0)
        .AtMost(1e100)
        .Words("learn")
        .Derived(),
    sdk::Number("prior", "1", "prior pseudo-observations s (Gaussian, Poisson)").Above(0).AtMost(1e100),
    sdk::Number("prior_variance", "1", "prior variance v of the Gaussian features").Above(0).AtMost(1e100),
    sdk::Number("prior_rate", "1", "prior rate r of the Poisson features").Above(0).AtMost(1e100),
    sdk::Number("smoothing", "1", "prior count eps of every category").Above(0).AtMost(1e100),
    sdk::Boolean("discriminative", "0", "1: DMMNB, the outputs are the schema's classes"),
    sdk::Number("label_prior", "1", "DMMNB: prior of the label statistics").Above(0).AtMost(1e100),
    sdk::Boolean("learn_alpha", "0",
                 "1: learn the membership prior, one alpha_c per component (eq. 21 / 52 on the stream's E[log pi])"),
    sdk::Number("init_spread", "1", "spread of the random initial components, in prior standard deviations")
        .AtLeast(0)
        .AtMost(1e6),
    sdk::Integer("warmup", "0", "the first W steps use the fast local step").AtLeast(0).AtMost(1e9),
    {},
};

int Create(const trib_schema* schema, const trib_option* opts, size_t num_opts, trib_family_model** out,
           trib_error* err) {
  return Guard(err, [&] {
    auto m = std::make_unique<Model>();
    sdk::OptionValues opt;
    if (int rc = sdk::ParseOptions(kOptions, TRIB_KIND_FAMILY, "mmnb", opts, num_opts, &opt, err); rc != TRIB_OK) {
      return rc;
    }
    if (opt.IsSet("components") && opt.IsSet("topics") && opt.Text("components") != opt.Text("topics")) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "options components='%s' and topics='%s' disagree (both set the number of components)",
                  opt.Text("components").c_str(), opt.Text("topics").c_str());
    }
    m->K = opt.Integer<uint32_t>(opt.IsSet("topics") ? "topics" : "components");
    m->fast = opt.Is("inference", "fast");
    m->max_iters = opt.Integer<uint32_t>("max_iters");
    m->tol = opt.Number("tol");
    const bool alpha_learn = opt.HasValue("alpha") && opt.Is("alpha", "learn");  // alpha=learn: learn_alpha=1 from 1/K
    if (opt.HasValue("alpha") && !alpha_learn) m->alpha = opt.Number("alpha");   // else 1/K (Alpha)
    m->prior = opt.Number("prior");
    m->prior_variance = opt.Number("prior_variance");
    m->prior_rate = opt.Number("prior_rate");
    m->smoothing = opt.Number("smoothing");
    m->discriminative = opt.Flag("discriminative");
    m->label_prior = opt.Number("label_prior");
    m->learn_alpha = opt.Flag("learn_alpha") || alpha_learn;
    m->alpha_vec.assign(m->K, tributary::mmnb::Alpha(*m));
    m->init_spread = opt.Number("init_spread");
    m->warmup = opt.Integer<uint64_t>("warmup");
    // Features.
    m->num_reals = schema->num_reals;
    m->C = schema->num_categoricals;
    m->real_type.resize(m->num_reals);
    m->real_slot.resize(m->num_reals);
    for (uint32_t i = 0; i < m->num_reals; ++i) {
      const uint32_t kind = schema->real_kinds ? schema->real_kinds[i] : static_cast<uint32_t>(TRIB_FEATURE_REAL);
      if (kind == TRIB_FEATURE_REAL) {
        m->real_type[i] = kGauss;
        m->real_slot[i] = m->G++;
      } else if (kind == TRIB_FEATURE_COUNT) {
        m->real_type[i] = kPoisson;
        m->real_slot[i] = m->P++;
      } else {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "mmnb: real feature %u has unsupported kind %u", i, kind);
      }
    }
    if (m->num_reals == 0 && m->C == 0) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "mmnb needs dense features in the schema (REAL, COUNT or CATEGORICAL; bag-of-words terms are "
                  "ignored), found none");
    }
    m->card.assign(schema->categorical_cardinalities, schema->categorical_cardinalities + m->C);
    for (uint32_t j = 0; j < m->C; ++j) {
      if (m->card[j] == 0) {
        return Fail(err, TRIB_ERR_INVALID_ARGUMENT, "mmnb: categorical feature %u has no categories", j);
      }
    }
    m->T = schema->num_classes;
    if (m->discriminative && m->T < 2) {
      return Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                  "mmnb discriminative=1 needs >= 2 classes in the schema (the label term of DMMNB), found %u", m->T);
    }
    // Layout.
    const uint64_t K = m->K;
    uint64_t sizes[kNumKinds] = {};
    sizes[kGN] = sizes[kGS] = sizes[kGV] = K * m->G;
    sizes[kPN] = sizes[kPS] = K * m->P;
    uint64_t cats = 0;
    for (uint32_t c : m->card) cats += c;
    sizes[kCat] = K * cats;
    if (m->discriminative) {
      sizes[kLA] = K * m->H();
      sizes[kLB] = K;
    }
    if (m->learn_alpha) sizes[kLogPi] = K;
    uint64_t o = 0;
    m->num_blocks = 0;
    for (uint32_t k = 0; k < kNumKinds; ++k) {
      m->off[k] = o;
      if (sizes[k] > 0) m->block_of[k] = static_cast<int>(m->num_blocks++);
      o += sizes[k];
    }
    m->off[kNumKinds] = o;
    m->cat_off.resize(m->C + 1);
    uint64_t co = m->off[kCat];
    for (uint32_t j = 0; j < m->C; ++j) {
      m->cat_off[j] = co;
      co += K * m->card[j];
    }
    m->cat_off[m->C] = co;
    m->cat_total.assign(static_cast<size_t>(K) * m->C, 0.0);
    *out = reinterpret_cast<trib_family_model*>(m.release());
    return TRIB_OK;
  });
}

double AbarOf(const Model& m, uint32_t kind) {
  switch (kind) {
    case kGN:
    case kPN:
      return m.prior;
    case kGS:
      return 0.0;  // prior mean 0
    case kGV:
      return m.prior * m.prior_variance;
    case kPS:
      return m.prior * m.prior_rate;
    case kCat:
      return m.smoothing;
    case kLogPi:  // E[log pi_c] under Dirichlet(alpha0): alpha starts at the option's value
      return Digamma(Alpha(m)) - Digamma(Alpha(m) * m.K);
    default:
      return m.label_prior;
  }
}

int Layout(const trib_family_model* mm, trib_block* blocks, uint32_t* num, trib_error* err) {
  const Model* m = M(mm);
  if (blocks == nullptr) {
    *num = m->num_blocks;
    return TRIB_OK;
  }
  if (*num < m->num_blocks) return Fail(err, TRIB_ERR_INTERNAL, "layout needs room for %u blocks", m->num_blocks);
  for (uint32_t k = 0; k < kNumKinds; ++k) {
    if (m->block_of[k] < 0) continue;
    blocks[m->block_of[k]] = trib_block{m->off[k], m->off[k + 1] - m->off[k], 0.0, AbarOf(*m, k), 1.0, 0.0};
  }
  *num = m->num_blocks;
  return TRIB_OK;
}

int Outputs(const trib_family_model* mm, uint32_t* kind, uint32_t* count, trib_error*) {
  const Model* m = M(mm);
  *kind = m->discriminative ? TRIB_OUTPUTS_CLASSES : TRIB_OUTPUTS_LATENT;
  *count = m->Outputs();
  return TRIB_OK;
}

// Random symmetry breaking (all components at the prior would stay identical
// forever): component c of Gaussian feature g gets mean spread * sqrt(v) * u
// with u ~ N(0, 1) and keeps variance v; Poisson rates and categorical
// pseudo-counts get factors in [1 - spread/2, 1 + spread/2] (at least 0).
int InitStats(trib_family_model* mm, trib_stats* s, uint64_t seed, trib_error* err) {
  return Guard(err, [&] {
    Model* m = M(mm);
    std::mt19937_64 rng(seed ^ 0x6d6d6e62ull);
    auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
    auto normal = [&] {
      const double u1 = uniform(), u2 = uniform();
      return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    };
    const double sp = m->init_spread;
    const uint64_t K = m->K;
    for (uint64_t i = 0; i < K * m->G; ++i) {
      const double mean = sp * std::sqrt(m->prior_variance) * normal();
      s->raw[m->off[kGS] + i] = m->prior * mean;
      s->raw[m->off[kGV] + i] = m->prior * mean * mean;
    }
    for (uint64_t i = 0; i < K * m->P; ++i) {
      s->raw[m->off[kPS] + i] = std::max(0.0, m->prior * m->prior_rate * sp * (uniform() - 0.5));
    }
    for (uint64_t i = m->off[kCat]; i < m->off[kCat + 1]; ++i) {
      s->raw[i] = std::max(0.0, m->smoothing * sp * (uniform() - 0.5));
    }
    return TRIB_OK;
  });
}

int StateCreate(const trib_family_model*, uint64_t, trib_family_state** out, trib_error* err) {
  return Guard(err, [&] {
    *out = reinterpret_cast<trib_family_state*>(new State());
    return TRIB_OK;
  });
}

int Score(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d, double* out,
          trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    State* st = reinterpret_cast<State*>(ss);
    st->valid = false;
    int rc = Prepare(*m, *s, d, st, err);
    if (rc != TRIB_OK) return rc;
    const uint32_t K = m->K;
    const uint32_t slots = m->discriminative ? m->T : 1;
    const size_t mf = st->feats.size();
    st->fast = m->FastNow();
    st->phi.resize(static_cast<size_t>(slots) * (st->fast ? K : mf * K));
    st->gamma.resize(static_cast<size_t>(slots) * K);
    st->zbar.resize(static_cast<size_t>(slots) * K);
    st->xi.resize(slots);
    if (m->discriminative) {
      for (uint32_t y = 0; y < m->T; ++y) out[y] = Infer(*m, st, y, y);
    } else {
      const double L = Infer(*m, st, 0, -1);
      double gsum = 0;
      for (uint32_t c = 0; c < K; ++c) gsum += st->gamma[c];
      // log E[pi_c] + L: softmax = memberships, log-sum-exp = L (the LATENT contract).
      for (uint32_t c = 0; c < K; ++c) out[c] = std::log(st->gamma[c] / gsum) + L;
    }
    for (uint32_t k = 0; k < m->Outputs(); ++k) {
      if (!std::isfinite(out[k])) {
        return Fail(err, TRIB_ERR_NUMERIC, "score of output %u is %g", k, out[k]);
      }
    }
    st->valid = true;
    st->doc_index = d->index;
    st->doc_ptr = d;
    return TRIB_OK;
  });
}

// Appends sum_k w_k E[s | x (, y = k)] (Table 2): per present feature the
// component weights q_jc = sum_y w_y phi^(y)_jc times the feature's
// statistics, plus the label statistics A, B in discriminative mode.
int Accumulate(const trib_family_model* mm, const trib_stats* s, trib_family_state* ss, const trib_document* d,
               const double* w, trib_delta* delta, trib_error* err) {
  return Guard(err, [&] {
    const Model* m = M(mm);
    State* st = reinterpret_cast<State*>(ss);
    if (!st->valid || st->doc_index != d->index || st->doc_ptr != d) {
      // Not right after score() on this document: redo the local step.
      std::vector<double> tmp(m->Outputs());
      int rc = Score(mm, s, ss, d, tmp.data(), err);
      if (rc != TRIB_OK) return rc;
    }
    const uint32_t K = m->K;
    const size_t mf = st->feats.size();
    const uint32_t slots = m->discriminative ? m->T : 1;
    // Slot weights.
    std::vector<double>& sw = st->work;
    sw.assign(slots, 0.0);
    if (m->discriminative) {
      for (uint32_t y = 0; y < m->T; ++y) sw[y] = w[y];
    } else {
      double tot = 0;
      for (uint32_t k = 0; k < K; ++k) tot += w[k];
      sw[0] = tot;
    }
    bool any = false;
    for (uint32_t y = 0; y < slots; ++y) any |= sw[y] != 0.0;
    if (!any) return TRIB_OK;
    // q: m x K (standard) or K (fast) combined component weights.
    const size_t qn = st->fast ? K : mf * K;
    std::vector<double>& q = st->q;
    q.assign(qn, 0.0);
    for (uint32_t y = 0; y < slots; ++y) {
      if (sw[y] == 0.0) continue;
      const double* phi = st->phi.data() + static_cast<size_t>(y) * qn;
      for (size_t i = 0; i < qn; ++i) q[i] += sw[y] * phi[i];
    }
    size_t need = delta->size;
    for (const Feature& f : st->feats) need += (f.type == kGauss ? 3u : f.type == kPoisson ? 2u : 1u) * K;
    if (m->discriminative) need += static_cast<size_t>(m->H() + 1) * K;
    if (m->learn_alpha) need += K;
    if (need > delta->capacity && delta->grow(delta, need) != 0) {
      return Fail(err, TRIB_ERR_NO_MEMORY, "cannot grow delta to %zu entries", need);
    }
    size_t p = delta->size;
    auto run = [&](uint64_t base, const double* qq, double mult) {
      for (uint32_t c = 0; c < K; ++c) {
        delta->index[p] = base + c;
        delta->value[p++] = qq[c] * mult;
      }
    };
    for (size_t fi = 0; fi < mf; ++fi) {
      const Feature& f = st->feats[fi];
      const double* qq = st->fast ? q.data() : q.data() + fi * K;
      const uint64_t base = static_cast<uint64_t>(f.slot) * K;
      if (f.type == kGauss) {
        // N run before V run: Commit checks V against the clamped N.
        run(m->off[kGN] + base, qq, 1.0);
        run(m->off[kGS] + base, qq, f.x);
        run(m->off[kGV] + base, qq, f.x * f.x);
      } else if (f.type == kPoisson) {
        run(m->off[kPN] + base, qq, 1.0);
        run(m->off[kPS] + base, qq, f.x);
      } else {
        run(m->cat_off[f.slot] + static_cast<uint64_t>(f.cat) * K, qq, 1.0);
      }
    }
    if (m->discriminative) {
      // A_hc += w_h zbar^(h)_c (h < T - 1);  B_c += sum_y w_y zbar^(y)_c / xi^(y).
      const uint32_t H = m->H();
      for (uint32_t h = 0; h < H; ++h) {
        const double* zb = st->zbar.data() + static_cast<size_t>(h) * K;
        run(m->off[kLA] + static_cast<uint64_t>(h) * K, zb, sw[h]);
      }
      std::vector<double>& bsum = st->work2;
      bsum.assign(K, 0.0);
      for (uint32_t y = 0; y < m->T; ++y) {
        if (sw[y] == 0.0) continue;
        const double* zb = st->zbar.data() + static_cast<size_t>(y) * K;
        for (uint32_t c = 0; c < K; ++c) bsum[c] += sw[y] * zb[c] / st->xi[y];
      }
      run(m->off[kLB], bsum.data(), 1.0);
    }
    if (m->learn_alpha) {
      // t_c += sum_y w_y E[log pi_c | x (, y)] = psi(gamma^(y)_c) - psi(sum gamma^(y)): eq. 21's data term.
      std::vector<double>& lp = st->work2;
      lp.assign(K, 0.0);
      for (uint32_t y = 0; y < slots; ++y) {
        if (sw[y] == 0.0) continue;
        const double* g = st->gamma.data() + static_cast<size_t>(y) * K;
        double gsum = 0;
        for (uint32_t c = 0; c < K; ++c) gsum += g[c];
        const double psum = Digamma(gsum);
        for (uint32_t c = 0; c < K; ++c) lp[c] += sw[y] * (Digamma(g[c]) - psum);
      }
      run(m->off[kLogPi], lp.data(), 1.0);
    }
    delta->size = p;
    st->valid = false;
    return TRIB_OK;
  });
}

// Each present feature is one "token" of the paper's perplexity (eq. 44).
double PerplexityTokens(const trib_family_model* mm, const trib_document* d) {
  const Model* m = M(mm);
  double n = 0;
  for (uint32_t i = 0; i < m->num_reals && i < d->num_reals; ++i) n += !(d->real_missing && d->real_missing[i]);
  for (uint32_t j = 0; j < m->C && j < d->num_categoricals; ++j) {
    n += !(d->categorical_missing && d->categorical_missing[j]);
  }
  return n;
}

// The categorical totals are kept incrementally by Commit; a resumed model
// must continue with the same running sums (ABI 1.1).
int ExportCache(const trib_family_model* mm, double* out, size_t* size, trib_error*) {
  return tributary::sdk::ExportCache(out, size, M(mm)->cat_total);
}

int ImportCache(trib_family_model* mm, const double* in, size_t size, trib_error* err) {
  return tributary::sdk::ImportCache(in, size, err, "categorical features x components", M(mm)->cat_total);
}

}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "mmnb", "1.1.0",  // 1.1.0: learn_alpha (1.0.0 snapshots load)
                             "mixed-membership naive Bayes over Gaussian, Poisson and categorical features "
                             "(Shan & Banerjee 2010; optional DMMNB label term)");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  if (int rc = tributary::sdk::BeginFamilyVtable<Model, State>(host, out, err); rc != TRIB_OK) return rc;
  trib_family_vtable& v = out->family;
  v.create = Create;
  v.layout = Layout;
  v.init_stats = InitStats;
  v.rebuild = Rebuild;
  v.state_create = StateCreate;
  v.score = Score;
  v.accumulate = Accumulate;
  v.commit = Commit;
  v.perplexity_tokens = PerplexityTokens;
  v.export_cache = ExportCache;
  v.import_cache = ImportCache;
  v.outputs = Outputs;
  return TRIB_OK;
}
