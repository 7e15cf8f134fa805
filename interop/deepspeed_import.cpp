// ParallelConfig from a DeepSpeed ds_config.
#include "config_import.hpp"
#include "config_import_detail.hpp"
#include "deepspeed_flags.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
using nlohmann::json;
using namespace import_detail;

namespace {

namespace dk = deepspeed_keys;
constexpr std::string_view kMbs = dk::micro_batch;
constexpr std::string_view kGas = dk::accumulation;
constexpr std::string_view kTbs = dk::train_batch;

// An integer batch field that may be "auto" (Hugging Face Trainer placeholder).
struct BatchField {
  std::optional<long long> value;
  bool is_auto = false;
};

BatchField batch_field(const json& ds, std::string_view key, const sim::JsonContext& jc) {
  auto it = ds.find(key);
  if (it != ds.end() && it->is_string() && it->get<std::string>() == "auto") return {std::nullopt, true};
  return {optional_int(ds, key, 1, jc), false};
}

const json& section(const json& ds, const char* key, const sim::JsonContext& jc) {
  static const json kEmpty = json::object();
  auto it = ds.find(key);
  if (it == ds.end() || it->is_null()) return kEmpty;
  if (!it->is_object()) jc.fail(key, "an object");
  return *it;
}

struct Batch {
  long long mbs = 0, gas = 0, tbs = 0;
};

[[noreturn]] void fail_auto_mbs(const sim::JsonContext& jc) {
  jc.fail(kMbs,
          "a number, got \"auto\" (a Hugging Face Trainer placeholder for --per_device_train_batch_size): "
          "write the micro-batch size per device, or give it to the import (micro-batch size)");
}

long long exact_div(long long total, long long part, std::string_view key, const std::string& what,
                    const sim::JsonContext& jc) {
  if (part <= 0 || total % part != 0)
    jc.fail(key, "a multiple of " + what + " = " + std::to_string(part) + ", got " + std::to_string(total));
  return total / part;
}

// DeepSpeed's rule: any two of the three determine the third; accumulation defaults to 1.
Batch resolve_batch(const json& ds, const ImportContext& ctx, int dp, const sim::JsonContext& jc,
                    std::vector<std::string>& warnings) {
  BatchField mbs = batch_field(ds, kMbs, jc), gas = batch_field(ds, kGas, jc), tbs = batch_field(ds, kTbs, jc);
  if (mbs.value && ctx.micro_batch_size > 0 && *mbs.value != ctx.micro_batch_size)
    jc.fail(kMbs, "the micro-batch size given to the import (" + std::to_string(ctx.micro_batch_size) + "), got " +
                      std::to_string(*mbs.value));
  if (!mbs.value && ctx.micro_batch_size > 0) mbs.value = ctx.micro_batch_size;
  if (!mbs.value) {
    if (tbs.value && gas.value)
      mbs.value = exact_div(*tbs.value, *gas.value * dp, kTbs, std::string(kGas) + " x dp", jc);
    else if (tbs.value && !gas.is_auto) mbs.value = exact_div(*tbs.value, dp, kTbs, "dp", jc);
    else if (mbs.is_auto) fail_auto_mbs(jc);
    else jc.fail(kMbs, "a number (or train_batch_size with gradient_accumulation_steps to derive it); it is missing");
  }
  if (!gas.value && tbs.value) {
    gas.value = exact_div(*tbs.value, *mbs.value * dp, kTbs, std::string(kMbs) + " x dp", jc);
  } else if (!gas.value) {
    gas.value = 1;
    if (gas.is_auto)
      warnings.push_back(jc.file + ": '" + std::string(kGas) +
                         "' is \"auto\": using 1 (the Hugging Face Trainer default)");
  }
  const long long expected = *mbs.value * *gas.value * dp;
  if (tbs.value && *tbs.value != expected)
    jc.fail(kTbs, "train_micro_batch_size_per_gpu x gradient_accumulation_steps x dp = " + std::to_string(*mbs.value) +
                      " x " + std::to_string(*gas.value) + " x " + std::to_string(dp) + " = " +
                      std::to_string(expected) + ", got " + std::to_string(*tbs.value));
  return {*mbs.value, *gas.value, expected};
}

// bf16/fp16 ("bfloat16" is DeepSpeed's alias of "bf16"): {"enabled": true|false|"auto"}.
std::optional<bool> enabled(const json& ds, const char* key, const sim::JsonContext& jc, bool& any_auto,
                            std::string& first_auto) {
  const json& s = section(ds, key, jc);
  auto it = s.find("enabled");
  if (s.empty() || it == s.end() || it->is_null()) return s.empty() ? std::nullopt : std::optional<bool>(false);
  if (it->is_string() && it->get<std::string>() == "auto") {
    if (!any_auto) first_auto = std::string(key) + ".enabled";
    any_auto = true;
    return std::nullopt;
  }
  if (!it->is_boolean()) jc.child(key).fail("enabled", "true or false");
  return it->get<bool>();
}

sim::Precision resolve_precision(const json& ds, const ImportContext& ctx, const sim::JsonContext& jc) {
  bool any_auto = false;
  std::string first_auto;
  std::optional<bool> bf16 = enabled(ds, "bf16", jc, any_auto, first_auto);
  if (!bf16) bf16 = enabled(ds, "bfloat16", jc, any_auto, first_auto);
  const std::optional<bool> fp16 = enabled(ds, "fp16", jc, any_auto, first_auto);
  if (any_auto && !ctx.precision)
    jc.fail(first_auto,
            "true or false, got \"auto\" (a Hugging Face Trainer placeholder for --bf16/--fp16): "
            "write true or false, or give the precision to the import");
  if (any_auto) return *ctx.precision;
  if (bf16.value_or(false) && fp16.value_or(false))
    jc.child("fp16").fail("enabled", "false when bf16.enabled is true (DeepSpeed runs one of them)");
  if (bf16.value_or(false)) return sim::Precision::bf16;
  if (fp16.value_or(false)) return sim::Precision::fp16;
  return sim::Precision::fp32;
}

std::string offload_device(const json& zero, const char* key, const sim::JsonContext& zc) {
  const json& s = section(zero, key, zc);
  const sim::JsonContext oc = zc.child(key);
  const std::string dev = sim::get_string_or(s, "device", "none", oc);
  if (dev != "cpu" && dev != "nvme" && dev != "none")
    oc.fail("device", "\"cpu\", \"nvme\" or \"none\", got \"" + dev + "\"");
  return dev;
}

void read_zero(const json& ds, const sim::JsonContext& jc, sim::ParallelConfig& cfg, std::vector<std::string>& w) {
  const json& zero = section(ds, "zero_optimization", jc);
  const sim::JsonContext zc = jc.child("zero_optimization");
  cfg.zero_stage = static_cast<int>(optional_int(zero, "stage", 0, zc).value_or(0));
  if (cfg.zero_stage > 3) zc.fail("stage", "0, 1, 2 or 3, got " + std::to_string(cfg.zero_stage));
  const std::string opt = offload_device(zero, "offload_optimizer", zc);
  cfg.offload_optimizer = opt != "none" || sim::get_bool_or(zero, "cpu_offload", false, zc);
  if (opt == "nvme") w.push_back(jc.file + ": optimizer offload to NVMe is modelled as CPU offload");
  if (offload_device(zero, "offload_param", zc) != "none")
    w.push_back(jc.file + ": 'zero_optimization.offload_param' (parameter offload) is not modelled; ignored");
  const long long mics = zero.contains("mics_shard_size") && zero["mics_shard_size"] == -1
                             ? -1
                             : optional_int(zero, "mics_shard_size", 1, zc).value_or(-1);
  if (mics > 0 && cfg.zero_stage >= 1) {
    if (mics > cfg.dp || cfg.dp % mics != 0)
      zc.fail("mics_shard_size", "a divisor of dp = " + std::to_string(cfg.dp) + ", got " + std::to_string(mics));
    cfg.sharding_degree = static_cast<int>(mics);
  } else if (mics > 0) {
    w.push_back(jc.file + ": 'zero_optimization.mics_shard_size' needs a ZeRO stage >= 1; ignored");
  }
  if (optional_int(zero, "zero_hpz_partition_size", 1, zc).value_or(1) > 1)
    w.push_back(jc.file + ": 'zero_optimization.zero_hpz_partition_size' (ZeRO++ hpZ) is not modelled; ignored");
  warn_unknown_keys(
      zero, zc,
      {"stage", "offload_optimizer", "offload_param", "cpu_offload", "mics_shard_size", "zero_hpz_partition_size"},
      {"overlap_comm",
       "contiguous_gradients",
       "reduce_bucket_size",
       "allgather_bucket_size",
       "allgather_partitions",
       "reduce_scatter",
       "round_robin_gradients",
       "sub_group_size",
       "stage3_prefetch_bucket_size",
       "stage3_param_persistence_threshold",
       "stage3_max_live_parameters",
       "stage3_max_reuse_distance",
       "stage3_gather_16bit_weights_on_model_save",
       "stage3_gather_fp16_weights_on_model_save",
       "gather_16bit_weights_on_model_save",
       "elastic_checkpoint",
       "load_from_fp32_weights",
       "ignore_unused_parameters",
       "mics_hierarchical_params_gather",
       "use_multi_rank_bucket_allreduce",
       "memory_efficient_linear",
       "cpu_offload_params",
       "cpu_offload_use_pin_memory",
       "log_trace_cache_warnings",
       "stage3_module_granularity_threshold"},
      w);
}

void read_checkpointing(const json& ds, const sim::JsonContext& jc, sim::ParallelConfig& cfg) {
  const json& ac = section(ds, "activation_checkpointing", jc);
  if (!ds.contains("activation_checkpointing") || ds["activation_checkpointing"].is_null()) return;
  cfg.recompute = sim::Recompute::full;
  cfg.offload_activations = sim::get_bool_or(ac, "cpu_checkpointing", false, jc.child("activation_checkpointing"));
}

// data_types.grad_accum_dtype: "fp32" (and its aliases) accumulate in fp32 (BF16_Optimizer).
void read_data_types(const json& ds, const sim::JsonContext& jc, sim::ParallelConfig& cfg) {
  const json& dt = section(ds, std::string(dk::data_types).c_str(), jc);
  const auto it = dt.find(dk::grad_accum_dtype);
  if (it == dt.end() || it->is_null()) return;
  const sim::JsonContext dc = jc.child(dk::data_types);
  if (!it->is_string()) dc.fail(dk::grad_accum_dtype, "a dtype name");
  const std::string v = it->get<std::string>();
  if (v == "fp32" || v == "float32" || v == "float" || v == "torch.float32")
    cfg.grad_accum_dtype = sim::GradAccumDtype::fp32;
  else if (v != "fp16" && v != "float16" && v != "half" && v != "bf16" && v != "bfloat16")
    dc.fail(dk::grad_accum_dtype, "fp32, fp16 or bf16 (DeepSpeed's DtypeEnum names), got \"" + v + "\"");
}

// tensor_parallel.autotp_size / pipeline.stages ("auto" = unset).
std::optional<long long> degree_in(const json& ds, const char* sec, const char* key, const sim::JsonContext& jc) {
  const json& s = section(ds, sec, jc);
  auto it = s.find(key);
  if (it != s.end() && it->is_string() && it->get<std::string>() == "auto") return std::nullopt;
  return optional_int(s, key, 1, jc.child(sec));
}

}  // namespace

ImportResult import_deepspeed(const json& ds, const ImportContext& ctx, const std::string& source) {
  check_context(ctx, source);
  if (!ds.is_object()) throw sim::InputError(source + ": expected a JSON object (a DeepSpeed config)");
  const sim::JsonContext jc{source, ""};
  ImportResult r;
  auto& cfg = r.config;
  cfg.seq_len = ctx.seq_len;
  cfg.tp = resolve_degree(degree_in(ds, "tensor_parallel", "autotp_size", jc), ctx.tp, "tensor_parallel.autotp_size",
                          "tensor-parallel degree", jc);
  cfg.pp = resolve_degree(degree_in(ds, "pipeline", "stages", jc), ctx.pp, "pipeline.stages",
                          "pipeline-parallel degree", jc);
  cfg.dp = data_parallel(ctx, cfg.tp, cfg.pp, "tensor_parallel.autotp_size", "pipeline.stages", jc);
  read_zero(ds, jc, cfg, r.warnings);
  const Batch b = resolve_batch(ds, ctx, cfg.dp, jc, r.warnings);
  cfg.micro_batch_size = static_cast<int>(b.mbs);
  cfg.global_batch_size = static_cast<int>(b.tbs);
  cfg.precision = resolve_precision(ds, ctx, jc);
  read_checkpointing(ds, jc, cfg);
  read_data_types(ds, jc, cfg);
  warn_unknown_keys(ds, jc,
                    {kMbs, kGas, kTbs, "zero_optimization", "bf16", "bfloat16", "fp16", "activation_checkpointing",
                     "tensor_parallel", "pipeline", dk::data_types},
                    {"optimizer",
                     "scheduler",
                     "gradient_clipping",
                     "steps_per_print",
                     "log_level",
                     "wall_clock_breakdown",
                     "zero_allow_untested_optimizer",
                     "zero_force_ds_cpu_optimizer",
                     "prescale_gradients",
                     "gradient_predivide_factor",
                     "communication_data_type",
                     "dump_state",
                     "memory_breakdown",
                     "flops_profiler",
                     "tensorboard",
                     "wandb",
                     "csv_monitor",
                     "comet",
                     "comms_logger",
                     "checkpoint",
                     "dataloader_drop_last",
                     "aio",
                     "shardplan_note"},
                    r.warnings);
  warn_layout(ctx, cfg, r.warnings);
  return r;
}

}  // namespace shardplan::interop
