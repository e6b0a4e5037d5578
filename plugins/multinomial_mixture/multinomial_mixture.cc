// Family "multinomial-mixture": a latent-class mixture of multinomials over
// unlabelled bags of words, learned online (sdEM with the nll loss: the class
// weights are the posteriors p(k | x), i.e. online EM; sdEM Table 2, first
// row). It is the multinomial naive Bayes family with the class made latent:
// the same statistics, scores, check-step and caches (plugins/multinomial,
// multinomial_core.h), plus K = option `components` outputs, random
// symmetry-breaking initial counts, p(term | component) for `tributary topics`
// and document completion.
#include "../multinomial/multinomial_core.h"
#include "tributary/plugin_sdk.h"

// Online EM never pushes a count below its prior, so the multinomial check-step
// change of 1.1.0 (raw >= -abar instead of >= 0) does not bind here: the
// mixture keeps its version and its snapshots.
TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "multinomial-mixture", "1.1.0",
                             "mixture of multinomials over bags of words (latent class, online EM)");
TRIBUTARY_DEFINE_PLUGIN_OPTIONS(tributary::multinomial::kMixtureOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::multinomial::Init(tributary::multinomial::Variant::kMixture, host, out, err);
}
