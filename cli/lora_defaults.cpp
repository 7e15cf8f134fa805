// PEFT's default LoRA targets where the command names none (lora_defaults.hpp).
#include "lora_defaults.hpp"

#include <iostream>

#include "frameworks/peft_targets.hpp"

namespace shardplan::cli {

void default_lora_targets(const simulator::ModelSpec& m, simulator::LoraConfig& lora) {
  if (!lora.enabled() || !lora.targets.empty()) return;
  const auto peft = frameworks::peft_default_targets(m);
  if (!peft) return;  // validation asks for --lora-targets
  lora.targets = peft->modules;
  std::string names;
  for (const auto& t : lora.targets) names += (names.empty() ? "" : ",") + t;
  std::cerr << "shardplan: note: --lora-targets " << names << ": PEFT's default for the " << m.family << " family ("
            << peft->source << ")\n";
}

}  // namespace shardplan::cli
