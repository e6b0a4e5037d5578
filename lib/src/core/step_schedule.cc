#include "tributary/step_schedule.h"

#include <sstream>

namespace tributary {

Status StepSchedule::Validate() const {
  auto num = [](double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  };
  switch (kind) {
    case Kind::kInverseLinear:
      if (!(lambda >= 0) || !std::isfinite(lambda)) {
        return Status::InvalidArgument("step schedule: lambda is " + num(lambda) + ", expected a finite value >= 0");
      }
      break;
    case Kind::kPolynomial:
      if (!(tau0 >= 1) || !std::isfinite(tau0)) {
        return Status::InvalidArgument("step schedule: tau0 is " + num(tau0) + ", expected a finite value >= 1");
      }
      if (!(kappa > 0 && kappa <= 1)) {
        return Status::InvalidArgument("step schedule: kappa is " + num(kappa) + ", expected 0 < kappa <= 1");
      }
      break;
    case Kind::kConstant:
      if (!(rho > 0 && rho <= 1)) {
        return Status::InvalidArgument("step schedule: rho is " + num(rho) + ", expected 0 < rho <= 1");
      }
      break;
    default:  // a value no version wrote (a damaged or forged snapshot)
      return Status::InvalidArgument("step schedule: kind " + std::to_string(static_cast<int>(kind)) +
                                     " is unknown (expected inverse, poly or constant)");
  }
  return Status::OK();
}

std::string StepSchedule::ToString() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kInverseLinear:
      os << "rho_t = (1 + " << lambda << " t)^-1";
      break;
    case Kind::kPolynomial:
      os << "rho_t = (" << tau0 << " + t)^-" << kappa;
      break;
    case Kind::kConstant:
      os << "rho_t = " << rho;
      break;
  }
  return os.str();
}

}  // namespace tributary
