#include "run_report.hpp"

#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::formats {

namespace sim = shardplan::simulator;
using nlohmann::json;

namespace {

json measured_json(const RunReport::Measured& m) {
  json j = {
      {"steps", m.steps},
      {"steps_in_medians", m.steps_in_medians},
      {"step_seconds", m.step_s},
      {"step_seconds_p10", m.step_s_p10},
      {"step_seconds_p90", m.step_s_p90},
      {"tokens_per_second", m.tokens_per_s},
      {"compute_seconds", m.compute_s},
      {"tp_comm_seconds", m.tp_comm_s},
      {"dp_comm_seconds", m.dp_comm_s},
      {"optimizer_seconds", m.optimizer_s},
      {"pp_comm_seconds", m.pp_comm_s},
      {"pipeline", m.pipeline},
      {"peak_memory_bytes", m.peak_bytes},
      {"peak_memory_bytes_per_rank", m.peak_bytes_per_rank},
      {"memory_source", m.memory_source},
      {"first_loss", m.first_loss},
      {"final_loss", m.final_loss},
  };
  if (m.reference_gemm_start_s && m.reference_gemm_end_s)
    j["reference_gemm_seconds"] = {{"start", *m.reference_gemm_start_s}, {"end", *m.reference_gemm_end_s}};
  if (m.cp_comm_s) j["cp_comm_seconds"] = *m.cp_comm_s;
  if (m.moe) {
    j["a2a_seconds"] = m.moe->a2a_s;
    j["router_load_imbalance"] = m.moe->router_imbalance;
    j["tokens_dropped"] = m.moe->tokens_dropped;
    if (m.moe->aux_loss) j["moe_aux_loss"] = *m.moe->aux_loss;
  }
  return j;
}

json predicted_json(const RunReport::Predicted& p) {
  json j = {
      {"feasible", p.feasible},
      {"step_seconds", p.step_s},
      {"tokens_per_second", p.tokens_per_s},
      {"tp_comm_seconds", p.tp_comm_s},
      {"dp_comm_seconds", p.dp_comm_s},
      {"optimizer_seconds", p.optimizer_s},
      {"sync_wait_seconds", p.sync_wait_s},
      {"pipeline_bubble_seconds", p.pipeline_bubble_s},
      {"pp_p2p_seconds", p.pp_p2p_s},
      {"pipeline",
       {{"max_in_flight_per_stage", p.max_in_flight_per_stage},
        {"in_flight_activation_bytes_per_stage", p.in_flight_activation_bytes_per_stage}}},
      {"peak_memory_bytes", p.peak_bytes},
      {"memory_bytes", p.memory_bytes},
  };
  if (p.cp_comm_s) j["cp_comm_seconds"] = *p.cp_comm_s;
  if (p.a2a_s) j["a2a_seconds"] = *p.a2a_s;
  return j;
}

std::optional<double> optional_number(const json& j, const char* key, const sim::JsonContext& ctx) {
  if (!j.contains(key)) return std::nullopt;
  return sim::get_non_negative(j, key, ctx);
}

RunReport::Measured measured_from_json(const json& m, const sim::JsonContext& ctx) {
  RunReport::Measured r;
  r.steps = sim::get_int_or(m, "steps", 0, ctx);
  r.steps_in_medians = sim::get_int_or(m, "steps_in_medians", 0, ctx);
  r.step_s = sim::get_positive(m, "step_seconds", ctx);
  r.step_s_p10 = sim::get_number_or(m, "step_seconds_p10", 0, ctx);
  r.step_s_p90 = sim::get_number_or(m, "step_seconds_p90", 0, ctx);
  const std::pair<const char*, double*> times[] = {
      {"tokens_per_second", &r.tokens_per_s}, {"compute_seconds", &r.compute_s},     {"tp_comm_seconds", &r.tp_comm_s},
      {"dp_comm_seconds", &r.dp_comm_s},      {"optimizer_seconds", &r.optimizer_s}, {"pp_comm_seconds", &r.pp_comm_s}};
  for (const auto& [key, into] : times) *into = optional_number(m, key, ctx).value_or(0);
  r.pipeline = m.value("pipeline", json());
  const double peak = sim::get_positive(m, "peak_memory_bytes", ctx);
  r.peak_bytes = static_cast<int64_t>(peak);
  if (auto it = m.find("peak_memory_bytes_per_rank"); it != m.end()) {
    if (!it->is_array()) ctx.fail("peak_memory_bytes_per_rank", "an array of byte counts > 0");
    for (const auto& v : *it) {
      if (!v.is_number() || !(v.get<double>() > 0))
        ctx.fail("peak_memory_bytes_per_rank", "an array of byte counts > 0");
      r.peak_bytes_per_rank.push_back(static_cast<int64_t>(v.get<double>()));
    }
  }
  r.memory_source = sim::get_string_or(m, "memory_source", "", ctx);
  r.first_loss = sim::get_number_or(m, "first_loss", 0, ctx);
  r.final_loss = sim::get_number_or(m, "final_loss", 0, ctx);
  if (auto ref = m.find("reference_gemm_seconds"); ref != m.end()) {
    const sim::JsonContext rc = ctx.child("reference_gemm_seconds");
    r.reference_gemm_start_s = sim::get_positive(*ref, "start", rc);
    r.reference_gemm_end_s = sim::get_positive(*ref, "end", rc);
  }
  r.cp_comm_s = optional_number(m, "cp_comm_seconds", ctx);
  if (m.contains("a2a_seconds")) {
    RunReport::Moe moe;
    moe.a2a_s = sim::get_non_negative(m, "a2a_seconds", ctx);
    moe.router_imbalance = sim::get_number_or(m, "router_load_imbalance", 0, ctx);
    moe.tokens_dropped = sim::get_number_or(m, "tokens_dropped", 0, ctx);
    moe.aux_loss = optional_number(m, "moe_aux_loss", ctx);
    r.moe = moe;
  }
  return r;
}

RunReport::Predicted predicted_from_json(const json& p, const sim::JsonContext& ctx) {
  RunReport::Predicted r;
  r.feasible = sim::get_bool_or(p, "feasible", true, ctx);
  const std::pair<const char*, double*> figures[] = {{"step_seconds", &r.step_s},
                                                     {"tokens_per_second", &r.tokens_per_s},
                                                     {"tp_comm_seconds", &r.tp_comm_s},
                                                     {"dp_comm_seconds", &r.dp_comm_s},
                                                     {"optimizer_seconds", &r.optimizer_s},
                                                     {"sync_wait_seconds", &r.sync_wait_s},
                                                     {"pipeline_bubble_seconds", &r.pipeline_bubble_s},
                                                     {"pp_p2p_seconds", &r.pp_p2p_s},
                                                     {"peak_memory_bytes", &r.peak_bytes}};
  for (const auto& [key, into] : figures) *into = sim::get_number_or(p, key, 0, ctx);
  if (auto it = p.find("pipeline"); it != p.end() && it->is_object()) {
    r.max_in_flight_per_stage = it->value("max_in_flight_per_stage", std::vector<int>{});
    r.in_flight_activation_bytes_per_stage = it->value("in_flight_activation_bytes_per_stage", std::vector<double>{});
  }
  r.memory_bytes = p.value("memory_bytes", json::object());
  r.cp_comm_s = optional_number(p, "cp_comm_seconds", ctx);
  r.a2a_s = optional_number(p, "a2a_seconds", ctx);
  return r;
}

}  // namespace

double relative_error(double measured, double predicted) {
  return measured > 0 ? (predicted - measured) / measured : 0.0;
}

json to_json(const RunReport& r) {
  json j = {{"schema", kRunReportSchema},
            {"plan", r.plan},
            {"model", r.model},
            {"world_size", r.world_size},
            {"device", r.device},
            {"threads_per_rank", r.threads_per_rank},
            {"layout", r.layout},
            {"precision", r.precision},
            {"attention", r.attention},
            {"attempts", r.attempts},
            {"measured", measured_json(r.measured)}};
  if (r.predicted) {
    j["predicted"] = predicted_json(*r.predicted);
    j["error"] = {
        {"step_seconds_relative", relative_error(r.measured.step_s, r.predicted->step_s)},
        {"peak_memory_relative", relative_error(static_cast<double>(r.measured.peak_bytes), r.predicted->peak_bytes)}};
  }
  if (!r.blas_kernels.empty()) j["blas_kernels"] = r.blas_kernels;
  if (!r.cpu_gemm.empty()) j["cpu_gemm"] = r.cpu_gemm;
  return j;
}

RunReport run_report_from_json(const json& j, const std::string& source, bool require_schema) {
  const sim::JsonContext ctx{source, ""};
  if (!j.is_object()) throw sim::InputError(source + ": expected a JSON object (a shardrun report.json)");
  if (require_schema || j.contains("schema")) {
    const std::string schema = sim::get_string(j, "schema", ctx);
    if (schema != kRunReportSchema)
      ctx.fail("schema", std::string("\"") + kRunReportSchema + "\" (got \"" + schema + "\")");
  }
  RunReport r;
  r.plan = sim::get_string_or(j, "plan", "", ctx);
  r.model = sim::get_string_or(j, "model", "", ctx);
  r.world_size = static_cast<int>(sim::get_int_or(j, "world_size", 0, ctx));
  r.device = sim::get_string_or(j, "device", "", ctx);
  r.threads_per_rank = static_cast<int>(sim::get_int_or(j, "threads_per_rank", 1, ctx));
  r.layout = j.value("layout", json());
  r.precision = j.value("precision", json());
  r.attention = j.value("attention", json());
  r.attempts = j.value("attempts", json());
  r.blas_kernels = sim::get_string_or(j, "blas_kernels", "", ctx);
  r.cpu_gemm = sim::get_string_or(j, "cpu_gemm", "", ctx);
  r.measured = measured_from_json(sim::require(j, "measured", ctx), ctx.child("measured"));
  if (auto it = j.find("predicted"); it != j.end() && it->is_object())
    r.predicted = predicted_from_json(*it, ctx.child("predicted"));
  return r;
}

RunReport load_run_report(const std::string& path) {
  return run_report_from_json(sim::read_json_file(path), path, true);
}

void save_run_report(const RunReport& r, const std::string& path) {
  sim::write_file_atomically(path, to_json(r).dump(2) + "\n");
}

}  // namespace shardplan::formats
