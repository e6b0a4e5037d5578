// The variational local step of the "mmnb" family (Shan & Banerjee 2010,
// §4.1 / §5.1): per document, the present features' log-likelihoods under
// every component (Prepare), then the fixed-point iterations of gamma and phi,
// standard or fast, with the DMMNB label term, and the document's lower bound
// (Infer). score() and accumulate() (mmnb.cc) drive it; the equations are
// explained in mmnb.cc's header comment, "Local step per document".
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../shared/dirichlet_fit.h"
#include "mmnb_model.h"
#include "tributary/plugin_sdk.h"

namespace tributary::mmnb {
namespace {

using tributary::sdk::Fail;
using tributary::sdk::Mu;

using tributary::sdk::Digamma;
using tributary::sdk::Trigamma;
inline double LogGamma(double x) { return tributary::sdk::Lgamma(x); }

constexpr double kMaxAbsX = 1e100;
constexpr double kLog2Pi = 1.8378770664093454836;

}  // namespace

double Alpha(const Model& m) { return m.alpha > 0 ? m.alpha : 1.0 / static_cast<double>(m.K); }

uint32_t FitAlpha(const Model& m, const double* t, std::vector<double>* out) {
  return dirichlet::FitDirichlet(t, m.K, Alpha(m), Digamma, Trigamma, out);
}

namespace {}  // namespace

// Collects the present features and log p(x_j | theta_jc) for every c.
int Prepare(const Model& m, const trib_stats& s, const trib_document* d, State* st, trib_error* err) {
  if (d->num_reals != m.num_reals || d->num_categoricals != m.C) {
    return Fail(err, TRIB_ERR_INVALID_DOCUMENT,
                "mmnb expects %u real/count and %u categorical features, found %u and %u", m.num_reals, m.C,
                d->num_reals, d->num_categoricals);
  }
  st->feats.clear();
  for (uint32_t i = 0; i < m.num_reals; ++i) {
    if (d->real_missing && d->real_missing[i]) continue;
    const double x = d->reals[i];
    if (!(std::fabs(x) <= kMaxAbsX)) {
      return Fail(err, TRIB_ERR_INVALID_DOCUMENT, "real feature %u is %g; mmnb supports |x| <= %g", i, x, kMaxAbsX);
    }
    if (m.real_type[i] == kPoisson && !(x >= 0 && x == std::floor(x))) {
      return Fail(err, TRIB_ERR_INVALID_DOCUMENT, "count feature %u is %g, expected an integer >= 0", i, x);
    }
    st->feats.push_back(Feature{m.real_type[i], m.real_slot[i], x, 0});
  }
  for (uint32_t j = 0; j < m.C; ++j) {
    if (d->categorical_missing && d->categorical_missing[j]) continue;
    if (d->categoricals[j] >= m.card[j]) {
      return Fail(err, TRIB_ERR_INVALID_DOCUMENT, "categorical feature %u is %u, expected < %u", j, d->categoricals[j],
                  m.card[j]);
    }
    st->feats.push_back(Feature{kCategorical, j, 0.0, d->categoricals[j]});
  }
  const uint32_t K = m.K;
  const size_t mf = st->feats.size();
  st->ll.resize(mf * K);
  st->llsum.assign(K, 0.0);
  for (size_t f = 0; f < mf; ++f) {
    const Feature& ft = st->feats[f];
    double* ll = st->ll.data() + f * K;
    if (ft.type == kGauss) {
      const uint64_t base = static_cast<uint64_t>(ft.slot) * K;
      const uint32_t bn = B(m, kGN), bs = B(m, kGS), bv = B(m, kGV);
      for (uint32_t c = 0; c < K; ++c) {
        const double n = Mu(s, bn, m.off[kGN] + base + c);
        const double mean = Mu(s, bs, m.off[kGS] + base + c) / n;
        const double var = Mu(s, bv, m.off[kGV] + base + c) / n - mean * mean;
        if (!(var > 0) || !std::isfinite(var)) {
          return Fail(err, TRIB_ERR_NUMERIC, "variance of Gaussian feature %u, component %u is %g, expected > 0",
                      ft.slot, c, var);
        }
        const double dx = ft.x - mean;
        ll[c] = -0.5 * (kLog2Pi + std::log(var) + dx * dx / var);
      }
    } else if (ft.type == kPoisson) {
      const uint64_t base = static_cast<uint64_t>(ft.slot) * K;
      const uint32_t bn = B(m, kPN), bs = B(m, kPS);
      const double lfact = LogGamma(ft.x + 1.0);
      for (uint32_t c = 0; c < K; ++c) {
        const double rate = Mu(s, bs, m.off[kPS] + base + c) / Mu(s, bn, m.off[kPN] + base + c);
        if (!(rate > 0) || !std::isfinite(rate)) {
          return Fail(err, TRIB_ERR_NUMERIC, "rate of count feature %u, component %u is %g, expected > 0", ft.slot, c,
                      rate);
        }
        ll[c] = ft.x * std::log(rate) - rate - lfact;
      }
    } else {
      const uint32_t bc = B(m, kCat);
      const trib_block& blk = s.blocks[bc];
      const double row_prior = blk.shift * blk.alpha_bar;
      const double tot_prior = row_prior * m.card[ft.slot];
      const double* row = s.raw + m.cat_off[ft.slot] + static_cast<uint64_t>(ft.cat) * K;
      const double* tot = m.cat_total.data() + static_cast<size_t>(ft.slot) * K;
      for (uint32_t c = 0; c < K; ++c) {
        const double num = blk.scale * row[c] + row_prior;
        const double den = blk.scale * tot[c] + tot_prior;
        if (!(num > 0) || !(den >= num) || !std::isfinite(den)) {
          return Fail(err, TRIB_ERR_NUMERIC,
                      "categorical feature %u, component %u: count %g of %g is not a probability", ft.slot, c, num,
                      den);
        }
        ll[c] = std::log(num) - std::log(den);
      }
    }
    for (uint32_t c = 0; c < K; ++c) st->llsum[c] += ll[c];
  }
  // Label parameters eta_hc = log(A_hc / B_c) (§6.3).
  if (m.discriminative) {
    const uint32_t H = m.H();
    st->eta.resize(static_cast<size_t>(H) * K);
    st->eexp.resize(static_cast<size_t>(H) * K);
    st->esum.assign(K, 0.0);
    const uint32_t ba = B(m, kLA), bb = B(m, kLB);
    for (uint32_t c = 0; c < K; ++c) {
      const double bc = Mu(s, bb, m.off[kLB] + c);
      for (uint32_t h = 0; h < H; ++h) {
        const double a = Mu(s, ba, m.off[kLA] + static_cast<uint64_t>(h) * K + c);
        if (!(a > 0) || !(bc > 0) || !std::isfinite(a) || !std::isfinite(bc)) {
          return Fail(err, TRIB_ERR_NUMERIC, "label statistics A = %g, B = %g of component %u are not positive", a, bc,
                      c);
        }
        const double e = a / bc;
        st->eta[static_cast<size_t>(h) * K + c] = std::log(e);
        st->eexp[static_cast<size_t>(h) * K + c] = e;
        st->esum[c] += e;
      }
    }
  }
  return TRIB_OK;
}

namespace {

// Softmax of logits[0..K) into out; returns nothing (logits finite).
inline void Softmax(const double* logits, uint32_t K, double* out) {
  double mx = logits[0];
  for (uint32_t c = 1; c < K; ++c) mx = std::max(mx, logits[c]);
  double z = 0;
  for (uint32_t c = 0; c < K; ++c) z += (out[c] = std::exp(logits[c] - mx));
  const double inv = 1.0 / z;
  for (uint32_t c = 0; c < K; ++c) out[c] *= inv;
}

}  // namespace

// The local variational step for inference slot `slot`, conditioned on class
// y (discriminative, y >= 0) or not (y = -1). Returns the lower bound L on
// log p(x) (log p(x, y) with a label).
double Infer(const Model& m, State* st, uint32_t slot, int64_t y) {
  const uint32_t K = m.K;
  const uint32_t H = m.H();
  const size_t mf = st->feats.size();
  const double md = static_cast<double>(mf);
  // The membership prior: alpha_vec[c] (learned, or Alpha(m) for every c).
  const double* av = m.alpha_vec.data();
  double* gamma = st->gamma.data() + static_cast<size_t>(slot) * K;
  double* zbar = st->zbar.data() + static_cast<size_t>(slot) * K;
  double* phi = st->phi.data() + static_cast<size_t>(slot) * (st->fast ? K : mf * K);
  double& xi = st->xi[slot];
  st->work.resize(K);
  st->work2.resize(K);
  st->dig.resize(K);
  double* lab = st->work2.data();  // label term of phi (Table 2 (a)), per c
  const bool label = m.discriminative && y >= 0;
  // Start: phi uniform, gamma = alpha + m / K.
  for (uint32_t c = 0; c < K; ++c) {
    gamma[c] = av[c] + md / K;
    zbar[c] = 1.0 / K;
    lab[c] = 0.0;
  }
  if (st->fast) {
    for (uint32_t c = 0; c < K; ++c) phi[c] = 1.0 / K;
  } else {
    std::fill(phi, phi + mf * K, 1.0 / K);
  }
  xi = 1.0;
  auto update_xi = [&] {
    // xi = 1 + sum_h sum_c zbar_c exp(eta_hc)  (Table 2 (c)); then the label term
    // of phi: eta_yc - sum_h exp(eta_hc) / xi.
    double acc = 0;
    for (uint32_t c = 0; c < K; ++c) acc += zbar[c] * st->esum[c];
    xi = 1.0 + acc;
    for (uint32_t c = 0; c < K; ++c) {
      const double ey = (y < static_cast<int64_t>(H)) ? st->eta[static_cast<size_t>(y) * K + c] : 0.0;
      lab[c] = ey - st->esum[c] / xi;
    }
  };
  if (mf > 0) {
    for (uint32_t it = 0; it < m.max_iters; ++it) {
      if (label) update_xi();
      for (uint32_t c = 0; c < K; ++c) st->dig[c] = Digamma(gamma[c]);
      double* newg = st->work.data();
      for (uint32_t c = 0; c < K; ++c) newg[c] = av[c];
      if (st->fast) {
        // eq. 24: phi_c ∝ exp(Psi(gamma_c) + (1/m) sum_j log p(x_j | theta_jc) [+ (1/m) label]).
        double* lg = st->dig.data();
        for (uint32_t c = 0; c < K; ++c) lg[c] = st->dig[c] + (st->llsum[c] + lab[c]) / md;
        Softmax(lg, K, phi);
        // eq. 23: gamma_c = alpha + m phi_c.
        for (uint32_t c = 0; c < K; ++c) {
          newg[c] += md * phi[c];
          zbar[c] = phi[c];
        }
      } else {
        // eq. 14: phi_jc ∝ exp(Psi(gamma_c)) p(x_j | theta_jc) [exp(label_c / m)].
        std::vector<double>& lg = st->q;
        lg.resize(K);
        for (size_t f = 0; f < mf; ++f) {
          const double* ll = st->ll.data() + f * K;
          double* ph = phi + f * K;
          for (uint32_t c = 0; c < K; ++c) lg[c] = st->dig[c] + ll[c] + lab[c] / md;
          Softmax(lg.data(), K, ph);
          for (uint32_t c = 0; c < K; ++c) newg[c] += ph[c];  // eq. 13
        }
        for (uint32_t c = 0; c < K; ++c) zbar[c] = (newg[c] - av[c]) / md;
      }
      double change = 0;
      for (uint32_t c = 0; c < K; ++c) {
        change = std::max(change, std::fabs(newg[c] - gamma[c]));
        gamma[c] = newg[c];
      }
      if (change < m.tol) break;
    }
    if (label) update_xi();
  } else if (label) {
    update_xi();  // no features: zbar stays uniform
  }
  // The lower bound (eq. 47 / 54, plus eq. 42 / 43 with a label).
  double gsum = 0;
  for (uint32_t c = 0; c < K; ++c) gsum += gamma[c];
  const double dsum = Digamma(gsum);
  double L;
  if (m.learn_alpha) {  // log Gamma(sum alpha) - sum log Gamma(alpha_c)
    double asum = 0, lsum = 0;
    for (uint32_t c = 0; c < K; ++c) {
      asum += av[c];
      lsum += LogGamma(av[c]);
    }
    L = LogGamma(asum) - lsum - LogGamma(gsum);
  } else {
    L = LogGamma(av[0] * K) - K * LogGamma(av[0]) - LogGamma(gsum);
  }
  for (uint32_t c = 0; c < K; ++c) {
    const double elog = Digamma(gamma[c]) - dsum;  // E[log pi_c]
    // (alpha - 1) E + sum_j phi_jc E - (gamma - 1) E = (alpha + n_c - gamma_c) E
    const double nc = md * zbar[c];
    L += (av[c] + nc - gamma[c]) * elog + LogGamma(gamma[c]);
  }
  if (st->fast) {
    for (uint32_t c = 0; c < K; ++c) {
      if (phi[c] > 0) L += phi[c] * (st->llsum[c] - md * std::log(phi[c]));
    }
  } else {
    for (size_t f = 0; f < mf; ++f) {
      const double* ll = st->ll.data() + f * K;
      const double* ph = phi + f * K;
      for (uint32_t c = 0; c < K; ++c) {
        if (ph[c] > 0) L += ph[c] * (ll[c] - std::log(ph[c]));
      }
    }
  }
  if (label) {
    // sum_c zbar_c (eta_yc - sum_h e_hc / xi) + 1 - 1/xi - log xi.
    double t = 1.0 - 1.0 / xi - std::log(xi);
    for (uint32_t c = 0; c < K; ++c) t += zbar[c] * lab[c];
    L += t;
  }
  return L;
}

}  // namespace tributary::mmnb
