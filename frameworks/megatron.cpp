// Megatron-LM / Megatron-Core (github.com/NVIDIA/Megatron-LM). Three eras whose defaults differ:
//   2021  Narayanan et al. SC'21 (PTD-P): no sequence parallelism, full recompute only, the
//         scale-mask-softmax attention (eager), no distributed optimizer
//   2022  Korthikanti et al. 2022 (v3.0): sequence parallelism and selective recompute added,
//         attention still eager
//   core  Megatron-Core today: Transformer Engine / cuDNN fused attention, CP, EP, FP8, the
//         distributed optimizer, TP overlap, custom pipeline layouts
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

namespace {

constexpr const char* kCoreCommit = "d98e8a64ddf34856e74b24714e3bedb2f5a39553";

KnobTable megatron_2021() {
  KnobTable k;
  k.runtimes = kCuda;
  k.tensor_parallel = true;
  k.schedules = {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved};
  k.zero_stages = {0};
  k.recompute = {Recompute::none, Recompute::full};
  k.attention = {AttentionKind::eager};
  k.fusion = {sim::Fusion::megatron};
  k.precisions = kAllPrecisions;
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  k.grad_accum = {sim::GradAccumDtype::param, sim::GradAccumDtype::fp32};
  return k;
}

KnobTable megatron_2022() {
  KnobTable k = megatron_2021();
  k.sequence_parallel = true;
  k.zero_stages = {0, 1};
  k.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  k.recompute_num_layers = true;
  k.uneven_partition = true;
  return k;
}

KnobTable megatron_core() {
  KnobTable k = megatron_2022();
  k.tp_comm_overlap = true;
  k.embedding_only_chunks = true;
  k.cp_kinds = {sim::CpKind::ring, sim::CpKind::all_to_all};
  k.expert_parallel = true;
  k.zero_stages = {0, 1, 2, 3};  // 2, 3: Megatron FSDP (--data-parallel-sharding-strategy)
  k.pipeline_zero_max = 1;
  k.sharding_degree = true;
  k.offload_optimizer = true;
  k.attention = {AttentionKind::flash, AttentionKind::eager};
  k.fp8 = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed, sim::Fp8Recipe::tensorwise, sim::Fp8Recipe::blockwise};
  k.fp8_param_gather = true;
  k.packed_sequences = true;
  return k;
}

std::vector<Fact> megatron_facts() {
  return {
      {"2021: 1F1B and interleaved schedules, no GPipe",
       "NVIDIA/Megatron-LM megatron/schedules.py:108,141,363 @ v2.5 (e269e200)"},
      {"2021: no distributed optimizer (DDP-impl local); full recompute only (--checkpoint-activations)",
       "NVIDIA/Megatron-LM megatron/arguments.py:393-401,578 @ v2.5 (e269e200)"},
      {"2021-22: eager attention, FusedScaleMaskSoftmax over baddbmm scores",
       "NVIDIA/Megatron-LM megatron/model/transformer.py, megatron/model/fused_softmax.py @ v2.5 (e269e200)"},
      {"2021: each micro-batch's gradients added to main_grad by a hook after the backward (no fused GEMM)",
       "NVIDIA/Megatron-LM megatron/model/distributed.py:174 @ v2.5; gradient_accumulation_fusion from 83b1e42f "
       "(2022-02-16)"},
      {"2022: sequence parallelism and selective (attention-core) recompute",
       "NVIDIA/Megatron-LM commit 9aad9203 (2022-05-20)"},
      {"2022: the distributed optimizer (optimizer states sharded over dp: ZeRO-1 memory)",
       "NVIDIA/Megatron-LM commit d07d29df (2022-06-08)"},
      {"flash attention only from 2023, opt-in --use-flash-attn",
       "NVIDIA/Megatron-LM commit 285068c8 (2023-01-11, written as d693034e)"},
      {"core: Transformer Engine the default layer implementation; attention backend auto (cuDNN on Hopper)",
       "NVIDIA/Megatron-LM commits e7b74a4b (2024-04-03), fa0dcc48 (2024-12-07)"},
      {"bf16 forces fp32 gradient accumulation and reduction (main_grad); fp16 keeps the param dtype",
       "NVIDIA/Megatron-LM megatron/training/arguments.py:1209-1217 @ d98e8a64; megatron/model/distributed.py:127-130 "
       "@ "
       "v2.5"},
      {"the log prints allocated, max allocated, reserved and max reserved (report_memory)",
       "NVIDIA/Megatron-LM megatron/training/utils.py (report_memory) @ d98e8a64"},
  };
}

}  // namespace

FrameworkModel megatron_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "megatron";
  fw.version = std::string(version);
  fw.repository = "github.com/NVIDIA/Megatron-LM";
  fw.defaults = {{"fusion", "megatron"}, {"mixed_precision", "master_weights"}};
  fw.facts = megatron_facts();
  // Megatron sets accumulate_allreduce_grads_in_fp32 for every bf16 run (main_grad in fp32).
  fw.defaults_by_precision = {{"bf16", {{"grad_accum_dtype", "fp32"}}}};
  fw.terms.fp32_grad_reduce = sim::Fp32GradReduce::bucketed;
  fw.terms.wgrad_accumulation = sim::WgradAccumulation::in_gemm;
  fw.terms.reports = sim::MemoryReport::allocated;  // max allocated, the figure papers quote
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  if (version == "2021") {
    fw.display = "Megatron-LM 2021 (PTD-P)";
    fw.released = "2021-04";
    fw.runs = megatron_2021();
    fw.defaults["attention"] = "eager";
    fw.terms.wgrad_accumulation = sim::WgradAccumulation::separate_pass;
  } else if (version == "2022") {
    fw.display = "Megatron-LM 2022 (v3.0)";
    fw.released = "2022-05";
    fw.runs = megatron_2022();
    fw.defaults["attention"] = "eager";
  } else {
    fw.display = "Megatron-Core";
    fw.released = "2026-08";
    fw.commit = kCoreCommit;
    fw.runs = megatron_core();
    fw.defaults["attention"] = "flash";
  }
  return fw;
}

}  // namespace shardplan::frameworks
