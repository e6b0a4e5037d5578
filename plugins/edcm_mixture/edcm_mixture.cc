// Family "edcm-mixture": a finite mixture of EDCM distributions (the
// exponential-family approximation to the Dirichlet compound multinomial,
// thesis ch. 2, eq. 14-16) over bag-of-words count vectors, trained by EP (or
// SEP / ADF) through the hooks of sep_abi.h: a Dirichlet site on the mixing
// weights and, per component and term, a Gamma site on the EDCM parameter
// (the thesis's diagonal Gaussian sites, eq. 17-18, cannot stay positive; see
// count_mixture.h).
// The implementation is shared with emsd-mixture (EDCM is EMSD with unit
// scale); see ../emsd_mixture/count_mixture.h for the model and the options.
#include "../emsd_mixture/count_mixture.h"
#include "../emsd_mixture/count_mixture_options.h"

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "edcm-mixture", "1.4.0",
                             "mixture of EDCM distributions over count vectors, learned by EP / SEP / ADF");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(tributary::count_mixture::kEdcmOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::count_mixture::Init<tributary::count_mixture::Flavor::kEdcm>(host, out, err);
}
