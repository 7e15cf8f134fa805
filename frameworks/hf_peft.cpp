// Hugging Face Trainer + PEFT on one device (github.com/huggingface/peft): LoRA or QLoRA over a
// frozen base, gradient checkpointing of every decoder layer, the attention implementation the
// transformers version picks (SDPA by default since 4.36).
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel hf_peft_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "hf-peft";
  fw.version = std::string(version);
  fw.display = "Hugging Face Trainer + PEFT (transformers " + fw.version + ")";
  fw.repository = "github.com/huggingface/peft";
  fw.released = version == "4.35" ? "2023-11" : "2023-12";
  KnobTable& k = fw.runs;
  k.runtimes = kCuda;
  k.multi_node = false;
  k.recompute = {Recompute::none, Recompute::full};  // gradient_checkpointing_enable()
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = kAllPrecisions;
  k.mixed_precision = {sim::MixedPrecision::autocast, sim::MixedPrecision::master_weights};
  k.lora = true;
  k.qlora = true;
  // TrainingArguments(bf16=True) runs torch.autocast over the weights as loaded.
  fw.defaults = {{"fusion", "eager"}, {"mixed_precision", "autocast"}};
  fw.defaults["attention"] = version == "4.35" ? "eager" : "flash";
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {
      {"attn_implementation defaults to sdpa since transformers 4.36 (eager before)",
       "huggingface/transformers issue #28005, pull #26572"},
      {"PEFT's default LoRA targets for llama: q_proj, v_proj",
       "huggingface/peft src/peft/utils/constants.py:85 @ 5d602fdb"},
      {"QLoRA preparation enables gradient checkpointing (every decoder layer)",
       "huggingface/peft src/peft/utils/other.py:158-258 @ 5d602fdb"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
