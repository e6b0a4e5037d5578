// Loss "ncll": negative conditional log-likelihood -log p(y | x)
// (sdEM §3.3, Table 1): w_k = 1[k = y] - p(k | x), c = 0.
#include <cmath>

#include "loss_common.h"

namespace {
int Weights(const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss, trib_error* err) {
  if (y < 0) return tributary::sdk::Fail(err, TRIB_ERR_INVALID_DOCUMENT, "ncll needs a labelled document");
  double lse = tributary::sdk::LogSumExp(s, K);
  for (uint32_t k = 0; k < K; ++k) w[k] = -std::exp(s[k] - lse);
  w[y] += 1.0;
  *c = 0.0;
  *loss = lse - s[y];
  return TRIB_OK;
}
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "ncll", "1.0.0", "negative conditional log-likelihood");
TRIBUTARY_DEFINE_LOSS_ENTRY(Weights, 1, 1e-4)
