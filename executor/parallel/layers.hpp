#pragma once
// Megatron-style tensor-parallel layers with optional LoRA adapters and sequence parallelism.
//
// Legend: B batch, S sequence, H hidden, t = tp size, r = LoRA rank, V vocabulary,
// Sx = S/t with sequence parallelism, else S.
//   column-parallel  W: (out/t, in)   x: (B, Sx, in)   -> y: (B, S, out/t)
//   row-parallel     W: (out, in/t)   x: (B, S, in/t)  -> y: (B, Sx, out)
//   LoRA (Hu et al. 2021, §4.1): y += (alpha/r) * B(A(dropout(x)))
//     column: A (r, in) replicated, B (out/t, r) sharded; A's output enters the TP region
//             through the same mapping as x, so A's gradient is complete on every rank.
//     row:    A (r, in/t) sharded, B (out, r) replicated; A's partial output is reduced
//             before B, so B's gradient is complete on every rank.
//   vocab-parallel embedding  W: (V/t, H), ids outside [start, start + V/t) give 0, summed.
//   vocab-parallel cross-entropy over logits (N, V/t) (Megatron cross_entropy.py).
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <vector>

#include "executor/comm/communicator.hpp"

namespace shardplan::executor {

// Where dropout masks come from: `replicated` draws the same mask on every tp rank (for
// tensors every tp rank holds whole), `sharded` differs per tp rank (for tp-split tensors).
// Generators are re-seeded at each unit (embedding, block, head) from (key, global unit), so
// the masks of a layer do not depend on which pipeline stage runs it. On CUDA they are CUDA
// (Philox) generators seeded the same way: masks are reproducible across layouts on one kind of
// device, but a CUDA run's masks differ from a CPU run's.
struct DropoutRng {
  at::Generator replicated;
  at::Generator sharded;
  uint64_t key = 0;                   // the micro-batch's key (seed, step, micro-batch, dp rank)
  uint64_t tp_salt = 0;               // the tp rank: `sharded` differs per tp rank
  torch::Device device{torch::kCPU};  // the generators' (and the masked tensors') device
  void reseed(int64_t unit);
};

struct TpContext {
  Communicator* tp = nullptr;
  bool sequence_parallel = false;
  bool training = true;
  DropoutRng* rng = nullptr;
};

// Inverted dropout with an explicit generator (identity when p == 0 or not training).
torch::Tensor dropout(const torch::Tensor& x, double p, const TpContext& ctx, bool sharded);

struct LoraAdapter {
  torch::Tensor A;     // (r, in) or (r, in/t)
  torch::Tensor B;     // (out/t, r) or (out, r)
  double scale = 1.0;  // alpha / r
  double dropout = 0.0;
};

struct Nf4Weight;

struct ParallelLinear {
  bool column = true;
  torch::Tensor weight;  // (out/t, in) column, (out, in/t) row
  torch::Tensor bias;    // (out/t) column, (out) row; undefined when none
  std::optional<LoraAdapter> lora;
  // QLoRA: the frozen base in NF4 (nf4_linear.hpp), dequantised at every use; `weight` is then
  // undefined.
  std::shared_ptr<const Nf4Weight> nf4;

  [[nodiscard]] bool has_base() const { return weight.defined() || nf4 != nullptr; }

  [[nodiscard]] torch::Tensor forward(const torch::Tensor& x, const TpContext& ctx) const;
};

// Column-parallel linears that read the same input, x: (B, Sx, in) -> ys[i]: (B, S, out_i/t),
// in order. Under sequence parallelism they share one all-gather and backward keeps only x's
// sequence shard (sp_column_linear.hpp; NF4 bases, which keep no input, share one
// gather_from_seq); otherwise each runs ParallelLinear::forward.
std::vector<torch::Tensor> column_forward(const std::vector<const ParallelLinear*>& linears, const torch::Tensor& x,
                                          const TpContext& ctx);

struct VocabEmbedding {
  torch::Tensor weight;  // (V_pad/t, H)
  int64_t start = 0;     // first vocabulary id of this rank
  int64_t valid = 0;     // rows of this rank that are real tokens (the rest is padding)
  // Backward adds the looked-up rows' gradients straight into weight.grad() when it is defined
  // (ZeRO 0/1: a view of the unit's flat gradient buffer) instead of building the dense (V/t, H)
  // gradient — a zero fill of the whole table and a full add, per micro-batch, for B*S rows
  // touched. Only for a weight nothing else uses (not tied to the head, whose gradient meets the
  // embedding's in autograd: simulator/stage_memory.cpp counts that peak).
  bool rows_into_grad = false;
  // ids: (B, S) -> (B, Sx, H)
  [[nodiscard]] torch::Tensor forward(const torch::Tensor& ids, const TpContext& ctx) const;
};

// Per-token losses (N) from local logits (N, V_pad/t) and targets (N) (-100 = ignored: loss 0).
// Columns at or beyond `valid` are padding and never win the softmax.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t start,
                                           int64_t valid, Communicator& tp);

}  // namespace shardplan::executor
