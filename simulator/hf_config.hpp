#pragma once
// Hugging Face config.json -> ModelSpec, for LlamaConfig, GPT2Config, GPTJConfig,
// GPTNeoXConfig and BertConfig field names (model_type llama/mistral, gpt2, gptj, gpt_neox, bert).
#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "model_spec.hpp"

namespace shardplan::simulator {

ModelSpec parse_hf_config(const nlohmann::json& j, const JsonContext& ctx);

}  // namespace shardplan::simulator
