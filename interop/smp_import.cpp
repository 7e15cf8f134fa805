// ParallelConfig from SageMaker model parallel (v1) parameters.
#include "config_import.hpp"
#include "config_import_detail.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
using nlohmann::json;
using namespace import_detail;

namespace {

// The parameters object, unwrapping {"smdistributed": {"modelparallel": {"parameters": ...}}}.
const json& unwrap(const json& j, sim::JsonContext& jc, std::vector<std::string>& warnings) {
  const json* p = &j;
  for (const char* wrapper : {"smdistributed", "modelparallel"}) {
    if (!p->contains(wrapper)) continue;
    const json& w = (*p)[wrapper];
    if (!w.is_object()) jc.fail(wrapper, "an object");
    jc = jc.child(wrapper);
    p = &w;
  }
  if (p != &j) {
    if (!sim::get_bool_or(*p, "enabled", true, jc))
      warnings.push_back(jc.file + ": '" + jc.path("enabled") + "' is false: SMP would not run; imported anyway");
    const json& params = sim::require(*p, "parameters", jc);
    if (!params.is_object()) jc.fail("parameters", "an object");
    jc = jc.child("parameters");
    p = &params;
  }
  return *p;
}

int pipeline_degree(const json& p, const ImportContext& ctx, const sim::JsonContext& jc) {
  const auto partitions = optional_int(p, "partitions", 1, jc);
  const auto alias = optional_int(p, "pipeline_parallel_degree", 1, jc);
  if (partitions && alias && *partitions != *alias)
    jc.fail("pipeline_parallel_degree", "the same value as 'partitions' (" + std::to_string(*partitions) + ")");
  return resolve_degree(partitions ? partitions : alias, ctx.pp, partitions ? "partitions" : "pipeline_parallel_degree",
                        "pipeline-parallel degree", jc);
}

void read_sharding(const json& p, const sim::JsonContext& jc, sim::ParallelConfig& cfg, std::vector<std::string>& w) {
  const long long sdp = optional_int(p, "sharded_data_parallel_degree", 1, jc).value_or(1);
  const bool shard_optimizer = sim::get_bool_or(p, "shard_optimizer_state", false, jc);
  if (sdp > 1) {
    if (sdp > cfg.dp || cfg.dp % sdp != 0)
      jc.fail("sharded_data_parallel_degree",
              "a divisor of dp = " + std::to_string(cfg.dp) + ", got " + std::to_string(sdp));
    cfg.zero_stage = 3;
    cfg.sharding_degree = static_cast<int>(sdp);
    if (shard_optimizer)
      w.push_back(jc.file + ": 'shard_optimizer_state' is ignored with sharded data parallelism (ZeRO-3)");
  } else if (shard_optimizer) {
    cfg.zero_stage = 1;
  }
}

sim::Precision read_precision(const json& p, const ImportContext& ctx, const sim::JsonContext& jc,
                              std::vector<std::string>& w) {
  const bool bf16 = sim::get_bool_or(p, "bf16", false, jc);
  const bool fp16 = sim::get_bool_or(p, "fp16", false, jc) || sim::get_bool_or(p, "fp16_params", false, jc);
  if (bf16 && fp16) jc.fail("fp16", "false when 'bf16' is true (SMP runs one of them)");
  if (bf16) return sim::Precision::bf16;
  if (fp16) return sim::Precision::fp16;
  if (ctx.precision) return *ctx.precision;
  w.push_back(jc.file + ": neither 'bf16' nor 'fp16' is set: fp32");
  return sim::Precision::fp32;
}

sim::PipelineSchedule read_schedule(const json& p, const sim::JsonContext& jc) {
  const std::string s = sim::get_string_or(p, "pipeline", "interleaved", jc);
  if (s == "interleaved") return sim::PipelineSchedule::one_f_one_b;  // SMP's 1F1B-style interleaving
  if (s == "simple") return sim::PipelineSchedule::gpipe;
  jc.fail("pipeline", "\"interleaved\" or \"simple\", got \"" + s + "\"");
}

}  // namespace

ImportResult import_smp(const json& params, const ImportContext& ctx, const std::string& source) {
  check_context(ctx, source);
  if (!params.is_object())
    throw sim::InputError(source + ": expected a JSON object (SageMaker model parallel parameters)");
  ImportResult r;
  sim::JsonContext jc{source, ""};
  const json& p = unwrap(params, jc, r.warnings);
  auto& cfg = r.config;
  cfg.seq_len = ctx.seq_len;
  cfg.tp = resolve_degree(optional_int(p, "tensor_parallel_degree", 1, jc), ctx.tp, "tensor_parallel_degree",
                          "tensor-parallel degree", jc);
  cfg.pp = pipeline_degree(p, ctx, jc);
  cfg.dp = data_parallel(ctx, cfg.tp, cfg.pp, "tensor_parallel_degree", "partitions", jc);
  read_sharding(p, jc, cfg, r.warnings);
  cfg.schedule = read_schedule(p, jc);
  const long long microbatches = optional_int(p, "microbatches", 1, jc).value_or(1);
  cfg.micro_batch_size = ctx.micro_batch_size > 0 ? ctx.micro_batch_size : 1;
  if (ctx.micro_batch_size == 0)
    r.warnings.push_back(source +
                         ": SMP parameters carry no batch size: micro-batch size 1 assumed (give it to the import)");
  cfg.global_batch_size = static_cast<int>(cfg.micro_batch_size * microbatches * cfg.dp);
  cfg.offload_activations = sim::get_bool_or(p, "offload_activations", false, jc);
  if (cfg.offload_activations) cfg.recompute = sim::Recompute::full;  // SMP offloads checkpointed activations
  cfg.precision = read_precision(p, ctx, jc, r.warnings);
  if (!sim::get_bool_or(p, "ddp", false, jc) && cfg.dp > 1)
    r.warnings.push_back(source + ": 'ddp' is not true but dp = " + std::to_string(cfg.dp) +
                         ": SMP needs ddp for data parallelism; imported with dp " + std::to_string(cfg.dp));
  if (sim::get_bool_or(p, "horovod", false, jc))
    r.warnings.push_back(source + ": 'horovod' data parallelism is modelled like ddp");
  warn_unknown_keys(p, jc,
                    {"partitions", "pipeline_parallel_degree", "tensor_parallel_degree", "microbatches", "pipeline",
                     "sharded_data_parallel_degree", "shard_optimizer_state", "offload_activations", "bf16", "fp16",
                     "fp16_params", "ddp", "horovod"},
                    {"optimize",
                     "placement_strategy",
                     "auto_partition",
                     "default_partition",
                     "active_microbatches",
                     "activation_loading_horizon",
                     "memory_weight",
                     "contiguous",
                     "ddp_port",
                     "ddp_dist_backend",
                     "tensor_parallel_seed",
                     "delayed_parameter_initialization",
                     "skip_tracing",
                     "prescaled_batch",
                     "fast_mode",
                     "sdp_reduce_bucket_size",
                     "sdp_param_persistence_threshold",
                     "sdp_max_live_parameters",
                     "sdp_hierarchical_allgather",
                     "sdp_gradient_clipping",
                     "predefined_hooks"},
                    r.warnings);
  warn_layout(ctx, cfg, r.warnings);
  return r;
}

}  // namespace shardplan::interop
