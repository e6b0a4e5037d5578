// Totals (count_mixture.h, header comment, "Totals"): the series moments,
// the exact terms and the refreshes.
#include "count_mixture_totals.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tributary::count_mixture {

Ref RefOf(const Model& m, uint32_t k, double a, double b, double a0, double b0) {
  const double D = m.frame_decay[k], x = (a - a0) / D, y = (b - b0 - m.frame_shift[k]) / D;
  return Ref{x, y, a0 + x, b0 + y};
}

// Adds (sign +1) or removes (-1) a term to / from the series moments of
// component k. Returns false if b' is not > 0 (the series cannot represent
// the term: the caller refreshes the component).
bool SeriesTerm(Model* m, uint32_t k, const Ref& r, double sign) {
  if (!(r.br > 0) || !std::isfinite(r.br) || !std::isfinite(r.ar)) return false;
  double* mo = &m->moments[static_cast<size_t>(k) * kMoments];
  constexpr int n = kOrder + 1;
  double inv[kOrder + 3], yq[kOrder + 2];
  const double ib = 1.0 / r.br;
  inv[0] = ib;
  yq[0] = 1.0;
  for (int p = 1; p <= kOrder + 2; ++p) inv[p] = inv[p - 1] * ib;  // 1 / b'^(p+1)
  for (int p = 1; p <= kOrder + 1; ++p) yq[p] = yq[p - 1] * r.y;   // y^p
  for (int p = 0; p <= kOrder + 1; ++p) {
    const double fa = sign * r.ar * inv[p];
    for (int q = 0; q <= p; ++q) mo[Tri(p, q)] += fa * yq[q];
  }
  if (r.x != 0) {  // x = 0 for the terms no document has touched (most, at a refresh)
    for (int p = 0; p <= kOrder + 1; ++p) {
      const double fx = sign * r.x * inv[p];
      for (int q = 0; q <= p; ++q) mo[kTri + Tri(p, q)] += fx * yq[q];
    }
  }
  const double ax = std::fabs(r.x), yn = std::fabs(yq[n]);
  double* bm = mo + 2 * kTri;
  for (int c = 0; c < 2; ++c) {  // B: 1 / b'^(P+2); C: 1 / b'^(P+3)
    const double ip = sign * inv[kOrder + 1 + c];
    bm[4 * c + 0] += r.ar * ip;
    bm[4 * c + 1] += ax * ip;
    bm[4 * c + 2] += r.ar * yn * ip;
    bm[4 * c + 3] += ax * yn * ip;
  }
  if (sign > 0) m->frame_min_rate[k] = std::min(m->frame_min_rate[k], r.br);
  return true;
}

int ExactSlot(const Model& m, uint32_t k, uint64_t w) {
  if (m.exact_count[w] == 0) return -1;
  const auto& ids = m.exact[k].w;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == w) return static_cast<int>(i);
  }
  return -1;
}
void ExactRemove(Model* m, uint32_t k, int slot) {
  Model::Exact& ex = m->exact[k];
  const size_t last = ex.w.size() - 1, i = static_cast<size_t>(slot);
  --m->exact_count[ex.w[i]];
  ex.w[i] = ex.w[last];
  for (int c = 0; c < 4; ++c) ex.p[4 * i + c] = ex.p[4 * last + c];
  ex.w.pop_back();
  ex.p.resize(4 * last);
}
// Adds a term: to the exact terms if its reference rate is below the
// threshold and there is room, else to the series.
bool AddTerm(Model* m, uint32_t k, uint64_t w, double a, double b, double a0, double b0) {
  const Ref r = RefOf(*m, k, a, b, a0, b0);
  Model::Exact& ex = m->exact[k];
  if (!(r.br >= ex.tau) && ex.w.size() < m->exact_cap && std::isfinite(r.x) && std::isfinite(r.y)) {
    ex.w.push_back(static_cast<uint32_t>(w));
    ex.p.insert(ex.p.end(), {a0, r.x, b0, r.y});
    ++m->exact_count[w];
    return true;
  }
  return SeriesTerm(m, k, r, 1.0);
}

// T_k and U_k at the frame's (D, Delta): the series plus the exact terms;
// false if the error bound exceeds kTolMean T or kTolVar U (header
// comment, "Totals").
bool FrameTotals(Model* m, uint32_t k) {
  const double* mo = &m->moments[static_cast<size_t>(k) * kMoments];
  const double D = m->frame_decay[k], e = 1.0 - D, dl = m->frame_shift[k];
  constexpr int n = kOrder + 1;
  double dp[kOrder + 2], ep[kOrder + 2], binom[kOrder + 1][kOrder + 1];
  dp[0] = ep[0] = 1.0;
  for (int p = 1; p <= kOrder + 1; ++p) {
    dp[p] = dp[p - 1] * dl;
    ep[p] = ep[p - 1] * -e;
  }
  for (int p = 0; p <= kOrder; ++p) {
    binom[p][0] = binom[p][p] = 1.0;
    for (int q = 1; q < p; ++q) binom[p][q] = binom[p - 1][q - 1] + binom[p - 1][q];
  }
  // (-h)^p / b'^(p+1) (T) and (p + 1) (-h)^p / b'^(p+2) (U), h = Delta - e y,
  // expanded in Delta and e.
  double t = 0, u = 0;
  for (int p = 0; p <= kOrder; ++p) {
    double tp = 0, up = 0;
    for (int q = 0; q <= p; ++q) {
      const double c = binom[p][q] * dp[p - q] * ep[q];
      tp += c * (mo[Tri(p, q)] - e * mo[kTri + Tri(p, q)]);
      up += c * (mo[Tri(p + 1, q)] - e * mo[kTri + Tri(p + 1, q)]);
    }
    const double sgn = p % 2 == 0 ? 1.0 : -1.0;
    t += sgn * tp;
    u += sgn * (p + 1) * up;
  }
  double err_t = 0, err_u = 0;
  const double g = 1.0 - e - std::max(0.0, -dl) / m->frame_min_rate[k];
  if (!(g >= 0.5)) {
    err_t = err_u = INFINITY;
  } else {
    // |h|^n <= (1 + th)^P |Delta|^n + (1 + 1/th)^P (e |y|)^n for any th > 0.
    const double* bm = mo + 2 * kTri;
    const double d1 = std::fabs(dp[n]), e1 = std::fabs(ep[n]);
    err_t = err_u = INFINITY;
    for (double th : {1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0}) {
      const double f = std::pow(1.0 + th, kOrder) * d1, h = std::pow(1.0 + 1.0 / th, kOrder) * e1;
      err_t = std::min(err_t, (f * (bm[0] + e * bm[1]) + h * (bm[2] + e * bm[3])) / g);
      err_u = std::min(err_u, 2.0 * (kOrder + 2) * (f * (bm[4] + e * bm[5]) + h * (bm[6] + e * bm[7])) / (g * g));
    }
  }
  // The exact terms.
  const Model::Exact& ex = m->exact[k];
  bool ok = true;
  for (size_t i = 0; i < ex.w.size(); ++i) {
    const double* q = &ex.p[4 * i];
    const double a = q[0] + D * q[1], b = q[2] + D * q[3] + dl;
    ok &= a > 0 && b > 0;
    t += a / b;
    u += a / (b * b);
  }
  m->total_mean[k] = t;
  m->total_var[k] = u;
  return ok && t > 0 && u > 0 && err_t <= kTolMean * t && err_u <= kTolVar * u;
}

// Recomputes the moments and exact terms of component k from all statistics
// (O(V)) and restarts its frame (D = 1, Delta = 0); checks feasibility.
int RefreshComponent(Model* m, const trib_stats& s, uint32_t k, trib_error* err) {
  std::fill(m->moments.begin() + static_cast<size_t>(k) * kMoments,
            m->moments.begin() + static_cast<size_t>(k + 1) * kMoments, 0.0);
  m->frame_decay[k] = 1.0;
  m->frame_shift[k] = 0.0;
  m->frame_min_rate[k] = INFINITY;
  Model::Exact& ex = m->exact[k];
  for (uint32_t w : ex.w) --m->exact_count[w];
  ex.w.clear();
  ex.p.clear();
  const uint32_t b0 = m->GaussBlock(k, 0), b1 = m->GaussBlock(k, 1);
  const trib_block &blk0 = s.blocks[b0], &blk1 = s.blocks[b1];
  const double sh0 = blk0.shift * blk0.alpha_bar, sh1 = blk1.shift * blk1.alpha_bar;
  const uint64_t i0 = m->Gauss(0, k, 0), i1 = m->Gauss(0, k, 1);
  // Pass 1: the prior means and the exact_cap smallest rates (a max-heap).
  std::vector<double>& prior = m->scratch;
  prior.resize(m->V);
  std::vector<std::pair<double, uint32_t>> heap;
  heap.reserve(m->exact_cap + 1);
  for (uint64_t w = 0; w < m->V; ++w) {
    const double m0 = m->ShapePriorMean(k, w), pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
    prior[w] = m0;
    const double a = pa + m->n * (blk0.scale * s.raw[i0 + w] + sh0);
    const double b = pb - m->n * (blk1.scale * s.raw[i1 + w] + sh1);
    if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b)) {
      return Fail(err, TRIB_ERR_NUMERIC, "posterior Gamma of the shape of component %u, term %llu is (%g, %g)", k,
                  static_cast<unsigned long long>(w), a, b);
    }
    if (heap.size() < m->exact_cap || b < heap.front().first) {
      heap.emplace_back(b, static_cast<uint32_t>(w));
      std::push_heap(heap.begin(), heap.end());
      if (heap.size() > m->exact_cap) {
        std::pop_heap(heap.begin(), heap.end());
        heap.pop_back();
      }
    }
  }
  // The threshold: the largest rate held exactly (none if V <= exact_cap: all
  // terms are exact).
  ex.tau = heap.size() < m->V ? heap.front().first : INFINITY;
  for (const auto& hw : heap) prior[hw.second] = -prior[hw.second];  // mark
  // Pass 2: the series over the other terms, then the exact terms.
  for (uint64_t w = 0; w < m->V; ++w) {
    const double m0 = std::fabs(prior[w]), pa = m0 * m0 / m->shape_var, pb = m0 / m->shape_var;
    const double a = pa + m->n * (blk0.scale * s.raw[i0 + w] + sh0);
    const double b = pb - m->n * (blk1.scale * s.raw[i1 + w] + sh1);
    if (prior[w] < 0) {
      ex.w.push_back(static_cast<uint32_t>(w));
      ex.p.insert(ex.p.end(), {pa, a - pa, pb, b - pb});
      ++m->exact_count[w];
    } else {
      SeriesTerm(m, k, Ref{a - pa, b - pb, a, b}, 1.0);
    }
  }
  FrameTotals(m, k);  // D = 1, Delta = 0: the series is exact
  return TRIB_OK;
}

// Recomputes all components (O(K V)).
int RefreshTotals(Model* m, const trib_stats& s, trib_error* err) {
  for (uint32_t k = 0; k < m->K; ++k) {
    if (int rc = RefreshComponent(m, s, k, err); rc != TRIB_OK) return rc;
  }
  ++m->refreshes;
  return TRIB_OK;
}

}  // namespace tributary::count_mixture
