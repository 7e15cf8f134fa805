#include "parallel_config.hpp"

#include <numeric>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& msg) { throw InputError(flag + ": " + msg); }

std::string str(long long v) { return std::to_string(v); }

void check_shapes(const ModelSpec& m, const ClusterSpec& c, ParallelConfig& cfg) {
  if (cfg.tp < 1) bad("--tp", "expected an integer >= 1");
  if (cfg.pp < 1) bad("--pp", "expected an integer >= 1");
  if (cfg.dp < 1) bad("--dp", "expected an integer >= 1");
  if (cfg.cp < 1) bad("--cp", "expected an integer >= 1");
  if (c.nodes < 1) bad("--nodes", "expected an integer >= 1");
  if (cfg.devices() != c.devices()) {
    const std::string cp = cfg.cp > 1 ? " x cp" : "", cpv = cfg.cp > 1 ? " x " + str(cfg.cp) : "";
    bad(cfg.cp > 1 ? "--tp/--cp/--pp/--dp" : "--tp/--pp/--dp",
        "expected tp" + cp + " x pp x dp = the cluster's " + str(c.devices()) + " devices (" + str(c.nodes) +
            " nodes x " + str(c.per_node()) + "), got " + str(cfg.tp) + cpv + " x " + str(cfg.pp) + " x " +
            str(cfg.dp) + " = " + str(cfg.devices()));
  }
  if (m.num_heads % cfg.tp != 0)
    bad("--tp", "expected a divisor of the model's " + str(m.num_heads) + " attention heads, got " + str(cfg.tp));
  if (m.num_kv_heads % cfg.tp != 0)
    bad("--tp", "expected a divisor of the model's " + str(m.num_kv_heads) + " key/value heads, got " + str(cfg.tp));
  if (cfg.seq_len < 1) bad("--seq-len", "expected an integer >= 1");
  if (m.positional == PositionalKind::learned && cfg.seq_len > m.max_positions)
    bad("--seq-len", "expected <= the model's " + str(m.max_positions) + " learned positions, got " + str(cfg.seq_len));
  if (cfg.tp_comm_overlap && (!cfg.sequence_parallel || cfg.tp < 2))
    bad("--tp-comm-overlap", "expected --sequence-parallel and --tp >= 2 with it (it overlaps SP's collectives)");
  if (cfg.sequence_parallel && cfg.seq_len % cfg.tp != 0)
    bad("--sequence-parallel",
        "needs --seq-len divisible by --tp (" + str(cfg.seq_len) + " % " + str(cfg.tp) + " != 0)");
}

void check_zero(ParallelConfig& cfg) {
  if (cfg.zero_stage < 0 || cfg.zero_stage > 3) bad("--zero", "expected 0, 1, 2 or 3, got " + str(cfg.zero_stage));
  if (cfg.sharding_degree < 0) bad("--sharding-degree", "expected an integer >= 1");
  if (cfg.sharding_degree == 0) cfg.sharding_degree = cfg.dp;
  if (cfg.sharding_degree > cfg.dp || cfg.dp % cfg.sharding_degree != 0)
    bad("--sharding-degree", "expected a divisor of --dp (" + str(cfg.dp) + "), got " + str(cfg.sharding_degree));
  if (cfg.offload_optimizer && cfg.zero_stage == 0)
    bad("--offload-optimizer", "needs --zero 1, 2 or 3 (ZeRO-Offload partitions what it moves to the host)");
  if (cfg.zero_stage == 0 && cfg.sharding_degree != cfg.dp)
    bad("--sharding-degree", "needs --zero 1, 2 or 3 (stage 0 shards nothing)");
  if (cfg.zero3_fetch != Zero3Fetch::prefetch && cfg.zero_stage != 3)
    bad("--zero3-fetch", "per_tensor_sync needs --zero 3 (only stage 3 gathers parameters)");
  if (cfg.fp32_grad_accum() && !fp32_grad_accum_applies(cfg))
    bad("--grad-accum-dtype",
        cfg.zero_stage > 1 ? "fp32 expected --zero 0 or 1 (stages 2 and 3 reduce each micro-batch's gradients)"
                           : "fp32 expected a 16-bit precision with master weights (the gradients are fp32 already)");
}

void check_batch(ParallelConfig& cfg) {
  if (cfg.micro_batch_size < 1) bad("--micro-batch-size", "expected an integer >= 1");
  if (cfg.global_batch_size == 0) cfg.global_batch_size = cfg.micro_batch_size * cfg.dp;
  const int per_step = cfg.micro_batch_size * cfg.dp;
  if (cfg.global_batch_size < per_step || cfg.global_batch_size % per_step != 0)
    bad("--global-batch-size",
        "expected a multiple of micro-batch-size x dp = " + str(per_step) + ", got " + str(cfg.global_batch_size));
}

void check_recompute(const ModelSpec& m, const ParallelConfig& cfg) {
  if (cfg.recompute_num_layers < 0 || cfg.recompute_num_layers > m.num_layers)
    bad("--recompute-num-layers", "expected 0 (every block) to the model's " + str(m.num_layers) + " layers, got " +
                                      str(cfg.recompute_num_layers));
  if (cfg.recompute_num_layers > 0 && cfg.recompute != Recompute::full)
    bad("--recompute-num-layers", "needs --recompute full (it picks which blocks are fully recomputed)");
  if (cfg.recompute_every < 0)
    bad("--recompute-every", "expected 0 (unused) or a block frequency N >= 1, got " + str(cfg.recompute_every));
  if (cfg.recompute_every > 0 && cfg.recompute != Recompute::full)
    bad("--recompute-every", "needs --recompute full (it picks which blocks are fully recomputed)");
  if (cfg.recompute_every > 0 && cfg.recompute_num_layers > 0)
    bad("--recompute-every", "expected 0 with --recompute-num-layers (every N-th block or the first k, not both)");
  if (cfg.recompute == Recompute::op_sac)
    if (const std::string why = op_sac_unsupported(m, cfg); !why.empty()) throw InputError(why);
}

void check_pipeline(const ModelSpec& m, ParallelConfig& cfg) {
  const int v = cfg.virtual_stages;
  if (cfg.schedule == PipelineSchedule::interleaved) {
    if (cfg.pp < 2) bad("--schedule", "interleaved needs --pp >= 2");
    if (v < 2) bad("--virtual-stages", "expected >= 2 with --schedule interleaved, got " + str(v));
    if (cfg.micro_batches() % cfg.pp != 0)
      bad("--global-batch-size", "interleaved needs the number of micro-batches (" + str(cfg.micro_batches()) +
                                     ") to be a multiple of --pp (" + str(cfg.pp) + ")");
  } else if (two_chunks(cfg.schedule)) {
    if (v != 2)
      bad("--virtual-stages", std::string(to_string(cfg.schedule)) + " places 2 chunks per stage, got " + str(v));
  } else if (v != 1) {
    bad("--virtual-stages",
        "expected 1 unless --schedule interleaved, a V (zbv, vhalf, vmin, dualpipev) or dualpipe, got " + str(v));
  }
  // deepseek-ai/DualPipe dualpipe.py:332-333 @ 3da1bbe: an even rank count (rank r pairs with
  // p - 1 - r) and an even micro-batch count (half enter at each end).
  if (bidirectional(cfg.schedule)) {
    if (cfg.pp % 2 != 0)
      bad("--pp",
          "dualpipe runs two pipelines in opposite directions over rank pairs (r, pp - 1 - r), expected an "
          "even count, got " +
              str(cfg.pp));
    if (cfg.micro_batches() % 2 != 0)
      bad("--global-batch-size",
          "dualpipe sends half the micro-batches each way, expected an even count "
          "(global batch / (micro-batch size x dp)), got " +
              str(cfg.micro_batches()));
  }
  if (splits_backward(cfg.schedule)) {
    const std::string name = to_string(cfg.schedule);
    if (cfg.pp < 2) bad("--schedule", name + " needs --pp >= 2");
    // A recomputed forward would keep its GEMM inputs alive until the deferred W, which the
    // pipeline's memory count does not follow (AMD Primus refuses the pair: config_validation.py).
    if (recomputes_forward(cfg))
      bad("--recompute", name +
                             " defers each weight gradient past its input gradient; recomputing the forward "
                             "for it is not modelled (expected --recompute none)");
    // DualPipe(V): deepseek-ai/DualPipe @ 3da1bbe asserts num_chunks >= num_ranks * 2 (dualpipev.py:318,
    // dualpipe.py:333).
    if (const int least = min_micro_batches(cfg.schedule, cfg.pp); cfg.micro_batches() < least)
      bad("--global-batch-size", name + " expected at least 2 x --pp = " + str(least) +
                                     " micro-batches (global batch / (micro-batch size x dp)), got " +
                                     str(cfg.micro_batches()));
  }
  const long long chunks = model_chunks(cfg);
  if (!cfg.partition.empty()) {
    if (static_cast<long long>(cfg.partition.size()) != cfg.pp &&
        static_cast<long long>(cfg.partition.size()) != chunks)
      bad("--partition", "expected " + str(cfg.pp) + " (or pp x virtual stages = " + str(chunks) +
                             ") layer counts, got " + str(static_cast<long long>(cfg.partition.size())));
    if (v > 1 && static_cast<long long>(cfg.partition.size()) != chunks)
      bad("--partition", "expected pp x virtual stages = " + str(chunks) + " layer counts with two or more chunks");
    // The first chunk may hold only the embedding and the last only the head (Megatron-Core's
    // --pipeline-model-parallel-layout "E|...|L", torchtitan's [["tok_embeddings"], ..., ["norm", "output"]]).
    long long sum = 0;
    const std::size_t last = cfg.partition.size() - 1;
    for (std::size_t i = 0; i <= last; ++i) {
      const int l = cfg.partition[i];
      if (l < 0) bad("--partition", "expected layer counts >= 0, got " + str(l));
      if (l == 0 && i != 0 && i != last)
        bad("--partition",
            "a chunk of 0 layers is allowed only first (embedding only) or last (head only); expected >= 1 "
            "layer at chunk " +
                str(static_cast<long long>(i)));
      sum += l;
    }
    if (sum != m.num_layers)
      bad("--partition", "layer counts sum to " + str(sum) + ", expected the model's " + str(m.num_layers) + " layers");
  } else if (m.num_layers % chunks != 0) {
    bad("--pp", "expected pp x virtual stages (" + str(chunks) + ") to divide the model's " + str(m.num_layers) +
                    " layers, or an explicit --partition");
  }
}

void check_lora(const ModelSpec& m, const ParallelConfig& cfg) {
  const auto& l = cfg.lora;
  if (l.rank < 0) bad("--lora-rank", "expected an integer >= 0");
  if (!l.enabled()) {
    if (!l.targets.empty()) bad("--lora-targets", "needs --lora-rank > 0");
    if (l.base != LoraBase::bf16) bad("--lora-base", "expected --lora-rank > 0 with nf4 (QLoRA trains adapters)");
    return;
  }
  if (l.alpha <= 0) bad("--lora-alpha", "expected a number > 0");
  if (l.base == LoraBase::nf4 && cfg.uses_fp8())
    bad("--lora-base", "expected bf16 with --fp8 (a 4-bit NF4 base is dequantised to 16-bit, not FP8)");
  if (l.dropout < 0 || l.dropout >= 1) bad("--lora-dropout", "expected a probability in [0, 1)");
  if (l.targets.empty()) bad("--lora-targets", "expected at least one module name with --lora-rank > 0");
  (void)resolve_lora_targets(m, l.targets);  // throws naming the unknown target
}

// Context parallelism: the sequence splits into cp pieces (2cp chunks for ring's causal load
// balancing); ring attention runs fused kernels (Megatron-Core and torchtitan run it through TE /
// SDPA), Ulysses any attention.
void check_context(const ModelSpec& m, const ParallelConfig& cfg) {
  if (cfg.cp == 1) return;
  const int chunks = cp_sequence_chunks(m, cfg.cp, cfg.cp_kind);
  if (cfg.seq_len % (chunks * (cfg.sequence_parallel ? cfg.tp : 1)) != 0)
    bad("--cp", "expected --seq-len (" + str(cfg.seq_len) + ") divisible by " + str(chunks) +
                    (cfg.sequence_parallel && cfg.tp > 1 ? " x tp" : "") + " (" +
                    (chunks == 2 * cfg.cp ? "2 chunks per rank for causal load balancing" : "one chunk per rank") +
                    "), got cp " + str(cfg.cp));
  // A ring step is a blockwise fused kernel; Ulysses wraps whatever attention the rank runs
  // (DeepSpeed-Ulysses' DistributedAttention takes any local attention, eager included).
  if (cfg.cp_kind == CpKind::ring && cfg.attention != AttentionKind::flash)
    bad("--cp", "expected --attention flash with ring attention (each ring step runs a fused kernel)");
  if (cfg.cp_kind == CpKind::all_to_all && cfg.attention == AttentionKind::flash1)
    bad("--cp", "expected --attention flash or eager with all_to_all context parallelism");
  if (cfg.cp_kind == CpKind::all_to_all && !cp_heads_divide(m, cfg.tp, cfg.cp))
    bad("--cp-kind", "all_to_all needs tp x cp (" + str(cfg.tp * cfg.cp) + ") to divide the model's " +
                         str(m.num_heads) + " heads and " + str(m.num_kv_heads) + " key/value heads; expected ring");
}

// Packed documents: a varlen / THD fused kernel attends within each; an explicit softmax computes
// the whole s x s block, and context parallelism's chunks are modelled over one document.
}  // namespace

void validate_packing(int l, int seq_len, AttentionKind attention) {
  if (l == 0) return;
  if (l < 0) bad("--packed-document-tokens", "expected a positive number of tokens (or 0: not packed), got " + str(l));
  if (l >= seq_len)
    bad("--packed-document-tokens", "expected fewer tokens than --seq-len (" + str(seq_len) + "), got " + str(l));
  if (!fused(attention))
    bad("--packed-document-tokens",
        "expected --attention flash or flash1 with it (an explicit softmax computes the "
        "whole s x s block)");
}

void validate_packing(const ParallelConfig& cfg) {
  validate_packing(cfg.packed_document_tokens, cfg.seq_len, cfg.attention);
  if (cfg.packed_document_tokens > 0 && cfg.cp > 1)
    bad("--packed-document-tokens", "expected --cp 1 with it, got cp " + str(cfg.cp));
}

namespace {

// Expert parallelism folded over the stage's tp x cp x dp ranks (Megatron-Core parallel folding).
void check_experts(const ModelSpec& m, ParallelConfig& cfg) {
  if (cfg.ep < 1) bad("--ep", "expected an integer >= 1");
  if (cfg.etp < 0) bad("--etp", "expected an integer >= 1");
  if (!m.is_moe()) {
    if (cfg.ep > 1) bad("--ep", "expected 1: model '" + m.name + "' has no experts");
    // A dense model has no expert layers: etp is meaningless and follows tp (a plan edited to a
    // new tp keeps its old expert_tensor_parallel; it is not an error).
    cfg.etp = cfg.tp;
    if (cfg.moe_capacity_factor != 0) bad("--moe-capacity-factor", "expected 0: model '" + m.name + "' has no experts");
    return;
  }
  if (cfg.etp == 0) cfg.etp = cfg.tp;
  if (m.moe.num_experts % cfg.ep != 0)
    bad("--ep", "expected a divisor of the model's " + str(m.moe.num_experts) + " experts, got " + str(cfg.ep));
  const int stage_ranks = cfg.tp * cfg.cp * cfg.dp;
  if (stage_ranks % (cfg.ep * cfg.etp) != 0)
    bad("--ep", "expected ep x etp (" + str(cfg.ep) + " x " + str(cfg.etp) +
                    ") to divide tp x cp x dp = " + str(stage_ranks) + " (experts fold onto a pipeline stage's ranks)");
  if (m.moe.expert_ffn_hidden % cfg.etp != 0)
    bad("--etp",
        "expected a divisor of the experts' FFN width " + str(m.moe.expert_ffn_hidden) + ", got " + str(cfg.etp));
  if (cfg.tp > 1 && !cfg.sequence_parallel)
    bad("--sequence-parallel",
        "expected with --tp > 1 on a mixture-of-experts model (Megatron-Core routes the "
        "sequence-parallel tokens)");
  if (cfg.moe_capacity_factor != 0 && cfg.moe_capacity_factor < 1)
    bad("--moe-capacity-factor",
        "expected 0 (dropless) or a number >= 1, got " + std::to_string(cfg.moe_capacity_factor));
}

void check_fp8(const ClusterSpec& c, const ParallelConfig& cfg) {
  if (cfg.fp8_param_gather && !cfg.uses_fp8())
    bad("--fp8-param-gather", "expected --fp8 delayed, tensorwise or blockwise with it (FP8-held weights)");
  if (cfg.fp8_param_gather && cfg.zero_stage == 0)
    bad("--fp8-param-gather", "expected --zero 1, 2 or 3 with it (the sharded optimizer's parameter gather in FP8)");
  if (cfg.fp8_param_gather && cfg.lora.enabled())
    bad("--fp8-param-gather", "expected no LoRA (the frozen base weights are not gathered by the optimizer)");
  if (!cfg.uses_fp8()) return;
  if (!c.hardware.device.has_fp8())
    bad("--fp8", std::string("the device of '") + c.hardware.name + "' (" + c.hardware.device.name +
                     ") has no FP8 tensor cores (no peak_TFLOPs.fp8 in its profile): expected --fp8 none");
  if (cfg.precision == Precision::fp32)
    bad("--fp8", "expected --precision bf16 or fp16 (FP8 GEMMs sit inside 16-bit mixed precision)");
}

}  // namespace

const char* to_string(CpKind v) { return name_of(v); }
std::optional<CpKind> cp_kind_from_string(const std::string& name) { return enum_from_name<CpKind>(name); }
const char* to_string(LoraBase v) { return name_of(v); }
std::optional<LoraBase> lora_base_from_string(const std::string& name) { return enum_from_name<LoraBase>(name); }
const char* to_string(Fp8Recipe v) { return name_of(v); }
std::optional<Fp8Recipe> fp8_recipe_from_string(const std::string& name) { return enum_from_name<Fp8Recipe>(name); }
const char* to_string(MixedPrecision v) { return name_of(v); }
std::optional<MixedPrecision> mixed_precision_from_string(const std::string& name) {
  return enum_from_name<MixedPrecision>(name);
}
const char* to_string(AttentionKind v) { return name_of(v); }
std::optional<AttentionKind> attention_kind_from_string(const std::string& name) {
  return enum_from_name<AttentionKind>(name);
}
const char* to_string(Fusion v) { return name_of(v); }
std::optional<Fusion> fusion_from_string(const std::string& name) { return enum_from_name<Fusion>(name); }
const char* to_string(GradAccumDtype v) { return name_of(v); }
std::optional<GradAccumDtype> grad_accum_dtype_from_string(const std::string& name) {
  return enum_from_name<GradAccumDtype>(name);
}
const char* to_string(Zero3Fetch v) { return name_of(v); }
std::optional<Zero3Fetch> zero3_fetch_from_string(const std::string& name) { return enum_from_name<Zero3Fetch>(name); }
const char* to_string(Recompute v) { return name_of(v); }

bool fp32_grad_accum_applies(const ParallelConfig& cfg) { return cfg.zero_stage <= 1 && !cfg.fp32_weights(); }

GradAccumDtype grad_accum_for(const ParallelConfig& cfg, GradAccumDtype wanted) {
  return wanted == GradAccumDtype::fp32 && !fp32_grad_accum_applies(cfg) ? GradAccumDtype::param : wanted;
}

void validate_config(const ModelSpec& m, const ClusterSpec& c, ParallelConfig& cfg) {
  check_shapes(m, c, cfg);
  check_zero(cfg);
  check_batch(cfg);
  check_pipeline(m, cfg);
  check_lora(m, cfg);
  check_recompute(m, cfg);
  check_fp8(c, cfg);
  check_context(m, cfg);
  validate_packing(cfg);
  check_experts(m, cfg);
  if (c.hardware.device.peak(cfg.precision) <= 0)
    bad("--precision", std::string("the device of '") + c.hardware.name + "' has no " + to_string(cfg.precision) +
                           " peak in its profile");
  if (cfg.memory_headroom < 0 || cfg.memory_headroom >= 1) bad("--headroom", "expected a fraction in [0, 1)");
}

std::string op_sac_unsupported(const ModelSpec& m, const ParallelConfig& cfg) {
  const std::string flag = "--recompute: op_sac (torchtitan's per-op policy) is modelled ";
  if (cfg.fusion == Fusion::megatron) return flag + "on unfused linears, expected --fusion eager";
  if (cfg.uses_fp8()) return flag + "without --fp8 (a float8 linear runs _scaled_mm, not the mm its save list names)";
  if (cfg.lora.enabled()) return flag + "for full training, expected --lora-rank 0";
  if (m.is_moe() || m.mla.enabled()) return flag + "for dense blocks with standard attention, not MoE or MLA models";
  if (cfg.cp > 1) return flag + "without context parallelism (a ring runs SDPA once per step), expected --cp 1";
  return "";
}

int chunk_layers(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage) {
  const int n = model_chunks(cfg);
  if (cfg.partition.empty()) return static_cast<int>(m.num_layers / n);
  if (static_cast<int>(cfg.partition.size()) == n) return cfg.partition[model_chunk_index(cfg, chunk, stage)];
  return cfg.partition[stage];
}

int rank_blocks_before(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage) {
  int before = 0;
  for (int c = 0; c < chunk; ++c) before += chunk_layers(m, cfg, c, stage);
  return before;
}

std::vector<int> layers_per_chunk(const ModelSpec& m, const ParallelConfig& cfg) {
  const int p = cfg.pp, v = cfg.virtual_stages;
  std::vector<int> out(static_cast<std::size_t>(p) * v);
  if (bidirectional(cfg.schedule)) {  // two directions over the same stages: chunk by chunk
    for (int ch = 0; ch < v; ++ch)
      for (int s = 0; s < p; ++s) out[static_cast<std::size_t>(ch * p + s)] = chunk_layers(m, cfg, ch, s);
    SHARDPLAN_CHECK(std::accumulate(out.begin(), out.end(), 0LL) == v * m.num_layers,
                    "partition does not cover the model in each direction");
    return out;
  }
  if (cfg.partition.empty()) {
    std::fill(out.begin(), out.end(), static_cast<int>(m.num_layers / (p * v)));
  } else {
    // Given chunk by chunk in model order (model_chunk_index: chunk c of stage s), or v == 1.
    out = cfg.partition;
  }
  SHARDPLAN_CHECK(std::accumulate(out.begin(), out.end(), 0LL) == m.num_layers, "partition does not cover the model");
  return out;
}

}  // namespace shardplan::simulator
