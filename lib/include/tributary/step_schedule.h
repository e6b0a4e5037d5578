// Step sizes rho_t for stochastic updates.
#ifndef TRIBUTARY_STEP_SCHEDULE_H_
#define TRIBUTARY_STEP_SCHEDULE_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "tributary/status.h"

namespace tributary {

/// The step size rho_t of the t-th stochastic update: a formula and its parameters. Only the parameters of the
/// chosen kind are used (and validated).
struct StepSchedule {
  /// Which formula Rho() uses: kInverseLinear (1 + lambda t)^-1, kPolynomial (tau0 + t)^-kappa, kConstant rho.
  enum class Kind { kInverseLinear, kPolynomial, kConstant };
  /// Default: the paper's rho_t = (1 + lambda t)^-1 (sdEM §3.2, after Bottou).
  Kind kind = Kind::kInverseLinear;
  double lambda = 1.0;  ///< kInverseLinear: decay rate, finite and >= 0 (0 gives a constant step of 1)
  double tau0 = 1.0;    ///< kPolynomial: rho_t = (tau0 + t)^-kappa; tau0 finite and >= 1
  double kappa = 0.7;   ///< kPolynomial: Validate accepts (0, 1]; the steps satisfy Robbins-Monro for (0.5, 1]
  double rho = 0.01;    ///< kConstant: the step, in (0, 1]

  /// t counts updates already applied (the first document gets t = 0).
  double Rho(uint64_t t) const {
    const double tt = static_cast<double>(t);
    switch (kind) {
      case Kind::kInverseLinear:
        return 1.0 / (1.0 + lambda * tt);
      case Kind::kPolynomial:
        return std::pow(tau0 + tt, -kappa);
      case Kind::kConstant:
        return rho;
    }
    return rho;
  }
  /// Checks the parameters are usable; the message names the bad one.
  Status Validate() const;
  /// The formula with its parameters, e.g. "rho_t = (1 + 1 t)^-1", for logs and reports.
  std::string ToString() const;
};

}  // namespace tributary

#endif  // TRIBUTARY_STEP_SCHEDULE_H_
