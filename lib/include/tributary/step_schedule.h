// Step sizes rho_t for stochastic updates.
#ifndef TRIBUTARY_STEP_SCHEDULE_H_
#define TRIBUTARY_STEP_SCHEDULE_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "tributary/status.h"

namespace tributary {

struct StepSchedule {
  enum class Kind { kInverseLinear, kPolynomial, kConstant };
  // Default: the paper's rho_t = (1 + lambda t)^-1 (sdEM §3.2, after Bottou).
  Kind kind = Kind::kInverseLinear;
  double lambda = 1.0;
  double tau0 = 1.0;  // kPolynomial: rho_t = (tau0 + t)^-kappa, kappa in (0.5, 1]
  double kappa = 0.7;
  double rho = 0.01;  // kConstant

  // t counts updates already applied (the first document gets t = 0).
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
  // Checks the parameters are usable; the message names the bad one.
  Status Validate() const;
  std::string ToString() const;
};

}  // namespace tributary

#endif  // TRIBUTARY_STEP_SCHEDULE_H_
