#pragma once
// Each framework's compute_efficiency (simulator/framework_terms.hpp): the rate its GEMM and
// attention kernels reach over the hardware profile's sustained rate. Fitted together with the
// profiles' compute terms to the calibration set (`shardplan calibrate --suite published
// --frameworks`, calibration/framework_fit.hpp); a framework with no runs there stays at 1, the
// calibration set's common rate, and says so.
#include <string_view>

#include "framework_model.hpp"

namespace shardplan::frameworks {

struct FittedEfficiency {
  std::string_view framework;
  double compute_efficiency = 1;
  int runs = 0;                // the calibration set's runs of it
  double std_error = 0;        // of compute_efficiency
  double leave_out_error = 0;  // its runs' mean |step-time error| when the fit sees only the others
};

// The fitted table, one row per framework with runs in the calibration set.
const std::vector<FittedEfficiency>& fitted_efficiencies();

// Sets fw.terms.compute_efficiency from the table (every version of the framework) and adds the
// fact that cites it; a framework without a row keeps 1 and a fact saying why.
void apply_fitted_efficiency(FrameworkModel& fw);

}  // namespace shardplan::frameworks
