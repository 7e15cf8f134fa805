#pragma once
// FrameworkTerms: what the cost model takes from the framework that runs a configuration. The
// frameworks room (frameworks/) fills it from a framework's model; the default is no framework
// named: memory compared as the device holds it, no allocator slack.
#include <string>

#include "enum_names.hpp"

namespace shardplan::simulator {

// Which peak-memory figure a framework's log prints:
//   allocated  bytes in live tensors (torch.cuda.max_memory_allocated; shardrun's accounting)
//   reserved   bytes the caching allocator holds from the device (torch.cuda.max_memory_reserved)
//   device     everything the process holds on the device (nvidia-smi, neuron-top, hl-smi):
//              reserved + the runtime's context, communicator buffers, library workspaces
enum class MemoryReport { allocated, reserved, device };
template <>
struct EnumNames<MemoryReport> {
  static constexpr NameTable<MemoryReport, 3> table{
      {{MemoryReport::allocated, "allocated"}, {MemoryReport::reserved, "reserved"}, {MemoryReport::device, "device"}}};
};

// How a run that accumulates gradients in fp32 (grad_accum_dtype fp32) reduces them:
//   by_fusion        no framework named: after the backward with eager kernels, bucketed with
//                    Megatron's (the proxy used before frameworks were named)
//   after_backward   the whole fp32 gradient all-reduced once after the last micro-batch
//                    (DeepSpeed's BF16_Optimizer, deepspeed/runtime/bf16_optimizer.py)
//   bucketed         fp32 main_grad buffers reduced in buckets as the ZeRO stage says, overlapped
//                    with the last backward (Megatron's DistributedDataParallel)
enum class Fp32GradReduce { by_fusion, after_backward, bucketed };

// Where a ZeRO 0/1 run adds each micro-batch's weight gradients to the step's:
//   by_fusion      no framework named: inside the GEMM under fusion megatron, a pass otherwise
//   separate_pass  a pass after each backward (PyTorch's AccumulateGrad; Megatron-LM 2021's
//                  main_grad.add_(grad) hook, megatron/model/distributed.py:174 @ v2.5)
//   in_gemm        the weight-gradient GEMM accumulates into main_grad (Megatron's
//                  gradient_accumulation_fusion, commit 83b1e42f, 2022-02-16)
enum class WgradAccumulation { by_fusion, separate_pass, in_gemm };

struct FrameworkTerms {
  std::string name;  // "megatron@2022"; empty: none named
  MemoryReport reports = MemoryReport::device;
  // The caching allocator's reserved bytes over allocated ones at the peak (block rounding and
  // cached free blocks: c10/cuda/CUDACachingAllocator.cpp); 0 where no caching allocator runs.
  double allocator_slack_fraction = 0;
  Fp32GradReduce fp32_grad_reduce = Fp32GradReduce::by_fusion;
  WgradAccumulation wgrad_accumulation = WgradAccumulation::by_fusion;
  // The rate its GEMM and attention kernels reach, over the hardware profile's sustained rate (its
  // curves times fitted.compute_efficiency_scale): 1 is the calibration set's frameworks in common;
  // a framework with runs there has its own fit (calibration/framework_fit.hpp, the
  // frameworks room cites it), what its kernels and engine lose beyond what the simulator prices.
  double compute_efficiency = 1.0;
  // Full recompute stops at the block's last saved tensor: PyTorch's non-reentrant checkpoint
  // (torch/utils/checkpoint.py @0008d771: checkpoint(..., early_stop=True), Rule 5,
  // _recomputation_hook raising _StopRecomputationError once every saved tensor is back). An op
  // saves its inputs before it runs (tools/autograd/gen_variable_type.py: setup_derivative before
  // emit_call), so the block's last linear, which saves its input, never runs again, nor what
  // follows it. false: the whole forward reruns (reentrant checkpoints: Megatron's, DeepSpeed's;
  // torchtitan turns early stop off).
  bool recompute_stops_early = false;
  // The distributed optimizer's all-gather of the updated weights (ZeRO-1) runs behind the next
  // step's forward, each bucket waited on where the forward first uses it (NeMo's
  // distributed_fused_adam with overlap_param_sync; Megatron-Core's --overlap-param-gather,
  // megatron/core/distributed/distributed_data_parallel.py:517-540 @ d98e8a64). false: gathered
  // after the optimizer step, exposed.
  bool param_gather_overlaps_forward = false;
  [[nodiscard]] bool named() const { return !name.empty(); }
};

}  // namespace shardplan::simulator
