#pragma once
// A LoRA rank given without --lora-targets takes PEFT's default targets for the model's family
// (frameworks/peft_targets.hpp), said in one note on stderr; a family PEFT has no default for
// keeps the error that asks for the targets.
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::cli {

void default_lora_targets(const simulator::ModelSpec& m, simulator::LoraConfig& lora);

}  // namespace shardplan::cli
