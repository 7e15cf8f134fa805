#pragma once
// linear(x, W, b) as an autograd function that saves the weight *parameter itself* for
// backward (not a view of its storage, as at::linear's W.t() would), so ZeRO-3 can free a
// gathered weight after forward and re-gather it before backward (DeepSpeed's
// LinearFunctionForZeroStage3). Under autocast the matmuls run in the autocast dtype and
// the weight/bias gradients come back in the parameters' dtype (fp32 master copies).
//   x: (..., in)  W: (out, in)  b: (out)  ->  y: (..., out)
#include <torch/torch.h>

namespace shardplan::executor {

torch::Tensor zero_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {});

}  // namespace shardplan::executor
