#pragma once
// A linear over a frozen NF4 base (QLoRA, Dettmers et al. 2023, §3): the weight is held only as
// packed 4-bit codes and double-quantised constants (model/nf4.hpp) and dequantised at every
// use — in forward, and again in backward for the input gradient — so no full-precision copy
// lives between the passes. The weight is frozen: no weight gradient, and the input is not kept
// (it would serve only the weight gradient). Under autocast the GEMMs run in the autocast dtype
// (the dequantised weight is cast to it, as bitsandbytes' dequantize_4bit casts to its dtype).
//   x: (..., in)   W: (out, in) NF4   ->   y = x @ dequant(W)^T: (..., out)
//   backward: dx = dy @ dequant(W): (..., in)
#include <torch/torch.h>

#include <string>
#include <vector>

#include "executor/model/nf4.hpp"
#include "executor/model/parameter.hpp"

namespace shardplan::executor {

// The NF4 base of one linear on this rank: its slice of the full weight's quantisation, with
// what exporting it needs (the Hugging Face name, the full shape and how it is cut over tp).
struct Nf4Weight {
  std::string name;                 // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> full_shape;  // (out, in), the internal layout
  ShardSpec shard;                  // as the weight parameter it replaced
  Nf4Tensor q;                      // this rank's slice, local shape
};

torch::Tensor nf4_linear(const torch::Tensor& x, const Nf4Tensor& w);

}  // namespace shardplan::executor
