#include "plan.hpp"

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::formats {

namespace sim = shardplan::simulator;

nlohmann::json to_json(const Plan& p) {
  nlohmann::json j;
  j["schema"] = kPlanSchema;
  j["shardplan_version"] = p.shardplan_version.empty() ? sim::version() : p.shardplan_version;
  if (p.framework) j["framework"] = frameworks::framework_ref_json(*p.framework);
  j["model"] = sim::to_card_json(p.model);
  j["cluster"] = {{"nodes", p.cluster.nodes},
                  {"devices_per_node", p.cluster.per_node()},
                  {"hardware", sim::to_json(p.cluster.hardware)}};
  j["config"] = sim::to_json(p.config);
  j["rank_layout"] = {{"order", p.config.rank_order}, {"tp", p.config.tp}, {"dp", p.config.dp}, {"pp", p.config.pp}};
  j["prediction"] = sim::to_json(p.prediction, false);
  // What shardrun uses when --checkpoint-every is not given (informational here: a plan read
  // back re-simulates it from the embedded profile's "resilience" figures).
  j["checkpoint"] = {{"interval_steps", p.prediction.goodput.interval_steps},
                     {"interval_seconds", p.prediction.goodput.interval_s}};
  j["search"] = p.search.is_null() ? nlohmann::json::object() : p.search;
  return j;
}

namespace {

void check_schema(const nlohmann::json& j, const std::string& source, const sim::JsonContext& ctx) {
  if (!j.is_object()) throw sim::InputError(source + ": expected a JSON object (a shardplan plan)");
  const std::string schema = sim::get_string(j, "schema", ctx);
  if (schema != kPlanSchema) ctx.fail("schema", std::string("\"") + kPlanSchema + "\" (got \"" + schema + "\")");
}

sim::ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& source, const sim::JsonContext& ctx) {
  const auto& cl = sim::require(j, "cluster", ctx);
  const sim::JsonContext cctx = ctx.child("cluster");
  sim::ClusterSpec c;
  c.hardware = sim::hardware_from_json(sim::require(cl, "hardware", cctx), source + " (cluster.hardware)");
  c.nodes = static_cast<int>(sim::get_positive_int(cl, "nodes", cctx));
  c.devices_per_node = static_cast<int>(sim::get_int_or(cl, "devices_per_node", 0, cctx));
  return c;
}

}  // namespace

Plan plan_from_json(const nlohmann::json& j, const std::string& source) {
  const sim::JsonContext ctx{source, ""};
  check_schema(j, source, ctx);
  Plan p;
  p.shardplan_version = sim::get_string_or(j, "shardplan_version", "", ctx);
  p.model = sim::model_from_json(sim::require(j, "model", ctx), source + " (model)");
  p.cluster = cluster_from_json(j, source, ctx);
  p.config = sim::config_from_json(sim::require(j, "config", ctx), source);
  if (auto f = j.find("framework"); f != j.end()) {
    p.framework = frameworks::framework_from_json(*f, source + " field 'framework'");
    frameworks::bind(*p.framework, p.config);
  }
  p.search = j.value("search", nlohmann::json::object());
  p.prediction = sim::simulate(p.model, p.cluster, p.config);
  return p;
}

sim::ClusterSpec load_plan_cluster(const std::string& path) {
  const nlohmann::json j = sim::read_json_file(path);
  const sim::JsonContext ctx{path, ""};
  check_schema(j, path, ctx);
  return cluster_from_json(j, path, ctx);
}

Plan load_plan(const std::string& path) { return plan_from_json(sim::read_json_file(path), path); }

void save_plan(const Plan& plan, const std::string& path) {
  sim::write_file_atomically(path, to_json(plan).dump(2) + "\n");
}

}  // namespace shardplan::formats
