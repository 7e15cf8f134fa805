// PyTorch FSDP1 stacks: the Hugging Face Trainer / Accelerate, MosaicML llm-foundry on Composer,
// IBM fms-fsdp. All shard whole transformer blocks (FlatParameter units) with FULL_SHARD (ZeRO-3),
// SHARD_GRAD_OP (ZeRO-2) or HYBRID_SHARD (HSDP); none has tensor or pipeline parallelism. They
// differ in the attention kernel their model code calls and in how they checkpoint activations.
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

namespace {

KnobTable fsdp1_table() {
  KnobTable k;
  k.runtimes = kCuda;
  k.zero_stages = {0, 2, 3};  // NO_SHARD / DDP, SHARD_GRAD_OP, FULL_SHARD
  k.sharding_degree = true;   // HYBRID_SHARD: shard inside a node, replicate across
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fusion = {sim::Fusion::eager};
  k.precisions = kAllPrecisions;
  // FSDP MixedPrecision(param_dtype=bf16): fp32 flat shards and fp32 optimizer, 16-bit gathered
  // copies for compute: 16 bytes per parameter over the shard group, as 2+2+12.
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  return k;
}

FrameworkModel fsdp1_base(std::string name, std::string_view version) {
  FrameworkModel fw;
  fw.name = std::move(name);
  fw.version = std::string(version);
  fw.runs = fsdp1_table();
  fw.defaults = {{"fusion", "eager"}, {"mixed_precision", "master_weights"}, {"attention", "flash"}};
  fw.facts = {{"FULL_SHARD / SHARD_GRAD_OP / HYBRID_SHARD / NO_SHARD",
               "pytorch/pytorch torch/distributed/fsdp/api.py (ShardingStrategy)"}};
  return fw;
}

}  // namespace

FrameworkModel accelerate_fsdp_model(std::string_view version) {
  FrameworkModel fw = fsdp1_base("accelerate-fsdp", version);
  fw.display = "Hugging Face Accelerate " + fw.version + " + FSDP";
  fw.repository = "github.com/huggingface/accelerate";
  fw.released = "2026-07";
  fw.commit = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83";
  fw.runs.offload_optimizer = true;  // fsdp_offload_params
  fw.runs.lora = true;
  fw.runs.qlora = true;  // bitsandbytes 4-bit with bnb_4bit_quant_storage under FSDP
  fw.terms.reports = sim::MemoryReport::allocated;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.terms.recompute_stops_early = true;
  fw.facts.push_back(
      {"fsdp_activation_checkpointing wraps each unit in checkpoint_wrapper(NO_REENTRANT): PyTorch's "
       "non-reentrant checkpoint, whose recompute stops early (the last linear does not rerun)",
       "huggingface/accelerate src/accelerate/accelerator.py:1965-1978 @ 16cb6eb8"});
  fw.facts.push_back({"backward prefetch unset: NO_PREFETCH (PyTorch's own default is BACKWARD_PRE)",
                      "huggingface/accelerate src/accelerate/utils/dataclasses.py:1679-1683,1884-1887 @ 16cb6eb8"});
  fw.facts.push_back(
      {"mixed precision: param_dtype = reduce_dtype = bf16, forward under autocast",
       "huggingface/accelerate src/accelerate/utils/dataclasses.py:2092-2125, accelerator.py:1818-1824 @ "
       "16cb6eb8"});
  return fw;
}

FrameworkModel llm_foundry_model(std::string_view version) {
  FrameworkModel fw = fsdp1_base("llm-foundry", version);
  fw.display = "MosaicML llm-foundry (" + fw.version + ") on Composer + FSDP";
  fw.repository = "github.com/mosaicml/llm-foundry";
  fw.released = version == "2023" ? "2023-06" : "2025-01";
  fw.runs.attention = {AttentionKind::flash, AttentionKind::flash1, AttentionKind::eager};
  // MPT's attn_config.attn_impl: 'triton' (flash_attn_triton.py) in the 2023 benchmark YAMLs,
  // 'flash' (flash-attn 2) since.
  fw.defaults["attention"] = version == "2023" ? "flash1" : "flash";
  fw.facts.push_back({"MPT attn_impl triton until v0.7.0, flash since",
                      "mosaicml/llm-foundry llmfoundry/models/mpt/configuration_mpt.py:13 @ v0.2.0 (d0efe55f); commit "
                      "c26309de (2024-03-18)"});
  fw.facts.push_back({"Composer's MemoryMonitor logs allocated and reserved peaks; the benchmark tables quote neither",
                      "docs.mosaicml.com composer.callbacks.MemoryMonitor"});
  if (version != "2023") {
    fw.runs.fusion = {sim::Fusion::eager, sim::Fusion::compile};
    fw.facts.push_back({"compile_config (Composer's torch.compile of the model): None by default",
                        "mosaicml/llm-foundry llmfoundry/utils/config_utils.py:182, llmfoundry/command_utils/"
                        "train.py:558,598 @ 8c8dd48f"});
  }
  fw.terms.reports = sim::MemoryReport::reserved;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.terms.recompute_stops_early = true;
  fw.facts.push_back(
      {"activation checkpointing non-reentrant (the MPT YAMLs' activation_checkpointing_reentrant: false; "
       "Composer then wraps each block in checkpoint_wrapper(NO_REENTRANT)): the recompute stops early, the "
       "block's last linear does not rerun",
       "mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-13b.yaml:87-93 @ c6cfb428; mosaicml/composer "
       "composer/distributed/dist_strategy.py:513-539 @ 64051888"});
  return fw;
}

FrameworkModel fms_fsdp_model(std::string_view version) {
  FrameworkModel fw = fsdp1_base("fms-fsdp", version);
  fw.display = "IBM fms-fsdp (" + fw.version + ")";
  fw.repository = "github.com/foundation-model-stack/fms-fsdp";
  fw.released = "2024-03";
  fw.runs.zero_stages = {3};
  // fms_fsdp/policies/ac_handler.py: selective_checkpointing p wraps every 1/p-th block.
  fw.runs.recompute_every = true;
  fw.facts.push_back({"selective_checkpointing p wraps every 1/p-th block (interleaved)",
                      "foundation-model-stack/fms-fsdp fms_fsdp/policies/ac_handler.py:16-55 @ 5a296afe"});
  fw.runs.fusion = {sim::Fusion::eager, sim::Fusion::compile};
  fw.defaults["fusion"] = "compile";
  fw.facts.push_back(
      {"use_torch_compile defaults to True (torch.compile of the whole model after FSDP and AC); the "
       "README's throughput table ran compiled (its 'Compile: Y' column)",
       "foundation-model-stack/fms-fsdp fms_fsdp/config/training.py:61, main_training_llama.py:104-110, "
       "README.md:10-19 @ 5a296afe"});
  fw.facts.push_back({"the log prints max_memory_reserved and max_memory_allocated",
                      "foundation-model-stack/fms-fsdp fms_fsdp/utils/train_utils.py:128-141 @ 5a296afe"});
  fw.terms.reports = sim::MemoryReport::reserved;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  // Compiled, the checkpointed block's backward graph recomputes only what backward reads, which
  // leaves out the last linear's output just as the eager early stop does.
  fw.terms.recompute_stops_early = true;
  fw.facts.push_back(
      {"blocks checkpointed with checkpoint_wrapper(NO_REENTRANT): the recompute stops early, the "
       "block's last linear does not rerun",
       "foundation-model-stack/fms-fsdp fms_fsdp/policies/ac_handler.py:10-13 @ 5a296afe"});
  return fw;
}

}  // namespace shardplan::frameworks
