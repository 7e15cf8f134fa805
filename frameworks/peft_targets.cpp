// The family table of peft_targets.hpp.
#include "peft_targets.hpp"

namespace shardplan::frameworks {

std::optional<PeftTargets> peft_default_targets(const simulator::ModelSpec& m) {
  // ModelSpec::family names the module naming; PEFT's keys are model_type values of that naming.
  constexpr const char* kAt = "huggingface/peft src/peft/utils/constants.py:";
  constexpr const char* kCommit = " @ 5d602fdb";
  struct Row {
    const char* family;
    std::vector<std::string> modules;
    const char* line;  // the mapping's entry
  };
  static const std::vector<Row> rows = {
      {"gpt2", {"c_attn"}, "71 (gpt2)"},
      {"llama", {"q_proj", "v_proj"}, "85 (llama; mistral 95, qwen2/qwen3 103-104 alike)"},
      {"gptj", {"q_proj", "v_proj"}, "75 (gptj)"},
      {"gpt_neox", {"query_key_value"}, "76 (gpt_neox)"},
      {"bert", {"query", "value"}, "78 (bert)"},
  };
  for (const auto& r : rows)
    if (m.family == r.family) return PeftTargets{r.modules, std::string(kAt) + r.line + kCommit};
  return std::nullopt;
}

}  // namespace shardplan::frameworks
