// Loss "hinge": max(0, 1 - ln p(y, x) / p(ybar, x)) with ybar the most
// offending wrong class (sdEM eq. 17, Table 1): when the margin is <= 1,
// w_y = +1 and w_ybar = -1, otherwise w = 0; c = 0 either way.
#include "loss_common.h"

namespace {
int Weights(const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss, trib_error* err) {
  if (y < 0) return tributary::sdk::Fail(err, TRIB_ERR_INVALID_DOCUMENT, "hinge needs a labelled document");
  for (uint32_t k = 0; k < K; ++k) w[k] = 0.0;
  *c = 0.0;
  *loss = 0.0;
  if (K < 2) return TRIB_OK;
  int64_t ybar = -1;
  for (uint32_t k = 0; k < K; ++k) {
    if (static_cast<int64_t>(k) == y) continue;
    if (ybar < 0 || s[k] > s[ybar]) ybar = k;
  }
  const double margin = s[y] - s[ybar];
  if (margin > 1.0) return TRIB_OK;
  w[y] = 1.0;
  w[ybar] = -1.0;
  *loss = 1.0 - margin;
  return TRIB_OK;
}
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "hinge", "1.0.0", "multi-class hinge loss on log-joint margins");
TRIBUTARY_DEFINE_LOSS_ENTRY(Weights, 1, 1e-4)
