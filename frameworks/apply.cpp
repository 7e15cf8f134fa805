// Defaults, binding and the knob-table check of apply.hpp.
#include "apply.hpp"

#include <algorithm>

#include "simulator/prediction_json.hpp"

namespace shardplan::frameworks {

using nlohmann::json;

namespace {

// The framework's defaults for a run of `precision` (a name; the precision-specific ones win).
json defaults_for(const FrameworkModel& fw, const json& precision) {
  json out = fw.defaults;
  if (precision.is_string())
    if (auto it = fw.defaults_by_precision.find(precision.get<std::string>()); it != fw.defaults_by_precision.end())
      for (const auto& [key, value] : it->items()) out[key] = value;
  return out;
}

}  // namespace

json with_defaults(const FrameworkModel& fw, const json& config) {
  const json precision =
      config.contains("precision") ? config["precision"] : fw.defaults.value("precision", json("bf16"));
  json out = defaults_for(fw, precision);
  for (const auto& [key, value] : config.items()) out[key] = value;
  return out;
}

namespace {

bool async_tp(const sim::ParallelConfig& cfg) { return cfg.tp_comm_overlap && cfg.tp > 1; }
bool model_parallel_or_fp8(const sim::ParallelConfig& cfg) {
  return cfg.tp > 1 || cfg.cp > 1 || cfg.ep > 1 || cfg.uses_fp8();
}

// Defaults that are the framework's choice only where the configuration allows them.
void settle_defaults(const KnobTable& k, sim::ParallelConfig& cfg, const std::set<std::string>& explicit_keys) {
  if (!explicit_keys.count("grad_accum_dtype")) cfg.grad_accum_dtype = sim::grad_accum_for(cfg, cfg.grad_accum_dtype);
  // Its every-N-th-block default goes with its full recompute (torchtitan's selective N); another
  // recompute the user named leaves no block frequency behind.
  if (!explicit_keys.count("recompute_every") && cfg.recompute != sim::Recompute::full) cfg.recompute_every = 0;
  // A ZeRO-3 fetch is the framework's only where stage 3 gathers parameters.
  if (!explicit_keys.count("zero3_fetch") && cfg.zero_stage != 3) cfg.zero3_fetch = sim::Zero3Fetch::prefetch;
  // Async TP switches compile on where the framework needs it for that (torchtitan raises otherwise).
  if (!explicit_keys.count("fusion") && k.tp_overlap_needs_compile && async_tp(cfg)) cfg.fusion = sim::Fusion::compile;
  if (!explicit_keys.count("fusion") && k.model_parallel_needs_fused_layers && model_parallel_or_fp8(cfg))
    cfg.fusion = sim::Fusion::megatron;
}

}  // namespace

sim::ParallelConfig config_with_framework(const FrameworkModel& fw, const json& config, const std::string& source) {
  sim::ParallelConfig cfg = sim::config_from_json(with_defaults(fw, config), source);
  std::set<std::string> given;
  for (const auto& [key, value] : config.items()) given.insert(key);
  settle_defaults(fw.runs, cfg, given);
  bind(fw, cfg);
  return cfg;
}

void apply_defaults(const FrameworkModel& fw, sim::ParallelConfig& cfg, const std::set<std::string>& explicit_keys) {
  json j = sim::to_json(cfg);
  const json defaults = defaults_for(fw, j["precision"]);  // named: items() would outlive a temporary
  for (const auto& [key, value] : defaults.items())
    if (!explicit_keys.count(key)) j[key] = value;
  const sim::FrameworkTerms terms = cfg.framework;
  cfg = sim::config_from_json(j, fw.name + " defaults");
  cfg.framework = terms;
  settle_defaults(fw.runs, cfg, explicit_keys);
}

namespace {
constexpr const char* kKernelKeys[] = {"attention", "fusion", "mixed_precision", "grad_accum_dtype", "zero3_fetch"};
}  // namespace

KernelDefaults kernel_defaults(const FrameworkModel& fw, sim::Precision precision) {
  const json all = defaults_for(fw, json(sim::to_string(precision)));
  json kernel = sim::to_json(sim::ParallelConfig{});  // a whole configuration, the kernel keys replaced
  for (const char* key : kKernelKeys)
    if (all.contains(key)) kernel[key] = all[key];
  if (all.contains("recompute_every")) kernel["recompute_every"] = all["recompute_every"];
  const sim::ParallelConfig parsed = sim::config_from_json(kernel, fw.name + " defaults");
  KernelDefaults d;
  if (all.contains("attention")) d.attention = parsed.attention;
  if (all.contains("fusion")) d.fusion = parsed.fusion;
  if (all.contains("mixed_precision")) d.mixed_precision = parsed.mixed_precision;
  if (all.contains("grad_accum_dtype")) d.grad_accum_dtype = parsed.grad_accum_dtype;
  if (all.contains("zero3_fetch")) d.zero3_fetch = parsed.zero3_fetch;
  if (all.contains("recompute_every")) d.recompute_every = parsed.recompute_every;
  return d;
}

void apply_kernel_defaults(const FrameworkModel& fw, const KernelDefaults& d, sim::ParallelConfig& cfg) {
  // The keys a configuration's JSON writes, the kernel ones left out; recompute_every is written
  // only when set (prediction_json.cpp), so an unset one takes the framework's default too.
  static const std::set<std::string> written = [] {
    std::set<std::string> keys;
    sim::ParallelConfig every;
    every.recompute_every = 1;
    const json whole = sim::to_json(every);  // named: items() would outlive a temporary
    for (const auto& item : whole.items()) keys.insert(item.key());
    for (const char* key : kKernelKeys) keys.erase(key);
    return keys;
  }();
  static const std::set<std::string> written_but_every = [] {
    std::set<std::string> keys = written;
    keys.erase("recompute_every");
    return keys;
  }();
  if (d.attention) cfg.attention = *d.attention;
  if (d.fusion) cfg.fusion = *d.fusion;
  if (d.mixed_precision) cfg.mixed_precision = *d.mixed_precision;
  if (d.grad_accum_dtype) cfg.grad_accum_dtype = *d.grad_accum_dtype;
  if (d.zero3_fetch) cfg.zero3_fetch = *d.zero3_fetch;
  const bool every_unset = cfg.recompute_every <= 0;
  if (every_unset && d.recompute_every) cfg.recompute_every = *d.recompute_every;
  settle_defaults(fw.runs, cfg, every_unset ? written_but_every : written);
}

void bind(const FrameworkModel& fw, sim::ParallelConfig& cfg) {
  cfg.framework = fw.terms;
  cfg.framework.name = fw.name + "@" + fw.version;
}

namespace {

template <class E>
bool has(const std::vector<E>& v, E e) {
  return std::find(v.begin(), v.end(), e) != v.end();
}

template <class E>
std::string not_in(const char* knob, E value, const std::vector<E>& allowed) {
  std::string list;
  for (E a : allowed) list += (list.empty() ? "" : ", ") + std::string(sim::name_of(a));
  return std::string(knob) + " " + sim::name_of(value) + " (it runs " + (list.empty() ? "none" : list) + ")";
}

// The first of the parallel degrees and layout settings the table lacks.
std::optional<std::string> layout_gap(const KnobTable& k, const sim::ParallelConfig& c) {
  if (c.tp > 1 && !k.tensor_parallel) return "tensor parallelism (tp " + std::to_string(c.tp) + ")";
  if (c.sequence_parallel && !k.sequence_parallel) return std::string("sequence parallelism");
  if (c.tp > 1 && k.sequence_parallel_required && !c.sequence_parallel)
    return std::string("tensor parallelism without sequence parallelism (it always shards the sequence)");
  if (c.tp_comm_overlap && !k.tp_comm_overlap) return std::string("TP communication overlap");
  if (c.pp > 1) {
    if (k.schedules.empty()) return "pipeline parallelism (pp " + std::to_string(c.pp) + ")";
    if (!has(k.schedules, c.schedule)) return not_in("pipeline schedule", c.schedule, k.schedules);
    if (const int least = sim::min_micro_batches(c.schedule, c.pp); least > 1 && c.micro_batches() < least)
      return std::string(sim::to_string(c.schedule)) + " with fewer than 2 x pp micro-batches (" +  // DualPipeV
             std::to_string(c.micro_batches()) + ")";
    if (!c.partition.empty() && !k.uneven_partition) return std::string("an uneven pipeline partition");
    if (std::count(c.partition.begin(), c.partition.end(), 0) > 0 && !k.embedding_only_chunks)
      return std::string("a pipeline chunk holding only the embedding or only the head");
  }
  if (c.cp > 1) {
    if (k.cp_kinds.empty()) return "context parallelism (cp " + std::to_string(c.cp) + ")";
    if (!has(k.cp_kinds, c.cp_kind)) return not_in("context-parallel kind", c.cp_kind, k.cp_kinds);
  }
  if (c.ep > 1 && !k.expert_parallel) return "expert parallelism (ep " + std::to_string(c.ep) + ")";
  if (c.micro_batches() > 1 && !k.gradient_accumulation)
    return "gradient accumulation (" + std::to_string(c.micro_batches()) + " micro-batches a step)";
  if (!has(k.zero_stages, c.zero_stage)) {
    std::string list;
    for (int z : k.zero_stages) list += (list.empty() ? "" : ", ") + std::to_string(z);
    return "ZeRO stage " + std::to_string(c.zero_stage) + " (it runs " + list + ")";
  }
  if (c.pp > 1 && sim::splits_backward(c.schedule) && c.zero_stage > k.split_backward_zero_max)
    return "ZeRO stage " + std::to_string(c.zero_stage) + " with a deferred weight gradient (" +
           sim::to_string(c.schedule) + "; at most " + std::to_string(k.split_backward_zero_max) + ")";
  if (c.pp > 1 && c.zero_stage > k.pipeline_zero_max)
    return "ZeRO stage " + std::to_string(c.zero_stage) + " with pipeline parallelism (at most " +
           std::to_string(k.pipeline_zero_max) + " with pp > 1)";
  if (k.zero0_only_alone && c.zero_stage == 0 && c.dp > 1 && (c.tp > 1 || c.pp > 1 || c.cp > 1))
    return std::string("ZeRO stage 0 beside tensor, pipeline or context parallelism (it shards over dp then)");
  if (c.sharding_degree > 0 && c.sharding_degree != c.dp && !k.sharding_degree)
    return "a sharding group of " + std::to_string(c.sharding_degree) + " inside dp " + std::to_string(c.dp);
  return std::nullopt;
}

// The first of the memory, kernel and precision settings the table lacks.
std::optional<std::string> feature_gap(const KnobTable& k, const sim::ParallelConfig& c) {
  if (c.offload_optimizer && !k.offload_optimizer) return std::string("optimizer offload");
  if (c.offload_activations && !k.offload_activations) return std::string("activation offload");
  if (!has(k.recompute, c.recompute)) return not_in("recompute", c.recompute, k.recompute);
  if (c.recompute_num_layers > 0 && !k.recompute_num_layers)
    return std::string("full recompute of only the first blocks of a chunk");
  if (c.recompute_every > 1 && !k.recompute_every) return std::string("full recompute of every N-th block only");
  if (!has(k.attention, c.attention)) return not_in("attention", c.attention, k.attention);
  if (!has(k.fusion, c.fusion)) return not_in("fusion", c.fusion, k.fusion);
  if (k.tp_overlap_needs_compile && async_tp(c) && c.fusion != sim::Fusion::compile)
    return std::string("async tensor parallelism without torch.compile (fusion compile)");
  if (k.model_parallel_needs_fused_layers && model_parallel_or_fp8(c) && c.fusion != sim::Fusion::megatron)
    return std::string("tensor, context or expert parallelism or FP8 without its fused layers (fusion megatron)");
  if (!has(k.precisions, c.precision)) return not_in("precision", c.precision, k.precisions);
  if (c.precision != sim::Precision::fp32 && !has(k.mixed_precision, c.mixed_precision))
    return not_in("mixed precision", c.mixed_precision, k.mixed_precision);
  if (!has(k.fp8, c.fp8)) return not_in("FP8 recipe", c.fp8, k.fp8);
  if (c.fp8_param_gather && !k.fp8_param_gather) return std::string("FP8 parameter all-gather");
  if (c.zero_stage == 3 && !has(k.zero3_fetch, c.zero3_fetch))
    return not_in("ZeRO-3 fetch", c.zero3_fetch, k.zero3_fetch);
  if (sim::fp32_grad_accum_applies(c) && !has(k.grad_accum, c.grad_accum_dtype))
    return not_in("gradient accumulation dtype", c.grad_accum_dtype, k.grad_accum);
  if (c.lora.enabled() && !k.lora) return "LoRA (rank " + std::to_string(c.lora.rank) + ")";
  if (c.lora.quantized_base() && !k.qlora) return std::string("QLoRA (an NF4 base)");
  if (c.packed_document_tokens > 0 && !k.packed_sequences) return std::string("packed documents (cu_seqlens)");
  return std::nullopt;
}

}  // namespace

std::optional<std::string> why_not(const FrameworkModel& fw, const sim::ParallelConfig& cfg,
                                   const sim::ClusterSpec& cluster) {
  const KnobTable& k = fw.runs;
  std::optional<std::string> gap;
  if (!has(k.runtimes, cluster.hardware.device.runtime))
    gap = std::string("devices driven by ") + sim::name_of(cluster.hardware.device.runtime);
  else if (cluster.nodes > 1 && !k.multi_node) gap = "more than one node (" + std::to_string(cluster.nodes) + ")";
  if (!gap) gap = layout_gap(k, cfg);
  if (!gap) gap = feature_gap(k, cfg);
  if (!gap) return std::nullopt;
  return fw.display + " cannot run " + *gap;
}

}  // namespace shardplan::frameworks
