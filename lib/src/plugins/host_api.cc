// The host API table handed to every plugin's init (trib_host_api,
// plugin_registry.h HostApi()): the special functions plugins share.
#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/erf.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>

#include "tributary/plugin_registry.h"

namespace tributary {

namespace {

// The host's special functions (trib_host_api): double precision, errors as
// values. Boost's default policy promotes double to long double (x87
// arithmetic; lgamma then goes through powl): bench/SEP_RESULTS.md's profile
// of the count mixtures found it dominating short documents. Double keeps a
// few ulps.
using DoublePolicy =
    boost::math::policies::policy<boost::math::policies::promote_double<false>,
                                  boost::math::policies::domain_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::pole_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::evaluation_error<boost::math::policies::ignore_error>>;

double HostLgamma(double x) { return boost::math::lgamma(x, DoublePolicy()); }
double HostDigamma(double x) { return boost::math::digamma(x, DoublePolicy()); }
double HostTrigamma(double x) { return boost::math::trigamma(x, DoublePolicy()); }
double HostErfInv(double x) { return boost::math::erf_inv(x, DoublePolicy()); }

const trib_host_api kHostApi = {sizeof(trib_host_api), TRIB_ABI_MAJOR, TRIB_ABI_MINOR, &HostLgamma,
                                &HostDigamma,          &HostTrigamma,  &HostErfInv};

}  // namespace

const trib_host_api* HostApi() { return &kHostApi; }

}  // namespace tributary
