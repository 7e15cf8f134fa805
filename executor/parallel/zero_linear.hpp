#pragma once
// linear(x, W, b) as an autograd function that saves the weight *parameter itself* for
// backward (not a view of its storage, as at::linear's W.t() would), so ZeRO-3 can free a
// gathered weight after forward and re-gather it before backward (DeepSpeed's
// LinearFunctionForZeroStage3). Under autocast the matmuls run in the autocast dtype and
// the weight/bias gradients come back in the parameters' dtype (fp32 master copies).
//   x: (..., in)  W: (out, in)  b: (out)  ->  y: (..., out)
//
// `into_grad` (Megatron's gradient_accumulation_fusion, Narayanan et al. SC'21 §4.2): when the
// weight's .grad is defined and everything is fp32 (ZeRO 0/1: .grad is a view of the unit's flat
// gradient buffer), backward adds x^T gy into it inside the GEMM (beta = 1) and returns no weight
// gradient, so no fresh (out, in) gradient is allocated, zero-filled by the BLAS (beta = 0) and
// added by AccumulateGrad; the parameter's AccumulateGrad node still runs (with nothing to add),
// so its hooks fire as before. The simulator drops that fresh gradient from ZeRO 0/1's peak
// (simulator/stage_memory.cpp). Only for a weight used once per pass (not a tied head).
#include <torch/torch.h>

namespace shardplan::executor {

torch::Tensor zero_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {},
                          bool into_grad = false);

}  // namespace shardplan::executor
