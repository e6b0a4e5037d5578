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
#include <new>

#include "loss_common.h"

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

int Create(const trib_option* options, size_t num_options, trib_loss_model** out, trib_error* err) {
  return tributary::sdk::Guard(err, [&] {
    HingeLoss h;
    for (size_t i = 0; i < num_options; ++i) {
      const char* key = options[i].key;
      if (std::strcmp(key, "margin") == 0) {
        if (!tributary::sdk::ParseDouble(options[i].value, &h.margin) || !(h.margin > 0)) {
          return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                                      "option margin='%s': expected a number > 0 (log-odds, nats)", options[i].value);
        }
      } else if (std::strcmp(key, "weights") == 0) {
        if (std::strcmp(options[i].value, "table1") == 0) {
          h.algorithm4 = false;
        } else if (std::strcmp(options[i].value, "algorithm4") == 0) {
          h.algorithm4 = true;
        } else {
          return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                                      "option weights='%s': expected 'table1' (+1/-1) or 'algorithm4' (1-p, -p)",
                                      options[i].value);
        }
      } else {
        return tributary::sdk::Fail(err, TRIB_ERR_INVALID_ARGUMENT,
                                    "unknown option '%s' (hinge takes: margin, weights)", key);
      }
    }
    *out = reinterpret_cast<trib_loss_model*>(new HingeLoss(h));
    return TRIB_OK;
  });
}

void Destroy(trib_loss_model* m) { delete reinterpret_cast<HingeLoss*>(m); }

int WeightsWith(const trib_loss_model* m, const double* s, uint32_t K, int64_t y, double* w, double* c, double* loss,
                trib_error* err) {
  const auto* h = reinterpret_cast<const HingeLoss*>(m);
  return WeightsMargin(h->margin, h->algorithm4, s, K, y, w, c, loss, err);
}
}  // namespace

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_LOSS, "hinge", "1.1.0", "multi-class hinge loss on log-joint margins");
TRIBUTARY_DEFINE_LOSS_ENTRY_WITH_OPTIONS(Weights, 1, 1e-4, Create, Destroy, WeightsWith)
