// Loss "nll": negative log-likelihood, i.e. online EM / MAP (sdEM Table 1-2,
// first row). Labelled: w = e_y; unlabelled: w_k = p(k | x) (latent class).
// In both cases c = sum_k w_k = 1, so with rho_t = 1/(1+t) (lambda = 1, the
// default) sdEM averages the statistics and reproduces the batch MAP estimate.
#include <cmath>

#include "tributary/plugin_sdk.h"
#include "tributary/vector_exp.h"

namespace {
int Weights(const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss, trib_error*) {
  *c = 1.0;
  if (y >= 0) {
    for (uint32_t k = 0; k < K; ++k) w[k] = 0.0;
    w[y] = 1.0;
    *loss = -s[y];
    return TRIB_OK;
  }
  // p(k | x) by the vector exp (vector_exp.h SoftmaxBest; 1.0.0 called
  // std::exp 2K times: 1.5 % of an LDA `train`, whose 20 topics are its K).
  *loss = -tributary::vector_exp::SoftmaxBest(s, K, w);
  return TRIB_OK;
}
// No options: the empty table says so to the host (`tributary plugins --options`).
constexpr trib_option_spec kOptions[] = {{}};
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "nll", "1.1.0", "negative log-likelihood (online EM, MAP)");
extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::sdk::BeginLossVtable(host, out, err,
                                         {.weights = Weights, .requires_label = false, .default_lambda = 1.0});
}
