// AWS NeuronX Distributed (github.com/aws-neuron/neuronx-distributed) on Trainium: Megatron-style
// tensor parallelism with sequence parallelism, 1F1B pipelines, ZeRO-1 (its optimizer shards the
// optimizer states only), selective or full activation checkpointing; the degrees count
// NeuronCores (interop/neuron_flags.hpp).
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel neuronx_distributed_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "neuronx-distributed";
  fw.version = std::string(version);
  fw.display = "NeuronX Distributed " + fw.version;
  fw.repository = "github.com/aws-neuron/neuronx-distributed";
  fw.released = "2026-04";
  fw.commit = "fbac349b61a3adbb123c2983835af692840ff62f";
  KnobTable& k = fw.runs;
  k.runtimes = {sim::DeviceRuntime::neuron};
  k.tensor_parallel = true;
  k.sequence_parallel = true;
  k.schedules = {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved};  // virtual_pipeline_size > 1
  k.zero_stages = {0, 1};
  k.recompute = {Recompute::selective, Recompute::full};  // the examples always checkpoint
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = {Precision::bf16, Precision::fp32};
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  fw.defaults = {
      {"fusion", "eager"}, {"mixed_precision", "master_weights"}, {"attention", "eager"}, {"recompute", "selective"}};
  fw.terms.reports = sim::MemoryReport::device;  // no log figure found; neuron-top shows the device
  fw.facts = {
      {"ZeRO-1 only: NeuronZero1Optimizer",
       "aws-neuron/neuronx-distributed src/neuronx_distributed/optimizer/zero_redundancy_optimizer.py:30 @ fbac349b"},
      {"1F1B, interleaved when virtual_pipeline_size > 1",
       "aws-neuron/neuronx-distributed src/neuronx_distributed/pipeline/model.py:690-705 @ fbac349b"},
      {"selective checkpointing = CoreAttention, else full (every transformer layer): no run without one",
       "aws-neuron/neuronx-distributed examples/training/llama/tp_zero1_llama_hf_pretrain.py:192 @ fbac349b"},
      {"NKI flash attention: on in the ZeRO-1 example, off in the pipeline example",
       "aws-neuron/neuronx-distributed tp_zero1_llama_hf_pretrain.py:661-666, run_llama_nxd.py:397 @ fbac349b"},
      {"master weights and fp32 gradient accumulation (--use_gpu_compatible_precision 1)",
       "aws-neuron/neuronx-distributed examples/training/llama/training_utils.py:371-375 @ fbac349b"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
