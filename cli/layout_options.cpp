// The layout flags shared by `shardplan simulate` and `shardplan runs import`.
#include "layout_options.hpp"

#include "lora_defaults.hpp"

#include <iostream>

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "interop/config_import.hpp"
#include "planner/partition.hpp"
#include "planner/space_parse.hpp"
#include "planner/stage_partition.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::cli {

namespace sim = shardplan::simulator;

namespace {

std::vector<int> parse_partition(const std::string& s) {
  std::vector<int> out;
  for (const auto& item : planner::split_list(s)) {
    try {
      std::size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw sim::InputError("--partition: expected comma-separated layer counts (e.g. 10,11,11,10), got '" + s + "'");
    }
  }
  return out;
}

sim::ParallelConfig to_config(const LayoutOptions& o, const sim::ModelSpec& m, const sim::ClusterSpec& c) {
  sim::ParallelConfig cfg;
  cfg.tp = o.tp;
  cfg.pp = o.pp;
  if (o.dp > 0) {
    cfg.dp = o.dp;
  } else {
    if (o.tp < 1) throw sim::InputError("--tp: expected an integer >= 1, got " + std::to_string(o.tp));
    if (o.pp < 1) throw sim::InputError("--pp: expected an integer >= 1, got " + std::to_string(o.pp));
    if (o.cp < 1) throw sim::InputError("--cp: expected an integer >= 1, got " + std::to_string(o.cp));
    const int model_parallel = o.tp * o.pp * o.cp;
    if (c.devices() % model_parallel != 0)
      throw sim::InputError(
          std::string(o.cp > 1 ? "--tp/--cp/--pp: expected tp x cp x pp" : "--tp/--pp: expected tp x pp") +
          " to divide the cluster's " + std::to_string(c.devices()) + " devices, got " +
          std::to_string(model_parallel) + " (give --dp or change --nodes)");
    cfg.dp = c.devices() / model_parallel;
  }
  cfg.cp = o.cp;
  cfg.cp_kind = *sim::cp_kind_from_string(o.cp_kind);  // CLI11 checked the name
  cfg.ep = o.ep;
  cfg.etp = o.etp;
  cfg.moe_capacity_factor = o.moe_capacity_factor;
  cfg.zero_stage = o.zero;
  cfg.sharding_degree = o.sharding_degree;
  cfg.micro_batch_size = o.micro_batch_size.value_or(1);
  cfg.global_batch_size = o.global_batch_size;
  cfg.seq_len = o.seq_len ? *o.seq_len : static_cast<int>(std::min<int64_t>(2048, m.max_positions));
  cfg.schedule = planner::parse_schedules(o.schedule).front();
  cfg.virtual_stages = o.virtual_stages;
  cfg.recompute = planner::parse_recomputes(o.recompute).front();
  cfg.recompute_num_layers = o.recompute_num_layers;
  cfg.recompute_every = o.recompute_every;
  cfg.sequence_parallel = o.sequence_parallel;
  cfg.tp_comm_overlap = o.tp_comm_overlap;
  cfg.offload_activations = o.offload_activations;
  cfg.offload_optimizer = o.offload_optimizer;
  cfg.precision = planner::parse_precisions(o.precision).front();
  cfg.mixed_precision = planner::parse_mixed_precision(o.mixed_precision);
  cfg.attention = planner::parse_attention(o.attention);
  cfg.fusion = planner::parse_fusion(o.fusion);
  cfg.grad_accum_dtype = planner::parse_grad_accum_dtype(o.grad_accum);
  cfg.packed_document_tokens = o.packed_document_tokens;
  cfg.fp8 = planner::parse_fp8_recipes(o.fp8).front();
  cfg.fp8_param_gather = o.fp8_param_gather;
  cfg.zero3_fetch = *sim::zero3_fetch_from_string(o.zero3_fetch);  // CLI11 checked the name
  cfg.lora.rank = o.lora_rank;
  cfg.lora.alpha = o.lora_alpha;
  cfg.lora.dropout = o.lora_dropout;
  cfg.lora.targets = planner::split_list(o.lora_targets);
  default_lora_targets(m, cfg.lora);
  cfg.lora.base = *sim::lora_base_from_string(o.lora_base);  // CLI11 checked the name
  if (o.partition != "auto" && o.partition != "auto-memory") cfg.partition = parse_partition(o.partition);
  cfg.rank_order = o.rank_order;
  cfg.memory_headroom = o.headroom;
  return cfg;
}

interop::ImportResult imported(const LayoutOptions& o, const sim::ModelSpec& m, const sim::ClusterSpec& c) {
  interop::ImportContext ctx;
  ctx.devices = c.devices();
  ctx.devices_per_node = c.per_node();
  ctx.seq_len = o.seq_len ? *o.seq_len : static_cast<int>(std::min<int64_t>(2048, m.max_positions));
  ctx.micro_batch_size = o.micro_batch_size.value_or(0);  // files without one (Accelerate, SMP) take it
  ctx.global_batch_size = o.global_batch_size;
  interop::ImportResult r = interop::import_config_file(o.import_file, ctx);
  for (const auto& w : r.warnings) std::cerr << "shardplan: note: " << w << "\n";
  r.config.lora.rank = o.lora_rank;
  r.config.lora.alpha = o.lora_alpha;
  r.config.lora.dropout = o.lora_dropout;
  r.config.lora.targets = planner::split_list(o.lora_targets);
  default_lora_targets(m, r.config.lora);
  r.config.memory_headroom = o.headroom;
  r.config.attention = planner::parse_attention(o.attention);  // the imported files do not say
  return r;
}

// Config keys no imported file states (the kernels live in the model code): the framework's.
const std::set<std::string> kKeysImportsLeaveOpen = {"attention", "fusion", "zero3_fetch"};

// The --framework (else the imported file's) defaults and terms on `cfg`.
std::optional<frameworks::FrameworkModel> with_framework(const LayoutOptions& o, const std::string& from_import,
                                                         sim::ParallelConfig& cfg) {
  const std::string spec = o.framework.empty() ? from_import : o.framework;
  if (spec.empty()) return std::nullopt;
  frameworks::FrameworkModel fw = frameworks::parse_framework_spec(spec, "--framework");
  std::set<std::string> keep = o.given;
  if (!o.import_file.empty()) {
    const nlohmann::json imported_keys = sim::to_json(cfg);
    for (const auto& [key, value] : imported_keys.items())
      if (!kKeysImportsLeaveOpen.count(key)) keep.insert(key);
  }
  frameworks::apply_defaults(fw, cfg, keep);
  frameworks::bind(fw, cfg);
  return fw;
}

// --partition auto|auto-memory: the DP's layer split (SageMaker auto_partition, speed|memory).
void auto_partition_config(const LayoutOptions& o, const sim::ModelSpec& m, const sim::ClusterSpec& c,
                           sim::ParallelConfig& cfg) {
  if (cfg.pp < 2 || cfg.virtual_stages != 1)
    throw sim::InputError("--partition: auto needs --pp >= 2 without interleaving");
  cfg.partition = planner::default_split(static_cast<int>(m.num_layers), cfg.pp);
  sim::validate_config(m, c, cfg);
  const sim::Evaluator ev(m, c, cfg.lora);
  const auto goal = o.partition == "auto" ? planner::PartitionGoal::speed : planner::PartitionGoal::memory;
  const auto part = planner::choose_partition(ev, cfg, goal);
  if (!part) throw sim::InputError("--partition: no layer split of this configuration fits the device memory");
  cfg.partition = *part;
}

// Records `key` in o.given when the option is on the command line.
CLI::Option* given(LayoutOptions& o, const char* key, CLI::Option* opt) {
  std::string k = key;
  opt->each([&o, k](const std::string&) { o.given.insert(k); });
  return opt;
}

}  // namespace

void add_layout_options(CLI::App* cmd, LayoutOptions& o) {
  std::string names;
  for (const auto& n : frameworks::framework_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--framework", o.framework,
                  "The framework that runs it, NAME[@VERSION] (" + names +
                      "): its defaults for the settings not given, its memory figure (default: the --import file's)");
  cmd->add_option("--model", o.model, "Built-in model name, model card or Hugging Face config.json");
  cmd->add_option("--hardware", o.hardware, "Built-in hardware profile name or profile JSON");
  cmd->add_option("--import", o.import_file,
                  "Evaluate a DeepSpeed ds_config.json or SageMaker model-parallel parameters JSON "
                  "(with --model/--hardware/--nodes/--seq-len)");
  cmd->add_option("--nodes", o.nodes, "Number of nodes")->check(CLI::PositiveNumber);
  cmd->add_option("--devices-per-node", o.devices_per_node, "Override the profile's devices per node")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tp", o.tp, "Tensor-parallel degree");
  cmd->add_option("--pp", o.pp, "Pipeline-parallel stages");
  cmd->add_option("--dp", o.dp, "Data-parallel degree (default: devices / (tp x cp x pp))");
  cmd->add_option("--cp", o.cp, "Context-parallel degree: the sequence split over cp ranks");
  given(o, "context_parallel_kind",
        cmd->add_option("--cp-kind", o.cp_kind,
                        "Context-parallel attention: ring (KV blocks passed peer to peer) or "
                        "all_to_all (DeepSpeed-Ulysses head exchange)")
            ->check(CLI::IsMember(sim::enum_names<sim::CpKind>())));
  cmd->add_option("--ep", o.ep,
                  "Expert-parallel degree (MoE models): experts split over ep ranks folded from tp x cp x dp");
  cmd->add_option("--etp", o.etp, "Expert tensor-parallel degree (MoE models; default: --tp)");
  cmd->add_option("--moe-capacity-factor", o.moe_capacity_factor,
                  "Tokens an expert takes, as a multiple of its balanced share (the rest dropped); 0 = dropless");
  cmd->add_option("--zero", o.zero, "ZeRO stage 0-3");
  cmd->add_option("--sharding-degree", o.sharding_degree, "ZeRO/MiCS sharding group size (divides dp)");
  cmd->add_option("--micro-batch-size", o.micro_batch_size,
                  "Sequences per micro-batch (default 1; with --import: for files without one)");
  cmd->add_option("--global-batch-size", o.global_batch_size, "Sequences per step (default: micro-batch x dp)");
  cmd->add_option("--seq-len", o.seq_len, "Sequence length (default: min(2048, model max))");
  given(o, "pipeline_schedule",
        cmd->add_option("--schedule", o.schedule, "Pipeline schedule")
            ->check(CLI::IsMember(sim::enum_names<sim::PipelineSchedule>())));
  cmd->add_option("--virtual-stages", o.virtual_stages, "Model chunks per stage (interleaved)");
  given(o, "recompute",
        cmd->add_option("--recompute", o.recompute, "Activation recomputation")
            ->check(CLI::IsMember(sim::enum_names<sim::Recompute>())));
  cmd->add_option("--recompute-num-layers", o.recompute_num_layers,
                  "With --recompute full: recompute only the first N blocks of each model chunk, the others keep "
                  "their activations (Megatron --recompute-method block; 0 = every block)");
  given(o, "recompute_every",
        cmd->add_option("--recompute-every", o.recompute_every,
                        "With --recompute full: recompute only every N-th block of each pipeline rank, counted over "
                        "its chunks (torchtitan selective_ac_option N; 0 = every block)"));
  given(o, "sequence_parallel",
        cmd->add_flag("--sequence-parallel", o.sequence_parallel, "Megatron sequence parallelism"));
  cmd->add_flag("--tp-comm-overlap", o.tp_comm_overlap,
                "Pipeline SP's all-gathers and reduce-scatters with the GEMMs (Megatron-Core --tp-comm-overlap; "
                "needs --sequence-parallel)");
  cmd->add_flag("--offload-activations", o.offload_activations, "Offload stored activations to host memory");
  cmd->add_flag("--offload-optimizer", o.offload_optimizer, "Optimizer states and step on the host (ZeRO-Offload)");
  given(o, "precision",
        cmd->add_option("--precision", o.precision, "Training precision")
            ->check(CLI::IsMember(sim::enum_names<sim::Precision>())));
  given(o, "mixed_precision",
        cmd->add_option("--mixed-precision", o.mixed_precision,
                        "How bf16/fp16 keep weights: master_weights (DeepSpeed, Megatron) or autocast (PyTorch AMP)")
            ->check(CLI::IsMember(sim::enum_names<sim::MixedPrecision>())));
  given(
      o, "attention",
      cmd->add_option(
          "--attention", o.attention,
          "Attention kernel: flash (fused, FlashAttention-2 / SDPA; default), flash1 (fused, FlashAttention v1 or its "
          "Triton port, e.g. llm-foundry attn_impl: triton) or eager (explicit softmax)"));
  given(o, "fusion",
        cmd->add_option(
            "--fusion", o.fusion,
            "Kernels the framework fuses: eager (a GEMM per projection, silu then mul; HF, torchtitan, "
            "shardrun; default), megatron (fused q/k/v and gate/up GEMMs, fused SwiGLU; Megatron-Core, NeMo) or "
            "compile (torch.compile: pointwise ops fused, GEMMs separate; torchtitan's [compile])"));
  given(o, "grad_accum_dtype",
        cmd->add_option(
            "--grad-accum-dtype", o.grad_accum,
            "Gradient accumulation over micro-batches (ZeRO 0/1, 16-bit): param (in .grad, the compute dtype; "
            "default) or fp32 (an fp32 buffer, reduced in fp32: DeepSpeed grad_accum_dtype / BF16_Optimizer, "
            "Megatron --accumulate-allreduce-grads-in-fp32)"));
  cmd->add_option("--packed-document-tokens", o.packed_document_tokens,
                  "Sequences packed from documents of this many tokens on average, attending within each "
                  "(cu_seqlens / THD; fused attention, cp 1); 0: one document per sequence (default)");
  cmd->add_option("--fp8", o.fp8,
                  "FP8 linears (H100, Gaudi2): none (default), delayed (TE amax history; Megatron's default), "
                  "tensorwise (current scaling) or blockwise (1x128 / 128x128 block scales)");
  cmd->add_flag("--fp8-param-gather", o.fp8_param_gather,
                "Keep the linears' weights in FP8 and gather them in FP8 (Megatron --fp8-param-gather; FSDP2 "
                "float8 all-gather); needs --fp8 and --zero >= 1");
  given(o, "zero3_fetch",
        cmd->add_option("--zero3-fetch", o.zero3_fetch,
                        "ZeRO-3 parameter fetch: prefetch (one collective per unit, overlapped; FSDP, DeepSpeed today; "
                        "default) or per_tensor_sync (DeepSpeed <= 0.4.0: one blocking collective per tensor)")
            ->check(CLI::IsMember(sim::enum_names<sim::Zero3Fetch>())));
  cmd->add_option("--lora-rank", o.lora_rank, "LoRA rank (0 = full training)");
  cmd->add_option("--lora-alpha", o.lora_alpha, "LoRA alpha");
  cmd->add_option("--lora-dropout", o.lora_dropout, "LoRA dropout probability");
  cmd->add_option("--lora-targets", o.lora_targets, "Comma-separated module names (q_proj,k_proj,...)");
  cmd->add_option("--lora-base", o.lora_base,
                  "Frozen base weights under LoRA: bf16 (default) or nf4 (QLoRA: 4-bit NormalFloat, double-quantised)")
      ->check(CLI::IsMember(sim::enum_names<sim::LoraBase>()));
  cmd->add_option("--partition", o.partition,
                  "Layers per stage (or per model chunk), comma-separated, 0 first/last for an embedding-only / "
                  "head-only stage; or auto / auto-memory");
  cmd->add_option("--rank-order", o.rank_order, "Rank layout, fastest-varying first");
  cmd->add_option("--headroom", o.headroom, "Fraction of device memory kept free");
}

Layout resolve_layout(const LayoutOptions& o, const std::function<void(sim::HardwareProfile&)>& adjust,
                      const std::string& missing_hint) {
  if (o.model.empty()) throw sim::InputError("--model: expected a model" + missing_hint);
  if (o.hardware.empty()) throw sim::InputError("--hardware: expected a hardware profile" + missing_hint);
  Layout l{sim::load_model(o.model), sim::ClusterSpec{sim::load_hardware(o.hardware), o.nodes, o.devices_per_node}, {}};
  if (adjust) adjust(l.cluster.hardware);
  std::string import_framework;
  if (o.import_file.empty()) {
    l.config = to_config(o, l.model, l.cluster);
  } else {
    interop::ImportResult r = imported(o, l.model, l.cluster);
    l.config = std::move(r.config);
    import_framework = r.framework;
  }
  l.framework = with_framework(o, import_framework, l.config);
  if (o.partition == "auto" || o.partition == "auto-memory") auto_partition_config(o, l.model, l.cluster, l.config);
  return l;
}

}  // namespace shardplan::cli
