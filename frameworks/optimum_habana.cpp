// Hugging Face Optimum Habana (github.com/huggingface/optimum-habana) on Gaudi: GaudiTrainer with
// DeepSpeed ZeRO, Habana's fused SDPA (use_flash_attention), gradient checkpointing, LoRA through
// PEFT (interop/habana_flags.hpp).
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel optimum_habana_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "optimum-habana";
  fw.version = std::string(version);
  fw.display = "Optimum Habana " + fw.version;
  fw.repository = "github.com/huggingface/optimum-habana";
  fw.released = "2025-06";
  fw.commit = "1d8504c6c7666a19d71968dba50976dceaf7c6b6";
  KnobTable& k = fw.runs;
  k.runtimes = {sim::DeviceRuntime::synapse};
  k.zero_stages = {0, 1, 2, 3};
  k.offload_optimizer = true;
  k.cp_kinds = {sim::CpKind::all_to_all};
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = {Precision::bf16, Precision::fp32};
  k.mixed_precision = {sim::MixedPrecision::master_weights, sim::MixedPrecision::autocast};
  k.grad_accum = {sim::GradAccumDtype::param, sim::GradAccumDtype::fp32};
  k.lora = true;
  fw.defaults = {{"fusion", "eager"}, {"attention", "eager"}, {"mixed_precision", "master_weights"}};
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.facts = {
      {"attn_implementation defaults to eager; Habana's fused SDPA only with gaudi_fused_sdpa",
       "huggingface/optimum-habana optimum/habana/transformers/training_args.py:374-384 @ 1d8504c6"},
      {"fp16 refused", "huggingface/optimum-habana optimum/habana/transformers/training_args.py:459-462 @ 1d8504c6"},
      {"bf16 by autocast (gaudi_config.use_torch_autocast) or DeepSpeed bf16 (master weights)",
       "huggingface/optimum-habana examples/language-modeling/run_clm.py:336 @ 1d8504c6"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
