#pragma once
// The eager attention core's two GEMMs, scores = Q K^T and context = P V (Vaswani et al. 2017,
// §3.2.1), each one autograd node. fp32 on the CPU: one CBLAS sgemm per (batch, head) matrix,
// read through the tensors' own strides, so the transposed q/k/v views the model makes are never
// copied, the g query heads of a KV head share one K and V (grouped-query attention, Ainslie et
// al. 2023) without repeating them, and the context is written straight into its (B, S, nh*hd)
// layout; backward is the four GEMMs autograd would run. Elsewhere (CUDA, 16-bit, no CBLAS):
// torch::matmul on the stacked-group views, as before.
// Legend: B batch, nh query heads, nkv KV heads, g = nh / nkv, S query positions, Sk key
// positions, hd head dim. Every input needs unit stride on its last dim.
//
// Causal (query i sees keys 0..i, Sk == S) on the CBLAS path: the S query rows run in
// causal_row_blocks(S) row blocks, and block r = [first, end) multiplies only against keys
// [0, end), as FlashAttention skips fully masked blocks (Dao 2023, FlashAttention-2, §3.1.1).
// Scores above the blocks are written 0 uncomputed; P must be 0 above the diagonal (as
// causal_softmax writes it) and its gradient there is written 0 uncomputed, which is exact for the
// softmax before it (y = 0 there). With b blocks a causal pass runs (b + 1) / 2b of the GEMM FLOPs
// (S = 128: 4 blocks, 62.5 %; S >= 512: 16 blocks, 53 %). Elsewhere causal changes nothing.
#include <torch/torch.h>

namespace shardplan::executor {

// q: (B, nh, S, hd), k: (B, nkv, Sk, hd) -> scores (B, nkv, g*S, Sk); row j*S + i of group kv is
// query head kv*g + j at position i.
torch::Tensor attention_scores(const torch::Tensor& q, const torch::Tensor& k, bool causal = false);

// p: (B, nkv, g*S, Sk) (as attention_scores lays them out), v: (B, nkv, Sk, hd), nh query heads
// -> context (B, S, nh*hd), head h = kv*g + j in columns [h*hd, (h+1)*hd).
torch::Tensor attention_values(const torch::Tensor& p, const torch::Tensor& v, int64_t nh, bool causal = false);

// Row blocks of a causal pass over S queries: S / 32, between 1 and 16 (blocks of 32 rows at
// S = 128, so each GEMM keeps OpenBLAS's full register tiles; at most 16 so each stays >= S/16).
int64_t causal_row_blocks(int64_t S);

// Whether the per-matrix sgemm path (cpu_gemm.hpp: oneDNN or CBLAS) serves fp32 CPU tensors in this build.
bool attention_gemms_use_sgemm();

}  // namespace shardplan::executor
