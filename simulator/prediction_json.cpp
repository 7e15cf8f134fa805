#include "prediction_json.hpp"

#include "errors.hpp"
#include "json_fields.hpp"

namespace shardplan::simulator {

const char* version() { return SHARDPLAN_VERSION; }

nlohmann::json to_json(const ParallelConfig& c) {
  nlohmann::json j = {
      {"tensor_parallel", c.tp},
      {"pipeline_parallel", c.pp},
      {"data_parallel", c.dp},
      {"context_parallel", c.cp},
      {"context_parallel_kind", to_string(c.cp_kind)},
      {"expert_parallel", c.ep},
      {"expert_tensor_parallel", c.expert_tp()},
      {"moe_capacity_factor", c.moe_capacity_factor},
      {"zero_stage", c.zero_stage},
      {"sharding_degree", c.shard_group()},
      {"micro_batch_size", c.micro_batch_size},
      {"global_batch_size", c.global_batch_size},
      {"micro_batches", c.global_batch_size > 0 ? c.micro_batches() : 0},
      {"seq_len", c.seq_len},
      {"pipeline_schedule", to_string(c.schedule)},
      {"virtual_stages", c.virtual_stages},
      {"recompute", to_string(c.recompute)},
      {"recompute_num_layers", c.recompute_num_layers},
      {"sequence_parallel", c.sequence_parallel},
      {"tp_comm_overlap", c.tp_comm_overlap},
      {"offload_activations", c.offload_activations},
      {"offload_optimizer", c.offload_optimizer},
      {"precision", to_string(c.precision)},
      {"mixed_precision", to_string(c.mixed_precision)},
      {"attention", to_string(c.attention)},
      {"fusion", to_string(c.fusion)},
      {"grad_accum_dtype", to_string(c.grad_accum_dtype)},
      {"packed_document_tokens", c.packed_document_tokens},
      {"fp8", to_string(c.fp8)},
      {"fp8_param_gather", c.fp8_param_gather},
      {"zero3_fetch", to_string(c.zero3_fetch)},
      {"rank_order", c.rank_order},
      {"memory_headroom_fraction", c.memory_headroom},
      {"partition", c.partition},
  };
  // Written only when set, so the plans and predictions of other configurations keep their bytes.
  if (c.recompute_every > 0) j["recompute_every"] = c.recompute_every;
  if (c.lora.enabled())
    j["lora"] = {{"rank", c.lora.rank},
                 {"alpha", c.lora.alpha},
                 {"dropout", c.lora.dropout},
                 {"targets", c.lora.targets},
                 {"base", to_string(c.lora.base)}};
  else j["lora"] = nullptr;
  return j;
}

ParallelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  const JsonContext ctx{source, "config"};
  if (!j.is_object()) throw InputError(source + ": field 'config': expected an object");
  ParallelConfig c;
  c.tp = static_cast<int>(get_positive_int(j, "tensor_parallel", ctx));
  c.pp = static_cast<int>(get_positive_int(j, "pipeline_parallel", ctx));
  c.dp = static_cast<int>(get_positive_int(j, "data_parallel", ctx));
  // Absent in plans written before context and expert parallelism existed: 1 each, dropless.
  c.cp = static_cast<int>(get_int_or(j, "context_parallel", 1, ctx));
  c.cp_kind = get_enum_or(j, "context_parallel_kind", CpKind::ring, ctx);
  c.ep = static_cast<int>(get_int_or(j, "expert_parallel", 1, ctx));
  c.etp = static_cast<int>(get_int_or(j, "expert_tensor_parallel", 0, ctx));
  c.moe_capacity_factor = get_number_or(j, "moe_capacity_factor", 0.0, ctx);
  c.zero_stage = static_cast<int>(get_int_or(j, "zero_stage", 0, ctx));
  c.sharding_degree = static_cast<int>(get_int_or(j, "sharding_degree", 0, ctx));
  c.micro_batch_size = static_cast<int>(get_positive_int(j, "micro_batch_size", ctx));
  c.global_batch_size = static_cast<int>(get_int_or(j, "global_batch_size", 0, ctx));
  c.seq_len = static_cast<int>(get_positive_int(j, "seq_len", ctx));
  c.schedule = get_enum_or(j, "pipeline_schedule", PipelineSchedule::one_f_one_b, ctx);
  c.virtual_stages = static_cast<int>(get_int_or(j, "virtual_stages", 1, ctx));
  c.recompute = get_enum_or(j, "recompute", Recompute::none, ctx);
  c.recompute_num_layers = static_cast<int>(get_int_or(j, "recompute_num_layers", 0, ctx));
  c.recompute_every = static_cast<int>(get_int_or(j, "recompute_every", 0, ctx));  // absent: unused
  c.sequence_parallel = get_bool_or(j, "sequence_parallel", false, ctx);
  c.tp_comm_overlap = get_bool_or(j, "tp_comm_overlap", false, ctx);
  c.offload_activations = get_bool_or(j, "offload_activations", false, ctx);
  c.offload_optimizer = get_bool_or(j, "offload_optimizer", false, ctx);
  c.precision = get_enum_or(j, "precision", Precision::bf16, ctx);
  c.mixed_precision = get_enum_or(j, "mixed_precision", MixedPrecision::master_weights, ctx);
  // Absent in plans written before attention kinds existed: the default (flash).
  c.attention = get_enum_or(j, "attention", AttentionKind::flash, ctx);
  // Absent in plans written before fusion kinds existed: eager (what they were simulated with).
  c.fusion = get_enum_or(j, "fusion", Fusion::eager, ctx);
  // Absent in plans written before it existed: param (what they were simulated with).
  c.grad_accum_dtype = get_enum_or(j, "grad_accum_dtype", GradAccumDtype::param, ctx);
  // Absent in plans written before it existed: 0 (one document per sequence).
  const long long docs = get_int_or(j, "packed_document_tokens", 0, ctx);
  if (docs < 0 || docs > 1'000'000'000) ctx.fail("packed_document_tokens", "a number of tokens >= 0 (0: not packed)");
  c.packed_document_tokens = static_cast<int>(docs);
  c.fp8 = get_enum_or(j, "fp8", Fp8Recipe::none, ctx);
  c.fp8_param_gather = get_bool_or(j, "fp8_param_gather", false, ctx);
  c.zero3_fetch = get_enum_or(j, "zero3_fetch", Zero3Fetch::prefetch, ctx);
  c.rank_order = get_string_or(j, "rank_order", "tp-dp-pp", ctx);
  c.memory_headroom = get_number_or(j, "memory_headroom_fraction", 0.05, ctx);
  if (auto it = j.find("partition"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) ctx.fail("partition", "an array of layer counts");
    for (const auto& v : *it) {
      if (!v.is_number_integer()) ctx.fail("partition", "an array of integer layer counts");
      c.partition.push_back(v.get<int>());
    }
  }
  if (auto it = j.find("lora"); it != j.end() && !it->is_null()) {
    const JsonContext lctx = ctx.child("lora");
    c.lora.rank = static_cast<int>(get_positive_int(*it, "rank", lctx));
    c.lora.alpha = get_number_or(*it, "alpha", 16.0, lctx);
    c.lora.dropout = get_number_or(*it, "dropout", 0.0, lctx);
    c.lora.base = get_enum_or(*it, "base", LoraBase::bf16, lctx);
    const auto& t = require(*it, "targets", lctx);
    if (!t.is_array()) lctx.fail("targets", "an array of module names");
    for (const auto& v : t) {
      if (!v.is_string()) lctx.fail("targets", "an array of module names");
      c.lora.targets.push_back(v.get<std::string>());
    }
  }
  return c;
}

nlohmann::json to_json(const MemoryBreakdown& m) {
  return {{"parameters", m.parameters},
          {"gradients", m.gradients},
          {"optimizer_states", m.optimizer_states},
          {"activations", m.activations},
          {"lora", m.lora},
          {"comm_buffers", m.comm_buffers},
          {"workspace", m.workspace},
          {"runtime_context", m.runtime_context},
          {"communicators", m.communicators},
          {"library_workspace", m.library_workspace},
          {"allocator_slack", m.allocator_slack},
          {"allocated", m.allocated()},
          {"reserved", m.reserved()},
          {"device", m.device()},
          {"total", m.total()}};
}

namespace {

nlohmann::json stages_json(const Prediction& p) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& s : p.stages) {
    arr.push_back({{"stage", s.stage},
                   {"layers", s.layers},
                   {"has_embedding", s.has_embedding},
                   {"has_head", s.has_head},
                   {"parameters_per_device", s.parameters_per_device},
                   {"in_flight_micro_batches", s.in_flight_micro_batches},
                   {"forward_seconds_per_micro_batch", s.forward_s},
                   {"backward_seconds_per_micro_batch", s.backward_s},
                   {"host_bytes_per_device", s.host_bytes},
                   {"per_device_bytes", to_json(s.memory)}});
  }
  return arr;
}

}  // namespace

nlohmann::json to_json(const TimeBreakdown& t) {
  return {{"step_seconds", t.step_s},
          {"forward_compute_seconds", t.forward_compute_s},
          {"backward_compute_seconds", t.backward_compute_s},
          {"recompute_seconds", t.recompute_s},
          {"tp_comm_exposed_seconds", t.tp_comm_s},
          {"cp_comm_exposed_seconds", t.cp_comm_s},
          {"ep_comm_exposed_seconds", t.ep_comm_s},
          {"pipeline_bubble_seconds", t.pipeline_bubble_s},
          {"dp_comm_exposed_seconds", t.dp_exposed_comm_s},
          {"offload_exposed_seconds", t.offload_exposed_s},
          {"optimizer_seconds", t.optimizer_s},
          {"sync_wait_seconds", t.sync_wait_s},
          {"pp_p2p_seconds", t.pp_p2p_s},
          {"dp_comm_overlapped_seconds", t.dp_overlapped_comm_s},
          {"dp_comm_total_seconds", t.dp_total_comm_s}};
}

nlohmann::json to_json(const Prediction& p, bool with_events) {
  nlohmann::json j;
  j["shardplan_version"] = version();
  j["model"] = p.model_name;
  j["hardware"] = p.hardware_name;
  j["hardware_calibration"] = {{"status", p.hardware_calibrated ? "calibrated" : "uncalibrated"},
                               {"rule", p.hardware_calibration_rule}};
  if (!p.framework_name.empty()) j["framework"] = p.framework_name;
  j["peak_memory_reported"] = {{"kind", name_of(p.memory_reported)},
                               {"bytes", p.stages.empty() ? 0.0 : p.worst.reported(p.memory_reported)}};
  j["nodes"] = p.nodes;
  j["devices"] = p.devices;
  j["feasible"] = p.feasible;
  j["infeasible_reason"] = p.infeasible_reason;
  j["total_parameters"] = p.total_parameters;
  if (p.active_parameters != p.total_parameters) j["active_parameters"] = p.active_parameters;
  j["trainable_parameters"] = p.trainable_parameters;
  j["memory"] = {{"per_device_bytes", to_json(p.worst)},
                 {"worst_stage", p.worst_stage},
                 {"device_capacity_bytes", p.device_capacity_bytes},
                 {"usable_bytes", p.usable_bytes},
                 {"headroom_fraction", p.headroom},
                 {"host_bytes_per_node", p.host_bytes_per_node},
                 {"host_capacity_bytes", p.host_capacity_bytes},
                 {"stages", stages_json(p)}};
  j["time"] = to_json(p.time);
  j["throughput"] = {{"tokens_per_second", p.tokens_per_s},
                     {"samples_per_second", p.samples_per_s},
                     {"tokens_per_step", p.tokens_per_step},
                     {"micro_batches_per_step", p.micro_batches},
                     {"achieved_tflops_per_device", p.achieved_tflops_per_device},
                     {"model_flops_per_step", p.model_flops_per_step},
                     {"hardware_flops_per_step", p.hardware_flops_per_step}};
  j["mfu"] = p.mfu;  // against the 16-bit (fp32) peak
  j["gemm_peak_fraction"] = p.gemm_peak_fraction;
  j["cost"] = {{"price_usd_per_hour", p.price_usd_per_hour},
               {"train_tokens", p.train_tokens ? nlohmann::json(*p.train_tokens) : nlohmann::json()},
               {"train_seconds", p.train_time_s ? nlohmann::json(*p.train_time_s) : nlohmann::json()},
               {"train_cost_usd", p.train_cost_usd ? nlohmann::json(*p.train_cost_usd) : nlohmann::json()},
               {"train_seconds_with_failures",
                p.train_time_with_failures_s ? nlohmann::json(*p.train_time_with_failures_s) : nlohmann::json()},
               {"train_cost_usd_with_failures",
                p.train_cost_with_failures_usd ? nlohmann::json(*p.train_cost_with_failures_usd) : nlohmann::json()}};
  const GoodputPrediction& g = p.goodput;
  j["resilience"] = {{"goodput", g.goodput},
                     {"job_mtbf_seconds", g.job_mtbf_s},
                     {"checkpoint_bytes", g.checkpoint_bytes},
                     {"checkpoint_writers", g.checkpoint_writers},
                     {"checkpoint_write_seconds", g.checkpoint_write_s},
                     {"restart_seconds", g.restart_s},
                     {"young_interval_seconds", g.young_interval_s},
                     {"daly_interval_seconds", g.daly_interval_s},
                     {"checkpoint_interval_steps", g.interval_steps},
                     {"checkpoint_interval_seconds", g.interval_s},
                     {"waste_per_failure_seconds", g.waste_per_failure_s}};
  nlohmann::json pipe = {{"makespan_seconds", p.pipeline.makespan_s},
                         {"bubble_seconds", p.pipeline.bubble_s()},
                         {"max_in_flight", p.pipeline.max_in_flight},
                         {"stage_busy_seconds", p.pipeline.stage_busy_s}};
  if (with_events) {
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : p.pipeline.events)
      ev.push_back({e.stage, e.chunk, e.micro_batch, e.weight ? "W" : e.backward ? "B" : "F", e.start_s, e.end_s});
    pipe["events"] = std::move(ev);
    pipe["event_fields"] = {"stage", "chunk", "micro_batch", "kind", "start_seconds", "end_seconds"};
  }
  j["pipeline"] = std::move(pipe);
  return j;
}

}  // namespace shardplan::simulator
