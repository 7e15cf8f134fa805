// SageMaker model parallel v2 from a Plan: the estimator's distribution (SMP v2 parameters) and
// the hyperparameters of AWS's SMP v2 example script (names and sources in smp_flags.hpp).
//
// Sharding: SMP v2 is PyTorch FSDP; hybrid_shard_degree is the size of the FSDP sharding group in
// ranks, which spans the context-parallel ranks too (the reference: context_parallel_degree <=
// hybrid_shard_degree), so it is the plan's ZeRO sharding group x cp. ZeRO-3 runs as
// hybrid_shard, ZeRO-2 as _hybrid_shard_zero2 (FSDP keeps gradients sharded, parameters whole
// between forward and backward), ZeRO 0 as hybrid_shard_degree 1 (NO_SHARD).
#include <algorithm>
#include <array>

#include "launch_export.hpp"
#include "simulator/errors.hpp"
#include "smp_flags.hpp"
#include "smp_v2.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace sf = smp_flags;
using nlohmann::json;

namespace {

// The instance types SMP v2 supports (the reference's "Supported instance types": P4d, P4de, P5).
constexpr std::array<std::string_view, 3> kInstances = {"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"};

std::string instance_type(const formats::Plan& plan) {
  const std::string& name = plan.cluster.hardware.name;
  for (const auto i : kInstances)
    if (name == i) return "ml." + name;
  throw sim::InputError(
      "SageMaker model parallel v2: runs on ml.p4d.24xlarge, ml.p4de.24xlarge or ml.p5.48xlarge; "
      "this plan is for '" +
      name + "'");
}

void check_runnable(const formats::Plan& plan) {
  const auto& c = plan.config;
  if (c.pp > 1)
    throw sim::InputError("SageMaker model parallel v2: has no pipeline parallelism (pp " + std::to_string(c.pp) +
                          "); re-plan with --pp 1, or use the v1 parameters (smp_parameters.json)");
  if (c.ep > 1 && (c.tp > 1 || c.cp > 1))
    throw sim::InputError(
        "SageMaker model parallel v2: expert parallelism with tensor or context parallelism is not "
        "supported by its MoE transform; re-plan with ep 1 or tp = cp = 1");
  if (c.ep > 1 && c.expert_tp() != 1)
    throw sim::InputError("SageMaker model parallel v2: has no expert tensor parallelism (etp " +
                          std::to_string(c.expert_tp()) + ")");
  // activation_checkpointing 1 checkpoints every transformer layer.
  if (const std::string why = torchtitan_only_recompute(c, false); !why.empty())
    throw sim::InputError("SageMaker model parallel v2: " + why);
}

const char* sharding_strategy(const sim::ParallelConfig& c) {
  if (c.zero_stage == 3) return "hybrid_shard";
  if (c.zero_stage == 0) return "no_shard";
  return "_hybrid_shard_zero2";  // ZeRO-1 and ZeRO-2: FSDP has no optimizer-only sharding
}

}  // namespace

json smp_v2_config(const formats::Plan& plan) {
  check_runnable(plan);
  const auto& c = plan.config;
  json params;
  params[sf::hybrid_shard_degree] = c.zero_stage == 0 ? 1 : c.dense_shard_group();
  params[sf::tensor_parallel_degree] = c.tp;
  params[sf::context_parallel_degree] = c.cp;
  params[sf::expert_parallel_degree] = c.ep;
  params[sf::activation_offloading] = c.offload_activations;
  params[sf::activation_loading_horizon] = 2;  // the reference's default
  json distribution;
  distribution[sf::torch_distributed] = {{sf::enabled, true}};
  distribution[sf::smdistributed][sf::modelparallel] = {{sf::enabled, true}, {sf::parameters, params}};
  // SMP's implementation (Transformer Engine's fused layers): what tp/cp/ep/FP8 need, and fusion megatron.
  const bool transform = c.tp > 1 || c.cp > 1 || c.ep > 1 || c.uses_fp8() || c.fusion == sim::Fusion::megatron;
  json hp;
  hp[sf::train_batch_size] = c.micro_batch_size;
  hp[sf::max_context_width] = c.seq_len;
  hp[sf::bf16] = c.precision == sim::Precision::bf16 ? 1 : 0;
  hp[sf::fp8] = c.uses_fp8() ? 1 : 0;
  hp[sf::activation_checkpointing] = c.recompute != sim::Recompute::none ? 1 : 0;
  hp[sf::sharding_strategy] = sharding_strategy(c);
  hp[sf::use_smp_implementation] = transform ? 1 : 0;
  hp[sf::use_orig_params] = (transform || c.lora.enabled()) ? 1 : 0;
  if (c.cp > 1) hp[sf::cp_comm_type] = "p2p";
  if (plan.model.is_moe()) hp[sf::moe] = 1;
  return {{"instance_type", instance_type(plan)},
          {"instance_count", plan.cluster.nodes},
          {"distribution", distribution},
          {sf::hyperparameters, hp}};
}

std::vector<std::string> smp_v2_notes(const formats::Plan& plan) {
  const auto& c = plan.config;
  std::vector<std::string> n;
  if (c.global_batch_size != c.micro_batch_size * c.dp)
    n.push_back("the example script has no gradient accumulation: it trains train_batch_size x dp = " +
                std::to_string(c.micro_batch_size * c.dp) + " sequences per step, the plan " +
                std::to_string(c.global_batch_size) + " (" + std::to_string(c.micro_batches()) + " micro-batches)");
  if (c.zero_stage == 1)
    n.push_back(
        "ZeRO-1: FSDP has no optimizer-only sharding; exported as _hybrid_shard_zero2 (gradients sharded "
        "too, less memory than planned)");
  if (c.recompute == sim::Recompute::selective)
    n.push_back(
        "selective recompute: the script checkpoints whole transformer layers (activation_checkpointing 1), "
        "more recompute than planned");
  if (c.recompute_num_layers > 0)
    n.push_back("recompute of the first " + std::to_string(c.recompute_num_layers) +
                " layers only: the script checkpoints every layer");
  if (c.precision == sim::Precision::fp16)
    n.push_back("fp16: the example script trains in bf16 or fp32 only (bf16 0 runs fp32)");
  if (c.casts_weights())
    n.push_back(
        "the plan keeps fp32 weights (autocast); FSDP's MixedPrecision keeps 16-bit compute copies of "
        "sharded fp32 parameters, as the plan assumes");
  if (c.uses_fp8() && c.fp8 != sim::Fp8Recipe::delayed)
    n.push_back(std::string("FP8 recipe '") + sim::to_string(c.fp8) +
                "': the script builds Transformer Engine's DelayedScaling (HYBRID)");
  if (c.offload_optimizer) n.push_back("optimizer offload is not an SMP v2 setting (FSDP CPU offload in the script)");
  if (c.lora.enabled()) n.push_back("LoRA: apply with PEFT in the training script (use_orig_params 1 is set)");
  if (c.cp > 1 && c.cp_kind == sim::CpKind::all_to_all)
    n.push_back(
        "all-to-all (Ulysses) context parallelism: SMP v2's cp_comm_type is p2p or all_gather; exported as p2p");
  n.push_back(attention_note(c.attention));
  return n;
}

}  // namespace shardplan::interop
