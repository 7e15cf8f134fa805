#pragma once
// Hugging Face config.json -> ModelSpec, for LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config,
// GPT2Config, GPTJConfig, GPTNeoXConfig and BertConfig field names, and the mixture-of-experts
// MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig and DeepseekV3Config (model_type llama/mistral,
// qwen2, qwen3, gpt2, gptj, gpt_neox, bert, mixtral, qwen2_moe, qwen3_moe, deepseek_v3).
#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "model_spec.hpp"

namespace shardplan::simulator {

ModelSpec parse_hf_config(const nlohmann::json& j, const JsonContext& ctx);

}  // namespace shardplan::simulator
