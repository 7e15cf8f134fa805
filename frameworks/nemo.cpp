// NeMo (github.com/NVIDIA/NeMo): Megatron-Core's layers with Transformer Engine's kernels
// (fused attention through cuDNN, FP8 GEMMs), the distributed optimizer, TP overlap through TE
// userbuffers. 23.09 is MLPerf Training v3.1's container; 24.07 the NeMo performance tables'.
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel nemo_model(std::string_view version) {
  FrameworkModel fw = megatron_model("core");
  fw.name = "nemo";
  fw.version = std::string(version);
  fw.display = "NeMo " + fw.version + " (Megatron-Core + Transformer Engine)";
  fw.repository = "github.com/NVIDIA/NeMo";
  fw.released = version == "23.09" ? "2023-09" : "2024-07";
  fw.commit.clear();
  KnobTable& k = fw.runs;
  k.lora = true;                     // NeMo's PEFT (nemo/collections/nlp/parts/peft_config.py): LoRA on linear_qkv etc.
  k.cp_kinds = {sim::CpKind::ring};  // TE's p2p ring; a2a only from TE 1.11 (2024-09)
  if (version == "23.09") {
    k.fp8 = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
    k.fp8_param_gather = false;
    k.zero_stages = {0, 1};
    k.embedding_only_chunks = false;
  } else {
    k.fp8 = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
    k.zero_stages = {0, 1};
  }
  fw.defaults = {{"attention", "flash"}, {"fusion", "megatron"}, {"mixed_precision", "master_weights"}};
  // NeMo's performance configs train with Apex's distributed_fused_adam and grad_sync_dtype bf16:
  // gradients accumulate and reduce in bf16, not Megatron-LM's forced fp32.
  fw.defaults_by_precision = nlohmann::json::object();
  fw.terms.param_gather_overlaps_forward = true;
  fw.facts = {
      {"the launcher's GPT-3 configs: mcore_gpt, megatron_amp_O2, SP, distributed_fused_adam; 24.07 turns on "
       "transformer_engine",
       "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/175b.yaml @ 8325688d"},
      {"TE picks cuDNN FusedAttention on sm90, flash-attn elsewhere",
       "NVIDIA/TransformerEngine transformer_engine/pytorch/attention.py:2383-2388 @ v1.2 (4f9662fb)"},
      {"context parallelism: TE's p2p ring from 1.0; a2a from 1.11",
       "NVIDIA/TransformerEngine transformer_engine/pytorch/attention.py:4847 @ v1.11 (40dda924)"},
      {"distributed_fused_adam with overlap_param_sync: true: the updated weights' all-gather runs behind the "
       "next step's forward (in the launcher's configs since 2023-06, d1d5454f)",
       "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/175b.yaml:170-174, "
       "llama/llama2_70b.yaml:151-159 @ 8325688d"},
      {"NeMo's selective recompute is the attention core ('only the memory intensive part of attention')",
       "NVIDIA/NeMo examples/nlp/language_modeling/conf/megatron_gpt_config.yaml:126 @ v1.20.0"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
