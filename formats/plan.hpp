#pragma once
// Plan: the versioned, self-contained output of `shardplan plan` — what the executor runs and
// what `explain` / `simulate --plan` / the launch exporters read.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "frameworks/framework_model.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::formats {

inline constexpr const char* kPlanSchema = "shardplan.plan/1";

struct Plan {
  std::string shardplan_version;
  simulator::ModelSpec model;                           // embedded as a model card
  simulator::ClusterSpec cluster;                       // resolved hardware profile + nodes
  simulator::ParallelConfig config;                     // incl. partition and rank order
  simulator::Prediction prediction;                     // what the simulator expects
  nlohmann::json search;                                // the search settings that chose it (informational)
  std::optional<frameworks::FrameworkModel> framework;  // the framework it is for, when one was named
};

// JSON: {"schema", "shardplan_version", "framework": {"name", "version"} (optional), "model": card, "cluster":
// {"nodes", "devices_per_node", "hardware": resolved profile}, "config": ParallelConfig, "rank_layout": {"order", "tp",
// "dp", "pp"}, "prediction": Prediction JSON (summary, no events), "checkpoint": {"interval_steps", "interval_seconds"}
// (the optimal interval, simulator/goodput.hpp), "search": {...}}.
nlohmann::json to_json(const Plan& plan);
// Reads a plan; errors name `source` and the field. The prediction is re-simulated from the
// embedded model, cluster and config (the stored one is informational), so a plan can never
// carry figures that disagree with the code reading it.
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
Plan load_plan(const std::string& path);
// The plan's cluster alone (nodes x devices, the embedded profile), without the model, the
// configuration or a simulation: what a launcher needs to count ranks.
simulator::ClusterSpec load_plan_cluster(const std::string& path);
// Atomic write (temp + rename).
void save_plan(const Plan& plan, const std::string& path);

}  // namespace shardplan::formats
