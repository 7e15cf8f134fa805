#pragma once
// The runtime's device memory beside the training tensors, per device (one process):
//   context            the driver context the process holds (CUDA context with lazy module
//                      loading, PyTorch's default; the Neuron runtime's micro-code)
//   communicators      each collective communicator's buffers, one set per process group of more
//                      than one rank that the step runs collectives on (PyTorch creates NCCL
//                      communicators lazily, on a group's first collective)
//   library_workspace  cuBLAS / cuBLASLt workspaces
// None of them is in torch.cuda.memory_allocated or memory_reserved: NCCL and the driver allocate
// outside the caching allocator. The hardware profile holds the per-unit figures (they depend on
// the device, the driver and the NCCL version); the configuration decides how many communicators.
// A profile without them (older files, measured CPU profiles) gives one lump, runtime_reserved,
// counted as context.
#include <nlohmann/json.hpp>

namespace shardplan::simulator {

struct RuntimeMemory {
  double context_bytes = 0;
  double communicator_bytes = 0;  // per communicator
  double library_workspace_bytes = 0;
};

struct ParallelConfig;
// The process groups of more than one rank a training step runs collectives on (so holds an NCCL
// communicator for): tensor, context, pipeline (p2p), the gradient group (dp x cp), the expert
// and expert-data groups, and HSDP's replica group when the sharding group is smaller than dp.
int communicators_used(const ParallelConfig& cfg);

}  // namespace shardplan::simulator
