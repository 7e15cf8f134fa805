#pragma once
// ZeroEngine: data parallelism for the executor's model, unit by unit (FSDP-style flat
// buffers per unit: embedding, each block, head), covering ZeRO stages 0-3 and MiCS
// (Rajbhandari et al. 2019 "ZeRO", §5; Zhang et al. 2022 "MiCS").
//
//   stage 0  params + grads + AdamW states replicated; grads all-reduced over dp (one bucket
//            per unit, launched as soon as the unit's gradients are complete)
//   stage 1  + AdamW states (and the update) sharded over the sharding group; updated shards
//            all-gathered back into the parameters
//   stage 2  + gradients reduce-scattered per unit as backward produces them; only the
//            gradient shard is kept
//   stage 3  + parameters sharded: a unit is all-gathered before its forward and before its
//            backward, and freed after each; a QLoRA unit's NF4 base too, as one flat byte
//            buffer (FSDP-QLoRA, nf4_flat_group.hpp)
//   MiCS     sharding group smaller than dp: shards are reduced across the replica group
//
// Flat layout of a unit (identical on every rank of a tp group): its parameters' local shards
// concatenated in model order, padded to a multiple of the sharding group size S; rank s of the
// sharding group owns elements [s*n, (s+1)*n), n = padded / S. Trainable and frozen (LoRA
// base) parameters live in separate flat groups: frozen ones have no gradients or AdamW state.
// Weights: fp32 (they are the master copy; autocast runs the matmuls in bf16/fp16), or bf16/fp16
// with an fp32 master of the owned elements in the optimizer (master weights, as DeepSpeed and
// Megatron): gradients and communication are then 16-bit too.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/comm/process_groups.hpp"
#include "executor/model/transformer.hpp"
#include "executor/model/unit_hooks.hpp"

namespace shardplan::executor {

struct OptimizerOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double clip_norm = 1.0;  // <= 0: no clipping
};

struct StepOutcome {
  double grad_norm = 0;  // global L2 norm of the (unscaled) gradients, before clipping
  bool finite = true;    // false: non-finite gradients, update skipped
};

struct FlatGroup;
struct EngineUnit;

class ZeroEngine final : public UnitHooks {
 public:
  ZeroEngine(Transformer& model, const ProcessGroups& groups, int zero_stage, OptimizerOptions opt,
             torch::ScalarType weight_dtype = torch::kFloat);
  ~ZeroEngine() override;
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  void begin_step();  // zero gradients
  // One backward pass over units [first, end) (a model chunk; the whole model when pp = 1).
  // `last_micro_batch`: the chunk's last backward of the step (stages 0/1 reduce then).
  void begin_backward(int first_unit, int end_unit, bool last_micro_batch);
  void end_backward(int first_unit, int end_unit);  // flush those units, wait for their communication
  // Unscale (x inv_scale), check, clip, AdamW update, re-assemble parameters.
  StepOutcome step(double lr, double inv_scale);

  // UnitHooks
  void before_forward(int unit) override;
  void after_forward(int unit) override;
  torch::Tensor wrap_output(int unit, const torch::Tensor& y) override;
  torch::Tensor wrap_input(int unit, const torch::Tensor& x) override;

  // Called from autograd hooks.
  void on_grad_ready(int unit);
  void on_input_grad(int unit);

  // ZeRO-3: make a unit's parameters resident / drop them (no-ops below stage 3).
  void materialize(int unit);
  void release(int unit);

  // Optimizer state this rank owns, by name ("unit3.param", "unit3.exp_avg", ...), and the
  // checkpoint file key of its owner shard. Empty for ranks that do not write (replicas).
  [[nodiscard]] std::vector<std::pair<std::string, torch::Tensor>> owned_state();
  [[nodiscard]] bool writes_checkpoint() const;
  [[nodiscard]] std::string shard_key() const;  // "tp0-pp0-shard1"
  // Copies a checkpoint's tensors (same names/shapes as owned_state on the owner) in, then
  // re-assembles parameters. Every rank calls it with the tensors of its owner shard.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t adam_step);
  [[nodiscard]] int64_t adam_step() const { return adam_step_; }
  [[nodiscard]] int stage() const { return stage_; }

 private:
  void setup_unit(int u);
  void unit_ready(int u);
  void launch_grad_sync(int u);
  void wait_pending(size_t keep);
  void reassemble(size_t u);
  // Where unit u's gradients are reduced (stages 0/1) and its states sharded: the dp / sharding
  // group, or for an MoE block's routed experts the expert-data group (ranks holding the same
  // experts). Also how u is split: its group's size and this rank's index (1 and 0 at stage 0).
  [[nodiscard]] Communicator& reduce_group(size_t u) const;
  [[nodiscard]] Communicator& shard_group(size_t u) const;
  // The squared gradient norm of the experts' owned elements, summed over the expert groups.
  [[nodiscard]] torch::Tensor expert_sq_norm(double inv_scale);
  // 0-d double on the device; tp-replicated parameters count on tp rank 0 only unless their
  // values differ over tp (`differ_over_tp`: whole experts, etp = 1).
  [[nodiscard]] torch::Tensor owned_sq_norm(const FlatGroup& g, bool differ_over_tp = false) const;
  void sum_tp_partial_grads();
  void sum_tied_embedding_grads();
  void adamw(FlatGroup& g, double lr, double clip_coef);

  Transformer& model_;
  const ProcessGroups& groups_;
  int stage_;
  OptimizerOptions opt_;
  torch::ScalarType weight_dtype_;
  int shard_size_ = 1;  // 1 for stage 0 (nothing sharded)
  int shard_rank_ = 0;
  bool last_micro_batch_ = true;
  int64_t adam_step_ = 0;
  std::vector<std::unique_ptr<EngineUnit>> units_;
  std::vector<char> expert_;  // per unit: an MoE block's routed experts (Transformer::is_expert_unit)
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive for the hooks
  struct Pending;
  std::vector<std::unique_ptr<Pending>> pending_;
};

}  // namespace shardplan::executor
