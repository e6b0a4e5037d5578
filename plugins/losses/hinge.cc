// Loss "hinge": max(0, m - ln p(y, x) / p(ybar, x)) with ybar the most
// offending wrong class (sdEM eq. 17, Table 1): when the log-odds margin is
// <= m, w_y = +1 and w_ybar = -1, otherwise w = 0; c = 0 either way.
//
// The paper's margin is m = 1 nat. Option `margin` (ABI 1.2 loss options,
// the program's --loss-opt margin=M) sets m > 0: log p(k, x) of a naive Bayes
// model is a sum over the document's tokens, so long documents clear a
// 1-nat margin after a few updates and stop teaching the model; a margin of
// the order of a few nats per ten tokens keeps them in play (see README,
// "Accuracy on real text").
//
// Option `weights`: `table1` (default) is Table 1's s(y, x) - s(ybar, x),
// w_y = +1, w_ybar = -1. `algorithm4` is the supplement's Algorithm 4 (lines
// 14-22): w_y = 1 - p(y | x), w_ybar = -p(ybar | x), the NCLL weights of the
// two classes alone, so a step shrinks as the model grows confident. The
// condition for a step (the margin) is the same in both.
#include <cmath>
#include "tributary/plugin_sdk.h"

namespace {
struct HingeLoss {
  double margin = 1.0;
  bool algorithm4 = false;  // weights=algorithm4
};

int WeightsMargin(double m, bool algorithm4, const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss,
                  trib_error* err) {
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
  if (margin > m) return TRIB_OK;
  *loss = m - margin;
  if (!algorithm4) {
    w[y] = 1.0;
    w[ybar] = -1.0;
    return TRIB_OK;
  }
  // p(k | x) = exp(s_k - logsumexp(s)).
  double mx = s[0];
  for (uint32_t k = 1; k < K; ++k) mx = s[k] > mx ? s[k] : mx;
  double z = 0;
  for (uint32_t k = 0; k < K; ++k) z += std::exp(s[k] - mx);
  const double lse = mx + std::log(z);
  w[y] = 1.0 - std::exp(s[y] - lse);
  w[ybar] = -std::exp(s[ybar] - lse);
  return TRIB_OK;
}

int Weights(const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss, trib_error* err) {
  return WeightsMargin(1.0, false, s, K, y, w, c, loss, err);
}

constexpr trib_option_spec kOptions[] = {
    tributary::sdk::Number("margin", "1", "the margin m in nats (log-odds); 1 is the paper's").Above(0),
    tributary::sdk::Choice("weights", "table1|algorithm4", "table1",
                           "table1: w = +1 / -1 (Table 1); algorithm4: w = 1 - p(y|x) / -p(ybar|x) (Algorithm 4)"),
    {},
};

int Create(const trib_option* options, size_t num_options, trib_loss_model** out, trib_error* err) {
  return tributary::sdk::Guard(err, [&] {
    tributary::sdk::OptionValues o;
    int rc = tributary::sdk::ParseOptions(kOptions, TRIB_KIND_LOSS, "hinge", options, num_options, &o, err);
    if (rc != TRIB_OK) return rc;
    *out = tributary::sdk::NewLossModel(HingeLoss{o.Number("margin"), o.Is("weights", "algorithm4")});
    return TRIB_OK;
  });
}

int WeightsWith(const trib_loss_model* m, const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss,
                trib_error* err) {
  const auto* h = tributary::sdk::AsLoss<HingeLoss>(m);
  return WeightsMargin(h->margin, h->algorithm4, s, K, y, w, c, loss, err);
}
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "hinge", "1.1.0", "multi-class hinge loss on log-joint margins");
TRIBUTARY_DEFINE_PLUGIN_OPTIONS(kOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::sdk::BeginLossVtable<HingeLoss>(host, out, err,
                                                    {.weights = Weights,
                                                     .requires_label = true,
                                                     .default_lambda = 1e-4,
                                                     .create = Create,
                                                     .weights_with = WeightsWith});
}
