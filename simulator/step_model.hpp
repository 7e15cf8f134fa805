#pragma once
// The per-configuration model shared by the fast estimate and the full simulation: what each
// pipeline chunk costs per micro-batch, what each stage holds in memory, and the data-parallel
// / ZeRO communication at the end of a step. Allocation-free.
#include <algorithm>
#include <array>

#include "layer_cost.hpp"
#include "parallel_config.hpp"
#include "prediction.hpp"
#include "rank_layout.hpp"

namespace shardplan::simulator {

// Everything derived from (model, cluster, LoRA) once, by the Evaluator.
struct ModelContext {
  ModelSpec model;
  ClusterSpec cluster;
  LoraConfig lora;
  std::vector<LinearDesc> linears;
  std::vector<char> lora_mask;  // parallel to linears
  // MoE models: the first dense blocks' linears (and LoRA mask), one routed expert's linears.
  std::vector<LinearDesc> dense_linears;
  std::vector<char> dense_lora_mask;
  std::vector<LinearDesc> expert_linears;
  std::vector<char> expert_lora_mask;  // parallel to expert_linears: PEFT targets that adapt experts
  ParameterCounts counts;
  int64_t lora_params_per_layer = 0;         // the block's own linears (dense or attention + shared expert)
  int64_t expert_lora_params_per_layer = 0;  // every routed expert's adapters of one MoE block
  // All adapters of the model (LoRA's trainable parameters).
  [[nodiscard]] double lora_parameters() const {
    return static_cast<double>(lora_params_per_layer) * model.num_layers +
           static_cast<double>(expert_lora_params_per_layer) * model.moe_layers();
  }
};

struct ChunkTime {
  double forward_s = 0;
  double backward_s = 0;
  double stored_bytes = 0;  // per micro-batch, kept until backward
  // Of backward_s: the weight-gradient GEMMs (PartCost::weight_grad_s), a split backward's W.
  double weight_grad_s = 0;
  // Breakdown (one micro-batch):
  double fwd_compute_s = 0, bwd_compute_s = 0, recompute_s = 0, tp_comm_s = 0;
  double cp_comm_s = 0, ep_comm_s = 0;  // exposed context-parallel and expert-parallel exchanges
  double dp_exposed_s = 0, dp_total_s = 0, offload_exposed_s = 0;
  double sync_wait_s = 0;  // waiting at collectives for the slowest rank
  // Summing chunks of one stage.
  ChunkTime& operator+=(const ChunkTime& o);
};

// Everything derived from one ParallelConfig; cheap to build.
struct ConfigContext {
  const ModelContext* mc = nullptr;
  const ParallelConfig* cfg = nullptr;
  RankLayout layout;
  // dp_group: the dense gradients' group (dp x cp); expert_dp_group: the experts' (edp).
  GroupPlacement dp_group, shard_group, replica_group, expert_dp_group;
  CostEnv env;
  PartCost block, embedding, head;
  // A block that keeps its activations, for the blocks full recompute of some blocks leaves out
  // (equal to `block` unless ParallelConfig::recomputes_some_blocks).
  PartCost block_kept;
  // An MoE model's first dense blocks (ModelSpec::moe.first_dense_layers), as `block`/`block_kept`.
  CostEnv dense_env;
  PartCost dense_block, dense_block_kept;
  double dense_block_params = 0;  // per tp rank
  double dense_block_trainable = 0;
  double dense_block_lora = 0;
  // Routed experts of one MoE block on this rank: E/ep experts, 1/etp of each; ZeRO shards
  // their states over the expert data-parallel group (expert_shard ranks).
  double expert_params = 0;
  double expert_lora = 0;  // their adapters when LoRA targets expert linears (PEFT suffix match)
  double expert_trainable = 0;
  double expert_gather_bytes = 0;
  int expert_shard = 1;
  double param_bytes = 2;  // bytes per weight / gradient element
  double grad_bytes = 2;   // bytes per gradient element as accumulated and reduced (4: fp32 grad_accum_dtype)
  int per_node = 1;
  int shard = 1;                    // ZeRO sharding group size (1 when zero_stage == 0)
  double block_params = 0;          // per tp rank
  double block_trainable = 0;       // per tp rank (adapters only under LoRA)
  double block_lora = 0;            // adapter parameters per tp rank
  double embedding_params = 0;      // per tp rank
  double head_params = 0;           // per tp rank (incl. a tied-embedding copy when pp > 1)
  double block_linear_weights = 0;  // per tp rank: the block linears' weight elements (FP8 GEMM operands)
  double block_gather_bytes = 0;    // one block's parameters as ZeRO gathers them (FP8 linears with fp8_param_gather)
  double p2p_s = 0;                 // one micro-batch's activations to the next stage
  // Waits at collectives for the slowest rank, per second of compute (the profile's skew scaled
  // to the largest group the step synchronises; ConfigContext::set_sync_skew).
  double sync_skew = 0;
  // The job's rank-local time against the kernels' (the slowest profiled rank's): < 1 when the
  // job runs on fewer of the node's cores than were profiled (rank_pace.hpp).
  double rank_pace = 1;

  // Per-unit ZeRO work of one micro-batch, the same for every chunk (precomputed: the search
  // evaluates many chunk shapes per context). "block": the repeated (MoE or dense) block,
  // experts included; "dense": an MoE model's first dense blocks.
  struct ZeroUnits {
    double pack_block = 0, pack_dense = 0, pack_embedding = 0, pack_head = 0;          // ZeRO >= 2 bucket copies
    double gather_block = 0, gather_dense = 0, gather_embedding = 0, gather_head = 0;  // ZeRO-3 prefetch
    double scatter_block = 0, scatter_dense = 0;
  } zero_units;

  ConfigContext(const ModelContext& mc, const ParallelConfig& cfg);

 private:
  void set_sync_skew(double two_rank_fraction);
  void set_zero_units();
};

struct ChunkShape {
  int layers = 0;
  bool embedding = false;
  bool head = false;
  int dense_layers = 0;      // of `layers`, an MoE model's first dense blocks
  int recomputed = 0;        // of `layers`, the fully recomputed blocks (ParallelConfig::recomputed_blocks)
  int dense_recomputed = 0;  // of `recomputed`, the dense ones
  bool operator==(const ChunkShape&) const = default;
};

// Model chunk `chunk` on pipeline stage `stage`.
ChunkShape chunk_shape(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage);

// Of model chunk `chunk` on pipeline stage `stage`, how many blocks are an MoE model's first dense
// ones (0 for dense models: every block is `block`).
int dense_layers_in_chunk(const ModelSpec& m, const ParallelConfig& cfg, int chunk, int stage);

ChunkTime chunk_time(const ConfigContext& c, const ChunkShape& shape);

struct StageShape {
  int stage = 0;
  int layers = 0;
  bool embedding = false;
  bool head = false;
  int in_flight = 1;             // chunk micro-batches held at peak
  double peak_stored_bytes = 0;  // activations at peak (event simulation or closed form)
  double max_chunk_stored = 0;   // largest single chunk micro-batch
  int dense_layers = 0;          // of `layers`, an MoE model's first dense blocks
};

struct StageMemory {
  MemoryBreakdown device;
  double host_bytes = 0;
  double params_per_device = 0;  // per tp rank, before ZeRO sharding
  double trainable_per_device = 0;
  double fp8_weights_per_device = 0;  // of those, held in FP8 (fp8_param_gather), per tp rank
  // Of params/trainable, the routed experts' (reduced over the expert data-parallel group).
  double expert_params_per_device = 0;
  double expert_trainable_per_device = 0;
  // The tied word embedding's gradient elements (per tp rank) this stage all-reduces with the
  // other end of the pipeline (first and last stage, pp > 1, the embedding trained).
  double tied_sync_elements = 0;
};

StageMemory stage_memory(const ConfigContext& c, const StageShape& s);

// Gradients are reduced in buckets of this size as the backward produces them; the last one is
// exposed (PyTorch DDP's default bucket_cap_mb, 25 MiB).
inline constexpr double kBucketBytes = 25.0 * 1024 * 1024;

// What stays exposed of `comm_s` moving `bytes` in such buckets beside `window_s` of compute at the
// link's `overlap`: what the window cannot hide, and never less than one bucket's share (the last
// one reduced after the backward, or the first one gathered before the forward).
inline double exposed_in_buckets(double comm_s, double bytes, double window_s, double overlap) {
  return std::max(comm_s * std::min(1.0, kBucketBytes / std::max(1.0, bytes)), comm_s - overlap * window_s);
}

struct StepTail {
  double exposed_s = 0;  // DP/ZeRO communication after the last backward, not hidden
  double total_s = 0;    // all of it
  double optimizer_s = 0;
};

// `last_backward_s`: the stage's backward of its last micro-batch (what gradient buckets can
// overlap with); `first_forward_s`: its first micro-batch's forward through all its chunks (what a
// weight all-gather overlapped with the next step's forward hides behind). In step_tail.cpp.
StepTail step_tail(const ConfigContext& c, const StageMemory& stage, double last_backward_s, double first_forward_s);

// FLOPs of one micro-batch through the whole model, all tp ranks: what the math needs
// (`model`, no recompute) and what the devices execute (`hardware`, with recompute, including
// the flash kernel's recompute of the scores in backward). Both use the conventional attention
// count (no halving under a causal mask): MFU stays comparable across attention kinds.
void flops_per_micro_batch(const ConfigContext& c, double* model, double* hardware);

}  // namespace shardplan::simulator
