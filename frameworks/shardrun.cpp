// shardrun, this project's executor (executor/README.md): everything the planner writes, on the
// CPU under MPI and on CUDA with NCCL, but FP8 linears and (on CUDA) optimizer offload
// (executor/run/trainer.cpp check_supported). Its memory figure is allocated bytes: the
// accounting allocator on the CPU, the caching allocator's peak allocated on CUDA.
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel shardrun_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "shardrun";
  fw.version = std::string(version);
  fw.display = "shardrun";
  fw.repository = "this repository (executor/)";
  KnobTable& k = fw.runs;
  k.runtimes = {sim::DeviceRuntime::cuda, sim::DeviceRuntime::cpu};
  k.tensor_parallel = true;
  k.sequence_parallel = true;
  k.schedules = {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved,
                 PipelineSchedule::zb1p,  PipelineSchedule::zb2p,        PipelineSchedule::zbv,
                 PipelineSchedule::vhalf, PipelineSchedule::vmin};
  // The deferred W's gradients are reduced once, after a chunk's last W (ZeRO-2/3 reduce-scatter
  // each micro-batch's as its backward ends): executor/run/trainer.cpp check_split_backward_supported.
  k.split_backward_zero_max = 1;
  k.uneven_partition = true;
  k.cp_kinds = {sim::CpKind::ring, sim::CpKind::all_to_all};
  k.expert_parallel = true;
  k.zero_stages = {0, 1, 2, 3};
  k.sharding_degree = true;
  k.offload_optimizer = true;
  k.offload_activations = true;
  k.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  k.recompute_num_layers = true;
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = kAllPrecisions;
  k.mixed_precision = {sim::MixedPrecision::master_weights, sim::MixedPrecision::autocast};
  k.grad_accum = {sim::GradAccumDtype::param};  // fp32 is accepted and run as param (trainer.cpp)
  k.zero3_fetch = {sim::Zero3Fetch::prefetch};
  k.lora = true;
  k.qlora = true;
  k.packed_sequences = false;
  fw.defaults = {{"fusion", "eager"}};
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {{"what it refuses: FP8 linears, optimizer offload on CUDA, DualPipeV, a split backward with ZeRO-2/3 "
               "or in a V with tied embeddings",
               "executor/run/trainer.cpp (check_supported)"},
              {"memory: the accounting allocator's peak (CPU), max_memory_allocated (CUDA)",
               "executor/metrics/ (accounting allocator, cuda_stats)"}};
  return fw;
}

}  // namespace shardplan::frameworks
