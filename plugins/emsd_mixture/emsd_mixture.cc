// Family "emsd-mixture": a finite mixture of EMSD distributions (the
// exponential-family approximation to the multinomial scaled Dirichlet,
// thesis ch. 3, eq. 45-46) over bag-of-words count vectors, trained by SEP
// (or EP / ADF) through the hooks of sep_abi.h. See count_mixture.h for the
// model, the moment matching and the options.
#include "count_mixture.h"
#include "count_mixture_options.h"

TRIBUTARY_DEFINE_PLUGIN_INFO(TRIB_KIND_FAMILY, "emsd-mixture", "1.4.0",
                             "mixture of EMSD distributions over count vectors, learned by SEP / EP / ADF");

TRIBUTARY_DEFINE_PLUGIN_OPTIONS(tributary::count_mixture::kEmsdOptions);

extern "C" TRIB_PLUGIN_EXPORT int tributary_plugin_init(const trib_host_api* host, trib_plugin_vtable* out,
                                                        trib_error* err) {
  return tributary::count_mixture::Init<tributary::count_mixture::Flavor::kEmsd>(host, out, err);
}
