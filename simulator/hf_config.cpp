#include "hf_config.hpp"

#include <algorithm>

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
    else if (a.starts_with("Qwen3") && !a.starts_with("Qwen3Moe")) t = "qwen3";
    else if (a.starts_with("Qwen2") && !a.starts_with("Qwen2Moe")) t = "qwen2";
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
  m.out_proj_bias = false;
  m.qk_norm = qwen3;
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
  else if (t == "gpt2") m = gpt2(j, ctx);
  else if (t == "gptj") m = gptj(j, ctx);
  else if (t == "gpt_neox") m = neox(j, ctx);
  else if (t == "bert") m = bert(j, ctx);
  else ctx.fail("model_type", "one of llama, mistral, qwen2, qwen3, gpt2, gptj, gpt_neox, bert (got '" + t + "')");
  m.name = get_string_or(j, "_name_or_path", "", ctx);
  if (auto pos = m.name.rfind('/'); pos != std::string::npos) m.name = m.name.substr(pos + 1);
  return m;
}

}  // namespace shardplan::simulator
