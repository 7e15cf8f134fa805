#pragma once
// Transformer: a decoder-only language model built from a model card (simulator::ModelSpec —
// the same card the simulator reads), split for one tensor-parallel rank.
//   GPT-2 style: learned positions, LayerNorm, GELU (tanh), fused c_attn, tied head.
//   Llama style: RoPE (rotate-half), RMSNorm, SwiGLU, grouped-query attention.
// Causal attention; optional LoRA adapters on the plan's target modules; optional sequence
// parallelism. Parameters carry their Hugging Face names (PEFT names for adapters).
//
// Legend: B batch, S sequence, H hidden, t = tp size, nh/nkv heads (local: /t), hd head dim.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "executor/comm/communicator.hpp"
#include "executor/parallel/layers.hpp"
#include "parameter.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"
#include "unit_hooks.hpp"

namespace shardplan::executor {

struct ModelOptions {
  int tp = 1;
  int tp_rank = 0;
  bool sequence_parallel = false;
  simulator::LoraConfig lora;           // rank 0 = none
  double hidden_dropout = 0.0;          // from the card unless overridden
  double attention_dropout = 0.0;
};

struct Block {
  torch::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // *_b undefined for RMSNorm
  ParallelLinear qkv;                  // fused (GPT-2 c_attn) — or:
  ParallelLinear q, k, v;              // separate (Llama)
  ParallelLinear out;                  // row-parallel
  ParallelLinear fc, gate, up, down;   // GPT-2: fc + down(c_proj); Llama: gate, up, down
};

struct LossSum {
  torch::Tensor loss_sum;  // scalar: sum of per-token losses of this micro-batch (this rank's share)
  int64_t tokens = 0;      // target tokens counted in it
};

class Transformer {
 public:
  // Throws InputError if the card's family or shapes are not buildable with this tp.
  Transformer(const simulator::ModelSpec& spec, const ModelOptions& opt);

  // Seeded initialisation, identical whatever the layout: every full tensor is drawn from a
  // generator seeded by (seed, parameter name), then cut for this rank.
  void init_weights(uint64_t seed);

  // ids, labels: (B, S) int64 (labels -100 = ignored). Returns the summed loss; the caller
  // divides by the global token count.
  LossSum forward(const torch::Tensor& ids, const torch::Tensor& labels, TpContext& ctx, UnitHooks* hooks);

  [[nodiscard]] std::vector<Parameter>& parameters() { return params_; }
  [[nodiscard]] const std::vector<Parameter>& parameters() const { return params_; }
  [[nodiscard]] int num_units() const { return num_units_; }
  [[nodiscard]] const simulator::ModelSpec& spec() const { return spec_; }
  [[nodiscard]] const ModelOptions& options() const { return opt_; }
  [[nodiscard]] int64_t padded_vocab() const { return vocab_padded_; }

 private:
  void build();
  void add_param(const std::string& name, torch::Tensor* slot, std::vector<int64_t> full_shape, ShardSpec shard,
                 int unit, bool no_decay, bool hf_transposed = false);
  void build_linear(ParallelLinear& lin, const simulator::LinearDesc& d, const std::string& prefix, int unit,
                    std::vector<int64_t> segments);
  torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  torch::Tensor attention(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  torch::Tensor mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  torch::Tensor block_forward(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  [[nodiscard]] int head_unit() const;

  simulator::ModelSpec spec_;
  ModelOptions opt_;
  bool llama_ = false;
  int64_t vocab_padded_ = 0;
  int num_units_ = 0;
  VocabEmbedding wte_;
  torch::Tensor wpe_;               // (P, H) learned positions (GPT-2)
  std::vector<Block> blocks_;
  torch::Tensor final_w_, final_b_;
  torch::Tensor lm_head_;           // (V_pad/t, H); undefined when tied
  std::vector<Parameter> params_;  // their tensors share storage with the members above
};

}  // namespace shardplan::executor
