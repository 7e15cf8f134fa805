// Recorded runs in the calibration, and leave-one-source-out: does a fit generalise to a source
// (a framework, a cluster, a team's way of measuring) it never saw?
#include <algorithm>

#include "calibration.hpp"
#include "simulator/errors.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;

std::vector<MeasuredRun> measured_from_recorded(const std::vector<RecordedRun>& runs) {
  std::vector<MeasuredRun> out;
  for (const auto& r : runs) {
    MeasuredRun m{r.name, r.plan, r.measured_step_s, false, "", true, r.source, r.framework_name()};
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// A run is named by its name, its source id, its profile, or a prefix of its name ending in '*'.
bool matches(const MeasuredRun& r, const std::string& n) {
  if (!n.empty() && n.back() == '*') return r.name.starts_with(n.substr(0, n.size() - 1));
  return r.name == n || r.group == n || r.plan.cluster.hardware.name == n;
}

void check_names(const std::vector<MeasuredRun>& runs, const std::vector<std::string>& names, const char* flag) {
  for (const auto& n : names)
    if (std::none_of(runs.begin(), runs.end(), [&](const MeasuredRun& r) { return matches(r, n); }))
      throw sim::InputError(std::string(flag) + ": expected names of runs, sources or profiles in the runs; '" + n +
                            "' matches none");
}

}  // namespace

void select_runs(std::vector<MeasuredRun>& runs, const std::vector<std::string>& only,
                 const std::vector<std::string>& exclude) {
  check_names(runs, only, "--only");
  check_names(runs, exclude, "--exclude");
  std::erase_if(runs, [&](const MeasuredRun& r) {
    const bool kept =
        only.empty() || std::any_of(only.begin(), only.end(), [&](const auto& n) { return matches(r, n); });
    return !kept || std::any_of(exclude.begin(), exclude.end(), [&](const auto& n) { return matches(r, n); });
  });
}

namespace {

// The unit of leave-one-source-out: a recorded run's source id, else its runs file.
const std::string& group_of(const MeasuredRun& r) { return r.group.empty() ? r.source : r.group; }

}  // namespace

void signed_stats(const std::vector<double>& errors, ErrorStats& stats, double& bias) {
  stats = error_stats(errors);
  bias = 0;
  for (double e : errors) bias += e;
  if (!errors.empty()) bias /= static_cast<double>(errors.size());
}

std::vector<SourceHoldout> leave_one_source_out(const sim::HardwareProfile& base, const std::vector<MeasuredRun>& runs,
                                                const CalibrationOptions& options) {
  std::vector<std::string> groups;
  for (const auto& r : runs) {
    if (std::find(groups.begin(), groups.end(), group_of(r)) == groups.end()) groups.push_back(group_of(r));
  }
  const Params prior = prior_params(base);
  std::vector<SourceHoldout> out;
  for (const auto& g : groups) {
    std::vector<MeasuredRun> split = runs;
    SourceHoldout h;
    h.group = g;
    for (auto& r : split) {
      r.holdout = group_of(r) == g;
      h.runs += r.holdout ? 1 : 0;
    }
    const int fitting = static_cast<int>(split.size()) - h.runs;
    std::vector<double> before, after;
    h.values = prior;
    if (fitting >= std::max(1, free_parameters(options))) {
      const CalibrationResult res = calibrate(base, split, options);
      h.values = res.values;
      h.fitted = true;
      for (const auto& rr : res.runs)
        if (rr.holdout) before.push_back(rr.error_before()), after.push_back(rr.error_after());
    } else {
      for (const auto& r : split)
        if (r.holdout) {
          const double e = predicted_step_s(r, base, prior) / r.measured_step_s - 1;
          before.push_back(e);
          after.push_back(e);
        }
    }
    signed_stats(before, h.before, h.bias_before);
    signed_stats(after, h.after, h.bias_after);
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace shardplan::calibration
