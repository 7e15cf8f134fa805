// torchtitan (github.com/pytorch/torchtitan) at v0.2.2, the last release with TOML job configs
// (interop/torchtitan_flags.hpp): FSDP2 (fully_shard) with HSDP, DTensor tensor parallelism with
// sequence parallelism always on, async TP, torch.distributed.pipelining schedules, context
// parallelism, expert parallelism, torchao Float8 linears, per-op and per-layer selective AC.
#include "models.hpp"

namespace shardplan::frameworks {

using namespace knobs;

FrameworkModel torchtitan_model(std::string_view version) {
  FrameworkModel fw;
  fw.name = "torchtitan";
  fw.version = std::string(version);
  fw.display = "torchtitan " + fw.version;
  fw.repository = "github.com/pytorch/torchtitan";
  fw.released = "2026-02";
  fw.commit = "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce";
  KnobTable& k = fw.runs;
  k.runtimes = kCuda;
  k.tensor_parallel = true;
  k.sequence_parallel = true;
  k.sequence_parallel_required = true;  // parallelize_llama: SequenceParallel on the norms
  k.tp_comm_overlap = true;             // parallelism.enable_async_tensor_parallel
  k.tp_overlap_needs_compile = true;    // ... which raises without compile of the model
  k.schedules = {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved,
                 PipelineSchedule::zbv,         // ZBVZeroBubble: two stages per rank in a V
                 PipelineSchedule::dualpipev};  // DualPipeV: the same V
  k.uneven_partition = true;
  k.embedding_only_chunks = true;    // module_fqns_per_model_stage
  k.cp_kinds = {sim::CpKind::ring};  // ring attention only: rotate_method alltoall swaps KV shards
  k.expert_parallel = true;
  k.zero_stages = {0, 2, 3};   // DDP, fully_shard with reshard_after_forward False / True
  k.zero0_only_alone = true;   // DDP only without TP, PP, CP (llama3/infra/parallelize.py:148-151)
  k.sharding_degree = true;    // HSDP: data_parallel_replicate_degree x data_parallel_shard_degree
  k.offload_optimizer = true;  // training.enable_cpu_offload (FSDP2 CPUOffloadPolicy)
  k.recompute = {Recompute::none, Recompute::full, Recompute::op_sac};  // mode none | full | selective op
  k.recompute_every = true;                                             // selective N: every N-th block
  k.attention = {AttentionKind::flash};
  k.fusion = {sim::Fusion::eager, sim::Fusion::compile};  // [compile] enable: per-block torch.compile
  k.precisions = {Precision::bf16, Precision::fp32};
  k.mixed_precision = {sim::MixedPrecision::master_weights};
  k.fp8 = {sim::Fp8Recipe::none, sim::Fp8Recipe::tensorwise, sim::Fp8Recipe::blockwise};
  k.fp8_param_gather = true;  // quantize.linear.float8.enable_fsdp_float8_all_gather
  k.packed_sequences = false;
  // FSDP2's MixedPrecisionPolicy(param_dtype bf16, reduce_dtype fp32): fp32 sharded parameters,
  // bf16 compute copies gathered per block, gradients reduced in fp32.
  // [activation_checkpoint] defaults to mode "selective", selective_ac_option "2": every 2nd block.
  fw.defaults = {{"attention", "flash"},      {"fusion", "eager"},   {"mixed_precision", "master_weights"},
                 {"sequence_parallel", true}, {"recompute", "full"}, {"recompute_every", 2}};
  fw.terms.reports = sim::MemoryReport::reserved;
  fw.terms.allocator_slack_fraction = kCachingAllocatorSlack;
  fw.facts = {
      {"attention: SDPA (attn_type sdpa); compile off by default",
       "pytorch/torchtitan torchtitan/models/llama3/model/args.py:45, torchtitan/config/job_config.py:721-725 @ "
       "73a0e697"},
      {"activation checkpointing default mode selective, option 2 (every 2nd block); op = per-op SAC",
       "pytorch/torchtitan torchtitan/config/job_config.py:651-659, "
       "torchtitan/distributed/activation_checkpoint.py:27-116 "
       "@ 73a0e697"},
      {"FSDP2 mixed precision: param bfloat16, reduce float32 (fp32 sharded parameters)",
       "pytorch/torchtitan torchtitan/config/job_config.py:282,290 @ 73a0e697"},
      {"context parallelism is ring attention (rotate method allgather | alltoall), no Ulysses",
       "pytorch/torchtitan torchtitan/config/job_config.py:446-451, torchtitan/distributed/utils.py:205-216 @ "
       "73a0e697"},
      {"async TP needs compile", "pytorch/torchtitan torchtitan/distributed/tensor_parallel.py:22 @ 73a0e697"},
      {"pipeline_parallel_schedule ZBVZeroBubble (torch.distributed.pipelining ScheduleZBVZeroBubble): a multi-stage "
       "schedule, 2 stages per rank by default, placed in a V",
       "pytorch/torchtitan torchtitan/distributed/pipeline_parallel.py:24-25,104-115 @ 73a0e697; pytorch "
       "torch/distributed/pipelining/schedules.py ScheduleZBVZeroBubble @ 00722e64"},
      {"pipeline_parallel_schedule DualPipeV (ScheduleDualPipeV): V placement, 2 stages per rank, at least as many "
       "micro-batches as stages; F and B overlapped only with pipeline_parallel_expert_parallel_overlap",
       "pytorch/torchtitan torchtitan/distributed/pipeline_parallel.py:24,215-218,447-448 @ 73a0e697; pytorch "
       "torch/distributed/pipelining/schedules.py class ScheduleDualPipeV (char ~93,270) and get_schedule_class "
       "\"DualPipeV\" @ 1fd7abc2"},
      {"compile wraps each TransformerBlock in torch.compile (fullgraph); wq, wk, wv and w1, w3 stay separate "
       "nn.Linear",
       "pytorch/torchtitan torchtitan/models/llama3/infra/parallelize.py:121-123,256-269, "
       "torchtitan/models/llama3/model/model.py:343 @ 73a0e697"},
      {"the log's memory figure is max_reserved_gib (reserved_bytes.all.peak)",
       "pytorch/torchtitan torchtitan/components/metrics.py:64-72,465 @ 73a0e697"},
  };
  return fw;
}

}  // namespace shardplan::frameworks
