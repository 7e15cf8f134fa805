// SageMaker model parallel v2 (interop/smp_v2.hpp): PyTorch FSDP with hybrid sharding, tensor
// parallelism through Transformer Engine layers, context and expert parallelism, activation
// checkpointing and offloading, FP8 through TE on p5.
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel smp_v2_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "smp-v2";
  fw.version = std::string(version);
  fw.display = "SageMaker model parallel " + fw.version;
  fw.repository = "docs.aws.amazon.com/sagemaker (model-parallel-v2)";
  fw.released = "2024-06";
  KnobTable& k = fw.runs;
  k.runtimes = kCuda;
  k.tensor_parallel = true;
  k.sequence_parallel = true;
  k.sequence_parallel_required = true;
  k.cp_kinds = {sim::CpKind::ring};
  k.expert_parallel = true;
  k.zero_stages = {0, 2, 3};
  k.sharding_degree = true;  // hybrid_shard_degree
  k.offload_activations = true;
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::flash};
  k.fusion = {sim::Fusion::eager, sim::Fusion::megatron};
  k.precisions = {Precision::bf16, Precision::fp16, Precision::fp32};
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  k.fp8 = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
  k.model_parallel_needs_fused_layers = true;  // use_smp_implementation: the TE transformer layers
  k.gradient_accumulation = false;             // the example script steps after every batch
  fw.defaults = {{"fusion", "eager"}, {"attention", "flash"}, {"mixed_precision", "master_weights"}};
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {
      {"hybrid_shard_degree, tensor_parallel_degree, context_parallel_degree, expert_parallel_degree, "
       "sm_activation_offloading",
       "docs.aws.amazon.com/sagemaker/latest/dg/distributed-model-parallel-v2-reference.html"},
      {"tensor parallelism through Transformer Engine on top of PyTorch FSDP",
       "docs.aws.amazon.com/sagemaker/latest/dg/model-parallel-core-features-v2-tensor-parallelism.html"},
      {"no pipeline parallelism (no pipeline key)", "interop/smp_flags.hpp"},
      {"tp, cp, ep and FP8 need use_smp_implementation 1 (the script swaps in Transformer Engine's fused layers); "
       "no gradient accumulation argument (one optimizer step per train_batch_size batch)",
       "aws/amazon-sagemaker-examples build_and_train_models/sm-distributed_model_parallel_v2/shared-scripts/"
       "arguments.py @ a39b68fa"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
