#pragma once
// Weight gradients shardrun adds into ZeRO 0/1's flat gradient buffer itself, so that autograd
// makes no fresh gradient tensor for them and no accumulate pass adds one in:
//   - fp32 linears: the weight-gradient GEMM accumulates into the flat view (beta = 1;
//     executor/parallel/zero_linear.hpp), except the column linears under sequence parallelism,
//     LoRA adapters and routed experts (they keep PyTorch's own backward);
//   - an untied fp32 LM head, the same way;
//   - an untied embedding, any precision: its backward adds the batch's rows into the flat view
//     (index_add_; executor/parallel/layers.hpp).
// One source for the simulator's memory (stage_memory.cpp) and time (step_model.cpp).
#include <vector>

#include "model_spec.hpp"
#include "parallel_config.hpp"

namespace shardplan::simulator {

struct FlatGradFusion {
  bool linears = false;    // fp32 block linears (not SP column ones)
  bool head = false;       // an untied fp32 LM head
  bool embedding = false;  // an untied embedding's rows
};

// Which of the above apply to `cfg` (none under ZeRO 2/3, where gradients are reduced per
// micro-batch from autograd's own tensors, or under LoRA, where only adapters train).
FlatGradFusion flat_grad_fusion(const ModelSpec& model, const ParallelConfig& cfg, bool lora);

// Whether one block linear's weight gradient goes into the flat buffer inside its GEMM.
bool linear_into_flat(const LinearDesc& lin, const ParallelConfig& cfg, const FlatGradFusion& f);

// Weight elements of `linears` (one tp rank's share) whose gradients go into the flat buffer.
double linears_into_flat(const std::vector<LinearDesc>& linears, const ParallelConfig& cfg, const FlatGradFusion& f);

}  // namespace shardplan::simulator
