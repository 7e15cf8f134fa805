// A stage's end of step: the data-parallel gradient synchronisation after its last backward (per
// ZeRO stage and replica group), the tied embedding's and DualPipe's pairwise reductions, and the
// optimizer step over the shard the rank owns.
#include <algorithm>

#include "collectives.hpp"
#include "pipeline_schedule.hpp"
#include "step_model.hpp"

namespace shardplan::simulator {

namespace {

// A stage's data-parallel synchronisation after its last backward, added into `t`.
struct TailSync {
  const ConfigContext& c;
  double G;                // the stage's gradient bytes, as reduced
  double last_backward_s;  // the last micro-batch's backward
  double first_forward_s;  // the next step's first micro-batch forward
  double W;                // the stage's weight bytes, as gathered
  StepTail& t;

  double overlapped(double comm) const {  // hidden behind the last micro-batch's backward
    if (comm <= 0) return 0.0;
    return exposed_in_buckets(comm, G, last_backward_s, c.mc->cluster.hardware.node.intra.compute_overlap);
  }
  // The weights' all-gather: after the step, or behind the next step's first forward but for its
  // first bucket (FrameworkTerms::param_gather_overlaps_forward).
  double gathered(double comm) const {
    if (comm <= 0 || !c.cfg->framework.param_gather_overlaps_forward) return comm;
    return exposed_in_buckets(comm, W, first_forward_s, c.mc->cluster.hardware.node.intra.compute_overlap);
  }

  // Gradients of `grad_bytes` reduced over `group` (stage 0) or its shard group, and the updated
  // weights (`weight_bytes`) gathered back (stages 1, 2).
  void sync(double grad_bytes, double weight_bytes, const GroupPlacement& group, const GroupPlacement& shards) const {
    const auto& cfg = *c.cfg;
    const auto& hw = c.mc->cluster.hardware;
    const int pn = c.per_node;
    if (cfg.bf16_optimizer_reduce()) {
      // DeepSpeed's BF16_Optimizer: the fp32 gradients all-reduced whole once the backward is
      // done (engine.buffered_allreduce_fallback; the pipeline engine's ReduceGrads instruction
      // after the last micro-batch), the updated 16-bit weights all-gathered after its
      // partitioned step (all_gather_dp_groups). No hook overlaps either with the backward.
      const double ar = all_reduce_s(grad_bytes, group, hw, pn);
      const double ag = cfg.zero_stage == 1 ? all_gather_s(weight_bytes, shards, hw, pn) : 0.0;
      t.total_s += ar + ag;
      t.exposed_s += ar + ag;
    } else if (cfg.zero_stage == 0) {
      const double ar = all_reduce_s(grad_bytes, group, hw, pn);
      t.total_s += ar;
      t.exposed_s += overlapped(ar);
    } else if (cfg.zero_stage == 1) {
      const double rs = reduce_scatter_s(grad_bytes, shards, hw, pn);
      const double ag = all_gather_s(weight_bytes, shards, hw, pn);
      t.total_s += rs + ag;
      t.exposed_s += overlapped(rs) + gathered(ag);
    } else if (cfg.zero_stage == 2) {
      const double ag = all_gather_s(weight_bytes, shards, hw, pn);  // updated weights
      t.total_s += ag;
      t.exposed_s += ag;
    }
  }
};

// Dense weights: over dp x cp; under MiCS the gradient shards also synchronised across replicas.
void add_dense_sync(const TailSync& s, double W) {
  const ConfigContext& c = s.c;
  const auto& cfg = *c.cfg;
  s.sync(s.G, W, c.dp_group, c.shard_group);
  if (cfg.zero_stage >= 1 && c.shard < cfg.dense_replicas()) {  // MiCS: sync gradient shards across replicas
    const double ar = all_reduce_s(s.G / c.shard, c.replica_group, c.mc->cluster.hardware, c.per_node);
    s.t.total_s += ar;
    s.t.exposed_s += ar;
  }
}

// The tied word embedding: its gradient all-reduced between the first and the last stage once both
// are done (Megatron's _allreduce_embedding_grads, DeepSpeed's ReduceTiedGrads instruction), every
// rank of those stages at once: exposed. (shardrun's ZeRO-2/3 engine reduces its 1/N gradient
// shard instead; the frameworks reduce the whole gradient.)
void add_tied_embedding_sync(const ConfigContext& c, const StageMemory& stage, StepTail& t) {
  const bool cross = c.layout.pp_ends_cross_nodes();
  const double tied = all_reduce_s(c.grad_bytes * stage.tied_sync_elements,
                                   GroupPlacement{2, cross ? 2 : 1, cross ? 1 : 2}, c.mc->cluster.hardware, c.per_node);
  t.total_s += tied;
  t.exposed_s += tied;
}

// DualPipe: each stage's parameters live on ranks r and p - 1 - r (one copy per direction), and
// the pair sums its gradients once both are done (deepseek-ai/DualPipe examples/example_dualpipe.py
// :167-174 @ 3da1bbe), the shard this rank steps after its data-parallel reduction. The outermost
// pair (0, p - 1) crosses nodes when the pipeline's ends do; exposed, as the tied embedding's.
void add_mirror_sync(const ConfigContext& c, const StageMemory& stage, StepTail& t) {
  const bool sharded = c.cfg->zero_stage >= 1;
  const double elements = stage.trainable_per_device / (sharded ? c.shard : 1.0) +
                          stage.expert_trainable_per_device / (sharded ? c.expert_shard : 1.0);
  const bool cross = c.layout.pp_ends_cross_nodes();
  const double ar = all_reduce_s(c.grad_bytes * elements, GroupPlacement{2, cross ? 2 : 1, cross ? 1 : 2},
                                 c.mc->cluster.hardware, c.per_node);
  t.total_s += ar;
  t.exposed_s += ar;
}

// Optimizer step over this rank's shard: read gradient, read+write fp32 master and two moments,
// write the weight.
double optimizer_step_s(const ConfigContext& c, double trainable, double expert_trainable) {
  const auto& cfg = *c.cfg;
  const auto& hw = c.mc->cluster.hardware;
  const double shard_params =
      cfg.zero_stage >= 1 ? trainable / c.shard + expert_trainable / c.expert_shard : trainable + expert_trainable;
  const double bytes = shard_params * (c.grad_bytes + c.param_bytes + 24.0);
  double optimizer_s;
  if (cfg.offload_optimizer) {
    const double host_bw = hw.host.memory_bandwidth_Bps / std::max(1, c.per_node);
    optimizer_s = bytes / host_bw + 2 * c.param_bytes * shard_params / hw.host.link_bandwidth_Bps;
  } else if (const OpCost* adamw = hw.device.op_cost(Precision::fp32, OpKind::adamw)) {
    // Measured per parameter. The engine steps one ZeRO unit's flat shard at a time (mostly a
    // block's), so the cost per parameter is the one at that size: small shards stay in cache.
    const double shard = cfg.zero_stage >= 1 ? c.shard : 1.0;
    const double unit = std::max(1.0, (c.block_trainable > 0 ? c.block_trainable : trainable) / shard);
    optimizer_s = shard_params * adamw->forward_s_per_element.at(unit);
    // Master weights: the gradient shard is cast up to fp32 and the updated master back down.
    if (!cfg.fp32_weights())
      if (const OpCost* cast = hw.device.op_cost(cfg.precision, OpKind::weight_cast))
        optimizer_s += 2 * shard_params * cast->forward_s_per_element.at(unit);
  } else {
    optimizer_s = memory_time_s(c.env, bytes);
  }
  if (!cfg.offload_optimizer) optimizer_s *= c.rank_pace;  // a device's step, at the job's pace
  return optimizer_s;
}

}  // namespace

StepTail step_tail(const ConfigContext& c, const StageMemory& stage, double last_backward_s, double first_forward_s) {
  const auto& cfg = *c.cfg;
  const double trainable = stage.trainable_per_device;
  const double G = c.grad_bytes * trainable;  // gradient bytes of this stage, as reduced
  // Updated weights gathered after the step: the FP8-held ones at 1 byte (fp8_param_gather).
  const double W = c.param_bytes * trainable - (c.param_bytes - 1.0) * stage.fp8_weights_per_device;
  StepTail t;
  const TailSync dp{c, G, last_backward_s, first_forward_s, W, t};
  if (cfg.dense_replicas() > 1) add_dense_sync(dp, W);
  if (stage.tied_sync_elements > 0) add_tied_embedding_sync(c, stage, t);
  const double expert_trainable = stage.expert_trainable_per_device;
  if (expert_trainable > 0 && cfg.expert_dp() > 1) {  // routed experts: over the expert data-parallel group
    const double Ge = c.grad_bytes * expert_trainable;
    const double We = cfg.fp8_param_gather ? expert_trainable : c.param_bytes * expert_trainable;
    dp.sync(Ge, We, c.expert_dp_group, c.expert_dp_group);
  }
  if (bidirectional(cfg.schedule)) add_mirror_sync(c, stage, t);
  t.optimizer_s = optimizer_step_s(c, trainable, expert_trainable);
  return t;
}

}  // namespace shardplan::simulator
