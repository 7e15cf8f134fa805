#pragma once
// The transformer's non-GEMM ops, as training runs them: the model (transformer_forward.cpp)
// and `shardrun profile` (profile/kernel_bench.cpp, which times each one forward and backward
// so the simulator charges what these very functions cost) both call them.
// Legend: B batch, n heads, S sequence, hd head dim, H hidden, F ffn hidden (local to a tp rank).
#include <torch/torch.h>

namespace shardplan::executor {

// RoPE, rotate-half form, on the first `rot` dims of each head. x: (B, n, S, hd) at positions
// 0..S-1, or at `positions` (S) of a sequence of `total` tokens (context parallelism).
torch::Tensor rotary(const torch::Tensor& x, int64_t rot, const torch::Tensor& positions = {}, int64_t total = 0);

// RMSNorm in fp32 (Hugging Face Llama), one autograd node saving x and the inverse RMS. x: (.., H)
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps);

// LayerNorm in the activations' dtype (bf16 under autocast), which backward then keeps. x: (.., H)
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, double eps);

// softmax(scores * scale + causal mask) in fp32, returned (and kept for backward) in `dtype`.
// scores: (B, nkv, g*S, S), the g query heads sharing a KV head stacked along the rows (GQA).
torch::Tensor causal_softmax(const torch::Tensor& scores, int64_t group, double scale, torch::ScalarType dtype);

// GPT-2's MLP activation: GELU, tanh approximation. x: (.., F)
torch::Tensor gelu_tanh(const torch::Tensor& x);

// SwiGLU's gate (Shazeer 2020, "GLU Variants", §2): silu(g) * u. g, u: (.., F)
torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u);

}  // namespace shardplan::executor
