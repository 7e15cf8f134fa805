#pragma once
// `shardplan calibrate --frameworks`: each hardware family's compute term and each framework's
// compute_efficiency fitted together (calibration/framework_fit.hpp), printed and written.
#include <string>
#include <vector>

#include "calibration/calibration.hpp"

namespace shardplan::cli {

struct FrameworkFitCli {
  std::string out;   // the fit (shardplan.framework-fit/1)
  std::string json;  // the same, again (--json), when given
  bool leave_one_framework_out = false;
  int max_iterations = 60;
  double prior_sd = 0.10;  // of ln compute_efficiency (--framework-prior-sd)
};

int run_framework_fit(const std::vector<calibration::MeasuredRun>& runs, const FrameworkFitCli& o);

}  // namespace shardplan::cli
