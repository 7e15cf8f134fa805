#pragma once
// PEFT's default LoRA targets: what `LoraConfig(target_modules=None)` adapts for a model family
// (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING). A LoRA rank given without targets takes
// these, and the command says so.
#include <optional>
#include <string>
#include <vector>

#include "simulator/model_spec.hpp"

namespace shardplan::frameworks {

struct PeftTargets {
  std::vector<std::string> modules;
  std::string source;  // repo path:line @ commit
};

// nullopt for a family PEFT has no default for.
std::optional<PeftTargets> peft_default_targets(const simulator::ModelSpec& m);

}  // namespace shardplan::frameworks
