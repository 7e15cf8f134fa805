// Model cards: shapes, module naming, parameter counts, LoRA targets.
// Legend: h hidden, a heads, g KV heads, d head_dim, f ffn_hidden, V vocab, L layers, t tp.
#include "model_spec.hpp"

#include <algorithm>
#include <filesystem>

#include "errors.hpp"
#include "hf_config.hpp"
#include "json_fields.hpp"
#include "paths.hpp"

namespace shardplan::simulator {
namespace {

std::vector<LinearDesc> gpt2_linears(const ModelSpec& m) {
  const bool b = m.mlp_bias;
  return {{"attn.c_attn", m.hidden, m.q_dim() + 2 * m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attn.c_proj", m.q_dim(), m.hidden, m.out_proj_bias, TpSplit::row},
          {"mlp.c_fc", m.hidden, m.ffn_hidden, b, TpSplit::column},
          {"mlp.c_proj", m.ffn_hidden, m.hidden, b, TpSplit::row}};
}

// The gated (SwiGLU) or plain MLP of width `f`, named `prefix` + gate_proj/up_proj/down_proj.
void add_mlp(std::vector<LinearDesc>& v, const ModelSpec& m, const std::string& prefix, int64_t f, bool bias) {
  if (m.ffn_kind == FfnKind::swiglu) v.push_back({prefix + "gate_proj", m.hidden, f, bias, TpSplit::column});
  v.push_back({prefix + "up_proj", m.hidden, f, bias, TpSplit::column});
  v.push_back({prefix + "down_proj", f, m.hidden, bias, TpSplit::row});
}

// Multi-head latent attention (Hugging Face DeepseekV3Attention's module names): down-projections
// replicated over tp ranks (Megatron-Core MLA's linear_q_down_proj / linear_kv_down_proj), the
// per-head up-projections column-split, the output projection row-split.
void add_mla_attention(std::vector<LinearDesc>& v, const ModelSpec& m) {
  const auto& a = m.mla;
  if (a.q_lora_rank > 0) {
    v.push_back({"self_attn.q_a_proj", m.hidden, a.q_lora_rank, m.qkv_bias, TpSplit::replicated});
    v.push_back({"self_attn.q_b_proj", a.q_lora_rank, m.q_dim(), false, TpSplit::column});
  } else {
    v.push_back({"self_attn.q_proj", m.hidden, m.q_dim(), false, TpSplit::column});
  }
  v.push_back(
      {"self_attn.kv_a_proj_with_mqa", m.hidden, a.kv_lora_rank + a.qk_rope_head_dim, m.qkv_bias, TpSplit::replicated});
  const int64_t kv_b = m.num_heads * (m.head_dim - a.qk_rope_head_dim + a.v_head_dim);  // k_nope and v per head
  v.push_back({"self_attn.kv_b_proj", a.kv_lora_rank, kv_b, false, TpSplit::column});
  v.push_back({"self_attn.o_proj", m.attn_out_dim(), m.hidden, m.out_proj_bias, TpSplit::row});
}

void add_attention(std::vector<LinearDesc>& v, const ModelSpec& m) {
  if (m.mla.enabled()) return add_mla_attention(v, m);
  v.push_back({"self_attn.q_proj", m.hidden, m.q_dim(), m.qkv_bias, TpSplit::column});
  v.push_back({"self_attn.k_proj", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column});
  v.push_back({"self_attn.v_proj", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column});
  v.push_back({"self_attn.o_proj", m.q_dim(), m.hidden, m.out_proj_bias, TpSplit::row});
}

// Llama naming; `moe_block`: the MLP is the MoE block's shared expert (DeepSeek's
// mlp.shared_experts, Qwen2-MoE's mlp.shared_expert), or nothing when it has none.
std::vector<LinearDesc> llama_linears(const ModelSpec& m, bool moe_block) {
  std::vector<LinearDesc> v;
  add_attention(v, m);
  if (!moe_block) {
    add_mlp(v, m, "mlp.", m.ffn_hidden, m.mlp_bias);
  } else if (m.moe.shared_ffn_hidden > 0) {
    add_mlp(v, m, m.family == "deepseek" ? "mlp.shared_experts." : "mlp.shared_expert.", m.moe.shared_ffn_hidden,
            false);
  }
  return v;
}

std::vector<LinearDesc> gptj_linears(const ModelSpec& m) {
  return {{"attn.q_proj", m.hidden, m.q_dim(), m.qkv_bias, TpSplit::column},
          {"attn.k_proj", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attn.v_proj", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attn.out_proj", m.q_dim(), m.hidden, m.out_proj_bias, TpSplit::row},
          {"mlp.fc_in", m.hidden, m.ffn_hidden, m.mlp_bias, TpSplit::column},
          {"mlp.fc_out", m.ffn_hidden, m.hidden, m.mlp_bias, TpSplit::row}};
}

std::vector<LinearDesc> neox_linears(const ModelSpec& m) {
  return {{"attention.query_key_value", m.hidden, m.q_dim() + 2 * m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attention.dense", m.q_dim(), m.hidden, m.out_proj_bias, TpSplit::row},
          {"mlp.dense_h_to_4h", m.hidden, m.ffn_hidden, m.mlp_bias, TpSplit::column},
          {"mlp.dense_4h_to_h", m.ffn_hidden, m.hidden, m.mlp_bias, TpSplit::row}};
}

std::vector<LinearDesc> bert_linears(const ModelSpec& m) {
  return {{"attention.self.query", m.hidden, m.q_dim(), m.qkv_bias, TpSplit::column},
          {"attention.self.key", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attention.self.value", m.hidden, m.kv_dim(), m.qkv_bias, TpSplit::column},
          {"attention.output.dense", m.q_dim(), m.hidden, m.out_proj_bias, TpSplit::row},
          {"intermediate.dense", m.hidden, m.ffn_hidden, m.mlp_bias, TpSplit::column},
          {"output.dense", m.ffn_hidden, m.hidden, m.mlp_bias, TpSplit::row}};
}

}  // namespace

bool columns_share_input(const std::vector<LinearDesc>& v, std::size_t i) {
  return i + 1 < v.size() && v[i].split == TpSplit::column && v[i + 1].split == TpSplit::column &&
         v[i].d_in == v[i + 1].d_in;
}

bool has_fusable_layers(const ModelSpec& m) {
  if (m.ffn_kind == FfnKind::swiglu) return true;
  const std::vector<LinearDesc> v = m.block_linears();
  for (std::size_t i = 0; i < v.size(); ++i)
    if (columns_share_input(v, i)) return true;
  return false;
}

bool lora_target_matches(const std::string& module, const std::string& target) {
  if (module == target) return true;
  return module.size() > target.size() && module.ends_with(target) && module[module.size() - target.size() - 1] == '.';
}

std::vector<LinearDesc> ModelSpec::block_linears() const {
  if (family == "gpt2") return gpt2_linears(*this);
  if (family == "gptj") return gptj_linears(*this);
  if (family == "gpt_neox") return neox_linears(*this);
  if (family == "bert") return bert_linears(*this);
  return llama_linears(*this, moe.enabled());  // llama, mixtral, deepseek: separate q/k/v projections
}

std::vector<LinearDesc> ModelSpec::dense_block_linears() const { return llama_linears(*this, false); }

std::vector<LinearDesc> ModelSpec::expert_linears() const {
  std::vector<LinearDesc> v;
  if (!moe.enabled()) return v;
  const int64_t f = moe.expert_ffn_hidden;
  if (family == "mixtral") {  // MixtralSparseMoeBlock: experts.N.w1 (gate), w3 (up), w2 (down)
    v.push_back({"block_sparse_moe.experts.*.w1", hidden, f, false, TpSplit::column});
    v.push_back({"block_sparse_moe.experts.*.w3", hidden, f, false, TpSplit::column});
    v.push_back({"block_sparse_moe.experts.*.w2", f, hidden, false, TpSplit::row});
    return v;
  }
  add_mlp(v, *this, "mlp.experts.*.", f, false);
  return v;
}

int64_t per_rank(int64_t total, int64_t sharded, int64_t tp) { return (total - sharded) + sharded / tp; }

namespace {

// Weights and biases of `linears`, and the part of them tensor parallelism splits (column:
// weight and bias; row: the weight, the bias replicated; replicated: nothing).
void add_linears(const std::vector<LinearDesc>& linears, int64_t& total, int64_t& sharded) {
  for (const auto& lin : linears) {
    const int64_t w = lin.d_in * lin.d_out;
    const int64_t b = lin.bias ? lin.d_out : 0;
    total += w + b;
    if (lin.split == TpSplit::column) sharded += w + b;
    else if (lin.split == TpSplit::row) sharded += w;
  }
}

}  // namespace

ParameterCounts count_parameters(const ModelSpec& m) {
  ParameterCounts c;
  const int64_t h = m.hidden;
  const int64_t norms = m.norms_per_layer * m.norm_params() + m.qk_norm_params() + m.mla_norm_params();
  add_linears(m.block_linears(), c.per_layer, c.per_layer_tp_sharded);
  c.per_layer += norms;
  if (m.is_moe()) {
    int64_t sharded = 0;
    add_linears(m.expert_linears(), c.per_expert, sharded);
    c.per_layer_experts = m.moe.num_experts * c.per_expert;
    c.per_layer += m.router_params() + c.per_layer_experts;
    if (m.moe.first_dense_layers > 0) {
      add_linears(m.dense_block_linears(), c.dense_layer, c.dense_layer_tp_sharded);
      c.dense_layer += norms;
    }
  }
  c.embedding_tp_sharded = m.vocab_size * h;
  c.embedding = c.embedding_tp_sharded;
  if (m.positional == PositionalKind::learned) c.embedding += m.max_positions * h;
  c.embedding += m.type_vocab_size * h;
  if (m.embedding_norm) c.embedding += m.norm_params();

  if (m.final_norm) c.head += m.norm_params();
  if (!m.tied_embeddings) {
    c.head_tp_sharded = m.vocab_size * h + (m.lm_head_bias ? m.vocab_size : 0);
    c.head += c.head_tp_sharded;
  }
  if (m.mlm_head) {
    c.head += h * h + h + m.norm_params();  // transform: dense + norm (replicated)
    c.head += m.vocab_size;                 // decoder bias (vocab-parallel)
    c.head_tp_sharded += m.vocab_size;
  }
  if (m.pooler) c.head += h * h + h;
  if (m.nsp_head) c.head += 2 * h + 2;
  const int64_t dense = m.moe.first_dense_layers;
  c.total = c.per_layer * (m.num_layers - dense) + c.dense_layer * dense + c.embedding + c.head;
  c.active = c.total - m.moe_layers() * (m.moe.num_experts - m.moe.top_k) * c.per_expert;
  return c;
}

LoraTargetsResolved resolve_lora_targets(const ModelSpec& m, const std::vector<std::string>& targets) {
  LoraTargetsResolved out;
  const auto linears = m.block_linears();
  for (const auto& t : targets) {
    bool any = false;
    for (const auto& lin : linears) {
      if (!lora_target_matches(lin.module, t)) continue;
      any = true;
      bool dup = std::any_of(out.linears.begin(), out.linears.end(),
                             [&](const LinearDesc& x) { return x.module == lin.module; });
      if (!dup) out.linears.push_back(lin);
    }
    // Routed experts' linears (PEFT's "gate_proj" or Mixtral's "w1" also adapt experts.{e}.*):
    // accepted as targets, not counted here (resolved.linears are a block's own linears).
    const auto experts = m.expert_linears();
    any = any || std::any_of(experts.begin(), experts.end(),
                             [&](const LinearDesc& lin) { return lora_target_matches(lin.module, t); });
    if (!any) {
      std::string names;
      for (const auto& lin : linears) names += (names.empty() ? "" : ", ") + lin.module;
      for (const auto& lin : experts) names += ", " + lin.module;
      throw InputError("--lora-targets: '" + t + "' is not a linear of model '" + m.name +
                       "' (expected one of: " + names + ")");
    }
  }
  return out;
}

int64_t lora_parameters_per_layer(const LoraTargetsResolved& t, int64_t rank) {
  int64_t n = 0;
  for (const auto& lin : t.linears) n += rank * (lin.d_in + lin.d_out);
  return n;
}

void validate_model(const ModelSpec& m, const std::string& src) {
  auto bad = [&](const char* field, const std::string& expected) {
    throw InputError(src + ": field '" + field + "': expected " + expected);
  };
  if (m.num_layers <= 0) bad("num_layers", "an integer > 0");
  if (m.hidden <= 0) bad("hidden_size", "an integer > 0");
  if (m.num_heads <= 0) bad("num_attention_heads", "an integer > 0");
  if (m.num_kv_heads <= 0 || m.num_heads % m.num_kv_heads != 0)
    bad("num_key_value_heads", "an integer > 0 dividing num_attention_heads (" + std::to_string(m.num_heads) + ")");
  if (m.head_dim <= 0) bad("head_dim", "an integer > 0");
  if (m.ffn_hidden <= 0) bad("ffn_hidden_size", "an integer > 0");
  if (m.vocab_size <= 0) bad("vocab_size", "an integer > 0");
  if (m.max_positions <= 0) bad("max_position_embeddings", "an integer > 0");
  if (m.norms_per_layer < 1 || m.norms_per_layer > 2) bad("norms_per_layer", "1 or 2");
  if (m.attention_dropout < 0 || m.attention_dropout >= 1) bad("dropout.attention", "a probability in [0, 1)");
  if (m.hidden_dropout < 0 || m.hidden_dropout >= 1) bad("dropout.hidden", "a probability in [0, 1)");
  static const char* kFamilies[] = {"gpt2", "llama", "gptj", "gpt_neox", "bert", "mixtral", "deepseek"};
  if (std::find(std::begin(kFamilies), std::end(kFamilies), m.family) == std::end(kFamilies))
    bad("family", "one of gpt2, llama, gptj, gpt_neox, bert, mixtral, deepseek");
  const bool llama_layout = m.family == "llama" || m.family == "mixtral" || m.family == "deepseek";
  if ((m.moe.enabled() || m.mla.enabled()) && !llama_layout)
    bad("family", "llama, mixtral or deepseek with experts or latent attention");
  if (m.moe.num_experts < 0) bad("moe.num_experts", "an integer >= 0");
  if (m.moe.enabled()) {
    if (m.moe.top_k < 1 || m.moe.top_k > m.moe.num_experts)
      bad("moe.top_k", "an integer from 1 to moe.num_experts (" + std::to_string(m.moe.num_experts) + ")");
    if (m.moe.expert_ffn_hidden <= 0) bad("moe.expert_ffn_hidden_size", "an integer > 0");
    if (m.moe.shared_ffn_hidden < 0) bad("moe.shared_ffn_hidden_size", "an integer >= 0");
    if (m.moe.first_dense_layers < 0 || m.moe.first_dense_layers >= m.num_layers)
      bad("moe.first_dense_layers", "an integer from 0 to num_layers - 1 (" + std::to_string(m.num_layers - 1) + ")");
  }
  if (m.mla.enabled()) {
    if (m.mla.q_lora_rank < 0) bad("mla.q_lora_rank", "an integer >= 0");
    if (m.mla.qk_rope_head_dim <= 0 || m.mla.qk_rope_head_dim >= m.head_dim)
      bad("mla.qk_rope_head_dim", "an integer > 0 below head_dim (" + std::to_string(m.head_dim) + ")");
    if (m.mla.v_head_dim <= 0) bad("mla.v_head_dim", "an integer > 0");
    if (m.num_kv_heads != m.num_heads) bad("num_key_value_heads", "num_attention_heads with latent attention (mla)");
  }
}

namespace {

ModelSpec parse_card(const nlohmann::json& j, const JsonContext& ctx) {
  ModelSpec m;
  m.name = get_string(j, "name", ctx);
  m.family = get_string(j, "family", ctx);
  m.kind = get_enum_or(j, "kind", ModelKind::decoder, ctx);
  m.num_layers = get_positive_int(j, "num_layers", ctx);
  m.hidden = get_positive_int(j, "hidden_size", ctx);
  m.num_heads = get_positive_int(j, "num_attention_heads", ctx);
  m.num_kv_heads = get_int_or(j, "num_key_value_heads", m.num_heads, ctx);
  m.head_dim = get_int_or(j, "head_dim", m.hidden / m.num_heads, ctx);
  m.ffn_hidden = get_positive_int(j, "ffn_hidden_size", ctx);
  m.ffn_kind = get_enum<FfnKind>(j, "ffn_kind", ctx);
  m.vocab_size = get_positive_int(j, "vocab_size", ctx);
  m.max_positions = get_positive_int(j, "max_position_embeddings", ctx);
  m.norm_kind = get_enum<NormKind>(j, "norm", ctx);
  m.positional = get_enum<PositionalKind>(j, "positional", ctx);
  m.rotary_dim = get_int_or(j, "rotary_dim", 0, ctx);
  m.tied_embeddings = get_bool_or(j, "tied_embeddings", false, ctx);
  if (auto it = j.find("bias"); it != j.end()) {
    auto bctx = ctx.child("bias");
    m.qkv_bias = get_bool_or(*it, "qkv", false, bctx);
    m.out_proj_bias = get_bool_or(*it, "out_proj", false, bctx);
    m.mlp_bias = get_bool_or(*it, "mlp", false, bctx);
    m.lm_head_bias = get_bool_or(*it, "lm_head", false, bctx);
  }
  m.fused_qkv = get_bool_or(j, "fused_qkv", false, ctx);
  m.qk_norm = get_bool_or(j, "qk_norm", false, ctx);
  m.parallel_residual = get_bool_or(j, "parallel_residual", false, ctx);
  m.norms_per_layer = static_cast<int>(get_int_or(j, "norms_per_layer", 2, ctx));
  m.final_norm = get_bool_or(j, "final_norm", true, ctx);
  m.embedding_norm = get_bool_or(j, "embedding_norm", false, ctx);
  m.type_vocab_size = get_int_or(j, "type_vocab_size", 0, ctx);
  m.mlm_head = get_bool_or(j, "mlm_head", false, ctx);
  m.pooler = get_bool_or(j, "pooler", false, ctx);
  m.nsp_head = get_bool_or(j, "nsp_head", false, ctx);
  if (auto it = j.find("dropout"); it != j.end()) {
    auto dctx = ctx.child("dropout");
    m.attention_dropout = get_number_or(*it, "attention", 0.0, dctx);
    m.hidden_dropout = get_number_or(*it, "hidden", 0.0, dctx);
  }
  if (auto it = j.find("moe"); it != j.end() && !it->is_null()) {
    auto mctx = ctx.child("moe");
    if (!it->is_object()) ctx.fail("moe", "an object (num_experts, top_k, expert_ffn_hidden_size, ...)");
    m.moe.num_experts = get_positive_int(*it, "num_experts", mctx);
    m.moe.top_k = get_positive_int(*it, "top_k", mctx);
    m.moe.expert_ffn_hidden = get_positive_int(*it, "expert_ffn_hidden_size", mctx);
    m.moe.shared_ffn_hidden = get_int_or(*it, "shared_ffn_hidden_size", 0, mctx);
    m.moe.shared_expert_gate = get_bool_or(*it, "shared_expert_gate", false, mctx);
    m.moe.first_dense_layers = get_int_or(*it, "first_dense_layers", 0, mctx);
    m.moe.router_bias = get_bool_or(*it, "router_bias", false, mctx);
  }
  if (auto it = j.find("mla"); it != j.end() && !it->is_null()) {
    auto actx = ctx.child("mla");
    if (!it->is_object()) ctx.fail("mla", "an object (q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim)");
    m.mla.q_lora_rank = get_int_or(*it, "q_lora_rank", 0, actx);
    m.mla.kv_lora_rank = get_positive_int(*it, "kv_lora_rank", actx);
    m.mla.qk_rope_head_dim = get_positive_int(*it, "qk_rope_head_dim", actx);
    m.mla.v_head_dim = get_positive_int(*it, "v_head_dim", actx);
  }
  return m;
}

}  // namespace

ModelSpec model_from_json(const nlohmann::json& j, const std::string& source) {
  JsonContext ctx{source, ""};
  if (!j.is_object()) throw InputError(source + ": expected a JSON object (a model card or a config.json)");
  ModelSpec m;
  if (j.contains("model_type") || j.contains("architectures")) {
    m = parse_hf_config(j, ctx);
    if (m.name.empty()) m.name = std::filesystem::path(source).stem().string();
  } else {
    m = parse_card(j, ctx);
  }
  validate_model(m, source);
  return m;
}

ModelSpec load_model_file(const std::string& path) { return model_from_json(read_json_file(path), path); }

nlohmann::json to_card_json(const ModelSpec& m) {
  nlohmann::json j = {
      {"schema", "shardplan.model/1"},
      {"name", m.name},
      {"family", m.family},
      {"kind", name_of(m.kind)},
      {"num_layers", m.num_layers},
      {"hidden_size", m.hidden},
      {"num_attention_heads", m.num_heads},
      {"num_key_value_heads", m.num_kv_heads},
      {"head_dim", m.head_dim},
      {"ffn_hidden_size", m.ffn_hidden},
      {"ffn_kind", name_of(m.ffn_kind)},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings", m.max_positions},
      {"norm", name_of(m.norm_kind)},
      {"positional", name_of(m.positional)},
      {"rotary_dim", m.rotary_dim},
      {"tied_embeddings", m.tied_embeddings},
      {"bias", {{"qkv", m.qkv_bias}, {"out_proj", m.out_proj_bias}, {"mlp", m.mlp_bias}, {"lm_head", m.lm_head_bias}}},
      {"fused_qkv", m.fused_qkv},
      {"qk_norm", m.qk_norm},
      {"parallel_residual", m.parallel_residual},
      {"norms_per_layer", m.norms_per_layer},
      {"final_norm", m.final_norm},
      {"embedding_norm", m.embedding_norm},
      {"type_vocab_size", m.type_vocab_size},
      {"mlm_head", m.mlm_head},
      {"pooler", m.pooler},
      {"nsp_head", m.nsp_head},
      {"dropout", {{"attention", m.attention_dropout}, {"hidden", m.hidden_dropout}}}};
  if (m.moe.enabled())
    j["moe"] = {{"num_experts", m.moe.num_experts},
                {"top_k", m.moe.top_k},
                {"expert_ffn_hidden_size", m.moe.expert_ffn_hidden},
                {"shared_ffn_hidden_size", m.moe.shared_ffn_hidden},
                {"shared_expert_gate", m.moe.shared_expert_gate},
                {"first_dense_layers", m.moe.first_dense_layers},
                {"router_bias", m.moe.router_bias}};
  if (m.mla.enabled())
    j["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                {"kv_lora_rank", m.mla.kv_lora_rank},
                {"qk_rope_head_dim", m.mla.qk_rope_head_dim},
                {"v_head_dim", m.mla.v_head_dim}};
  return j;
}

ModelSpec load_model(const std::string& name_or_path) {
  if (looks_like_path(name_or_path)) {
    if (!std::filesystem::exists(name_or_path)) throw InputError("--model: file '" + name_or_path + "' does not exist");
    return load_model_file(name_or_path);
  }
  std::string path = data_dir() + "/models/" + name_or_path + ".json";
  if (!std::filesystem::exists(path)) {
    std::string names;
    for (const auto& n : builtin_model_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError("--model: unknown model '" + name_or_path + "' (expected a built-in name: " + names +
                     "; or a path to a model card / config.json)");
  }
  return load_model_file(path);
}

std::vector<std::string> builtin_model_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/models", ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace shardplan::simulator
