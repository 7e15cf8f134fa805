#include "run_report.hpp"

#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::gui {

namespace sim = shardplan::simulator;

MeasuredRun load_run_report(const std::string& path) {
  const nlohmann::json j = sim::read_json_file(path);
  const sim::JsonContext ctx{path, ""};
  if (!j.is_object()) throw sim::InputError(path + ": expected a JSON object (a shardrun report.json)");
  const std::string schema = sim::get_string(j, "schema", ctx);
  if (schema != "shardplan.report/1") ctx.fail("schema", "\"shardplan.report/1\" (got \"" + schema + "\")");
  MeasuredRun r;
  r.source = path;
  r.plan = sim::get_string_or(j, "plan", "", ctx);
  r.model = sim::get_string_or(j, "model", "", ctx);
  r.world_size = static_cast<int>(sim::get_int_or(j, "world_size", 0, ctx));
  const auto mctx = ctx.child("measured");
  const auto& m = sim::require(j, "measured", ctx);
  r.step_s = sim::get_positive(m, "step_seconds", mctx);
  r.tokens_per_s = sim::get_non_negative(m, "tokens_per_second", mctx);
  r.compute_s = sim::get_non_negative(m, "compute_seconds", mctx);
  r.tp_comm_s = sim::get_non_negative(m, "tp_comm_seconds", mctx);
  r.dp_comm_s = sim::get_non_negative(m, "dp_comm_seconds", mctx);
  r.optimizer_s = sim::get_non_negative(m, "optimizer_seconds", mctx);
  r.peak_bytes = sim::get_positive(m, "peak_memory_bytes", mctx);
  if (auto it = m.find("peak_memory_bytes_per_rank"); it != m.end()) {
    if (!it->is_array()) mctx.fail("peak_memory_bytes_per_rank", "an array of byte counts");
    for (const auto& v : *it) {
      if (!v.is_number() || v.get<double>() < 0) mctx.fail("peak_memory_bytes_per_rank", "an array of byte counts >= 0");
      r.peak_bytes_per_rank.push_back(v.get<double>());
    }
  }
  if (auto it = j.find("predicted"); it != j.end() && it->is_object()) {
    const auto pctx = ctx.child("predicted");
    r.predicted_step_s = sim::get_number_or(*it, "step_seconds", 0, pctx);
    r.predicted_peak_bytes = sim::get_number_or(*it, "peak_memory_bytes", 0, pctx);
  }
  return r;
}

}  // namespace shardplan::gui
