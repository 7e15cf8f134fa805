// The table of fitted_efficiency.hpp. Refit with
//   shardplan calibrate --suite published --frameworks --leave-one-framework-out --out fit.json
// and copy the "framework compute_efficiency" rows here, the profiles' rows into their `fitted`.
#include "fitted_efficiency.hpp"

#include <algorithm>
#include <cstdio>

namespace shardplan::frameworks {

namespace {

// The fit of 2026-11-29, refitted once recompute that stops early was priced (57 runs of
// runs/published.json; prior: ln compute_efficiency normal about 0 with sd 0.10, about twice the
// spread of the frameworks' separate fits): step-time |error| on those runs 5.1 % mean, 14.5 % worst
// (5.6 / 13.6 % before; 6.0 / 14.8 % with one term per profile only).
constexpr const char* kFit =
    "fitted by `shardplan calibrate --suite published --frameworks --leave-one-framework-out` (2026-11-29) together "
    "with the profiles' fitted.compute_efficiency_scale (p4d/p4de 0.808, p5 0.669, p5 FP8 0.778) to the 57 runs of "
    "runs/published.json";

}  // namespace

const std::vector<FittedEfficiency>& fitted_efficiencies() {
  // compute_efficiency, runs, std error, leave-one-framework-out mean |error| (its runs at 1).
  static const std::vector<FittedEfficiency> table{
      {"megatron-deepspeed", 0.947, 2, 0.068, 0.066},
      {"deepspeed", 0.983, 6, 0.071, 0.074},
      {"megatron", 1.054, 6, 0.068, 0.059},
      {"fms-fsdp", 0.992, 6, 0.063, 0.080},
      {"llm-foundry", 1.007, 29, 0.060, 0.051},
      {"neuronx-distributed", 1.028, 3, 0.068, 0.091},
      {"nemo", 1.018, 5, 0.122, 0.135},
  };
  return table;
}

void apply_fitted_efficiency(FrameworkModel& fw) {
  const auto& t = fitted_efficiencies();
  const auto it = std::find_if(t.begin(), t.end(), [&](const FittedEfficiency& f) { return f.framework == fw.name; });
  char what[256];
  if (it == t.end()) {
    fw.terms.compute_efficiency = 1;
    fw.facts.push_back(
        {"compute_efficiency 1: no runs of it in the calibration set, so the hardware profile's "
         "sustained rate as fitted to the other frameworks' runs; its fusion, attention kernel, "
         "recompute and sharding are priced by the simulator itself",
         "frameworks/fitted_efficiency.cpp (no row)"});
    return;
  }
  fw.terms.compute_efficiency = it->compute_efficiency;
  std::snprintf(what, sizeof what,
                "compute_efficiency %.3f (+- %.3f) over the hardware's sustained rate, fitted to its %d runs (all its "
                "versions share it); held out of the fit, its runs' mean |error| is %.1f %%",
                it->compute_efficiency, it->std_error, it->runs, 100 * it->leave_out_error);
  fw.facts.push_back({what, kFit});
}

}  // namespace shardplan::frameworks
