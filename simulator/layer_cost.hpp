#pragma once
// Per-micro-batch cost of one transformer block, the embedding and the head, on one tensor-
// parallel rank: FLOPs and bytes of each op through the device's roofline (max of compute
// and memory time, with the profile's efficiency curves), tensor-parallel communication, and
// the activations each op leaves stored for backward.
#include "collectives.hpp"
#include "hardware_profile.hpp"
#include "model_spec.hpp"
#include "parallel_config.hpp"

namespace shardplan::simulator {

// Everything one micro-batch on one tp rank looks like; built once per configuration.
struct CostEnv {
  const ModelSpec* model = nullptr;
  const HardwareProfile* hw = nullptr;
  int devices_per_node = 1;
  // The rank's share of the node's last-level cache (measured CPU profiles; 0 elsewhere).
  double cache_share_bytes = 0;
  // The share of the blocks' backward calls whose saved tensors are still cached (cache_reuse.hpp);
  // priced with the ops' warm backward where the profile measured one.
  double warm_backward_fraction = 0;
  GroupPlacement tp_group;
  double s = 0, b = 0, tp = 1;  // this rank's sequence length (s/cp), micro-batch size, tensor parallel
  // Context parallelism: attention runs over the whole sequence s_full = s * cp.
  double cp = 1, s_full = 0;
  // Packed sequences (ParallelConfig::packed_document_tokens): the fused kernel attends within
  // each document of this many tokens (0: one document per sequence).
  double doc_tokens = 0;
  CpKind cp_kind = CpKind::ring;
  GroupPlacement cp_group;
  // The MoE block (ModelSpec::moe): router, routed experts over ep x etp ranks, shared expert in
  // `linears`. false for dense models and an MoE model's first dense blocks.
  bool moe = false;
  double ep = 1, etp = 1;
  GroupPlacement ep_group, etp_group;
  double moe_capacity_factor = 0;                           // 0 = dropless
  const std::vector<LinearDesc>* expert_linears = nullptr;  // one routed expert's
  const std::vector<char>* expert_lora_mask = nullptr;      // parallel to it: adapted under LoRA
  bool sp = false;                                          // sequence parallel
  bool tp_overlap = false;                                  // SP collectives pipelined with the GEMMs (tp_comm_overlap)
  Recompute recompute = Recompute::none;
  bool recompute_stops_early = false;  // FrameworkTerms::recompute_stops_early
  AttentionKind attention = AttentionKind::flash;
  Fusion fusion = Fusion::eager;  // Megatron-Core fuses q/k/v and gate/up GEMMs and SwiGLU
  bool causal = true;             // decoder: causal mask (a fused kernel skips the masked blocks)
  Precision precision = Precision::bf16;
  bool casts_weights = false;                   // autocast mixed precision: fp32 weights cast per use
  double act_bytes = 2;                         // bytes per activation element (2 for bf16/fp16, 4 for fp32)
  double peak_flops = 0;                        // device peak for the precision
  const EfficiencyCurve* gemm_curve = nullptr;  // the device's GEMM curve for the precision
  double kernel_efficiency = 1;                 // the framework's compute_efficiency: divides GEMM/attention time
  // FP8 (ParallelConfig::fp8): the blocks' linears run e4m3/e5m2 GEMMs at the FP8 peak.
  Fp8Recipe fp8 = Fp8Recipe::none;
  double fp8_peak_flops = 0;
  const EfficiencyCurve* fp8_gemm_curve = nullptr;
  // Weight quantisations per micro-batch: 1/m when the FP8 weights are cached across a step's m
  // micro-batches (TE's is_first_microbatch; weights resident, ZeRO < 3), else 1 (ZeRO-3 gathers
  // the 16-bit shard again each time).
  double fp8_weight_casts = 1;
  double fp8_weight_bytes = 2;  // bytes per weight element read by its cast (1 with fp8_param_gather)
  const std::vector<LinearDesc>* linears = nullptr;  // the block's linears (precomputed)
  bool lora = false;                                 // base weights frozen; adapters where lora_mask[i] != 0
  bool nf4_base = false;                             // QLoRA: base linears stored in NF4, dequantised at every use
  const std::vector<char>* lora_mask = nullptr;      // parallel to *linears
  double lora_rank = 0;
  double lora_dropout = 0;
};

// The groups a block's collectives run on (ConfigContext places them with the rank layout).
struct BlockGroups {
  GroupPlacement tp, cp, ep, etp;
};

// `linears`, `lora_mask` and `expert_linears` must outlive the env (the Evaluator owns them).
CostEnv make_cost_env(const ModelSpec& m, const ClusterSpec& c, const ParallelConfig& cfg,
                      const std::vector<LinearDesc>& linears, const std::vector<char>& lora_mask,
                      const BlockGroups& groups, const std::vector<LinearDesc>* expert_linears = nullptr);

// The framework's host time for one block beyond its kernels (device.host_overhead_seconds;
// zero without): the block by style, an MoE block's router and dispatch plus each of the rank's
// experts, each adapter (host_overhead.hpp).
PassSeconds block_host_overhead_s(const CostEnv& env);

struct PartCost {
  double forward_s = 0;   // compute of the forward pass (excl. TP, CP and EP communication)
  double backward_s = 0;  // compute of the backward pass (dgrad + wgrad + elementwise)
  // Of backward_s: the weight-gradient GEMMs, the W of a split backward (zero-bubble schedules;
  // Qi et al. 2024, §2); the rest (dgrad, elementwise, the input-gradient chain) is its B.
  double weight_grad_s = 0;
  double weight_grad_flops = 0;
  double recompute_s = 0;         // forward recomputed during backward (compute + its TP comm)
  double tp_comm_forward_s = 0;   // exposed TP collectives in forward
  double tp_comm_backward_s = 0;  // exposed TP collectives in backward
  double cp_comm_forward_s = 0;   // exposed context-parallel exchange (ring KV p2p or all-to-alls)
  double cp_comm_backward_s = 0;
  double ep_comm_forward_s = 0;  // exposed expert-parallel dispatch/combine (all-to-all, etp gathers)
  double ep_comm_backward_s = 0;
  double forward_flops = 0;
  double backward_flops = 0;
  double recompute_flops = 0;
  double stored_activation_bytes = 0;  // kept from forward to backward under the recompute policy
  double full_activation_bytes = 0;    // what no recompute would keep (working set when recomputing)
  double transient_bytes = 0;          // largest short-lived buffer (e.g. the logits beside the fp32 softmax)
  [[nodiscard]] double forward_comm_s() const { return tp_comm_forward_s + cp_comm_forward_s + ep_comm_forward_s; }
  [[nodiscard]] double backward_comm_s() const { return tp_comm_backward_s + cp_comm_backward_s + ep_comm_backward_s; }
  [[nodiscard]] double forward_total_s() const { return forward_s + forward_comm_s(); }
  [[nodiscard]] double backward_total_s() const { return backward_s + recompute_s + backward_comm_s(); }
};

PartCost block_cost(const CostEnv& env);
// `tied_in_stage`: the word embedding is tied to the LM head and both live on this stage (pp = 1),
// so autograd sums the two gradients of one table.
PartCost embedding_cost(const CostEnv& env, bool tied_in_stage);
PartCost head_cost(const CostEnv& env);

// Stored activation bytes of one block for one micro-batch on one tp rank (the op-by-op
// derivation of Korthikanti et al. 2022, §4.1, generalised to GQA, SwiGLU, parallel residual,
// dropout-free models and LoRA adapters): block_activations.cpp.
double block_activation_bytes(const CostEnv& env, Recompute recompute);
// The SP region a block linear reads, in block order: attention in (0), attention out (1), MLP in
// (2), MLP out (3); `rows_seen` counts the row-parallel linears before it and is advanced.
int linear_region(const LinearDesc& lin, int& rows_seen);

// Attention scores of one micro-batch on one tp rank: b·(a/t)·s·s_full, over packed documents of
// l tokens s/l blocks of l x l (doc_tokens). Every score costs 2·(d + d_v) FLOPs forward.
double score_elements(const CostEnv& env);

// FLOPs of the attention core's matmuls (Q K^T and P V) for one micro-batch on one tp rank.
// `model_*`: the conventional count whatever the kernel and mask (forward 4·b·(a/t)·s²·d,
// backward twice that; Megatron-LM's formula, what MFU divides by). `executed_*`: what the
// device runs: the same for eager; for flash half the forward under a causal mask (the kernel
// skips the masked blocks) and 2.5x the forward in backward (S recomputed: 5 GEMMs, not 2).
struct AttentionFlops {
  double model_forward = 0, model_backward = 0;
  double executed_forward = 0, executed_backward = 0;
};
AttentionFlops attention_flops(const CostEnv& env);

// Forward and backward time of the fused attention kernel (flash): executed FLOPs at the
// profile's fused-kernel efficiency for the sequence length and head dim (16-bit precisions),
// else through the GEMM curve at the size of one of its batched GEMMs; max with the bytes it
// moves over the memory bandwidth; plus one kernel launch per pass. On a device without a fused
// kernel (DeviceProfile::fused_attention false) whose profile measured the attention ops: the
// algorithm as separate ops, priced by them (layer_cost.cpp, unfused_flash_attention_time).
struct AttentionTime {
  double forward_s = 0, backward_s = 0;
};
AttentionTime flash_attention_time(const CostEnv& env);

// Time of a linear's GEMM (m x k) @ (k x n) at the block's precision: the FP8 rate when the run
// uses FP8 (fp8_gemm_time_s), else gemm_time_s.
double block_gemm_time_s(const CostEnv& env, double m, double k, double n);
// Time of a GEMM (m x k) @ (k x n) on the device: roofline with efficiency curves.
double gemm_time_s(const CostEnv& env, double m, double k, double n, double batch = 1);
// The same GEMM with FP8 operands and a 16-bit output, at the FP8 peak and curve.
double fp8_gemm_time_s(const CostEnv& env, double m, double k, double n);
// Time of a memory-bound op moving `bytes`.
double memory_time_s(const CostEnv& env, double bytes);

}  // namespace shardplan::simulator
