// Special functions of the count mixtures.
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/gamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>
#include <cmath>
#include <cstdint>

#include "tributary/plugin_sdk.h"

namespace tributary::count_mixture {

// Double-precision Boost special functions. The host's lgamma / digamma
// (g_host) promote double to long double: digamma's rational approximations
// run in x87 arithmetic, and lgamma goes through gamma_imp, whose pow is
// then powl (the "powl" of bench/SEP_RESULTS.md's profile of short
// documents: perf shows HostLgamma -> lgamma_imp<long double> -> gamma_imp ->
// powl, called from the quadrature over s in MomentMatch). Double keeps a
// few ulps, far below the quadrature's error. Domain errors return NaN and
// poles inf, which the callers check.
using DoublePolicy =
    boost::math::policies::policy<boost::math::policies::promote_double<false>,
                                  boost::math::policies::domain_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::pole_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::evaluation_error<boost::math::policies::ignore_error>>;
inline double Lgamma(double x) { return boost::math::lgamma(x, DoublePolicy()); }
inline double Digamma(double x) { return boost::math::digamma(x, DoublePolicy()); }
inline double Trigamma(double x) { return boost::math::trigamma(x, DoublePolicy()); }

inline double LogMeanExp(const double* x, uint32_t n) {
  return sdk::LogSumExp(x, n) - std::log(static_cast<double>(n));
}

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_
