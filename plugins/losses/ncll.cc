// Loss "ncll": negative conditional log-likelihood -log p(y | x)
// (sdEM §3.3, Table 1): w_k = 1[k = y] - p(k | x), c = 0.
#include <cmath>

#include "tributary/plugin_sdk.h"
#include "tributary/vector_exp.h"

namespace {
// p(k | x) = exp(s_k - lse) by the vector exp (vector_exp.h SoftmaxBest).
int Weights(const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss, trib_error* err) {
  if (y < 0) return tributary::sdk::Fail(err, TRIB_ERR_INVALID_DOCUMENT, "ncll needs a labelled document");
  const double lse = tributary::vector_exp::SoftmaxBest(s, K, w);
  for (uint32_t k = 0; k < K; ++k) w[k] = -w[k];
  w[y] += 1.0;
  *c = 0.0;
  *loss = lse - s[y];
  return TRIB_OK;
}
// No options: the empty table says so to the host (`tributary plugins --options`).
constexpr trib_option_spec kOptions[] = {{}};
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "ncll", "1.0.0", "negative conditional log-likelihood");
extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::sdk::BeginLossVtable(host, out, err,
                                         {.weights = Weights, .requires_label = true, .default_lambda = 1e-4});
}
