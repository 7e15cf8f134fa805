#pragma once
// Activation checkpointing as an autograd function (Chen et al. 2016, "Training Deep Nets with
// Sublinear Memory Cost"; selective recomputation of the attention core: Korthikanti et al.
// 2022, "Reducing Activation Recomputation in Large Transformer Models", §4).
//
// checkpoint(fn, inputs): forward runs fn(inputs) inside the function's forward, where autograd
// records nothing, and keeps only the inputs (and the dropout generators' state). Backward
// re-runs fn with autograd on, from the kept inputs, under the same autocast setting and with
// the same dropout masks, backpropagates the incoming gradient through that graph (parameter
// gradients accumulate as usual) and returns the inputs' gradients.
//
// Offload (SageMaker's offload_activations): the kept inputs are copied to pinned host memory
// during forward and back to the device in backward. Tensors already on the CPU stay as they
// are (there is no faster memory to free): a no-op there.
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "executor/parallel/layers.hpp"

namespace shardplan::executor {

// fn(inputs, rng): must draw its dropout masks from `rng` (null when the caller has none).
using RecomputeFn = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&, DropoutRng*)>;

// Outputs of fn(inputs), checkpointed. `rng` (may be null) is the live generator pair: forward
// advances it exactly as running fn directly would.
std::vector<torch::Tensor> checkpoint(const RecomputeFn& fn, const std::vector<torch::Tensor>& inputs, DropoutRng* rng,
                                      bool offload);

}  // namespace shardplan::executor
