#pragma once
// Shared by the planner tests: a Plan of a built-in model on nodes x a built-in profile with a
// given configuration, validated (defaults filled) and simulated, as `shardplan plan` writes one.
#include <string>

#include "formats/plan.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::testing {

inline formats::Plan plan_of(const std::string& model, const std::string& hw, int nodes,
                             simulator::ParallelConfig cfg) {
  formats::Plan p;
  p.model = simulator::load_model(model);
  p.cluster = simulator::ClusterSpec{simulator::load_hardware(hw), nodes, 0};
  simulator::validate_config(p.model, p.cluster, cfg);
  p.config = cfg;
  p.prediction = simulator::simulate(p.model, p.cluster, cfg);
  return p;
}

}  // namespace shardplan::testing
