// Family "multinomial": multinomial naive Bayes over bags of words (Dirichlet
// prior, sdEM Appendix A). The implementation is multinomial_core.h / .cc,
// shared with multinomial-mixture.
#include "multinomial_core.h"
#include "tributary/plugin_sdk.h"

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "multinomial", "1.2.0",
                             "multinomial naive Bayes over bags of words (Dirichlet prior)");
TRIBUTARY_DEFINE_PLUGIN_OPTIONS(tributary::multinomial::kNaiveBayesOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::multinomial::Init(tributary::multinomial::Variant::kNaiveBayes, host, out, err);
}
