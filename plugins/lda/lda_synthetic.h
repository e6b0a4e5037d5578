// A known LDA for tests and benchmarks of the "lda" family (header-only; the
// matching uses the library's HungarianAssign, so include it only where
// libtributary is linked): topics beta_k ~ Dir_V(eta), documents theta ~ Dir_K(alpha)
// with L tokens each (Blei's notes 2013, §3, the generative process), and the
// mean L1 distance between learned and true topics after optimal (Hungarian)
// matching of the topics.
#ifndef TRIBUTARY_PLUGINS_LDA_LDA_SYNTHETIC_H_
#define TRIBUTARY_PLUGINS_LDA_LDA_SYNTHETIC_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tributary/metrics.h"

namespace tributary::lda {

struct SyntheticDoc {
  std::vector<uint32_t> term_ids;  // strictly increasing
  std::vector<double> term_counts;
};

struct SyntheticCorpus {
  uint32_t K = 0, V = 0;
  std::vector<std::vector<double>> topics;  // K x V, the true beta
  std::vector<SyntheticDoc> docs;
};

inline std::vector<double> Dirichlet(std::mt19937_64& rng, double a, uint32_t dim) {
  std::gamma_distribution<double> g(a, 1.0);
  std::vector<double> x(dim);
  double s = 0;
  for (auto& v : x) s += (v = g(rng));
  for (auto& v : x) v /= s;
  return x;
}

inline uint32_t DrawFromCdf(std::mt19937_64& rng, const std::vector<double>& cdf) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * cdf.back();
  return static_cast<uint32_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

inline SyntheticCorpus GenerateLda(uint64_t seed, uint32_t K, uint32_t V, uint32_t L, size_t D, double alpha = 0.1,
                                   double eta = 0.1) {
  std::mt19937_64 rng(seed);
  SyntheticCorpus c;
  c.K = K;
  c.V = V;
  std::vector<std::vector<double>> cdfs;
  for (uint32_t k = 0; k < K; ++k) {
    c.topics.push_back(Dirichlet(rng, eta, V));
    std::vector<double> cdf(V);
    double s = 0;
    for (uint32_t w = 0; w < V; ++w) cdf[w] = (s += c.topics[k][w]);
    cdfs.push_back(std::move(cdf));
  }
  std::vector<double> counts(V);
  c.docs.reserve(D);
  for (size_t d = 0; d < D; ++d) {
    std::vector<double> theta = Dirichlet(rng, alpha, K), tcdf(K);
    double s = 0;
    for (uint32_t k = 0; k < K; ++k) tcdf[k] = (s += theta[k]);
    std::fill(counts.begin(), counts.end(), 0.0);
    for (uint32_t i = 0; i < L; ++i) {
      counts[std::min(DrawFromCdf(rng, cdfs[std::min(DrawFromCdf(rng, tcdf), K - 1)]), V - 1)] += 1;
    }
    SyntheticDoc doc;
    for (uint32_t w = 0; w < V; ++w) {
      if (counts[w] > 0) {
        doc.term_ids.push_back(w);
        doc.term_counts.push_back(counts[w]);
      }
    }
    c.docs.push_back(std::move(doc));
  }
  return c;
}

// Mean L1 distance between learned topics (K x V, rows p(w | k)) and the true
// ones after optimal matching.
inline double MeanMatchedL1(const std::vector<std::vector<double>>& learned, const SyntheticCorpus& c) {
  std::vector<double> cost(size_t{c.K} * c.K);
  for (uint32_t a = 0; a < c.K; ++a) {
    for (uint32_t b = 0; b < c.K; ++b) {
      double l1 = 0;
      for (uint32_t w = 0; w < c.V; ++w) l1 += std::fabs(learned[a][w] - c.topics[b][w]);
      cost[size_t{a} * c.K + b] = l1;
    }
  }
  const std::vector<int64_t> match = HungarianAssign(cost, c.K, c.K);
  double total = 0;
  for (uint32_t a = 0; a < c.K; ++a) total += cost[size_t{a} * c.K + static_cast<size_t>(match[a])];
  return total / c.K;
}

}  // namespace tributary::lda

#endif  // TRIBUTARY_PLUGINS_LDA_LDA_SYNTHETIC_H_
