// Special functions of the count mixtures.
#ifndef TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_
#define TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_

#include <cmath>
#include <cstdint>

#include "tributary/plugin_sdk.h"

namespace tributary::count_mixture {

// The SDK's (the host's) double-precision special functions: Boost.Math
// without promotion to long double (whose powl dominated the profile of
// short documents in bench/SEP_RESULTS.md), a few ulps, far below the
// quadrature's error. Domain errors return NaN and poles inf, which the
// callers check.
using sdk::Digamma;
using sdk::Lgamma;
using sdk::Trigamma;

inline double LogMeanExp(const double* x, uint32_t n) {
  return sdk::LogSumExp(x, n) - std::log(static_cast<double>(n));
}

}  // namespace tributary::count_mixture

#endif  // TRIBUTARY_PLUGINS_COUNT_MIXTURE_MATH_H_
