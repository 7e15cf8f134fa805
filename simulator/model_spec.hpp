#pragma once
// ModelSpec: everything the shapes of a transformer depend on, read from a model card
// (models/<name>.json) or from a Hugging Face config.json. The simulator and the executor
// read the same cards: one source of truth for shapes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "enum_names.hpp"

namespace shardplan::simulator {

enum class FfnKind { gelu, swiglu };
template <>
struct EnumNames<FfnKind> {
  static constexpr NameTable<FfnKind, 2> table{{{FfnKind::gelu, "gelu"}, {FfnKind::swiglu, "swiglu"}}};
};
enum class NormKind { layernorm, rmsnorm };
template <>
struct EnumNames<NormKind> {
  static constexpr NameTable<NormKind, 2> table{{{NormKind::layernorm, "layernorm"}, {NormKind::rmsnorm, "rmsnorm"}}};
};
enum class PositionalKind { learned, rotary };
template <>
struct EnumNames<PositionalKind> {
  static constexpr NameTable<PositionalKind, 2> table{
      {{PositionalKind::learned, "learned"}, {PositionalKind::rotary, "rotary"}}};
};
// decoder: causal LM (GPT, Llama). encoder: bidirectional masked LM (BERT).
enum class ModelKind { decoder, encoder };
template <>
struct EnumNames<ModelKind> {
  static constexpr NameTable<ModelKind, 2> table{{{ModelKind::decoder, "decoder"}, {ModelKind::encoder, "encoder"}}};
};

// Which way a linear is split under Megatron tensor parallelism; `replicated` linears are whole
// on every tp rank (MLA's down-projections, Megatron-Core's "duplicated" parallel mode).
enum class TpSplit { column, row, replicated };

// One linear of a transformer block, named as Hugging Face names the module inside the
// block (e.g. "self_attn.q_proj"); LoRA targets match these names PEFT-style (exact or by
// '.'-suffix).
struct LinearDesc {
  std::string module;  // e.g. "self_attn.q_proj", "attn.c_attn", "mlp.c_proj"
  int64_t d_in = 0;
  int64_t d_out = 0;
  bool bias = false;
  TpSplit split = TpSplit::column;
  // Input and output widths on one of t tensor-parallel ranks.
  [[nodiscard]] double d_in_local(double t) const { return split == TpSplit::row ? d_in / t : double(d_in); }
  [[nodiscard]] double d_out_local(double t) const { return split == TpSplit::column ? d_out / t : double(d_out); }
  // Weight elements on one of t ranks.
  [[nodiscard]] double weight_local(double t) const {
    return split == TpSplit::replicated ? double(d_in) * d_out : double(d_in) * d_out / t;
  }
};

// Mixture of experts (Shazeer et al. 2017; Fedus et al. 2021, Switch Transformer; Jiang et al.
// 2024, Mixtral; DeepSeek-AI 2024, DeepSeek-V3 §2.1.2): the MLP of a block replaced by a router
// (a linear h -> E, softmax or sigmoid scores, top-k), E routed experts (each a gated MLP of
// width expert_ffn_hidden) and optionally always-active shared experts.
struct MoeSpec {
  int64_t num_experts = 0;          // routed experts per MoE block; 0 = a dense model
  int64_t top_k = 0;                // routed experts each token goes to
  int64_t expert_ffn_hidden = 0;    // one routed expert's FFN width
  int64_t shared_ffn_hidden = 0;    // the shared expert(s)' FFN width in total; 0 = none
  bool shared_expert_gate = false;  // Qwen2-MoE: a sigmoid gate (h -> 1) on the shared expert's output
  int64_t first_dense_layers = 0;   // DeepSeek first_k_dense_replace: the first k blocks keep a dense MLP
  bool router_bias = false;         // DeepSeek-V3: a learned per-expert score correction (E parameters)
  [[nodiscard]] bool enabled() const { return num_experts > 0; }
};

// Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 §2.1): q and kv are projected down
// to small latents (q_lora_rank, kv_lora_rank + a shared rotary key of qk_rope_head_dim), normed,
// and projected up per head; q/k heads are head_dim = nope + rope wide, values v_head_dim.
struct MlaSpec {
  int64_t q_lora_rank = 0;       // 0 = q projected directly from the hidden state
  int64_t kv_lora_rank = 0;      // > 0: MLA
  int64_t qk_rope_head_dim = 0;  // of head_dim, the rotary part (the rest, nope, is not rotated)
  int64_t v_head_dim = 0;
  [[nodiscard]] bool enabled() const { return kv_lora_rank > 0; }
};

struct ModelSpec {
  std::string name;
  std::string family;  // gpt2 | llama | gptj | gpt_neox | bert (naming of modules)
  ModelKind kind = ModelKind::decoder;

  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads unless GQA/MQA
  int64_t head_dim = 0;      // hidden / num_heads unless the card says otherwise
  int64_t ffn_hidden = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;  // BERT token-type embeddings (0 if none)
  int64_t rotary_dim = 0;       // dims per head that get RoPE (0 = all, when rotary)

  FfnKind ffn_kind = FfnKind::gelu;
  NormKind norm_kind = NormKind::layernorm;
  PositionalKind positional = PositionalKind::learned;
  bool tied_embeddings = false;

  bool qkv_bias = false;           // biases of q/k/v (or fused qkv)
  bool out_proj_bias = false;      // bias of the attention output projection
  bool mlp_bias = false;           // biases of the MLP linears
  bool fused_qkv = false;          // one qkv linear (GPT-2 c_attn, NeoX query_key_value)
  bool qk_norm = false;            // Qwen3: a norm over each head's q and k (head_dim weights each)
  bool parallel_residual = false;  // GPT-J / NeoX: attention and MLP read the same input
  int norms_per_layer = 2;         // GPT-J shares one norm (ln_1) between attention and MLP
  bool final_norm = true;
  bool embedding_norm = false;  // BERT: LayerNorm after the embeddings
  bool lm_head_bias = false;    // GPT-J lm_head has a bias
  bool mlm_head = false;        // BERT: transform (dense + norm) + decoder bias
  bool pooler = false;          // BERT pooler (dense h x h)
  bool nsp_head = false;        // BERT next-sentence prediction (dense h x 2), BertForPreTraining

  double attention_dropout = 0.0;  // probability; > 0 stores masks for backward
  double hidden_dropout = 0.0;

  MoeSpec moe;
  MlaSpec mla;

  // --- derived shapes -------------------------------------------------------------------
  [[nodiscard]] int64_t q_dim() const { return num_heads * head_dim; }
  // Keys (and, without MLA, values) after projection: g heads of head_dim.
  [[nodiscard]] int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // Values: MLA's v heads are v_head_dim wide.
  [[nodiscard]] int64_t v_dim() const { return mla.enabled() ? num_heads * mla.v_head_dim : kv_dim(); }
  // The attention output (the output projection's input): a heads of the value width.
  [[nodiscard]] int64_t attn_out_dim() const { return mla.enabled() ? num_heads * mla.v_head_dim : q_dim(); }
  [[nodiscard]] bool is_moe() const { return moe.enabled(); }
  // Blocks with routed experts (all but the first dense ones).
  [[nodiscard]] int64_t moe_layers() const { return moe.enabled() ? num_layers - moe.first_dense_layers : 0; }
  [[nodiscard]] int64_t norm_params() const { return norm_kind == NormKind::layernorm ? 2 * hidden : hidden; }
  // The q and k norms of one block (replicated over tp ranks: one head_dim vector each).
  [[nodiscard]] int64_t qk_norm_params() const {
    return qk_norm ? 2 * (norm_kind == NormKind::layernorm ? 2 : 1) * head_dim : 0;
  }
  // MLA's latent norms (q_a_layernorm, kv_a_layernorm), replicated over tp ranks.
  [[nodiscard]] int64_t mla_norm_params() const {
    return mla.enabled() ? (mla.q_lora_rank + mla.kv_lora_rank) * (norm_kind == NormKind::layernorm ? 2 : 1) : 0;
  }
  // The linears of the model's repeated block, in Hugging Face module naming: attention and the
  // MLP; for an MoE model the MoE block's attention and shared expert (not the router, not the
  // routed experts).
  [[nodiscard]] std::vector<LinearDesc> block_linears() const;
  // An MoE model's first dense blocks (moe.first_dense_layers): attention and a dense MLP.
  [[nodiscard]] std::vector<LinearDesc> dense_block_linears() const;
  // One routed expert's linears (gate/up column-, down row-split over expert tensor parallelism).
  [[nodiscard]] std::vector<LinearDesc> expert_linears() const;
  // Router weights of one MoE block (h x E, plus a shared-expert gate's h), replicated.
  [[nodiscard]] int64_t router_params() const {
    return moe.enabled() ? hidden * moe.num_experts + (moe.shared_expert_gate ? hidden : 0) +
                               (moe.router_bias ? moe.num_experts : 0)
                         : 0;
  }
};

// Parameter counts, split the way tensor parallelism splits them.
struct ParameterCounts {
  int64_t per_layer = 0;             // one repeated block (an MoE block with all its routed experts)
  int64_t per_layer_tp_sharded = 0;  // part of per_layer split over tp ranks (routed experts excluded)
  int64_t per_layer_experts = 0;     // of per_layer, the routed experts (split over ep x etp ranks)
  int64_t per_expert = 0;            // one routed expert
  int64_t dense_layer = 0;           // one of an MoE model's first dense blocks
  int64_t dense_layer_tp_sharded = 0;
  int64_t embedding = 0;             // word + position + token-type (+ embedding norm)
  int64_t embedding_tp_sharded = 0;  // vocab-parallel word embedding
  int64_t head = 0;                  // final norm + untied lm head (+ bias) + MLM head + pooler
  int64_t head_tp_sharded = 0;       // vocab-parallel lm head (+ its bias)
  int64_t total = 0;                 // what Hugging Face's num_parameters() reports
  int64_t active = 0;                // what one token runs through (total less the experts it skips)
};

ParameterCounts count_parameters(const ModelSpec& m);

// Parameters held by one tp rank for a block / embedding / head (sharded / tp + replicated).
int64_t per_rank(int64_t total, int64_t sharded, int64_t tp);

// LoRA (Hu et al. 2021, §4.1): r * (d_in + d_out) trainable parameters per adapted linear.
struct LoraTargetsResolved {
  std::vector<LinearDesc> linears;  // adapted linears of one block
};
// Resolve PEFT-style target names ("q_proj", "c_proj", "mlp.c_proj") against the block's
// linears. Throws InputError naming the target when it matches nothing, neither a block linear
// nor a routed expert's (MoE cards: "w1" selects Mixtral's experts.*.w1, but only block linears
// are returned).
LoraTargetsResolved resolve_lora_targets(const ModelSpec& m, const std::vector<std::string>& targets);
int64_t lora_parameters_per_layer(const LoraTargetsResolved& t, int64_t rank);
// Whether a PEFT target name selects `module` (exact, or a '.'-separated suffix).
bool lora_target_matches(const std::string& module, const std::string& target);
// Whether block linears i and i + 1 are column-parallel neighbours over the same input (q, k, v;
// gate, up): one input cast serves both under FP8, one GEMM under Megatron-Core's fused layers.
bool columns_share_input(const std::vector<LinearDesc>& linears, std::size_t i);
// Whether Megatron-Core's fused layers change anything for `m`: projections that fuse, or SwiGLU.
bool has_fusable_layers(const ModelSpec& m);

// Validate shapes (positive sizes, heads divide hidden, kv heads divide heads, ...).
// `source` names the file in error messages.
void validate_model(const ModelSpec& m, const std::string& source);

// Load a model card (our schema) or a Hugging Face config.json (detected by "model_type" /
// field names). Errors name the file and the field.
ModelSpec load_model_file(const std::string& path);
// The same from an already-parsed JSON object; `source` names it in error messages.
ModelSpec model_from_json(const nlohmann::json& j, const std::string& source);
// The card (our schema) describing `m`; model_from_json(to_card_json(m)) == m.
nlohmann::json to_card_json(const ModelSpec& m);
// `name_or_path`: a built-in card name (models/<name>.json) or a path to a JSON file.
ModelSpec load_model(const std::string& name_or_path);
// Built-in card names, sorted.
std::vector<std::string> builtin_model_names();

}  // namespace shardplan::simulator
