#include "hf_config.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

std::string detect_type(const nlohmann::json& j, const JsonContext& ctx) {
  std::string t = get_string_or(j, "model_type", "", ctx);
  if (t.empty()) {
    std::string a;
    if (const auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
      if (!it->is_array()) ctx.fail("architectures", "an array of class names (e.g. [\"LlamaForCausalLM\"])");
      if (!it->empty() && (*it)[0].is_string()) a = (*it)[0].get<std::string>();
    }
    if (a.starts_with("Llama") || a.starts_with("Mistral")) t = "llama";
    else if (a.starts_with("Mixtral")) t = "mixtral";
    else if (a.starts_with("Qwen3Moe")) t = "qwen3_moe";
    else if (a.starts_with("Qwen2Moe")) t = "qwen2_moe";
    else if (a.starts_with("Qwen3")) t = "qwen3";
    else if (a.starts_with("Qwen2")) t = "qwen2";
    else if (a.starts_with("DeepseekV3")) t = "deepseek_v3";
    else if (a.starts_with("GPT2")) t = "gpt2";
    else if (a.starts_with("GPTJ")) t = "gptj";
    else if (a.starts_with("GPTNeoX")) t = "gpt_neox";
    else if (a.starts_with("Bert")) t = "bert";
  }
  return t;
}

bool has_architecture(const nlohmann::json& j, const std::string& name) {
  auto it = j.find("architectures");
  if (it == j.end() || !it->is_array()) return false;
  return std::any_of(it->begin(), it->end(), [&](const nlohmann::json& a) { return a == name; });
}

ModelSpec llama(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m;
  m.family = "llama";
  m.hidden = get_positive_int(j, "hidden_size", ctx);
  m.ffn_hidden = get_positive_int(j, "intermediate_size", ctx);
  m.num_layers = get_positive_int(j, "num_hidden_layers", ctx);
  m.num_heads = get_positive_int(j, "num_attention_heads", ctx);
  m.num_kv_heads = get_int_or(j, "num_key_value_heads", m.num_heads, ctx);
  m.head_dim = get_int_or(j, "head_dim", m.hidden / m.num_heads, ctx);
  m.vocab_size = get_positive_int(j, "vocab_size", ctx);
  m.max_positions = get_positive_int(j, "max_position_embeddings", ctx);
  m.tied_embeddings = get_bool_or(j, "tie_word_embeddings", false, ctx);
  m.qkv_bias = m.out_proj_bias = get_bool_or(j, "attention_bias", false, ctx);
  m.mlp_bias = get_bool_or(j, "mlp_bias", false, ctx);
  m.ffn_kind = FfnKind::swiglu;
  m.norm_kind = NormKind::rmsnorm;
  m.positional = PositionalKind::rotary;
  m.attention_dropout = get_number_or(j, "attention_dropout", 0.0, ctx);
  return m;
}

// Qwen2 (Qwen2Config): Llama's layout with biases on q, k and v only; Qwen3 (Qwen3Config): no
// attention biases, an RMSNorm over each head's q and k (q_norm, k_norm), head_dim given.
ModelSpec qwen(const nlohmann::json& j, const JsonContext& ctx, bool qwen3) {
  ModelSpec m = llama(j, ctx);
  m.qkv_bias = get_bool_or(j, "attention_bias", !qwen3, ctx);
  m.out_proj_bias = qwen3 && m.qkv_bias;  // Qwen3Attention: o_proj bias=config.attention_bias too
  m.qk_norm = qwen3;
  return m;
}

// Routed-expert fields shared by the MoE readers, checked under the config's own field names.
void read_experts(ModelSpec& m, const nlohmann::json& j, const JsonContext& ctx, const char* experts_key,
                  const char* width_key) {
  m.moe.num_experts = get_positive_int(j, experts_key, ctx);
  m.moe.top_k = get_positive_int(j, "num_experts_per_tok", ctx);
  if (m.moe.top_k > m.moe.num_experts)
    ctx.fail("num_experts_per_tok",
             "at most " + std::string(experts_key) + " (" + std::to_string(m.moe.num_experts) + ")");
  m.moe.expert_ffn_hidden = get_positive_int(j, width_key, ctx);
}

// Qwen2-MoE / Qwen3-MoE: every block an MoE block; dense blocks among them are not modelled.
void require_every_block_sparse(const nlohmann::json& j, const JsonContext& ctx) {
  if (get_int_or(j, "decoder_sparse_step", 1, ctx) != 1)
    ctx.fail("decoder_sparse_step", "1 (dense blocks between MoE blocks are not modelled)");
  if (const auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) ctx.fail("mlp_only_layers", "an array of layer indices");
    if (!it->empty()) ctx.fail("mlp_only_layers", "[] (dense blocks among MoE blocks are not modelled)");
  }
}

// MixtralConfig: Mistral's attention; every MLP a block_sparse_moe of num_local_experts gated MLPs
// of intermediate_size, top num_experts_per_tok (Jiang et al. 2024).
ModelSpec mixtral(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m = llama(j, ctx);
  m.family = "mixtral";
  read_experts(m, j, ctx, "num_local_experts", "intermediate_size");
  return m;
}

// Qwen2MoeConfig: Qwen2's attention (q, k, v biases), num_experts of moe_intermediate_size, one
// shared expert of shared_expert_intermediate_size behind a sigmoid gate (h -> 1).
// Qwen3MoeConfig: Qwen3's attention (q/k norms, head_dim), no shared expert.
ModelSpec qwen_moe(const nlohmann::json& j, const JsonContext& ctx, bool qwen3) {
  ModelSpec m = qwen(j, ctx, qwen3);
  require_every_block_sparse(j, ctx);
  read_experts(m, j, ctx, "num_experts", "moe_intermediate_size");
  if (!qwen3) {
    m.qkv_bias = get_bool_or(j, "qkv_bias", true, ctx);  // Qwen2MoeAttention: q/k/v bias=config.qkv_bias
    m.moe.shared_ffn_hidden = get_int_or(j, "shared_expert_intermediate_size", 0, ctx);
    if (m.moe.shared_ffn_hidden < 0) ctx.fail("shared_expert_intermediate_size", "an integer >= 0");
    m.moe.shared_expert_gate = m.moe.shared_ffn_hidden > 0;
  }
  return m;
}

// DeepseekV3Config (DeepSeek-AI 2024): multi-head latent attention, the first first_k_dense_replace
// blocks dense (intermediate_size), the rest n_routed_experts of moe_intermediate_size plus
// n_shared_experts x moe_intermediate_size shared. The multi-token-prediction layers
// (num_nextn_predict_layers) are not instantiated by DeepseekV3ForCausalLM and are ignored.
ModelSpec deepseek_v3(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m = llama(j, ctx);  // Llama's fields and layout; attention replaced by MLA below
  m.family = "deepseek";
  m.mla.q_lora_rank = get_int_or(j, "q_lora_rank", 0, ctx);  // null: q_proj straight from the hidden state
  if (m.mla.q_lora_rank < 0) ctx.fail("q_lora_rank", "an integer > 0 or null");
  m.mla.kv_lora_rank = get_positive_int(j, "kv_lora_rank", ctx);
  m.mla.qk_rope_head_dim = get_positive_int(j, "qk_rope_head_dim", ctx);
  m.mla.v_head_dim = get_positive_int(j, "v_head_dim", ctx);
  m.head_dim = get_positive_int(j, "qk_nope_head_dim", ctx) + m.mla.qk_rope_head_dim;
  m.rotary_dim = m.mla.qk_rope_head_dim;
  if (m.num_kv_heads != m.num_heads)
    ctx.fail("num_key_value_heads", "num_attention_heads (" + std::to_string(m.num_heads) + ") with latent attention");
  read_experts(m, j, ctx, "n_routed_experts", "moe_intermediate_size");
  const int64_t shared = get_int_or(j, "n_shared_experts", 0, ctx);
  if (shared < 0) ctx.fail("n_shared_experts", "an integer >= 0 or null");
  m.moe.shared_ffn_hidden = shared * m.moe.expert_ffn_hidden;
  m.moe.first_dense_layers = get_int_or(j, "first_k_dense_replace", 0, ctx);
  if (m.moe.first_dense_layers < 0 || m.moe.first_dense_layers >= m.num_layers)
    ctx.fail("first_k_dense_replace",
             "an integer from 0 to num_hidden_layers - 1 (" + std::to_string(m.num_layers - 1) + ")");
  if (get_int_or(j, "moe_layer_freq", 1, ctx) != 1)
    ctx.fail("moe_layer_freq", "1 (dense blocks between MoE blocks are not modelled)");
  // transformers' DeepseekV3TopkRouter registers e_score_correction_bias as a buffer, not a
  // parameter (modeling_deepseek.py's MoEGate: an nn.Parameter); num_parameters() leaves it out.
  m.moe.router_bias = false;
  return m;
}

ModelSpec gpt2(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m;
  m.family = "gpt2";
  m.hidden = get_positive_int(j, "n_embd", ctx);
  m.num_layers = get_positive_int(j, "n_layer", ctx);
  m.num_heads = get_positive_int(j, "n_head", ctx);
  m.num_kv_heads = m.num_heads;
  m.head_dim = m.hidden / m.num_heads;
  m.ffn_hidden = get_int_or(j, "n_inner", 4 * m.hidden, ctx);
  m.vocab_size = get_positive_int(j, "vocab_size", ctx);
  m.max_positions = get_positive_int(j, "n_positions", ctx);
  m.tied_embeddings = get_bool_or(j, "tie_word_embeddings", true, ctx);
  m.qkv_bias = m.out_proj_bias = m.mlp_bias = true;
  m.fused_qkv = true;
  m.attention_dropout = get_number_or(j, "attn_pdrop", 0.1, ctx);
  m.hidden_dropout = get_number_or(j, "resid_pdrop", 0.1, ctx);
  return m;
}

ModelSpec gptj(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m = gpt2(j, ctx);
  m.family = "gptj";
  m.fused_qkv = false;
  m.qkv_bias = m.out_proj_bias = false;
  m.mlp_bias = true;
  m.lm_head_bias = true;
  m.tied_embeddings = get_bool_or(j, "tie_word_embeddings", false, ctx);
  m.positional = PositionalKind::rotary;
  m.rotary_dim = get_int_or(j, "rotary_dim", 64, ctx);
  m.parallel_residual = true;
  m.norms_per_layer = 1;
  m.attention_dropout = get_number_or(j, "attn_pdrop", 0.0, ctx);
  m.hidden_dropout = get_number_or(j, "resid_pdrop", 0.0, ctx);
  return m;
}

ModelSpec neox(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m;
  m.family = "gpt_neox";
  m.hidden = get_positive_int(j, "hidden_size", ctx);
  m.ffn_hidden = get_positive_int(j, "intermediate_size", ctx);
  m.num_layers = get_positive_int(j, "num_hidden_layers", ctx);
  m.num_heads = get_positive_int(j, "num_attention_heads", ctx);
  m.num_kv_heads = m.num_heads;
  m.head_dim = m.hidden / m.num_heads;
  m.vocab_size = get_positive_int(j, "vocab_size", ctx);
  m.max_positions = get_positive_int(j, "max_position_embeddings", ctx);
  m.tied_embeddings = get_bool_or(j, "tie_word_embeddings", false, ctx);
  m.qkv_bias = m.out_proj_bias = get_bool_or(j, "attention_bias", true, ctx);
  m.mlp_bias = true;
  m.fused_qkv = true;
  m.positional = PositionalKind::rotary;
  m.rotary_dim = static_cast<int64_t>(get_number_or(j, "rotary_pct", 0.25, ctx) * m.head_dim);
  m.parallel_residual = get_bool_or(j, "use_parallel_residual", true, ctx);
  m.attention_dropout = get_number_or(j, "attention_dropout", 0.0, ctx);
  m.hidden_dropout = get_number_or(j, "hidden_dropout", 0.0, ctx);
  return m;
}

ModelSpec bert(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m;
  m.family = "bert";
  m.kind = ModelKind::encoder;
  m.hidden = get_positive_int(j, "hidden_size", ctx);
  m.ffn_hidden = get_positive_int(j, "intermediate_size", ctx);
  m.num_layers = get_positive_int(j, "num_hidden_layers", ctx);
  m.num_heads = get_positive_int(j, "num_attention_heads", ctx);
  m.num_kv_heads = m.num_heads;
  m.head_dim = m.hidden / m.num_heads;
  m.vocab_size = get_positive_int(j, "vocab_size", ctx);
  m.max_positions = get_positive_int(j, "max_position_embeddings", ctx);
  m.type_vocab_size = get_int_or(j, "type_vocab_size", 2, ctx);
  m.tied_embeddings = get_bool_or(j, "tie_word_embeddings", true, ctx);
  m.qkv_bias = m.out_proj_bias = m.mlp_bias = true;
  m.embedding_norm = true;
  m.final_norm = false;  // post-LN: each block ends in its own norm
  // BertForMaskedLM: MLM head, no pooler; BertForPreTraining/BertModel: pooler too.
  m.mlm_head = !has_architecture(j, "BertModel");
  m.pooler = has_architecture(j, "BertModel") || has_architecture(j, "BertForPreTraining");
  m.nsp_head = has_architecture(j, "BertForPreTraining");
  m.attention_dropout = get_number_or(j, "attention_probs_dropout_prob", 0.1, ctx);
  m.hidden_dropout = get_number_or(j, "hidden_dropout_prob", 0.1, ctx);
  return m;
}

}  // namespace

ModelSpec parse_hf_config(const nlohmann::json& j, const JsonContext& ctx) {
  const std::string t = detect_type(j, ctx);
  ModelSpec m;
  if (t == "llama" || t == "mistral") m = llama(j, ctx);
  else if (t == "qwen2" || t == "qwen3") m = qwen(j, ctx, t == "qwen3");
  else if (t == "mixtral") m = mixtral(j, ctx);
  else if (t == "qwen2_moe" || t == "qwen3_moe") m = qwen_moe(j, ctx, t == "qwen3_moe");
  else if (t == "deepseek_v3") m = deepseek_v3(j, ctx);
  else if (t == "gpt2") m = gpt2(j, ctx);
  else if (t == "gptj") m = gptj(j, ctx);
  else if (t == "gpt_neox") m = neox(j, ctx);
  else if (t == "bert") m = bert(j, ctx);
  else
    ctx.fail("model_type",
             "one of llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v3, gpt2, "
             "gptj, gpt_neox, bert (got '" +
                 t + "')");
  m.name = get_string_or(j, "_name_or_path", "", ctx);
  if (auto pos = m.name.rfind('/'); pos != std::string::npos) m.name = m.name.substr(pos + 1);
  return m;
}

}  // namespace shardplan::simulator
