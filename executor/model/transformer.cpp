#include "transformer.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "executor/errors.hpp"
#include "executor/seed_hash.hpp"

namespace shardplan::executor {

namespace {

using simulator::FfnKind;
using simulator::LinearDesc;
using simulator::NormKind;
using simulator::PositionalKind;
using simulator::TpSplit;

std::string block_prefix(const simulator::ModelSpec& m, int64_t i) {
  return (m.family == "gpt2" ? "transformer.h." : "model.layers.") + std::to_string(i) + ".";
}

// Stable 64-bit seed for (seed, name): FNV-1a over the name, mixed with the seed (splitmix64).
uint64_t param_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return splitmix64_finalize(h + seed * kGoldenGamma);
}

}  // namespace

Transformer::Transformer(const simulator::ModelSpec& spec, const ModelOptions& opt) : spec_(spec), opt_(opt) {
  const std::string src = "model '" + spec.name + "'";
  if (spec.kind != simulator::ModelKind::decoder ||
      (spec.family != "gpt2" && spec.family != "llama" && spec.family != "mixtral"))
    throw InputError(src +
                     ": field 'family': shardrun builds decoder models of the gpt2, llama and mixtral families, "
                     "got '" +
                     spec.family + "'");
  if (spec.mla.enabled()) throw InputError(src + ": shardrun does not build latent-attention (MLA) models yet");
  if (spec.is_moe()) check_moe_options(spec, opt);  // moe_block.cpp
  if (spec.parallel_residual || spec.lm_head_bias || spec.embedding_norm || spec.type_vocab_size > 0 || spec.qk_norm)
    throw InputError(src +
                     ": shardrun does not build parallel-residual, lm-head-bias, embedding-norm or q/k-norm "
                     "variants");
  const int t = opt.tp;
  if (spec.num_heads % t != 0 || spec.num_kv_heads % t != 0 || spec.ffn_hidden % t != 0)
    throw InputError(src + ": tensor_parallel " + std::to_string(t) +
                     " must divide the attention heads, the key/value heads and the FFN width");
  const int chunks = opt.pp * opt.virtual_stages;
  if (opt_.layers_per_chunk.empty()) {
    if (chunks != 1) throw InputError(src + ": a pipeline of " + std::to_string(chunks) + " chunks needs a partition");
    opt_.layers_per_chunk = {static_cast<int>(spec.num_layers)};
  }
  int64_t total = 0;
  for (int n : opt_.layers_per_chunk) total += n;
  if (static_cast<int>(opt_.layers_per_chunk.size()) != chunks || total != spec.num_layers)
    throw InputError(src + ": field 'config.partition': expected " + std::to_string(chunks) +
                     " chunk sizes summing to " + std::to_string(spec.num_layers) + " layers");
  llama_ = spec.family == "llama" || spec.family == "mixtral";
  vocab_padded_ = (spec.vocab_size + t - 1) / t * t;  // Megatron pads the vocabulary to a multiple of tp
  build();
}

std::vector<int64_t> Transformer::activation_shape(int64_t batch, int64_t seq) const {
  const bool sp = opt_.sequence_parallel && opt_.tp > 1;
  return {batch, sp ? seq / opt_.tp : seq, spec_.hidden};
}

void Transformer::add_param(const std::string& name, torch::Tensor* slot, std::vector<int64_t> full_shape,
                            ShardSpec shard, int unit, bool no_decay, bool hf_transposed) {
  Parameter p;
  p.name = name;
  p.full_shape = full_shape;
  p.shard = shard;
  p.unit = unit;
  p.no_decay = no_decay;
  p.hf_transposed = hf_transposed;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(opt_.device);
  p.tensor = torch::zeros(shard_shape(full_shape, shard, opt_.tp), f32);
  const bool is_lora = name.ends_with("lora_A.weight") || name.ends_with("lora_B.weight");
  p.lora = is_lora;
  p.trainable = opt_.lora.enabled() ? is_lora : true;
  p.tensor.set_requires_grad(p.trainable);
  // Under sequence parallelism a tp-replicated parameter sees only this rank's sequence chunk.
  const bool column_lora_a = is_lora && name.ends_with("lora_A.weight") && shard.replicated();
  const bool row_lora_b = is_lora && name.ends_with("lora_B.weight") && shard.replicated();
  p.tp_partial_grad =
      opt_.sequence_parallel && opt_.tp > 1 && shard.replicated() && (!is_lora || column_lora_a || row_lora_b);
  *slot = p.tensor;
  params_.push_back(std::move(p));
}

void Transformer::build_linear(ParallelLinear& lin, const LinearDesc& d, const std::string& prefix, int unit,
                               std::vector<int64_t> segments) {
  lin.column = d.split == TpSplit::column;
  const bool conv1d = spec_.family == "gpt2";  // GPT-2 stores Conv1D weights (in, out)
  ShardSpec w_shard{lin.column ? 0 : 1, lin.column ? segments : std::vector<int64_t>{}, 0};
  add_param(prefix + d.module + ".weight", &lin.weight, {d.d_out, d.d_in}, w_shard, unit, false, conv1d);
  if (d.bias) {
    ShardSpec b_shard = lin.column ? ShardSpec{0, segments, 0} : ShardSpec{};
    add_param(prefix + d.module + ".bias", &lin.bias, {d.d_out}, b_shard, unit, true);
  }
  const auto& lora = opt_.lora;
  if (!lora.enabled()) return;
  // PEFT's suffix match, as the simulator's dense-layer mask (an MoE card's first dense blocks'
  // mlp.gate_proj is adapted by "gate_proj" like the shared expert's).
  const bool adapted = std::any_of(lora.targets.begin(), lora.targets.end(),
                                   [&](const std::string& t) { return simulator::lora_target_matches(d.module, t); });
  if (!adapted) return;
  lin.lora.emplace();
  lin.lora->scale = lora.alpha / lora.rank;
  lin.lora->dropout = lora.dropout;
  const std::string peft = "base_model.model." + prefix + d.module;
  const ShardSpec a_shard = lin.column ? ShardSpec{} : ShardSpec{1, {}, 0};
  const ShardSpec b_shard = lin.column ? ShardSpec{0, segments, 0} : ShardSpec{};
  add_param(peft + ".lora_A.weight", &lin.lora->A, {lora.rank, d.d_in}, a_shard, unit, false);
  add_param(peft + ".lora_B.weight", &lin.lora->B, {d.d_out, lora.rank}, b_shard, unit, false);
}

void Transformer::build_block(Block& b, int64_t i, int unit) {
  const auto& m = spec_;
  const int64_t h = m.hidden;
  const bool ln = m.norm_kind == NormKind::layernorm;
  b.layer = static_cast<int>(i);
  b.unit = unit;
  const std::string p = block_prefix(m, i);
  const std::string n1 = m.family == "gpt2" ? "ln_1" : "input_layernorm";
  const std::string n2 = m.family == "gpt2" ? "ln_2" : "post_attention_layernorm";
  add_param(p + n1 + ".weight", &b.norm1_w, {h}, {}, unit, true);
  if (ln) add_param(p + n1 + ".bias", &b.norm1_b, {h}, {}, unit, true);
  add_param(p + n2 + ".weight", &b.norm2_w, {h}, {}, unit, true);
  if (ln) add_param(p + n2 + ".bias", &b.norm2_b, {h}, {}, unit, true);
  // An MoE card's first dense blocks have a dense MLP; its MoE blocks the shared expert (if any).
  const bool moe_layer = m.is_moe() && i >= m.moe.first_dense_layers;
  for (const LinearDesc& d : m.is_moe() && !moe_layer ? m.dense_block_linears() : m.block_linears()) {
    const std::string& mod = d.module;
    if (mod.ends_with("c_attn")) build_linear(b.qkv, d, p, unit, {m.q_dim(), m.kv_dim(), m.kv_dim()});
    else if (mod.ends_with("q_proj")) build_linear(b.q, d, p, unit, {});
    else if (mod.ends_with("k_proj")) build_linear(b.k, d, p, unit, {});
    else if (mod.ends_with("v_proj")) build_linear(b.v, d, p, unit, {});
    else if (mod == "attn.c_proj" || mod.ends_with("o_proj")) build_linear(b.out, d, p, unit, {});
    else if (mod.ends_with("c_fc")) build_linear(b.fc, d, p, unit, {});
    else if (mod.ends_with("gate_proj")) build_linear(b.gate, d, p, unit, {});
    else if (mod.ends_with("up_proj")) build_linear(b.up, d, p, unit, {});
    else if (mod == "mlp.c_proj" || mod.ends_with("down_proj")) build_linear(b.down, d, p, unit, {});
    else throw InputError("model '" + m.name + "': linear '" + mod + "' is not one shardrun builds");
  }
  if (moe_layer) build_moe(b, p);
}

// Units of a chunk, in order: [embedding unit(s)] [one per block] [head unit(s)]. With tied
// embeddings and one stage the head shares the embedding's unit (one parameter); across stages
// the word embedding (and its copy) get a unit of their own, so that the first and the last
// stage have identical flat layouts for it and can sum its gradient shard for shard.
void Transformer::build_chunk(ModelChunk& c) {
  const auto& m = spec_;
  const int64_t h = m.hidden;
  const bool ln = m.norm_kind == NormKind::layernorm;
  const bool split_tied = m.tied_embeddings && opt_.pp > 1;
  const std::string emb_name = m.family == "gpt2" ? "transformer.wte.weight" : "model.embed_tokens.weight";
  c.unit_begin = num_units_;
  if (c.first) {
    c.embedding_units.push_back(num_units_);
    add_param(emb_name, &wte_.weight, {m.vocab_size, h}, ShardSpec{0, {}, vocab_padded_}, num_units_, false);
    if (split_tied) tied_unit_ = num_units_;
    if (split_tied && m.positional == PositionalKind::learned) c.embedding_units.push_back(++num_units_);
    if (m.positional == PositionalKind::learned)
      add_param("transformer.wpe.weight", &wpe_, {m.max_positions, h}, ShardSpec{}, num_units_, false);
    ++num_units_;
  }
  c.block_begin = static_cast<int>(blocks_.size());
  for (int i = 0; i < c.layers; ++i) {
    blocks_.emplace_back();
    build_block(blocks_.back(), c.first_layer + i, num_units_++);
  }
  if (c.last) {
    // Tied on one stage: the head is the embedding's unit.
    const int hu = m.tied_embeddings && !split_tied ? c.embedding_units.at(0) : num_units_++;
    c.head_units.push_back(hu);
    const std::string fn = m.family == "gpt2" ? "transformer.ln_f" : "model.norm";
    add_param(fn + ".weight", &final_w_, {h}, {}, hu, true);
    if (ln) add_param(fn + ".bias", &final_b_, {h}, {}, hu, true);
    if (!m.tied_embeddings)
      add_param("lm_head.weight", &lm_head_, {m.vocab_size, h}, ShardSpec{0, {}, vocab_padded_}, hu, false);
    if (split_tied) {  // the word embedding's copy, in its own unit
      tied_unit_ = num_units_;
      c.head_units.push_back(num_units_);
      add_param(emb_name, &wte_.weight, {m.vocab_size, h}, ShardSpec{0, {}, vocab_padded_}, num_units_++, false);
      params_.back().tied_copy = true;
    }
  }
  c.unit_end = num_units_;
}

void Transformer::build() {
  params_.reserve(static_cast<size_t>(spec_.num_layers) * 24 + 8);
  const int p = opt_.pp, v = opt_.virtual_stages, last = p * v - 1;
  auto layers = [&](int k) { return opt_.layers_per_chunk[static_cast<size_t>(k)]; };
  int blocks = 0;
  // simulator::model_chunk_index: interleaved c p + r; a V's way back 2 p - 1 - r.
  auto model_chunk = [&](int c) {
    return opt_.v_placement && c == 1 ? 2 * p - 1 - opt_.pp_rank : c * p + opt_.pp_rank;
  };
  for (int c = 0; c < v; ++c) blocks += layers(model_chunk(c));
  blocks_.reserve(static_cast<size_t>(blocks));  // parameters point into the blocks: no reallocation
  for (int c = 0; c < v; ++c) {
    ModelChunk chunk;
    chunk.virtual_stage = model_chunk(c);
    for (int k = 0; k < chunk.virtual_stage; ++k) chunk.first_layer += layers(k);
    chunk.layers = layers(chunk.virtual_stage);
    chunk.first = chunk.virtual_stage == 0;
    chunk.last = chunk.virtual_stage == last;
    build_chunk(chunk);
    chunks_.push_back(std::move(chunk));
  }
  const int64_t rows = vocab_padded_ / opt_.tp;
  wte_.start = opt_.tp_rank * rows;
  wte_.valid = std::clamp<int64_t>(spec_.vocab_size - wte_.start, 0, rows);
  wte_.rows_into_grad = !spec_.tied_embeddings;
}

void Transformer::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  // GPT-2 (Radford et al. 2019, §2.3): N(0, 0.02), residual projections scaled by 1/sqrt(2L).
  // Drawn on the CPU whatever the run device, so a CUDA run starts from the same weights.
  const double std_dev = 0.02;
  const double residual_std = std_dev / std::sqrt(2.0 * static_cast<double>(spec_.num_layers));
  for (Parameter& p : params_) {
    auto gen = at::detail::createCPUGenerator(param_seed(seed, p.name));
    torch::Tensor full = torch::empty(p.full_shape, torch::kFloat);
    const bool is_norm_or_bias = p.no_decay;
    if (p.name.ends_with("lora_B.weight")) {
      full.zero_();  // PEFT: B = 0 so training starts from the base model
    } else if (p.name.ends_with("lora_A.weight")) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(p.full_shape[1]));  // kaiming_uniform(a=sqrt(5))
      full.uniform_(-bound, bound, gen);
    } else if (is_norm_or_bias) {
      if (p.name.ends_with(".bias")) full.zero_();
      else full.fill_(1.0);
    } else {
      const bool residual = p.name.ends_with("c_proj.weight") || p.name.ends_with("o_proj.weight") ||
                            p.name.ends_with("down_proj.weight");
      full.normal_(0.0, residual ? residual_std : std_dev, gen);
    }
    p.tensor.copy_(take_shard(full, p.shard, opt_.tp_rank, opt_.tp));
  }
}

}  // namespace shardplan::executor
