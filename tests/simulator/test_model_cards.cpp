// Tests of the model cards (models/*.json) and the Hugging Face config.json reader:
// parameter counts against the figures Hugging Face's num_parameters() reports (literals
// below, not read from the cards), the tensor-parallel split of those counts (GPT-J's
// 8-way mesh-transformer-jax figure, GPT-NeoX's 2-way figure), HF fixtures vs cards, LoRA
// target resolution, and one-line input errors.
#include "simulator/model_spec.hpp"

#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <unistd.h>
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"

namespace shardplan::simulator {
namespace model_cards_test {  // named, not anonymous: the files share a unity-build unit

using testing::card_path;
using testing::hf_path;
using testing::input_error_of;

namespace fs = std::filesystem;

using shardplan::testing::TempDir;

// ----- parameter counts -------------------------------------------------------------------

// Hugging Face num_parameters() of the checkpoints the cards describe (literals on purpose).
const std::map<std::string, int64_t>& hf_figures() {
  static const std::map<std::string, int64_t> k{
      {"gpt2", 124'439'808},             // GPT2LMHeadModel
      {"gpt2-xl", 1'557'611'200},        // GPT2LMHeadModel
      {"bert-large", 335'174'458},       // BertForMaskedLM (bert-large-uncased)
      {"gpt-j-6b", 6'050'882'784},       // GPTJForCausalLM
      {"gpt-neox-20b", 20'554'567'680},  // GPTNeoXForCausalLM
      {"llama2-7b", 6'738'415'616},      // LlamaForCausalLM
      {"llama2-13b", 13'015'864'320},
      {"llama2-70b", 68'976'648'192},
      {"tinyllama-1.1b", 1'100'048'384},  // LlamaForCausalLM, GQA 32/4
      {"llama3.1-8b", 8'030'261'248},     // LlamaForCausalLM, vocab 128256
      {"llama3.1-70b", 70'553'706'496},
      {"llama3.1-405b", 405'853'388'800},
      {"mistral-7b", 7'241'732'096},  // MistralForCausalLM (v0.1)
      {"qwen3-8b", 8'190'735'360},    // Qwen3ForCausalLM: q_norm and k_norm in every layer
  };
  return k;
}

TEST(ModelCards, ParameterCountsMatchHuggingFace) {
  for (const auto& [name, expected] : hf_figures()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    EXPECT_EQ(m.name, name);
    EXPECT_EQ(count_parameters(m).total, expected);
  }
}

TEST(ModelCards, HfParametersFieldAgreesWithCount) {
  for (const auto& [name, expected] : hf_figures()) {
    SCOPED_TRACE(name);
    const nlohmann::json j = read_json_file(card_path(name));
    ASSERT_TRUE(j.contains("hf_parameters"));
    ASSERT_TRUE(j["hf_parameters"].is_number_integer());
    EXPECT_EQ(j["hf_parameters"].get<int64_t>(), expected);
    EXPECT_EQ(j["hf_parameters"].get<int64_t>(), count_parameters(load_model(name)).total);
  }
  // Every card that carries the field agrees with the count, not only the ones listed above.
  for (const auto& name : builtin_model_names()) {
    const nlohmann::json j = read_json_file(card_path(name));
    if (!j.contains("hf_parameters")) continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(j["hf_parameters"].get<int64_t>(), count_parameters(load_model(name)).total);
  }
}

TEST(ModelCards, CardsWithoutCheckpointMatchTheirNotes) {
  // Figures stated in the cards' notes (counted the HF way for the architecture named there).
  EXPECT_EQ(count_parameters(load_model("gpt3-175b")).total, 174'604'259'328);
  EXPECT_EQ(count_parameters(load_model("tiny-gpt")).total, 4'339'200);
  EXPECT_EQ(count_parameters(load_model("tiny-llama")).total, 4'999'424);
}

TEST(ModelCards, PartsAddUpToTotal) {
  for (const auto& name : builtin_model_names()) {
    SCOPED_TRACE(name);
    const ModelSpec m = load_model(name);
    const ParameterCounts c = count_parameters(m);
    // An MoE card's first dense blocks (moe.first_dense_layers) count as dense_layer each.
    const int64_t dense = m.moe.first_dense_layers;
    EXPECT_EQ(c.total, c.per_layer * (m.num_layers - dense) + c.dense_layer * dense + c.embedding + c.head);
    EXPECT_GT(c.per_layer_tp_sharded, 0);
    EXPECT_LE(c.per_layer_tp_sharded, c.per_layer);
    EXPECT_LE(c.embedding_tp_sharded, c.embedding);
    EXPECT_LE(c.head_tp_sharded, c.head);
    EXPECT_EQ(per_rank(c.per_layer, c.per_layer_tp_sharded, 1), c.per_layer);
  }
}

// Parameters summed over the tp ranks of a Megatron/mesh-transformer-jax style split: every
// rank holds 1/tp of the sharded part and a full copy of the replicated part.
int64_t sum_over_tp_ranks(const ModelSpec& m, int64_t tp) {
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(c.per_layer_tp_sharded % tp, 0);
  EXPECT_EQ(c.embedding_tp_sharded % tp, 0);
  EXPECT_EQ(c.head_tp_sharded % tp, 0);
  const int64_t per_rank_params = m.num_layers * per_rank(c.per_layer, c.per_layer_tp_sharded, tp) +
                                  per_rank(c.embedding, c.embedding_tp_sharded, tp) +
                                  per_rank(c.head, c.head_tp_sharded, tp);
  return tp * per_rank_params;
}

TEST(ModelCards, GptJModelCardFigureIsTheEightWayShardedCount) {
  // The GPT-J model card's 6,053,381,344 was counted on the 8-way model-parallel
  // mesh-transformer-jax checkpoint: each replicated tensor (ln_1, fc_out bias, ln_f) is
  // counted once per shard, and JAX's input embedding has a bias (one 4096 vector per shard)
  // that HF's conversion drops.
  const ModelSpec m = load_model("gpt-j-6b");
  const int64_t tp = 8;
  const int64_t jax_embedding_bias = 4096;
  EXPECT_EQ(sum_over_tp_ranks(m, tp) + tp * jax_embedding_bias, 6'053'381'344);

  // The same thing spelled out: replicated = 28 layers x (ln_1 weight+bias, fc_out bias)
  // + ln_f weight+bias = (28 x 3 + 2) x 4096, counted 7 extra times, + 8 embedding biases.
  const ParameterCounts c = count_parameters(m);
  const int64_t replicated = m.num_layers * (c.per_layer - c.per_layer_tp_sharded) +
                             (c.embedding - c.embedding_tp_sharded) + (c.head - c.head_tp_sharded);
  EXPECT_EQ(replicated, (28 * 3 + 2) * 4096);
  EXPECT_EQ(6'053'381'344 - 6'050'882'784, 610 * 4096);
  EXPECT_EQ((tp - 1) * replicated + tp * jax_embedding_bias, 610 * 4096);
}

TEST(ModelCards, GptNeoXEarlierFigureIsTheTwoWayShardedCount) {
  // models/gpt-neox-20b.json notes: 20,556,201,984 = HF count + 266 x 6144, the replicated
  // vectors counted twice at tensor-parallel size 2.
  const ModelSpec m = load_model("gpt-neox-20b");
  EXPECT_EQ(sum_over_tp_ranks(m, 2), 20'556'201'984);
  EXPECT_EQ(20'556'201'984 - 20'554'567'680, 266 * 6144);
}

TEST(ModelCards, TpShardedPartsOfLlama7b) {
  // Llama has no biases: per layer only the two RMSNorms (2 x 4096) are replicated; the
  // embedding and lm head are vocab-parallel; the final norm (4096) is replicated.
  const ParameterCounts c = count_parameters(load_model("llama2-7b"));
  EXPECT_EQ(c.per_layer - c.per_layer_tp_sharded, 2 * 4096);
  EXPECT_EQ(c.embedding, 32000 * 4096);
  EXPECT_EQ(c.embedding_tp_sharded, 32000 * 4096);
  EXPECT_EQ(c.head, 32000 * 4096 + 4096);
  EXPECT_EQ(c.head_tp_sharded, 32000 * 4096);
  // q, k, v, o (4 x 4096^2) + gate, up, down (3 x 4096 x 11008) + 2 norms.
  EXPECT_EQ(c.per_layer, 4LL * 4096 * 4096 + 3LL * 4096 * 11008 + 2 * 4096);
}

// ----- Hugging Face config.json fixtures ---------------------------------------------------

int64_t effective_rotary_dim(const ModelSpec& m) { return m.rotary_dim > 0 ? m.rotary_dim : m.head_dim; }

TEST(ModelCards, HfConfigFixturesMatchCards) {
  const std::vector<std::pair<std::string, std::string>> pairs{
      {"llama2-7b", "llama2-7b"},     {"llama2-70b", "llama2-70b"},     {"gpt2", "gpt2"},
      {"gpt-j-6b", "gpt-j-6b"},       {"gpt-neox-20b", "gpt-neox-20b"}, {"bert-large-uncased", "bert-large"},
      {"llama3.1-8b", "llama3.1-8b"}, {"qwen3-8b", "qwen3-8b"}};
  for (const auto& [fixture, card] : pairs) {
    SCOPED_TRACE(fixture + " vs " + card);
    const ModelSpec hf = load_model_file(hf_path(fixture));
    const ModelSpec c = load_model(card);
    EXPECT_EQ(hf.family, c.family);
    EXPECT_EQ(hf.kind, c.kind);
    EXPECT_EQ(hf.num_layers, c.num_layers);
    EXPECT_EQ(hf.hidden, c.hidden);
    EXPECT_EQ(hf.num_heads, c.num_heads);
    EXPECT_EQ(hf.num_kv_heads, c.num_kv_heads);
    EXPECT_EQ(hf.head_dim, c.head_dim);
    EXPECT_EQ(hf.ffn_hidden, c.ffn_hidden);
    EXPECT_EQ(hf.ffn_kind, c.ffn_kind);
    EXPECT_EQ(hf.vocab_size, c.vocab_size);
    EXPECT_EQ(hf.max_positions, c.max_positions);
    EXPECT_EQ(hf.tied_embeddings, c.tied_embeddings);
    EXPECT_EQ(hf.qk_norm, c.qk_norm);
    EXPECT_EQ(hf.qkv_bias, c.qkv_bias);
    EXPECT_EQ(hf.positional, c.positional);
    if (c.positional == PositionalKind::rotary) {
      // rotary_dim 0 means "all of head_dim" (model_spec.hpp); the HF Llama reader leaves it 0
      // while the cards spell out 128, so compare the effective width.
      EXPECT_EQ(effective_rotary_dim(hf), effective_rotary_dim(c));
    }
    EXPECT_EQ(count_parameters(hf).total, count_parameters(c).total);
    EXPECT_EQ(count_parameters(hf).total, hf_figures().at(card));
  }
}

// Qwen2Config: Llama's layout with biases on q, k and v (not o) and no q/k norms; a dense config
// relabelled qwen3_moe lacks the expert fields and is refused naming the first of them
// (the MoE readers themselves: test_moe_cards.cpp); an unknown model_type names model_type.
TEST(ModelCards, QwenConfigsReadTheirBiasesAndNorms) {
  TempDir tmp;
  nlohmann::json cfg = read_json_file(hf_path("qwen3-8b"));
  cfg["model_type"] = "qwen2";
  cfg.erase("attention_bias");
  const ModelSpec q2 = load_model_file(tmp.write_json("qwen2.json", cfg));
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.out_proj_bias);
  EXPECT_FALSE(q2.qk_norm);
  const ModelSpec q3 = load_model("qwen3-8b");
  // Per layer: Qwen2's q, k, v biases against Qwen3's q and k norms (head_dim weights each).
  const int64_t qkv_bias = 4096 + 2 * 1024, qk_norms = 2 * 128;
  EXPECT_EQ(count_parameters(q3).total + 36 * qkv_bias, count_parameters(q2).total + 36 * qk_norms);
  cfg["model_type"] = "qwen3_moe";
  const std::string err = input_error_of([&] { (void)load_model_file(tmp.write_json("moe.json", cfg)); });
  EXPECT_NE(err.find("'num_experts'"), std::string::npos) << err;
  cfg["model_type"] = "deepseek_v2";
  const std::string unknown = input_error_of([&] { (void)load_model_file(tmp.write_json("v2.json", cfg)); });
  EXPECT_NE(unknown.find("'model_type'"), std::string::npos) << unknown;
}

// The q/k norms store their inputs (q and k before the norm) and add a norm's time per block.
TEST(ModelCards, QkNormCostsActivationsAndTime) {
  ModelSpec with = load_model("qwen3-8b"), without = with;
  without.qk_norm = false;
  ClusterSpec c{load_hardware("p5.48xlarge"), 1, 0};
  ParallelConfig cfg;
  cfg.tp = 2;
  cfg.dp = 4;
  cfg.micro_batch_size = 1;
  cfg.global_batch_size = 4;
  cfg.seq_len = 4096;
  const Prediction a = simulate(with, c, cfg), b = simulate(without, c, cfg);
  const double per_block = 2.0 * 4096 * (4096 + 1024) / 2;  // e x tokens x (q_dim + kv_dim) / tp
  EXPECT_NEAR(a.worst.activations - b.worst.activations, 36 * per_block, 1e-6 * a.worst.activations);
  EXPECT_GT(a.time.forward_compute_s, b.time.forward_compute_s);
}

TEST(ModelCards, HfConfigNameFromNameOrPath) {
  EXPECT_EQ(load_model_file(hf_path("llama2-70b")).name, "Llama-2-70b-hf");
  // No _name_or_path: the file stem.
  EXPECT_EQ(load_model_file(hf_path("gpt2")).name, "gpt2.config");
}

// ----- LoRA ---------------------------------------------------------------------------------

TEST(ModelCards, LoraLlama70bAttentionRank4) {
  const ModelSpec m = load_model("llama2-70b");
  const auto t = resolve_lora_targets(m, {"q_proj", "k_proj", "v_proj", "o_proj"});
  ASSERT_EQ(t.linears.size(), 4u);
  EXPECT_EQ(t.linears[0].module, "self_attn.q_proj");
  EXPECT_EQ(t.linears[1].module, "self_attn.k_proj");
  EXPECT_EQ(t.linears[2].module, "self_attn.v_proj");
  EXPECT_EQ(t.linears[3].module, "self_attn.o_proj");

  // Hu et al. 2021 §4.1: r * (d_in + d_out) per adapted linear. GQA: k/v project to 8 x 128.
  const int64_t r = 4;
  auto lora = [r](int64_t d_in, int64_t d_out) { return r * (d_in + d_out); };
  const int64_t per_layer = lora(8192, 8192) + lora(8192, 1024) + lora(8192, 1024) + lora(8192, 8192);
  EXPECT_EQ(lora_parameters_per_layer(t, r), per_layer);
  EXPECT_EQ(m.num_layers * lora_parameters_per_layer(t, r), 80 * per_layer);
  EXPECT_EQ(80 * per_layer, 16'384'000);  // 80 x 4 x 51,200
}

TEST(ModelCards, LoraPeftSuffixMatching) {
  const ModelSpec m = load_model("gpt2");
  const auto both = resolve_lora_targets(m, {"c_proj"});
  ASSERT_EQ(both.linears.size(), 2u);
  EXPECT_EQ(both.linears[0].module, "attn.c_proj");
  EXPECT_EQ(both.linears[1].module, "mlp.c_proj");
  EXPECT_EQ(lora_parameters_per_layer(both, 8), 8 * (768 + 768) + 8 * (3072 + 768));

  const auto one = resolve_lora_targets(m, {"mlp.c_proj"});
  ASSERT_EQ(one.linears.size(), 1u);
  EXPECT_EQ(one.linears[0].module, "mlp.c_proj");
  EXPECT_EQ(one.linears[0].d_in, 3072);
  EXPECT_EQ(one.linears[0].d_out, 768);

  // The fully qualified name matches too, and an overlapping list adapts each linear once.
  EXPECT_EQ(resolve_lora_targets(m, {"attn.c_attn"}).linears.size(), 1u);
  EXPECT_EQ(resolve_lora_targets(m, {"c_proj", "mlp.c_proj", "attn.c_proj"}).linears.size(), 2u);
  // Suffixes match only at a '.' boundary: "proj" is not a suffix module name of "c_proj".
  EXPECT_NE(input_error_of([&] { resolve_lora_targets(m, {"proj"}); }), "");
}

TEST(ModelCards, LoraUnknownTargetIsInputError) {
  const ModelSpec m = load_model("llama2-7b");
  const std::string msg = input_error_of([&] { resolve_lora_targets(m, {"q_proj", "c_attn"}); });
  EXPECT_NE(msg.find("c_attn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--lora-targets"), std::string::npos) << msg;
}

// ----- validation and parse errors ----------------------------------------------------------

nlohmann::json valid_card() { return read_json_file(card_path("tiny-llama")); }

void expect_card_error(const TempDir& tmp, const std::string& file, const nlohmann::json& card,
                       const std::string& field) {
  SCOPED_TRACE(file);
  const std::string path = tmp.write_json(file, card);
  const std::string msg = input_error_of([&] { load_model_file(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << msg;
  // load_model with a path goes the same way.
  EXPECT_EQ(input_error_of([&] { load_model(path); }), msg);
}

TEST(ModelCards, ValidCardTemplateLoads) {
  TempDir tmp;
  EXPECT_NO_THROW(load_model_file(tmp.write_json("ok.json", valid_card())));
}

TEST(ModelCards, KvHeadsNotDividingHeads) {
  TempDir tmp;
  auto j = valid_card();
  j["num_key_value_heads"] = 3;  // 8 heads
  expect_card_error(tmp, "kv.json", j, "num_key_value_heads");
}

TEST(ModelCards, MissingHiddenSize) {
  TempDir tmp;
  auto j = valid_card();
  j.erase("hidden_size");
  expect_card_error(tmp, "nohidden.json", j, "hidden_size");
}

TEST(ModelCards, WrongTypeNumLayers) {
  TempDir tmp;
  auto j = valid_card();
  j["num_layers"] = "x";
  expect_card_error(tmp, "layers.json", j, "num_layers");
}

TEST(ModelCards, UnknownFfnKind) {
  TempDir tmp;
  auto j = valid_card();
  j["ffn_kind"] = "relu";
  expect_card_error(tmp, "ffn.json", j, "ffn_kind");
}

TEST(ModelCards, NestedFieldErrorsUseDottedPath) {
  TempDir tmp;
  auto j = valid_card();
  j["dropout"]["attention"] = 1.5;
  expect_card_error(tmp, "dropout.json", j, "dropout.attention");
  auto k = valid_card();
  k["bias"]["mlp"] = "yes";
  expect_card_error(tmp, "bias.json", k, "bias.mlp");
}

TEST(ModelCards, UnknownBuiltinNameListsBuiltins) {
  const std::string msg = input_error_of([] { load_model("llama2-8b"); });
  EXPECT_NE(msg.find("llama2-8b"), std::string::npos) << msg;
  for (const auto& n : builtin_model_names()) EXPECT_NE(msg.find(n), std::string::npos) << n << ": " << msg;
}

TEST(ModelCards, MissingFileIsInputError) {
  const std::string msg = input_error_of([] { load_model("/nonexistent/dir/card.json"); });
  EXPECT_NE(msg.find("/nonexistent/dir/card.json"), std::string::npos) << msg;
}

// ----- built-in names -------------------------------------------------------------------------

TEST(ModelCards, BuiltinNames) {
  const std::vector<std::string> expected{"bert-large", "gpt-j-6b",  "gpt-neox-20b", "gpt2",
                                          "gpt2-xl",    "gpt3-175b", "llama2-13b",   "llama2-70b",
                                          "llama2-7b",  "tiny-gpt",  "tiny-llama",   "tinyllama-1.1b"};
  const auto names = builtin_model_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& n : expected) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << " missing";
  EXPECT_GE(names.size(), expected.size());
  // Every built-in card loads, validates, and its "name" field is its file stem.
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    ModelSpec m;
    ASSERT_NO_THROW(m = load_model(n));
    EXPECT_EQ(m.name, n);
  }
}

TEST(ModelCards, TinyModelsAreTiny) {
  for (const char* n : {"tiny-llama", "tiny-gpt"}) {
    SCOPED_TRACE(n);
    const int64_t total = count_parameters(load_model(n)).total;
    EXPECT_GT(total, 0);
    EXPECT_LT(total, 10'000'000);
  }
}

}  // namespace model_cards_test
}  // namespace shardplan::simulator

namespace shardplan::simulator {
namespace model_cards_test {  // named, not anonymous: the files share a unity-build unit

TEST(ModelCards, BertHeadsFollowTheArchitecture) {
  // BertModel: + pooler; BertForMaskedLM: + MLM head; BertForPreTraining: both + NSP (h x 2).
  TempDir tmp;
  nlohmann::json cfg = read_json_file(std::string(SHARDPLAN_TEST_DATA_DIR) + "/hf/bert-large-uncased.config.json");
  cfg["architectures"] = {"BertModel"};
  EXPECT_EQ(count_parameters(load_model_file(tmp.write_json("base.json", cfg))).total, 335'141'888);
  cfg["architectures"] = {"BertForPreTraining"};
  EXPECT_EQ(count_parameters(load_model_file(tmp.write_json("pre.json", cfg))).total, 336'226'108);
}

// Found by fuzzing: a number beyond double made nlohmann throw out_of_range, which escaped as an
// "internal error" (exit 3) instead of a one-line error naming the file.
TEST(ModelCards, ANumberBeyondDoubleIsInvalidJsonNamingTheFile) {
  const TempDir tmp("cards");
  const std::string path = tmp.write("big.json", "{\"num_layers\": 1e309}");
  try {
    (void)load_model_file(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": invalid JSON: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("number overflow"), std::string::npos) << msg;
  }
  EXPECT_THROW((void)parse_json_text("[1, 2", "x.json"), InputError);
  EXPECT_EQ(parse_json_text("// a comment\n{\"a\": 1}", "x.json")["a"], 1);
}

}  // namespace model_cards_test
}  // namespace shardplan::simulator
