// DeepSpeed (github.com/deepspeedai/DeepSpeed) on Hugging Face models, and Megatron-DeepSpeed
// (Megatron's model code and fused kernels on DeepSpeed's engine and pipeline engine).
//   0.4.0   ZeRO-3 as of 2021 (0.3.13 to 0.5.10): one all-gather per parameter tensor behind a
//           synchronize, nothing overlapped (what Narayanan et al. SC'21 Table 2 ran); coalesced,
//           prefetched fetches from 0.6.0 (pull #1453)
//   0.19.6  today's: prefetched fetches; ZeRO++ hierarchical partitions (hpZ), MiCS; bf16 gradients
//           accumulate in bf16 unless data_types.grad_accum_dtype says fp32 (since 0.17.6)
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

namespace {

KnobTable deepspeed_table(std::string_view version) {
  KnobTable k;
  k.runtimes = {sim::DeviceRuntime::cuda, sim::DeviceRuntime::synapse};
  k.zero_stages = {0, 1, 2, 3};
  k.pipeline_zero_max = 1;  // deepspeed/runtime/pipe/engine.py asserts ZeRO < 2 under the pipeline engine
  k.offload_optimizer = true;
  k.offload_activations = true;  // activation_checkpointing.cpu_checkpointing
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = kAllPrecisions;
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  k.grad_accum = {sim::GradAccumDtype::param, sim::GradAccumDtype::fp32};
  k.lora = true;
  k.qlora = false;
  if (version == "0.4.0") {
    k.zero3_fetch = {sim::Zero3Fetch::per_tensor_sync};
  } else {
    k.zero3_fetch = {sim::Zero3Fetch::prefetch};
    k.sharding_degree = true;  // MiCS (mics_shard_size), ZeRO++ hpZ
    // DeepSpeed-Ulysses (deepspeed/sequence/layer.py:351) runs through the client's attention code
    // (DistributedAttention); a ds_config cannot set it, so this model leaves it to megatron-deepspeed.
    k.tensor_parallel = true;                       // AutoTP training (tensor_parallel.autotp_size)
    k.schedules = {PipelineSchedule::one_f_one_b};  // deepspeed/runtime/pipe/schedule.py TrainSchedule
  }
  return k;
}

}  // namespace

FrameworkModel deepspeed_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "deepspeed";
  fw.version = std::string(version);
  fw.display = "DeepSpeed " + fw.version;
  fw.repository = "github.com/deepspeedai/DeepSpeed";
  fw.released = version == "0.4.0" ? "2021-06" : "2026-08";
  fw.commit =
      version == "0.4.0" ? "2d302d6abb2cfa181f63320da3ed1be45e34ded3" : "edaa7221267243c7be7fb49c5d5f5c4fb97b4641";
  fw.runs = deepspeed_table(version);
  fw.defaults = {{"fusion", "eager"}, {"mixed_precision", "master_weights"}};
  fw.defaults["zero3_fetch"] = version == "0.4.0" ? "per_tensor_sync" : "prefetch";
  fw.terms.fp32_grad_reduce = sim::Fp32GradReduce::after_backward;
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {
      {"ZeRO-3 0.3.13-0.5.10: a per-parameter all-gather, each behind a synchronize",
       "deepspeedai/DeepSpeed deepspeed/runtime/zero/partition_parameters.py:618-640,791-835 @ v0.4.0 (2d302d6a)"},
      {"0.6.0: all_gather_coalesced and the parameter coordinator's prefetch",
       "deepspeedai/DeepSpeed partition_parameters.py:814, zero/stage3.py:172 @ v0.6.0 (pull #1453)"},
      {"today: gradients accumulate in the model dtype; BF16_Optimizer only for bf16 + fp32 accumulation at ZeRO-1, "
       "or bf16 ZeRO-0 under the pipeline engine",
       "deepspeedai/DeepSpeed deepspeed/runtime/engine.py:1485-1496,1994-2019 @ edaa7221"},
      {"the pipeline engine refuses ZeRO 2/3 and runs one schedule, TrainSchedule (1F1B)",
       "deepspeedai/DeepSpeed deepspeed/runtime/pipe/engine.py:76-77, pipe/schedule.py:189 @ edaa7221"},
      {"Ulysses all-to-all sequence parallelism (DistributedAttention)",
       "deepspeedai/DeepSpeed deepspeed/sequence/layer.py:351 @ edaa7221"},
      {"see_memory_usage prints MA / Max_MA (allocated) and CA / Max_CA (reserved)",
       "deepspeedai/DeepSpeed deepspeed/runtime/utils.py (see_memory_usage) @ edaa7221"},
  };
  return fw;
}

FrameworkModel megatron_deepspeed_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "megatron-deepspeed";
  fw.version = std::string(version);
  fw.display = "Megatron-DeepSpeed (" + fw.version + ")";
  fw.repository = "github.com/bigscience-workshop/Megatron-DeepSpeed";
  fw.released = "2022-03";
  fw.commit = "8387ae17";
  KnobTable& k = fw.runs;
  k.runtimes = {sim::DeviceRuntime::cuda, sim::DeviceRuntime::synapse};
  k.tensor_parallel = true;
  k.schedules = {PipelineSchedule::one_f_one_b};
  k.uneven_partition = true;  // partition_method type:transformer|embedding
  k.zero_stages = {0, 1};
  k.pipeline_zero_max = 1;
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::eager};
  k.fusion = {sim::Fusion::megatron};
  k.precisions = kAllPrecisions;
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  k.grad_accum = {sim::GradAccumDtype::param, sim::GradAccumDtype::fp32};
  fw.defaults = {{"attention", "eager"}, {"fusion", "megatron"}, {"mixed_precision", "master_weights"}};
  fw.defaults_by_precision = {{"bf16", {{"grad_accum_dtype", "fp32"}}}};
  fw.terms.fp32_grad_reduce = sim::Fp32GradReduce::after_backward;
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {
      {"Megatron's GPT on DeepSpeed's pipeline engine (GPTModelPipe under --deepspeed)",
       "bigscience-workshop/Megatron-DeepSpeed pretrain_gpt.py:56-58 @ 8387ae17"},
      {"eager attention: FusedScaleMaskSoftmax over baddbmm (kernel for 16 < sk <= 4096); Megatron's fusions on",
       "bigscience-workshop/Megatron-DeepSpeed megatron/model/transformer.py:179,307, megatron/arguments.py:541-551 @ "
       "8387ae17"},
      {"--zero-stage defaults to 1", "bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py:1031 @ 8387ae17"},
      {"bf16 trains with BF16_Optimizer (fp32 gradient accumulation, reduced after the backward)",
       "huggingface.co/blog/bloom-megatron-deepspeed ('BF16Optimizer'); deepspeed/runtime/bf16_optimizer.py"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
