// SageMaker model parallel (v1) "parameters" from a Plan.
#include "launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
using nlohmann::json;

std::vector<std::string> smp_notes(const Plan& plan) {
  const auto& c = plan.config;
  std::vector<std::string> n;
  if (c.casts_weights())
    n.push_back(
        "the plan keeps fp32 weights (autocast); SMP's bf16/fp16 keep 16-bit weights with an fp32 master "
        "(re-plan with --mixed-precision master_weights for its memory)");
  n.push_back("SMP has no batch size parameter: the training script feeds micro_batch_size x microbatches = " +
              std::to_string(c.micro_batch_size * c.micro_batches()) + " samples per data-parallel rank");
  if (c.schedule == sim::PipelineSchedule::interleaved)
    n.push_back("virtual pipeline stages (" + std::to_string(c.virtual_stages) +
                ") are not expressible: SMP's \"interleaved\" pipeline is plain 1F1B");
  if (c.zero_stage == 2) n.push_back("ZeRO-2 is not expressible: exported as shard_optimizer_state (ZeRO-1)");
  if (c.zero_stage == 1 && c.shard_group() < c.dp)
    n.push_back("a sharding degree below dp is not expressible with shard_optimizer_state");
  if (c.offload_optimizer) n.push_back("optimizer offload is not available in SMP v1");
  if (c.recompute != sim::Recompute::none)
    n.push_back(std::string("recompute '") + sim::to_string(c.recompute) +
                "': enable it in the training script (smp.set_activation_checkpointing)" +
                (c.recompute_num_layers > 0
                     ? " on the first " + std::to_string(c.recompute_num_layers) + " blocks of each stage only"
                     : std::string()) +
                (c.recompute_every > 1
                     ? " on every " + std::to_string(c.recompute_every) + "-th block of each stage only"
                     : std::string()));
  if (c.lora.enabled()) n.push_back("LoRA: apply with PEFT in the training script");
  if (c.lora.quantized_base())
    n.push_back("QLoRA: load the base in 4-bit NF4 with bitsandbytes in the training script (no SMP setting)");
  if (c.uses_fp8())
    n.push_back(
        "FP8 is not available in SMP v1 (SMP v2 runs it through Transformer Engine on p5): re-plan with "
        "--fp8 none for this export");
  if (!c.partition.empty())
    n.push_back("explicit partition: auto_partition is false; assign layers with smp.partition() in the script");
  if (c.cp > 1)
    n.push_back("context parallelism is not available in SMP v1 (SMP v2: context_parallel_degree " +
                std::to_string(c.cp) + ")");
  if (c.ep > 1)
    n.push_back("expert parallelism is not available in SMP v1 (SMP v2: expert_parallel_degree " +
                std::to_string(c.ep) + ")");
  n.push_back(attention_note(c.attention));
  return n;
}

nlohmann::json smp_parameters(const Plan& plan) {
  const auto& c = plan.config;
  if (const std::string why = torchtitan_only_recompute(c, true); !why.empty())
    throw sim::InputError("SageMaker model parallel v1: " + why);
  json p;
  p["partitions"] = c.pp;
  p["microbatches"] = c.micro_batches();
  // SMP v1: "interleaved" = 1F1B-style forward/backward interleaving, "simple" = GPipe.
  p["pipeline"] = c.schedule == sim::PipelineSchedule::gpipe ? "simple" : "interleaved";
  p["optimize"] = "speed";
  p["placement_strategy"] = "cluster";
  p["tensor_parallel_degree"] = c.tp;
  p["ddp"] = true;
  if (c.zero_stage == 3) p["sharded_data_parallel_degree"] = c.shard_group();
  if (c.zero_stage == 1 || c.zero_stage == 2) p["shard_optimizer_state"] = true;
  p["offload_activations"] = c.offload_activations;
  p["activation_loading_horizon"] = 4;
  p["auto_partition"] = c.partition.empty();
  if (!c.partition.empty()) p["default_partition"] = 0;
  if (c.precision == sim::Precision::bf16) p["bf16"] = true;
  if (c.precision == sim::Precision::fp16) p["fp16"] = true;
  return p;
}

}  // namespace shardplan::interop
