#pragma once
// ParallelConfig: one point of the configuration space; ClusterSpec: profile x nodes.
// Validated once, at the edge (validate_config), then trusted by the cost model.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "enum_names.hpp"
#include "framework_terms.hpp"
#include "hardware_profile.hpp"
#include "model_spec.hpp"
#include "pipeline_schedule.hpp"

namespace shardplan::simulator {

// What a transformer block keeps for its backward:
//   none       every op's saved tensors
//   selective  all but the attention core's s x s tensors, recomputed in backward (Megatron-LM
//              --recompute-granularity selective; Korthikanti et al. 2022, §5); nothing under flash
//   full       the block's input only; the whole block runs forward again in its backward
//              (Megatron --recompute-granularity full, torchtitan mode "full"). Hugging Face's
//              gradient_checkpointing_enable() is exactly this: every decoder layer is a
//              GradientCheckpointingLayer run under torch.utils.checkpoint (transformers
//              src/transformers/modeling_layers.py:61-89 @00029cfa0ed780d1ddb6e5d199bd92e86c5791a2;
//              use_reentrant=True by default, modeling_utils.py gradient_checkpointing_enable
//              @040ba146759afc625c77f49d04982bb54873995f), which saves the layer's inputs (the hidden
//              states; mask and rotary tables are shared by all layers) and reruns the whole layer
//   op_sac     torchtitan's per-op selective checkpointing ([activation_checkpoint] mode "selective",
//              selective_ac_option "op"): the outputs of the ops on its save list are kept, every
//              other op runs again in backward (simulator/op_sac.hpp)
enum class Recompute { none, selective, full, op_sac };
template <>
struct EnumNames<Recompute> {
  static constexpr NameTable<Recompute, 4> table{{{Recompute::none, "none"},
                                                  {Recompute::selective, "selective"},
                                                  {Recompute::full, "full"},
                                                  {Recompute::op_sac, "op_sac"}}};
};
const char* to_string(Recompute r);

// How a bf16/fp16 run keeps its weights (ignored for fp32):
//   master_weights  weights and gradients in the compute dtype, an fp32 master copy with the
//                   Adam moments in the optimizer (ZeRO paper §3's 2+2+12 bytes; DeepSpeed, Megatron)
//   autocast        fp32 weights, gradients and moments (4+4+8 bytes); each linear casts its
//                   weight to the compute dtype as it runs (PyTorch AMP, FSDP without param_dtype)
enum class MixedPrecision { master_weights, autocast };
template <>
struct EnumNames<MixedPrecision> {
  static constexpr NameTable<MixedPrecision, 2> table{
      {{MixedPrecision::master_weights, "master_weights"}, {MixedPrecision::autocast, "autocast"}}};
};
const char* to_string(MixedPrecision m);
// The recipe named `name` ("master_weights" | "autocast"); nullopt for anything else.
std::optional<MixedPrecision> mixed_precision_from_string(const std::string& name);
// Weights (and so gradients) are held in fp32: an fp32 run, or mixed precision by autocast.
inline bool fp32_weights(Precision p, MixedPrecision m) {
  return p == Precision::fp32 || m == MixedPrecision::autocast;
}

// How the attention core runs (softmax(Q K^T / sqrt(d) + mask) V):
//   flash  one fused kernel per pass (FlashAttention-2, Dao 2023; PyTorch SDPA): no s x s score
//          tensor is stored, the backward recomputes the scores inside the kernel. What
//          Megatron-Core, torchtitan, DeepSpeed, FSDP and Hugging Face run today; the default.
//   flash1 the first-generation fused kernels: FlashAttention v1 (Dao et al. 2022) and its Triton
//          port (flash_attn_triton.py; llm-foundry's attn_impl: triton, the only fused kernel that
//          took an ALiBi bias before flash-attn 2.4). Memory as flash; time the flash curve slowed
//          by the profile's device.flash_attention_v1_slowdown (FlashAttention-2 paper §4.1: FA2 is
//          1.3-1.5x faster forward and ~2x faster backward than FlashAttention in Triton).
//   eager  explicit GEMMs, softmax and dropout, each storing its s x s output for backward
//          (Korthikanti et al. 2022, §4.1); what shardrun runs on LibTorch < 2 and on the CPU.
enum class AttentionKind { flash, flash1, eager };
template <>
struct EnumNames<AttentionKind> {
  static constexpr NameTable<AttentionKind, 3> table{
      {{AttentionKind::flash, "flash"}, {AttentionKind::flash1, "flash1"}, {AttentionKind::eager, "eager"}}};
};
// One fused kernel per pass (flash or flash1): no s x s tensor stored, scores recomputed in backward.
inline bool fused(AttentionKind k) { return k != AttentionKind::eager; }
const char* to_string(AttentionKind k);
// The kind named `name` ("flash" | "flash1" | "eager"); nullopt for anything else.
std::optional<AttentionKind> attention_kind_from_string(const std::string& name);

// Which kernels the framework fuses around a block's linears (fixed by the framework, not searched):
//   eager     one GEMM per projection as the card names them (HF q_proj, k_proj, v_proj; gate_proj,
//             up_proj) and SwiGLU as silu then multiply, each keeping its input for backward:
//             Hugging Face, torchtitan without compile, shardrun; the default.
//   megatron  Megatron-Core's layers: q, k, v as one GEMM (linear_qkv) and gate, up as one
//             (linear_fc1 with gated_linear_unit), each timed at the fused GEMM's size; SwiGLU as
//             one kernel that keeps only the fc1 output and recomputes silu in backward
//             (megatron/core/fusions/fused_bias_swiglu.py). NeMo, MLPerf's Megatron runs.
//   compile   torch.compile (Inductor) over each block: the projections stay separate GEMMs as in
//             eager, the pointwise ops fuse into single kernels; SwiGLU is one kernel that keeps
//             gate and up and recomputes silu in backward (the min-cut partitioner recomputes
//             cheap pointwise ops: torch/_functorch/partitioners.py). torchtitan's [compile],
//             fms-fsdp's use_torch_compile, llm-foundry's compile_config.
enum class Fusion { eager, megatron, compile };
template <>
struct EnumNames<Fusion> {
  static constexpr NameTable<Fusion, 3> table{
      {{Fusion::eager, "eager"}, {Fusion::megatron, "megatron"}, {Fusion::compile, "compile"}}};
};
// SwiGLU (and the other pointwise chains) as one kernel: Megatron's fused kernels, or Inductor's.
inline bool fuses_pointwise(Fusion f) { return f != Fusion::eager; }
const char* to_string(Fusion f);
std::optional<Fusion> fusion_from_string(const std::string& name);

// FP8 training (Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; NVIDIA Transformer
// Engine): the transformer blocks' linear layers run their GEMMs in FP8 (e4m3 forward, e5m2
// gradients: the "hybrid" format), everything else (attention core, norms, LM head, optimizer,
// master weights) stays as `precision` says. The recipe is how each tensor's scale is chosen:
//   delayed     from an amax history of earlier steps (TE DelayedScaling; Megatron --fp8-recipe
//               delayed): the cast is one pass, the amaxes are all-reduced once per micro-batch
//   tensorwise  from the tensor's own current amax (TE Float8CurrentScaling, torchao's tensorwise
//               Float8Linear): one more read of each tensor before its cast
//   blockwise   one scale per 1x128 / 128x128 block (DeepSeek-V3 §3.3; TE Float8BlockScaling):
//               one pass, scales in fp32 beside the data
enum class Fp8Recipe { none, delayed, tensorwise, blockwise };
template <>
struct EnumNames<Fp8Recipe> {
  static constexpr NameTable<Fp8Recipe, 4> table{{{Fp8Recipe::none, "none"},
                                                  {Fp8Recipe::delayed, "delayed"},
                                                  {Fp8Recipe::tensorwise, "tensorwise"},
                                                  {Fp8Recipe::blockwise, "blockwise"}}};
};
const char* to_string(Fp8Recipe r);
// The recipe named `name` ("none" | "delayed" | "tensorwise" | "blockwise"); nullopt otherwise.
std::optional<Fp8Recipe> fp8_recipe_from_string(const std::string& name);

// How ZeRO-3 brings a unit's parameters in and its gradients out:
//   prefetch         one collective per unit (a block's flat parameters, FSDP's FlatParameter,
//                    DeepSpeed >= 0.4.1's coalesced fetch), the next unit's gather issued behind
//                    the current one's compute. What FSDP, DeepSpeed and shardrun do today.
//   per_tensor_sync  DeepSpeed's first ZeRO-3 (0.3.13 to 0.4.0, 2021): one all-gather per
//                    parameter tensor, each behind a torch.cuda.synchronize(), into a list of one
//                    output view per rank, and one reduce-scatter per gradient tensor; nothing
//                    overlaps (deepspeedai/DeepSpeed issue #1069, pull #1188). For replaying
//                    runs of that era (Narayanan et al. SC'21 Table 2), never searched.
enum class Zero3Fetch { prefetch, per_tensor_sync };
template <>
struct EnumNames<Zero3Fetch> {
  static constexpr NameTable<Zero3Fetch, 2> table{
      {{Zero3Fetch::prefetch, "prefetch"}, {Zero3Fetch::per_tensor_sync, "per_tensor_sync"}}};
};
const char* to_string(Zero3Fetch f);
// The fetch named `name` ("prefetch" | "per_tensor_sync"); nullopt for anything else.
std::optional<Zero3Fetch> zero3_fetch_from_string(const std::string& name);

// The dtype a 16-bit run accumulates its weight gradients in over the micro-batches of a step,
// and reduces them in (ZeRO 0/1 only: stages 2/3 reduce every micro-batch):
//   param  the compute dtype, in .grad: PyTorch's AccumulateGrad adds each later micro-batch's
//          gradients in place (HF, DDP no_sync, DeepSpeed fp16); the default.
//   fp32   an fp32 buffer besides the 16-bit weights, all-reduced in fp32: DeepSpeed's
//          data_types.grad_accum_dtype fp32 (its BF16_Optimizer, the default for bf16 at ZeRO
//          0/1: each micro-batch's gradients cast and added into it, bf16_optimizer.py
//          update_hp_grads), Megatron's --accumulate-allreduce-grads-in-fp32 (main_grad; with
//          fusion megatron the weight-gradient GEMM accumulates into it directly).
enum class GradAccumDtype { param, fp32 };
template <>
struct EnumNames<GradAccumDtype> {
  static constexpr NameTable<GradAccumDtype, 2> table{
      {{GradAccumDtype::param, "param"}, {GradAccumDtype::fp32, "fp32"}}};
};
const char* to_string(GradAccumDtype d);
std::optional<GradAccumDtype> grad_accum_dtype_from_string(const std::string& name);
struct ParallelConfig;
// `wanted` where the configuration can take it (fp32: ZeRO 0/1 and 16-bit master weights), else
// param: what a framework set to accumulate in fp32 does at the stages that reduce every micro-batch.
GradAccumDtype grad_accum_for(const ParallelConfig& cfg, GradAccumDtype wanted);
// Where fp32 accumulation exists: ZeRO 0/1 (2 and 3 reduce every micro-batch) with 16-bit weights
// and an fp32 master (fp32 weights have fp32 gradients already). validate_config and
// grad_accum_for share it.
bool fp32_grad_accum_applies(const ParallelConfig& cfg);

// Of the first `layers` blocks of a model chunk, how many `recompute` with `recompute_num_layers`
// and `recompute_every` (ParallelConfig's fields) recomputes fully: under full, all of them; with
// recompute_num_layers k the first k of the chunk; with recompute_every N those whose number among
// the pipeline rank's blocks, counted from 1 over its chunks in order, is a multiple of N
// (`rank_blocks_before`: the rank's blocks in its earlier chunks). None under the other policies.
// torchtitan's counter is _layer_sac_count, a module global each block apply_ac wraps in the
// process increments, checkpointing at count % N == 0 (torchtitan/distributed/
// activation_checkpoint.py:24-49 @73a0e6979dd10b6b1904098eb3c8f62c18ab87ce); a pipeline rank
// builds its stages pp_rank + s * pp in order of s and wraps each stage's module in that order
// (pipeline_parallel.py:136-141, 451-473). Block i of a chunk is recomputed iff the count of the
// first i + 1 exceeds that of the first i. The simulator and shardrun's model both count with it.
inline int recomputed_blocks(Recompute recompute, int recompute_num_layers, int recompute_every, int layers,
                             int rank_blocks_before = 0) {
  if (recompute != Recompute::full) return 0;
  if (recompute_every > 1)
    return (rank_blocks_before + layers) / recompute_every - rank_blocks_before / recompute_every;
  return recompute_num_layers > 0 ? std::min(layers, recompute_num_layers) : layers;
}

// How LoRA keeps the frozen base linears' weights:
//   bf16  in the run's 16-bit precision (LoRA)
//   nf4   4-bit NormalFloat with double-quantised block constants (QLoRA, Dettmers et al. 2023,
//         §3: blocks of 64 weights share an 8-bit absmax, blocks of 256 of those an fp32 one:
//         0.5 + 8/64/8 + 32/(64*256)/8 bytes per weight), dequantised to 16-bit at every use
enum class LoraBase { bf16, nf4 };
template <>
struct EnumNames<LoraBase> {
  static constexpr NameTable<LoraBase, 2> table{{{LoraBase::bf16, "bf16"}, {LoraBase::nf4, "nf4"}}};
};
const char* to_string(LoraBase b);
std::optional<LoraBase> lora_base_from_string(const std::string& name);
inline constexpr double kNf4BytesPerWeight = 0.5 + 1.0 / 64 + 4.0 / (64 * 256);

// How context parallelism splits the attention core over cp ranks, each holding s/cp tokens:
//   ring        ring attention (Liu et al. 2023; Megatron-Core / Transformer Engine "p2p"): Q stays,
//               K and V blocks pass peer to peer in cp - 1 steps, each step's transfer overlapped
//               with the previous block's attention; causal load balancing gives every rank two
//               of 2cp sequence chunks (chunk i and 2cp-1-i), so every step carries equal work
//   all_to_all  DeepSpeed-Ulysses (Jacobs et al. 2023; TE "a2a"): an all-to-all turns the sequence
//               split of q, k, v into a head split, each rank attends over the whole sequence for
//               a/cp heads, and a fourth all-to-all turns the output back; heads must divide
enum class CpKind { ring, all_to_all };
template <>
struct EnumNames<CpKind> {
  static constexpr NameTable<CpKind, 2> table{{{CpKind::ring, "ring"}, {CpKind::all_to_all, "all_to_all"}}};
};
const char* to_string(CpKind k);
std::optional<CpKind> cp_kind_from_string(const std::string& name);
// The chunks context parallelism cuts a sequence into: 2cp for ring attention on a causal model
// (causal load balancing: rank i holds chunks i and 2cp-1-i), else one per rank.
inline int cp_sequence_chunks(const ModelSpec& m, int cp, CpKind kind) {
  return kind == CpKind::ring && m.kind == ModelKind::decoder ? 2 * cp : cp;
}
// Ulysses gives each rank a/(tp x cp) query heads and g/(tp x cp) key/value heads.
inline bool cp_heads_divide(const ModelSpec& m, int tp, int cp) {
  return m.num_heads % (tp * cp) == 0 && m.num_kv_heads % (tp * cp) == 0;
}

struct LoraConfig {
  int rank = 0;  // 0 = full fine-tuning / pre-training
  double alpha = 16.0;
  double dropout = 0.0;
  std::vector<std::string> targets;  // Hugging Face module names (PEFT target_modules)
  LoraBase base = LoraBase::bf16;    // nf4 = QLoRA
  [[nodiscard]] bool enabled() const { return rank > 0; }
  [[nodiscard]] bool quantized_base() const { return enabled() && base == LoraBase::nf4; }
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int cp = 1;  // context parallel: the sequence split over cp ranks
  CpKind cp_kind = CpKind::ring;
  // Expert parallelism (MoE models), Megatron-Core's "parallel folding" (Liu et al. 2025, MoE
  // Parallel Folding): a stage's tp x cp x dp ranks are regrouped for the expert layers as
  // etp (expert tensor parallel, fastest) x ep (expert parallel) x edp (expert data parallel).
  int ep = 1;
  int etp = 0;  // 0 = tp (Megatron's default for --expert-tensor-parallel-size)
  // Tokens an expert takes per micro-batch, as a multiple of the balanced share (GShard,
  // Lepikhin et al. 2021, §2.2): the rest are dropped. 0 = dropless (Megatron-Core's default).
  double moe_capacity_factor = 0;
  int zero_stage = 0;       // 0..3
  int sharding_degree = 0;  // ZeRO/MiCS sharding group size; 0 = dp
  int micro_batch_size = 1;
  int global_batch_size = 0;  // 0 = micro_batch_size * dp
  int seq_len = 2048;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  Recompute recompute = Recompute::none;
  // With full recompute: 0 = every block; k > 0 = the first k blocks of each model chunk, the
  // others keep their activations (Megatron-LM --recompute-method block --recompute-num-layers k;
  // fms-fsdp's selective_checkpointing p is k = p x layers).
  int recompute_num_layers = 0;
  // With full recompute: N > 1 = every N-th block of each pipeline rank, counted over its chunks in
  // order (torchtitan [activation_checkpoint] mode "selective", selective_ac_option "N");
  // 0 (unused) and 1 = every block.
  int recompute_every = 0;
  bool sequence_parallel = false;
  // Sequence-parallel all-gathers and reduce-scatters pipelined with the linears' GEMMs in
  // chunks (Megatron-Core --tp-comm-overlap, Transformer Engine userbuffers; needs SP).
  bool tp_comm_overlap = false;
  bool offload_activations = false;
  bool offload_optimizer = false;
  Precision precision = Precision::bf16;
  MixedPrecision mixed_precision = MixedPrecision::master_weights;
  AttentionKind attention = AttentionKind::flash;
  Fusion fusion = Fusion::eager;
  Fp8Recipe fp8 = Fp8Recipe::none;
  // The block linears' weights are held in FP8 (no 16-bit copy) and gathered in FP8 by the
  // sharded optimizer (Megatron --fp8-param-gather; FSDP2 float8 all-gather): needs fp8 and ZeRO.
  bool fp8_param_gather = false;
  Zero3Fetch zero3_fetch = Zero3Fetch::prefetch;            // zero_stage 3 only
  GradAccumDtype grad_accum_dtype = GradAccumDtype::param;  // zero_stage 0/1, 16-bit only
  // Sequences packed from documents of this many tokens on average, each attending only within
  // itself (fine-tuning sets packed with cu_seqlens: Megatron-Core's THD PackedSeqParams through
  // TE, flash-attn's varlen kernels): the fused attention core costs s x l per sequence instead
  // of s x s. 0: one document per sequence. Fused attention only, cp 1.
  int packed_document_tokens = 0;
  [[nodiscard]] bool fp32_grad_accum() const { return grad_accum_dtype == GradAccumDtype::fp32; }
  // fp32 accumulation the DeepSpeed way (BF16_Optimizer) all-reduces the whole fp32 gradients
  // after the backward (step_model.cpp, step_tail); Megatron's main_grad reduces as its ZeRO stage
  // says (framework_terms.hpp Fp32GradReduce).
  [[nodiscard]] bool bf16_optimizer_reduce() const {
    if (!fp32_grad_accum()) return false;
    if (framework.fp32_grad_reduce == Fp32GradReduce::by_fusion) return fusion != Fusion::megatron;
    return framework.fp32_grad_reduce == Fp32GradReduce::after_backward;
  }
  // The weight-gradient GEMM accumulates micro-batches into main_grad (no separate pass).
  [[nodiscard]] bool wgrad_accumulates_in_gemm() const {
    if (framework.wgrad_accumulation == WgradAccumulation::by_fusion) return fusion == Fusion::megatron;
    return framework.wgrad_accumulation == WgradAccumulation::in_gemm;
  }
  LoraConfig lora;
  // Layers per pipeline stage (p entries) or per model chunk (p*v entries, chunk-major). The first
  // chunk may hold 0 (the embedding only), the last 0 (the final norm, head and loss only).
  std::vector<int> partition;
  std::string rank_order = "tp-dp-pp";  // fastest-varying first (Megatron core's order string)
  double memory_headroom = 0.05;        // fraction of device memory kept free
  // The framework that runs it (frameworks/ resolves a name and version into these terms at the
  // edge); not a config key: plans and runs files name the framework beside the config.
  FrameworkTerms framework;

  // An embedding-only first or head-only last chunk (the only 0-layer chunks validate_config allows).
  [[nodiscard]] bool has_empty_chunk() const {
    return std::find(partition.begin(), partition.end(), 0) != partition.end();
  }
  [[nodiscard]] int devices() const { return tp * cp * pp * dp; }
  // Ranks that hold the same dense weights and split the batch and the sequence (Megatron's
  // data-parallel group with context parallelism): gradients are reduced over them.
  [[nodiscard]] int dense_replicas() const { return dp * cp; }
  [[nodiscard]] int expert_tp() const { return etp > 0 ? etp : tp; }
  // Ranks holding the same experts (expert data parallel): tp x cp x dp / (ep x etp).
  [[nodiscard]] int expert_dp() const { return tp * cp * dp / (ep * expert_tp()); }
  [[nodiscard]] bool fp32_weights() const { return simulator::fp32_weights(precision, mixed_precision); }
  // A 16-bit run that casts each fp32 weight to the compute dtype as it is used (autocast).
  [[nodiscard]] bool casts_weights() const {
    return precision != Precision::fp32 && mixed_precision == MixedPrecision::autocast;
  }
  [[nodiscard]] bool uses_fp8() const { return fp8 != Fp8Recipe::none; }
  [[nodiscard]] int shard_group() const { return sharding_degree > 0 ? sharding_degree : dp; }
  // The dense weights' ZeRO shard group: the sharding group over dp, times cp (Megatron's
  // distributed optimizer shards over the data-parallel group with context parallelism).
  [[nodiscard]] int dense_shard_group() const { return shard_group() * cp; }
  [[nodiscard]] int micro_batches() const { return global_batch_size / (micro_batch_size * dp); }
  // Of the first `layers` blocks of a model chunk, how many are fully recomputed in backward
  // (`rank_blocks_before`: the pipeline rank's blocks in its earlier chunks).
  [[nodiscard]] int recomputed_blocks(int layers, int rank_blocks_before = 0) const {
    return simulator::recomputed_blocks(recompute, recompute_num_layers, recompute_every, layers, rank_blocks_before);
  }
  // Full recompute of some blocks only, the others keeping their activations.
  [[nodiscard]] bool recomputes_some_blocks() const {
    return recompute == Recompute::full && (recompute_num_layers > 0 || recompute_every > 1);
  }
};

struct ClusterSpec {
  HardwareProfile hardware;
  int nodes = 1;
  int devices_per_node = 0;  // 0 = the profile's
  [[nodiscard]] int per_node() const {
    return devices_per_node > 0 ? devices_per_node : hardware.node.devices_per_node;
  }
  [[nodiscard]] int devices() const { return nodes * per_node(); }
};

// Fills defaults (global batch, sharding degree) and checks everything the cost model relies
// on; throws InputError naming the flag and what was expected.
void validate_config(const ModelSpec& model, const ClusterSpec& cluster, ParallelConfig& cfg);
// The packed-document check of validate_config: the setting against the sequence and attention
// kind (what a search, which fixes all three, checks once), then cp 1.
void validate_packing(int packed_document_tokens, int seq_len, AttentionKind attention);
void validate_packing(const ParallelConfig& cfg);

// Layers of each rank's chunk, indexed [chunk * pp + stage] (size pp * v). Even split unless
// cfg.partition is given (its entries in model order, model_chunks of them, or pp).
std::vector<int> layers_per_chunk(const ModelSpec& model, const ParallelConfig& cfg);
// Whether the backward recomputes a forward (full, op_sac, or selective under eager attention;
// selective under a fused kernel recomputes nothing): what a split backward cannot be paired with.
inline bool recomputes_forward(const ParallelConfig& cfg) {
  return cfg.recompute == Recompute::full || cfg.recompute == Recompute::op_sac ||
         (cfg.recompute == Recompute::selective && cfg.attention == AttentionKind::eager);
}
// The model-order index of rank `stage`'s chunk `chunk`: chunk * pp + stage (interleaved), or for a
// V placement (zbv) stage on the way down and 2 pp - 1 - stage on the way back; DualPipe's chunk 1
// is stage pp - 1 - stage.
inline int model_chunk_index(const ParallelConfig& cfg, int chunk, int stage) {
  if (v_shaped(cfg.schedule)) return chunk == 0 ? stage : 2 * cfg.pp - 1 - stage;
  if (bidirectional(cfg.schedule)) return chunk == 0 ? stage : cfg.pp - 1 - stage;
  return chunk * cfg.pp + stage;
}
// The model's stages: pp x virtual stages, but pp under DualPipe, whose two directions each run
// every stage (rank r's chunk 1 is the same stage as rank p - 1 - r's chunk 0).
inline int model_chunks(const ParallelConfig& cfg) {
  return bidirectional(cfg.schedule) ? cfg.pp : cfg.pp * cfg.virtual_stages;
}
// The micro-batches each chunk of a rank runs per step: all of them, or half under DualPipe.
inline int chunk_micro_batches(const ParallelConfig& cfg) {
  return bidirectional(cfg.schedule) ? cfg.micro_batches() / 2 : cfg.micro_batches();
}
// Layers of model chunk `chunk` on pipeline stage `stage` (layers_per_chunk's entry, no allocation).
int chunk_layers(const ModelSpec& model, const ParallelConfig& cfg, int chunk, int stage);
// The blocks pipeline rank `stage` holds in its chunks before `chunk`.
int rank_blocks_before(const ModelSpec& model, const ParallelConfig& cfg, int chunk, int stage);
// Why torchtitan's per-op policy (Recompute::op_sac) is not modelled for `cfg` ("--flag: reason"),
// or empty: it is modelled for dense blocks of unfused, unadapted 16-bit linears without context
// parallelism (validate_config and the planner's search check it).
std::string op_sac_unsupported(const ModelSpec& model, const ParallelConfig& cfg);

}  // namespace shardplan::simulator
