#pragma once
// Transformer: a decoder-only language model built from a model card (simulator::ModelSpec —
// the same card the simulator reads), split for one tensor-parallel rank and one pipeline stage.
//   GPT-2 style: learned positions, LayerNorm, GELU (tanh), fused c_attn, tied head.
//   Llama style: RoPE (rotate-half), RMSNorm, SwiGLU, grouped-query attention.
// Causal attention; optional LoRA adapters on the plan's target modules; optional sequence
// parallelism; activation recomputation (none / selective / full) and activation offload.
// Parameters carry their Hugging Face names (PEFT names for adapters).
//
// Pipeline: the layers are cut into p*v model chunks (virtual stages vs = chunk*p + stage, in
// model order, Megatron's interleaving); this rank builds the v chunks of its stage. The first
// virtual stage also holds the embedding, the last the final norm, the head and the loss. With
// tied embeddings and p > 1 the last stage holds its own copy of the word embedding
// (`tied_copy`), kept equal to the first stage's by summing their gradients (Megatron's
// embedding group).
//
// Legend: B batch, S sequence (this rank's S/cp under context parallelism; Sx = S/t under SP), H hidden, t = tp size,
// nh/nkv heads (local: /t), hd head dim, L layers.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/comm/communicator.hpp"
#include "executor/parallel/context_parallel.hpp"
#include "executor/parallel/layers.hpp"
#include "moe_block.hpp"
#include "parameter.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"
#include "unit_hooks.hpp"

namespace shardplan::executor {

struct ModelOptions {
  int tp = 1;
  int tp_rank = 0;
  bool sequence_parallel = false;
  simulator::LoraConfig lora;   // rank 0 = none
  double hidden_dropout = 0.0;  // from the card unless overridden
  double attention_dropout = 0.0;
  int pp = 1;
  int pp_rank = 0;
  int virtual_stages = 1;
  bool v_placement = false;           // two chunks in a V (zbv): chunk 1 of rank r is model chunk 2 pp - 1 - r
  std::vector<int> layers_per_chunk;  // [chunk * pp + stage], size pp * v; empty = all in one
  simulator::Recompute recompute = simulator::Recompute::none;
  int recompute_num_layers = 0;       // full: 0 = every block, k = the first k of each chunk
  bool offload_activations = false;   // checkpointed inputs to host (CUDA only)
  torch::Device device{torch::kCPU};  // where parameters and activations live
  // The plan's attention kind is flash: fused scaled_dot_product_attention (flash /
  // memory-efficient kernels) where it can run (attention_run); else the explicit path.
  bool fused_attention = true;
  // Expert parallelism (MoE cards): this rank holds experts [ep_rank*E/ep, (ep_rank+1)*E/ep);
  // the routed tokens travel over `ep_group` (ProcessGroups::expert(); null when ep = 1).
  int ep = 1;
  int ep_rank = 0;
  Communicator* ep_group = nullptr;
  // Token dropping by expert capacity (config.moe_capacity_factor; 0: dropless, moe_block.hpp).
  double moe_capacity_factor = 0;
  // Expert tensor parallel 1 under tp > 1 (Megatron-Core's etp = 1): every expert whole on its
  // rank and each tp rank routing its own sequence shard (SP); else the experts split like the MLP.
  bool whole_experts = false;
  // The load-balancing auxiliary loss's coefficient (0: none; moe_aux_loss.hpp).
  double moe_aux_loss_coeff = 0;
  // Context parallelism: each sequence is split over cp.group (cp_positions: which positions
  // this rank holds); attention runs as a ring or as Ulysses all-to-alls (context_parallel.hpp).
  CpContext cp;
};

// What the attention core runs under `o`: "flash" (fused scaled_dot_product_attention: asked
// for, LibTorch >= 2, a CUDA device, no attention dropout) or "eager" (the explicit path), and
// why not flash when it was asked for (empty otherwise). report.json records it.
struct AttentionRun {
  std::string kind;
  std::string reason;
};
AttentionRun attention_run(const ModelOptions& o);

struct Block {
  torch::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // *_b undefined for RMSNorm
  ParallelLinear qkv;                                // fused (GPT-2 c_attn) — or:
  ParallelLinear q, k, v;                            // separate (Llama)
  ParallelLinear out;                                // row-parallel
  ParallelLinear fc, gate, up, down;                 // GPT-2: fc + down(c_proj); Llama: gate, up, down
  int layer = 0;                                     // global layer index
  int unit = 0;                                      // local ZeRO unit
  // MoE blocks: router and routed experts (gate/up/down above are then the shared expert, if
  // any); the experts live in a ZeRO unit of their own, reduced over the expert-data group.
  std::shared_ptr<MoeMlp> moe;
  int expert_unit = -1;
};

// One model chunk of this stage.
struct ModelChunk {
  int virtual_stage = 0;  // model-order index: chunk * pp + stage, or in a V 2 pp - 1 - stage for chunk 1
  int first_layer = 0;    // global index of its first block
  int layers = 0;
  int block_begin = 0;               // its first entry in this stage's blocks
  bool first = false;                // embedding here (input: token ids)
  bool last = false;                 // final norm, head and loss here (output: loss)
  int unit_begin = 0, unit_end = 0;  // its local ZeRO units [begin, end)
  std::vector<int> embedding_units;  // first chunk: units of the word / position embeddings
  std::vector<int> head_units;       // last chunk: units of the final norm and the head
};

struct ChunkOutput {
  torch::Tensor activation;  // not last: (B, Sx, H) for the next virtual stage
  torch::Tensor loss_sum;    // last: scalar, sum of per-token losses of this micro-batch
  int64_t tokens = 0;        // last: target tokens counted in it
};

class Transformer {
 public:
  // Throws InputError if the card's family or shapes are not buildable with this tp/partition.
  Transformer(const simulator::ModelSpec& spec, const ModelOptions& opt);

  // Seeded initialisation, identical whatever the layout: every full tensor is drawn from a
  // generator seeded by (seed, parameter name), then cut for this rank.
  void init_weights(uint64_t seed);

  // Forward of one micro-batch through local chunk `chunk`. `input`: token ids (B, S) int64 on
  // the first chunk, else the previous virtual stage's activation (B, Sx, H). `labels` (B, S)
  // (-100 = ignored) are used by the last chunk. The caller divides the loss by the global
  // token count. Dropout masks are drawn per layer from `rng` (reseeded per global unit).
  ChunkOutput forward_chunk(int chunk, const torch::Tensor& input, const torch::Tensor& labels, TpContext& ctx,
                            UnitHooks* hooks);

  [[nodiscard]] std::vector<Parameter>& parameters() { return params_; }
  [[nodiscard]] const std::vector<Parameter>& parameters() const { return params_; }
  [[nodiscard]] int num_units() const { return num_units_; }
  [[nodiscard]] const std::vector<ModelChunk>& chunks() const { return chunks_; }
  // This stage's blocks (QLoRA replaces their linears' weights by NF4 bases: nf4_base.hpp).
  [[nodiscard]] std::vector<Block>& blocks() { return blocks_; }
  [[nodiscard]] const std::vector<Block>& blocks() const { return blocks_; }
  [[nodiscard]] const simulator::ModelSpec& spec() const { return spec_; }
  [[nodiscard]] const ModelOptions& options() const { return opt_; }
  [[nodiscard]] int64_t padded_vocab() const { return vocab_padded_; }
  // Local unit of the tied word embedding (first stage) or of its copy (last stage) when the
  // embeddings are tied across pipeline stages; -1 otherwise.
  [[nodiscard]] int tied_embedding_unit() const { return tied_unit_; }
  // Activation shape passed between virtual stages for a micro-batch of `batch` x `seq`.
  [[nodiscard]] std::vector<int64_t> activation_shape(int64_t batch, int64_t seq) const;
  // Whether local unit `unit` holds an MoE block's routed experts (moe_block.cpp).
  [[nodiscard]] bool is_expert_unit(int unit) const;
  // Routing figures of the MoE blocks' training forwards since the caller last reset them.
  [[nodiscard]] MoeRoutingStats& moe_stats() const { return moe_stats_; }

 private:
  void build();
  void build_chunk(ModelChunk& c);
  void add_param(const std::string& name, torch::Tensor* slot, std::vector<int64_t> full_shape, ShardSpec shard,
                 int unit, bool no_decay, bool hf_transposed = false);
  void build_linear(ParallelLinear& lin, const simulator::LinearDesc& d, const std::string& prefix, int unit,
                    std::vector<int64_t> segments);
  void build_block(Block& b, int64_t layer, int unit);
  torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  torch::Tensor attention(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  torch::Tensor attention_core(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const TpContext& ctx) const;
  // attention_core across the context-parallel ranks (ring or Ulysses), or attention_core itself.
  torch::Tensor context_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const TpContext& ctx) const;
  [[nodiscard]] bool use_fused_attention(const torch::Tensor& q) const;
  torch::Tensor mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  torch::Tensor block_forward(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;
  void build_moe(Block& b, const std::string& prefix);  // moe_block.cpp
  void build_expert_lora(std::optional<LoraAdapter>& lora, const simulator::LinearDesc& d, const std::string& name,
                         int unit);                                                             // moe_block.cpp
  static void check_moe_options(const simulator::ModelSpec& spec, const ModelOptions& opt);     // moe_block.cpp
  torch::Tensor moe_mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const;  // moe_block.cpp
  torch::Tensor embed(const ModelChunk& c, const torch::Tensor& ids, TpContext& ctx, UnitHooks* hooks);
  ChunkOutput head(const ModelChunk& c, torch::Tensor x, const torch::Tensor& labels, TpContext& ctx, UnitHooks* hooks);

  simulator::ModelSpec spec_;
  ModelOptions opt_;
  bool llama_ = false;
  int64_t vocab_padded_ = 0;
  int num_units_ = 0;
  int tied_unit_ = -1;
  VocabEmbedding wte_;         // first stage (or the tied copy on the last)
  torch::Tensor wpe_;          // (P, H) learned positions (GPT-2), first stage
  std::vector<Block> blocks_;  // this stage's blocks, chunk by chunk
  std::vector<ModelChunk> chunks_;
  torch::Tensor final_w_, final_b_;
  torch::Tensor lm_head_;          // (V_pad/t, H); undefined when tied
  std::vector<Parameter> params_;  // their tensors share storage with the members above
  mutable MoeRoutingStats moe_stats_;
};

}  // namespace shardplan::executor
