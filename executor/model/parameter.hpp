#pragma once
// One parameter of the executor's model: its local tensor (this rank's tensor-parallel shard),
// its Hugging Face name, and how the full tensor maps onto the shards — the single place that
// knows how to cut a full weight for a rank and how to put shards back together.
//
// Internal layout: linears are (out, in) like torch.nn.Linear. GPT-2's Conv1D weights are
// (in, out) in Hugging Face files: `hf_transposed` says so.
// Fused weights (GPT-2 c_attn = [q; k; v] on the output dim) are split segment by segment, so
// that rank r holds [q_r; k_r; v_r].
#include <torch/torch.h>

#include <string>
#include <vector>

namespace shardplan::executor {

struct ShardSpec {
  int dim = -1;                   // sharded dimension of the internal layout; -1 = replicated
  std::vector<int64_t> segments;  // sizes along `dim` of fused parts (empty = one part)
  int64_t padded = 0;             // size along `dim` after padding to a multiple of tp (vocab)
  [[nodiscard]] bool replicated() const { return dim < 0; }
};

struct Parameter {
  std::string name;                 // Hugging Face (or PEFT, for LoRA) name
  torch::Tensor tensor;             // local shard, internal layout
  std::vector<int64_t> full_shape;  // internal layout, unpadded
  ShardSpec shard;
  int unit = 0;  // ZeRO unit (embedding, block i, head)
  bool trainable = true;
  bool lora = false;             // a LoRA adapter (lora_A / lora_B)
  bool hf_transposed = false;    // stored (in, out) in Hugging Face files (GPT-2 Conv1D)
  bool no_decay = false;         // biases and norm weights: no AdamW weight decay
  bool tp_partial_grad = false;  // replicated over tp but its gradient is partial (SP)
  bool tied_copy = false;        // the last pipeline stage's copy of a tied input embedding:
                                 // kept equal to the first stage's, never exported
};

// The local shard of `full` (internal layout, unpadded) for tp rank `rank` of `tp`.
torch::Tensor take_shard(const torch::Tensor& full, const ShardSpec& spec, int rank, int tp);
// The full tensor (unpadded) from all ranks' shards, rank-major in `shards`.
torch::Tensor merge_shards(const std::vector<torch::Tensor>& shards, const ShardSpec& spec,
                           const std::vector<int64_t>& full_shape);
// Shape of the local shard.
std::vector<int64_t> shard_shape(const std::vector<int64_t>& full_shape, const ShardSpec& spec, int tp);

}  // namespace shardplan::executor
