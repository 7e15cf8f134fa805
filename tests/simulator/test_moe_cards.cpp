// Tests of the mixture-of-experts and latent-attention model cards (models/mixtral-8x7b.json,
// qwen3-30b-a3b, qwen3-235b-a22b, deepseek-v3, tiny-moe) and the MoE Hugging Face config readers
// (MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV3Config): totals against the published
// exact figures (literals below, not read from the cards), active counts within the published
// rounding, how the parts add up, round trips through the card schema, and one-line input errors.
#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/paths.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::simulator {
namespace moe_cards_test {  // named, not anonymous: the files share a unity-build unit

using testing::card_path;
using testing::hf_path;
using testing::input_error_of;

using shardplan::testing::TempDir;

// A one-line InputError naming `file` and the field `field` (quoted, as JsonContext writes it).
void expect_field_error(const std::string& msg, const std::string& file, const std::string& field) {
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
  EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// ----- published figures (literals on purpose) ----------------------------------------------

struct Published {
  int64_t total;       // exact: Hugging Face num_parameters()
  double active;       // as published (rounded)
  double active_unit;  // the last published digit: |count - published| < one unit
};

const std::map<std::string, Published>& published() {
  static const std::map<std::string, Published> k{
      // model.safetensors.index.json total_size 93,405,585,408 / 2; Mistral AI: "uses 12.9B".
      {"mixtral-8x7b", {46'702'792'704, 12.9e9, 0.1e9}},
      // total_size 61,064,245,248 / 2; Qwen model card: "3.3B activated".
      {"qwen3-30b-a3b", {30'532'122'624, 3.3e9, 0.1e9}},
      // total_size 470,187,269,120 / 2; Qwen model card: "22B activated".
      {"qwen3-235b-a22b", {235'093'634'560, 22e9, 1e9}},
      // transformers DeepseekV3ForCausalLM (e_score_correction_bias a buffer); "37B activated".
      {"deepseek-v3", {671'026'404'352, 37e9, 1e9}},
  };
  return k;
}

const std::vector<std::string>& moe_cards() {
  static const std::vector<std::string> k{"mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3",
                                          "tiny-moe"};
  return k;
}

TEST(MoeCards, TotalsMatchPublishedExactFigures) {
  for (const auto& [name, p] : published()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    EXPECT_EQ(m.name, name);
    EXPECT_TRUE(m.is_moe());
    EXPECT_EQ(count_parameters(m).total, p.total);
  }
}

TEST(MoeCards, ActiveWithinPublishedRounding) {
  for (const auto& [name, p] : published()) {
    SCOPED_TRACE(name);
    const ParameterCounts c = count_parameters(load_model(name));
    EXPECT_LT(c.active, c.total);
    EXPECT_LT(std::abs(static_cast<double>(c.active) - p.active), p.active_unit) << c.active;
  }
  // The rounded totals as published: 46.7B, 30.5B, 235B, 671B.
  EXPECT_NEAR(count_parameters(load_model("mixtral-8x7b")).total, 46.7e9, 0.05e9);
  EXPECT_NEAR(count_parameters(load_model("qwen3-30b-a3b")).total, 30.5e9, 0.05e9);
  EXPECT_NEAR(count_parameters(load_model("qwen3-235b-a22b")).total, 235e9, 0.5e9);
  EXPECT_NEAR(count_parameters(load_model("deepseek-v3")).total, 671e9, 0.5e9);
}

TEST(MoeCards, CardFiguresAgreeWithCounts) {
  for (const auto& [name, p] : published()) {
    SCOPED_TRACE(name);
    const nlohmann::json j = read_json_file(card_path(name));
    ASSERT_TRUE(j.contains("hf_parameters") && j["hf_parameters"].is_number_integer());
    ASSERT_TRUE(j.contains("hf_active_parameters") && j["hf_active_parameters"].is_number_integer());
    const ParameterCounts c = count_parameters(load_model(name));
    EXPECT_EQ(j["hf_parameters"].get<int64_t>(), p.total);
    EXPECT_EQ(j["hf_parameters"].get<int64_t>(), c.total);
    EXPECT_EQ(j["hf_active_parameters"].get<int64_t>(), c.active);
    EXPECT_TRUE(j.contains("source") && j["source"].get<std::string>().starts_with("https://huggingface.co/"));
  }
  // Every card carrying an active figure agrees with the count, and dense cards have active == total.
  for (const auto& name : builtin_model_names()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    const ParameterCounts c = count_parameters(m);
    const nlohmann::json j = read_json_file(card_path(name));
    if (j.contains("hf_active_parameters")) { EXPECT_EQ(j["hf_active_parameters"].get<int64_t>(), c.active); }
    if (!m.is_moe()) { EXPECT_EQ(c.active, c.total); }
  }
}

// ----- how the parts add up -----------------------------------------------------------------

TEST(MoeCards, PartsAddUpToTotal) {
  for (const auto& name : moe_cards()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    const ParameterCounts c = count_parameters(m);
    const int64_t dense = m.moe.first_dense_layers, moe = m.num_layers - dense;
    EXPECT_EQ(m.moe_layers(), moe);
    EXPECT_EQ(c.total, c.per_layer * moe + c.dense_layer * dense + c.embedding + c.head);
    EXPECT_EQ(dense == 0, c.dense_layer == 0);
    // Routed experts: E identical gated MLPs of the expert width.
    EXPECT_EQ(c.per_expert, 3 * m.hidden * m.moe.expert_ffn_hidden);
    EXPECT_EQ(c.per_layer_experts, m.moe.num_experts * c.per_expert);
    EXPECT_LE(c.per_layer_tp_sharded + c.per_layer_experts, c.per_layer);
    EXPECT_EQ(c.active, c.total - moe * (m.moe.num_experts - m.moe.top_k) * c.per_expert);
    // Untied embedding and lm head, one final RMSNorm.
    EXPECT_EQ(c.embedding, m.vocab_size * m.hidden);
    EXPECT_EQ(c.head, m.vocab_size * m.hidden + m.hidden);
  }
}

TEST(MoeCards, MixtralBlockSpelledOut) {
  const ModelSpec m = load_model("mixtral-8x7b");
  const ParameterCounts c = count_parameters(m);
  const int64_t attention = 2LL * 4096 * 4096 + 2LL * 4096 * 1024;  // q, o; GQA k, v (8 x 128)
  const int64_t expert = 3LL * 4096 * 14336;                        // w1, w3, w2
  EXPECT_EQ(c.per_expert, expert);
  EXPECT_EQ(c.per_layer, attention + 8 * expert + 4096 * 8 + 2 * 4096);  // + router + 2 norms
  const auto experts = m.expert_linears();
  ASSERT_EQ(experts.size(), 3u);
  EXPECT_EQ(experts[0].module, "block_sparse_moe.experts.*.w1");
  EXPECT_EQ(experts[1].module, "block_sparse_moe.experts.*.w3");
  EXPECT_EQ(experts[2].module, "block_sparse_moe.experts.*.w2");
  EXPECT_EQ(m.block_linears().size(), 4u);  // attention only: no dense MLP, no shared expert
}

TEST(MoeCards, DeepSeekBlocksSpelledOut) {
  const ModelSpec m = load_model("deepseek-v3");
  const ParameterCounts c = count_parameters(m);
  // MLA: q_a 7168x1536, q_b 1536x(128x192), kv_a 7168x(512+64), kv_b 512x(128x(128+128)), o (128x128)x7168.
  const int64_t attention = 7168LL * 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512LL * 128 * 256 + 128LL * 128 * 7168;
  EXPECT_EQ(attention, 187'105'280);
  const int64_t norms = 2 * 7168 + 1536 + 512;  // input/post-attention + q_a/kv_a latent norms
  const int64_t expert = 3LL * 7168 * 2048;
  EXPECT_EQ(c.dense_layer, attention + norms + 3LL * 7168 * 18432);
  EXPECT_EQ(c.per_layer, attention + norms + expert /*shared*/ + 256 * expert + 7168 * 256 /*router*/);
  EXPECT_EQ(c.dense_layer, 583'483'392);
  EXPECT_EQ(c.per_layer, 11'507'286'016);
  std::vector<std::string> names;
  for (const auto& l : m.block_linears()) names.push_back(l.module);
  EXPECT_EQ(names, (std::vector<std::string>{"self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa",
                                             "self_attn.kv_b_proj", "self_attn.o_proj", "mlp.shared_experts.gate_proj",
                                             "mlp.shared_experts.up_proj", "mlp.shared_experts.down_proj"}));
  // modeling_deepseek.py's MoEGate holds e_score_correction_bias as a parameter: the checkpoint's
  // main-model tensor count (HF API safetensors total less FP8 scales and the MTP layer).
  ModelSpec with_bias = m;
  with_bias.moe.router_bias = true;
  EXPECT_EQ(count_parameters(with_bias).total, 671'026'419'200);
  EXPECT_EQ(671'026'419'200 - 671'026'404'352, 58 * 256);
  // ... and that total is consistent with the HF API figure for the whole FP8 repository.
  const int64_t mtp_layer = count_parameters(with_bias).per_layer + 2 * 7168 + 7168LL * 2 * 7168 + 7168 +
                            2LL * 129280 * 7168;  // enorm, hnorm, eh_proj, shared_head.norm, embed + head copies
  const int64_t fp8_scales = 41'540'496;          // weight_scale_inv, one fp32 per 128x128 block
  EXPECT_EQ(671'026'419'200 + mtp_layer + fp8_scales, 684'531'386'000);
}

TEST(MoeCards, TinyMoeIsTinyAndSpelledOut) {
  const ModelSpec m = load_model("tiny-moe");
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.total, 4'100'224);
  EXPECT_EQ(c.active, 2'330'752);
  EXPECT_LT(c.total, 10'000'000);
  EXPECT_EQ(c.per_layer, 935'168);
  EXPECT_EQ(c.dense_layer, 246'016);
  EXPECT_EQ(m.moe.first_dense_layers, 1);
  std::vector<std::string> names;
  for (const auto& l : m.dense_block_linears()) names.push_back(l.module);
  EXPECT_EQ(names.back(), "mlp.down_proj");
  names.clear();
  for (const auto& l : m.block_linears()) names.push_back(l.module);
  EXPECT_EQ(names.back(), "mlp.shared_expert.down_proj");
}

// ----- round trip through the card schema -----------------------------------------------------

TEST(MoeCards, RoundTripThroughCardJson) {
  TempDir tmp;
  for (const auto& name : moe_cards()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    const nlohmann::json card = to_card_json(m);
    ASSERT_TRUE(card.contains("moe"));
    EXPECT_EQ(card.contains("mla"), m.mla.enabled());
    const ModelSpec back = model_from_json(card, name + " (round trip)");
    EXPECT_EQ(to_card_json(back), card);
    EXPECT_EQ(back.moe.num_experts, m.moe.num_experts);
    EXPECT_EQ(back.moe.top_k, m.moe.top_k);
    EXPECT_EQ(back.moe.expert_ffn_hidden, m.moe.expert_ffn_hidden);
    EXPECT_EQ(back.moe.shared_ffn_hidden, m.moe.shared_ffn_hidden);
    EXPECT_EQ(back.moe.shared_expert_gate, m.moe.shared_expert_gate);
    EXPECT_EQ(back.moe.first_dense_layers, m.moe.first_dense_layers);
    EXPECT_EQ(back.moe.router_bias, m.moe.router_bias);
    EXPECT_EQ(back.mla.q_lora_rank, m.mla.q_lora_rank);
    EXPECT_EQ(back.mla.kv_lora_rank, m.mla.kv_lora_rank);
    EXPECT_EQ(back.mla.qk_rope_head_dim, m.mla.qk_rope_head_dim);
    EXPECT_EQ(back.mla.v_head_dim, m.mla.v_head_dim);
    EXPECT_EQ(count_parameters(back).total, count_parameters(m).total);
    EXPECT_EQ(count_parameters(back).active, count_parameters(m).active);
    // Through a file too (what plan.json's embedded card goes through).
    const ModelSpec file = load_model_file(tmp.write_json(name + ".json", card));
    EXPECT_EQ(to_card_json(file), card);
  }
  // A dense card writes no moe / mla objects.
  const nlohmann::json dense = to_card_json(load_model("llama2-7b"));
  EXPECT_FALSE(dense.contains("moe"));
  EXPECT_FALSE(dense.contains("mla"));
}

// ----- validation errors --------------------------------------------------------------------

TEST(MoeCards, TopKAboveNumExpertsIsAFieldError) {
  TempDir tmp;
  nlohmann::json j = read_json_file(card_path("tiny-moe"));
  j["moe"]["top_k"] = 9;  // 8 experts
  const std::string path = tmp.write_json("topk.json", j);
  expect_field_error(input_error_of([&] { (void)load_model_file(path); }), path, "moe.top_k");
}

TEST(MoeCards, FirstDenseLayersNotBelowNumLayersIsAFieldError) {
  TempDir tmp;
  nlohmann::json j = read_json_file(card_path("tiny-moe"));
  j["moe"]["first_dense_layers"] = 4;  // 4 layers: no MoE block left
  const std::string path = tmp.write_json("dense.json", j);
  expect_field_error(input_error_of([&] { (void)load_model_file(path); }), path, "moe.first_dense_layers");
}

TEST(MoeCards, MlaWithGroupedKvHeadsIsAFieldError) {
  TempDir tmp;
  nlohmann::json j = read_json_file(card_path("deepseek-v3"));
  j["num_key_value_heads"] = 8;  // MLA: every head has its own k/v from the latent
  const std::string path = tmp.write_json("mla.json", j);
  expect_field_error(input_error_of([&] { (void)load_model_file(path); }), path, "num_key_value_heads");
}

TEST(MoeCards, MissingMoeFieldIsAFieldError) {
  TempDir tmp;
  nlohmann::json j = read_json_file(card_path("mixtral-8x7b"));
  j["moe"].erase("expert_ffn_hidden_size");
  const std::string path = tmp.write_json("noffn.json", j);
  expect_field_error(input_error_of([&] { (void)load_model_file(path); }), path, "moe.expert_ffn_hidden_size");
}

// ----- Hugging Face config.json fixtures ------------------------------------------------------

TEST(MoeCards, HfConfigFixturesMatchCards) {
  const std::vector<std::pair<std::string, std::string>> pairs{{"mixtral-8x7b", "mixtral-8x7b"},
                                                               {"qwen3-30b-a3b", "qwen3-30b-a3b"},
                                                               {"qwen3-235b-a22b", "qwen3-235b-a22b"},
                                                               {"deepseek-v3", "deepseek-v3"}};
  for (const auto& [fixture, card] : pairs) {
    SCOPED_TRACE(fixture);
    const ModelSpec hf = load_model_file(hf_path(fixture));
    const ModelSpec c = load_model(card);
    EXPECT_EQ(hf.family, c.family);
    EXPECT_EQ(hf.num_layers, c.num_layers);
    EXPECT_EQ(hf.hidden, c.hidden);
    EXPECT_EQ(hf.num_heads, c.num_heads);
    EXPECT_EQ(hf.num_kv_heads, c.num_kv_heads);
    EXPECT_EQ(hf.head_dim, c.head_dim);
    EXPECT_EQ(hf.ffn_hidden, c.ffn_hidden);
    EXPECT_EQ(hf.vocab_size, c.vocab_size);
    EXPECT_EQ(hf.max_positions, c.max_positions);
    EXPECT_EQ(hf.tied_embeddings, c.tied_embeddings);
    EXPECT_EQ(hf.qk_norm, c.qk_norm);
    EXPECT_EQ(hf.qkv_bias, c.qkv_bias);
    EXPECT_EQ(hf.out_proj_bias, c.out_proj_bias);
    EXPECT_EQ(to_card_json(hf)["moe"], to_card_json(c)["moe"]);
    EXPECT_EQ(to_card_json(hf).value("mla", nlohmann::json()), to_card_json(c).value("mla", nlohmann::json()));
    EXPECT_EQ(count_parameters(hf).total, count_parameters(c).total);
    EXPECT_EQ(count_parameters(hf).total, published().at(card).total);
    EXPECT_EQ(count_parameters(hf).active, count_parameters(c).active);
  }
}

// Qwen1.5-MoE-A2.7B(-Chat) config.json (qwen2_moe): q/k/v biases, a shared expert of 5632 behind a
// sigmoid gate. 14,315,784,192 = HF num_parameters() (keras-hub's qwen1.5_moe_2.7b_en preset);
// "14.3B parameters in total and 2.7B activated" (model card).
TEST(MoeCards, Qwen2MoeConfigReadsSharedExpertAndBiases) {
  const ModelSpec m = load_model_file(hf_path("qwen1.5-moe-a2.7b-chat"));
  EXPECT_EQ(m.family, "llama");
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_FALSE(m.out_proj_bias);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_EQ(m.moe.num_experts, 60);
  EXPECT_EQ(m.moe.top_k, 4);
  EXPECT_EQ(m.moe.expert_ffn_hidden, 1408);
  EXPECT_EQ(m.moe.shared_ffn_hidden, 5632);
  EXPECT_TRUE(m.moe.shared_expert_gate);
  EXPECT_EQ(m.router_params(), 2048 * 60 + 2048);
  EXPECT_EQ(m.block_linears().back().module, "mlp.shared_expert.down_proj");
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.total, 14'315'784'192);
  EXPECT_LT(std::abs(static_cast<double>(c.active) - 2.7e9), 0.1e9) << c.active;
}

TEST(MoeCards, HfConfigDetectedByArchitectureAlone) {
  TempDir tmp;
  for (const auto& fixture : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "qwen1.5-moe-a2.7b-chat"}) {
    SCOPED_TRACE(fixture);
    nlohmann::json cfg = read_json_file(hf_path(fixture));
    cfg.erase("model_type");
    const ModelSpec m = load_model_file(tmp.write_json(std::string(fixture) + ".json", cfg));
    EXPECT_EQ(count_parameters(m).total, count_parameters(load_model_file(hf_path(fixture))).total);
  }
}

// What the ModelSpec cannot express is refused with one line naming the file and the config field;
// the multi-token-prediction layers (num_nextn_predict_layers) are ignored, as DeepseekV3ForCausalLM does.
TEST(MoeCards, HfConfigRefusalsNameTheField) {
  TempDir tmp;
  struct Case {
    std::string fixture, field;
    nlohmann::json value;
  };
  const std::vector<Case> cases{
      {"qwen3-30b-a3b", "decoder_sparse_step", 2},
      {"qwen3-30b-a3b", "mlp_only_layers", nlohmann::json::array({0, 1})},
      {"qwen1.5-moe-a2.7b-chat", "decoder_sparse_step", 2},
      {"qwen1.5-moe-a2.7b-chat", "mlp_only_layers", nlohmann::json::array({3})},
      {"qwen3-30b-a3b", "num_experts_per_tok", 129},
      {"mixtral-8x7b", "num_experts_per_tok", 9},
      {"mixtral-8x7b", "num_local_experts", 0},
      {"deepseek-v3", "moe_layer_freq", 2},
      {"deepseek-v3", "first_k_dense_replace", 61},
      {"deepseek-v3", "num_key_value_heads", 16},
      {"deepseek-v3", "n_shared_experts", -1},
      {"deepseek-v3", "kv_lora_rank", nlohmann::json()},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fixture + ": " + c.field);
    nlohmann::json cfg = read_json_file(hf_path(c.fixture));
    cfg[c.field] = c.value;
    const std::string path = tmp.write_json("bad" + std::to_string(i++) + ".json", cfg);
    expect_field_error(input_error_of([&] { (void)load_model_file(path); }), path, c.field);
  }
  // Ignored: the MTP layers; q_lora_rank null (q projected directly) is expressible.
  nlohmann::json cfg = read_json_file(hf_path("deepseek-v3"));
  cfg["num_nextn_predict_layers"] = 3;
  EXPECT_EQ(count_parameters(load_model_file(tmp.write_json("mtp.json", cfg))).total, 671'026'404'352);
  cfg["q_lora_rank"] = nullptr;
  const ModelSpec direct = load_model_file(tmp.write_json("noq.json", cfg));
  EXPECT_EQ(direct.mla.q_lora_rank, 0);
  EXPECT_EQ(direct.block_linears().front().module, "self_attn.q_proj");
  // 61 x (q_proj 7168x24576 in place of q_a 7168x1536 + q_b 1536x24576 + q_a norm 1536).
  EXPECT_EQ(count_parameters(direct).total,
            671'026'404'352 + 61 * (7168LL * 24576 - 7168LL * 1536 - 1536LL * 24576 - 1536));
}

}  // namespace moe_cards_test
}  // namespace shardplan::simulator
