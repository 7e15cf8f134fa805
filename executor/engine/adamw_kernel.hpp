#pragma once
// The optimizer's arithmetic over one flat fp32 shard, shared by the ZeRO engine and the
// profile's optimizer benchmark (so the profile times what training runs).
//
//   squared_sum(g)            sum of g_i^2, accumulated in double        (the global grad norm)
//   adamw_update(p, g, m, v)  AdamW (Loshchilov & Hutter 2019, Algorithm 2) with torch.optim.AdamW's
//                             arithmetic: decoupled decay p *= 1 - lr*wd, m = b1 m + (1-b1) g,
//                             v = b2 v + (1-b2) g^2, p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps),
//                             g scaled by the clipping coefficient first.
//
// On the CPU with fp32 tensors both run as one fused pass over memory (DeepSpeed's CPU-Adam,
// Ren et al. 2021, "ZeRO-Offload", §4.2: the op-by-op form makes ~10 passes over four shard-sized
// tensors and allocates two more, which on a CPU costs more than the arithmetic). Elsewhere
// (CUDA, 16-bit tensors) they run as the equivalent LibTorch ops.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace shardplan::executor {

struct AdamWScalars {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;         // 1-based: the bias corrections use it
  double grad_scale = 1.0;  // the clipping coefficient, applied to g (g itself is not written)
};

// A run of the shard's elements and whether weight decay applies to it (norms and biases: no).
struct DecaySpan {
  int64_t begin = 0, length = 0;
  bool decay = true;
};

// Sum of squares of a 1-d tensor as a 0-d double tensor on its device.
[[nodiscard]] torch::Tensor squared_sum(const torch::Tensor& g);

// AdamW on 1-d p (fp32), g (any float dtype), m, v (fp32), all of one length. `spans` are the
// parameters' elements, each with its decay flag; the rest (padding) has zero gradients and
// stays as it is (the fused pass skips it, the op-by-op form leaves it unchanged).
void adamw_update(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v, const AdamWScalars& s,
                  const std::vector<DecaySpan>& spans);

// Whether adamw_update takes the fused CPU pass for these tensors (fp32, CPU, contiguous).
[[nodiscard]] bool adamw_is_fused(const torch::Tensor& p, const torch::Tensor& g);

}  // namespace shardplan::executor
