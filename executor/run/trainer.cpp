#include "trainer.hpp"

#include <filesystem>
#include <iostream>

#include "data_source.hpp"
#include "device.hpp"
#include "executor/errors.hpp"
#include "executor/model/nf4_base.hpp"
#include "moe_support.hpp"
#include "simulator/errors.hpp"
#include "tensor_io.hpp"
#include "trainer_state.hpp"

namespace shardplan::executor {

namespace {

namespace fs = std::filesystem;
using simulator::Precision;

// Runs one set-up phase on every rank; any rank's user error becomes everyone's.
template <typename F>
void phase(const MpiRuntime& rt, F&& f) {
  std::string error;
  try {
    f();
  } catch (const InputError& e) { error = e.what(); } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) { error = std::string("internal error: ") + e.what(); }
  const std::string agreed = rt.agree(error);
  if (!agreed.empty()) throw InputError(agreed);
}

Precision parse_precision(const std::string& s) {
  if (const auto p = simulator::enum_from_name<Precision>(s)) return *p;
  throw InputError(simulator::bad_name_message<Precision>("--precision", s));
}

simulator::MixedPrecision parse_mixed_precision(const std::string& s) {
  if (const auto m = simulator::mixed_precision_from_string(s)) return *m;
  throw InputError(simulator::bad_name_message<simulator::MixedPrecision>("--mixed-precision", s));
}

// Context parallelism: load_plan has checked the sequence against the chunks and, for Ulysses,
// the heads against tp x cp (simulator validation); shardrun's ring attention is causal.
void check_cp_supported(const formats::Plan& plan, const std::string& src) {
  if (plan.config.cp_kind == simulator::CpKind::ring && plan.model.kind != simulator::ModelKind::decoder)
    throw InputError(src +
                     ": field 'config.context_parallel_kind': shardrun's ring attention is causal (decoders only)");
}

// Zero-bubble schedules: shardrun defers the linears' weight gradients (WeightGradStore) for
// ZB1P, ZB2P and the V schedules of single F, B and W ops (ZBV, V-Half, V-Min), with the
// gradients reduced once per step after the last W (ZeRO 0/1). DualPipeV's overlapped
// forward-backward pairs it does not run.
void check_split_backward_supported(const formats::Plan& plan, const std::string& src) {
  const auto& c = plan.config;
  const std::string name = simulator::to_string(c.schedule);
  if (c.schedule == simulator::PipelineSchedule::dualpipev || simulator::bidirectional(c.schedule))
    throw InputError(src + ": field 'config.schedule': " + name +
                     " is simulated, not run by shardrun (gpipe, 1f1b, interleaved, zb1p, zb2p, zbv, vhalf, vmin)");
  if (c.zero_stage >= 2)
    throw InputError(src + ": field 'config.zero_stage': shardrun runs " + name +
                     " with ZeRO 0 or 1 (ZeRO-2/3 reduce-scatter each micro-batch's gradients when its backward "
                     "ends, before the deferred weight gradients), got " +
                     std::to_string(c.zero_stage));
  if (simulator::v_shaped(c.schedule) && plan.model.tied_embeddings)
    throw InputError(src + ": field 'config.schedule': " + name +
                     " places the embedding and the head on one stage; shardrun runs it with untied embeddings "
                     "only");
}

// What this executor runs: everything the planner outputs but optimizer offload on CUDA and FP8
// linears; fp16 needs CUDA.
void check_supported(const formats::Plan& plan, const std::string& src, Precision precision, torch::Device device) {
  const auto& c = plan.config;
  if (c.offload_optimizer && device.is_cuda())
    throw InputError(src +
                     ": field 'config.offload_optimizer': optimizer offload to host memory is not run by this "
                     "shardrun on CUDA (plan with --forbid offload); on the CPU it is a no-op");
  if (c.uses_fp8())
    throw InputError(src + ": field 'config.fp8': FP8 linears (" + simulator::to_string(c.fp8) +
                     ") are not run by this shardrun (LibTorch has no FP8 GEMM training path here); plan with --fp8 "
                     "none or --forbid fp8");
  if (simulator::splits_backward(c.schedule)) check_split_backward_supported(plan, src);
  if (c.cp > 1) check_cp_supported(plan, src);
  if (precision == Precision::fp16 && !device.is_cuda())
    throw InputError(src +
                     ": field 'config.precision': fp16 autocast needs a CUDA device; this rank runs on the CPU "
                     "(use --precision bf16 or fp32)");
}

// The set-up phases after the plan is loaded and checked, in the order Trainer::setup runs them.

// Threads per rank, then the process groups (NCCL on CUDA, else MPI).
void setup_process_groups(TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& cfg = s.plan.config;
  s.threads = configure_threads(o.threads, s.runtime.local_size());
  phase(s.runtime, [&] {
    const Backend backend = s.device.is_cuda() ? Backend::nccl : Backend::mpi;
    s.groups = std::make_unique<ProcessGroups>(s.runtime, cfg, backend, o.comm_timeout_s, o.plan_path);
  });
}

// This rank's model shard as the plan and the run's options describe it (all but the partition).
ModelOptions setup_model_options(const TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& cfg = s.plan.config;
  const auto& c = s.groups->coords();
  ModelOptions mo;
  mo.tp = cfg.tp;
  mo.tp_rank = c.tp;
  mo.sequence_parallel = cfg.sequence_parallel;
  mo.lora = cfg.lora;
  mo.hidden_dropout = o.dropout.value_or(s.plan.model.hidden_dropout);
  mo.attention_dropout = o.dropout.value_or(s.plan.model.attention_dropout);
  mo.pp = cfg.pp;
  mo.pp_rank = c.pp;
  mo.virtual_stages = cfg.virtual_stages;
  mo.v_placement = simulator::v_shaped(cfg.schedule);
  // torchtitan's policies, which the simulator models, shardrun does not run.
  if (cfg.recompute == simulator::Recompute::op_sac)
    throw InputError(o.plan_path +
                     ": field 'config.recompute': op_sac (torchtitan's per-op selective checkpointing) is not run "
                     "by shardrun; plan with none, selective or full");
  if (cfg.recompute_every > 1)
    throw InputError(o.plan_path +
                     ": field 'config.recompute_every': full recompute of every N-th block is not run by shardrun; "
                     "plan with recompute_num_layers (the first k blocks of each chunk) instead");
  mo.recompute = cfg.recompute;
  mo.recompute_num_layers = cfg.recompute_num_layers;
  mo.offload_activations = cfg.offload_activations;
  mo.fused_attention = simulator::fused(cfg.attention);
  mo.device = s.device;
  mo.ep = cfg.ep;
  mo.ep_rank = c.ep;
  mo.ep_group = cfg.ep > 1 ? &s.groups->expert() : nullptr;
  mo.moe_capacity_factor = cfg.moe_capacity_factor;
  mo.whole_experts = s.plan.model.is_moe() && cfg.tp > 1 && s.groups->expert_tp() == 1;
  mo.moe_aux_loss_coeff = o.moe_aux_loss_coeff;
  if (cfg.cp > 1) {
    mo.cp = {&s.groups->cp(), cfg.cp_kind, simulator::cp_sequence_chunks(s.plan.model, cfg.cp, cfg.cp_kind)};
    if (cfg.cp_kind == simulator::CpKind::ring && mo.attention_dropout > 0)
      throw InputError(o.plan_path +
                       ": field 'model.attention_dropout': ring attention (context parallelism) runs "
                       "without attention dropout; pass --dropout 0 or plan with context_parallel_kind all_to_all");
  }
  return mo;
}

// The model shard: partitioned, this stage's schedule, initialised or loaded, QLoRA's base quantised.
void setup_model(TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& cfg = s.plan.config;
  const auto& c = s.groups->coords();
  phase(s.runtime, [&] {
    ModelOptions mo = setup_model_options(s);
    try {
      mo.layers_per_chunk = simulator::layers_per_chunk(s.plan.model, cfg);
      s.pipeline_ops =
          simulator::pipeline_stage_order(cfg.schedule, cfg.pp, cfg.micro_batches(), cfg.virtual_stages, c.pp);
    } catch (const simulator::InputError& e) { throw InputError(o.plan_path + ": field 'config': " + e.what()); }
    s.model = std::make_unique<Transformer>(s.plan.model, mo);
    s.model->init_weights(o.seed);  // LoRA adapters keep this init under a loaded base
    if (o.init != "seed") load_hf_weights(*s.model, o.init);
    if (cfg.lora.quantized_base()) s.nf4_base = quantize_base_nf4(*s.model, &s.groups->tp());  // QLoRA: at load
  });
}

// The token cache (rank 0 prepares it), then every rank's dataset and sampler.
void setup_data(TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& cfg = s.plan.config;
  phase(s.runtime, [&] {
    if (s.runtime.world_rank() == 0) prepare_token_cache(o, s.plan.model.vocab_size, cfg.seq_len);
  });
  phase(s.runtime, [&] {
    s.dataset = open_dataset(o, s.plan.model.vocab_size, cfg.seq_len);
    s.sampler = std::make_unique<data::Sampler>(s.dataset->size(), cfg.global_batch_size, o.seed);
    if (cfg.global_batch_size % (cfg.dp * cfg.micro_batch_size) != 0)
      throw InputError(o.plan_path +
                       ": field 'config.global_batch_size': expected a multiple of dp x micro_batch_size");
  });
}

// The ZeRO engine, the run's layout (in checkpoints and report.json), the checkpointer and the
// loss scaler.
void setup_engine(TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& cfg = s.plan.config;
  OptimizerOptions oo{o.beta1, o.beta2, o.eps, o.weight_decay, o.clip_norm};
  s.engine = std::make_unique<ZeroEngine>(*s.model, *s.groups, cfg.zero_stage, oo, s.weight_dtype());
  s.layout = {{"model", s.plan.model.name},
              {"tp", cfg.tp},
              {"dp", cfg.dp},
              {"pp", cfg.pp},
              {"zero_stage", cfg.zero_stage},
              {"sharding_degree", cfg.shard_group()},
              {"lora_rank", cfg.lora.rank},
              {"init", o.init == "seed" ? "seed:" + std::to_string(o.seed) : o.init},
              {"schedule", simulator::to_string(cfg.schedule)},
              {"virtual_stages", cfg.virtual_stages},
              {"partition", s.model->options().layers_per_chunk},
              {"recompute", simulator::to_string(cfg.recompute)},
              {"offload_activations", !cfg.offload_activations ? "off"
                                      : s.device.is_cuda()     ? "checkpointed inputs to pinned host memory"
                                                               : "no-op on the cpu (inputs already in host memory)"}};
  if (cfg.ep > 1) s.layout["ep"] = cfg.ep;
  if (cfg.offload_optimizer) s.layout["offload_optimizer"] = "no-op on the cpu (states already in host memory)";
  if (cfg.cp > 1) s.layout["cp"] = {{"size", cfg.cp}, {"kind", simulator::to_string(cfg.cp_kind)}};
  s.checkpointer = std::make_unique<Checkpointer>(o, *s.groups, s.layout);
  if (cfg.lora.quantized_base())  // rank 0's NF4 base in report.json (not in checkpoints' layout: per rank)
    s.layout["nf4_base"] = {{"linears", s.nf4_base.linears},
                            {"weights", s.nf4_base.weights},
                            {"bytes", s.nf4_base.bytes},
                            {"source", o.init == "seed" ? "seeded init" : o.init}};
  s.scaler.enabled = s.precision == Precision::fp16 || o.loss_scaling;
  s.scaler.scale = o.initial_loss_scale;
}

// A checkpoint restored, if any: the step to start at and the loss scaler's state.
void setup_restore(TrainerState& s) {
  const RunOptions& o = s.opt;
  phase(s.runtime, [&] {
    if (auto st = s.checkpointer->restore(*s.engine)) {
      s.start_step = st->step;
      if (st->loss_scale > 0) s.scaler.scale = st->loss_scale;
      s.scaler.good_steps = st->good_steps;
      if (s.start_step >= o.steps)
        throw InputError("--steps " + std::to_string(o.steps) + ": the checkpoint is already at step " +
                         std::to_string(s.start_step));
    }
  });
}

// metrics.jsonl opened on rank 0.
void setup_metrics(TrainerState& s) {
  const RunOptions& o = s.opt;
  const auto& c = s.groups->coords();
  phase(s.runtime, [&] {
    if (c.world == 0) {
      fs::create_directories(o.out_dir);
      s.attempt = s.metrics.open((fs::path(o.out_dir) / "metrics.jsonl").string(), o.resume != "none");
    }
    // Rank 0 keeps the history; every rank learns which attempt this is.
    torch::Tensor attempt = torch::tensor({c.world == 0 ? s.attempt : 0}, torch::kInt).to(s.device);
    s.groups->world().all_reduce(attempt, ReduceOp::max);
    s.attempt = attempt.item<int>();
  });
}

// Rank 0's account of the run: ranks, device, data, parallelism, precision, resume and attempt, the
// pipeline, and an attention kernel the plan names but this build cannot run.
void print_setup_summary(const TrainerState& s) {
  const auto& cfg = s.plan.config;
  std::cerr << "shardrun: " << s.plan.model.name << " on " << s.runtime.world_size() << " rank(s), "
            << (s.device.is_cuda() ? describe_device(s.device) + " (rank 0)" : s.threads.describe()) << "; "
            << s.dataset->describe() << "\n";
  std::cerr << "shardrun: " << s.groups->describe() << "; ZeRO-" << cfg.zero_stage << ", precision "
            << simulator::to_string(s.precision)
            << (s.precision == Precision::fp32      ? ""
                : s.weight_dtype() == torch::kFloat ? " (autocast: fp32 weights)"
                                                    : " (16-bit weights and gradients, fp32 master weights)")
            << (s.start_step ? "; resumed at step " + std::to_string(s.start_step) : "")
            << (s.attempt > 1 ? "; attempt " + std::to_string(s.attempt) + " (metrics.jsonl keeps the earlier ones)"
                              : "")
            << "\n";
  if (cfg.pp > 1)
    std::cerr << "shardrun: pipeline: " << cfg.pp << " stages, schedule " << simulator::to_string(cfg.schedule)
              << (cfg.virtual_stages > 1 ? " with " + std::to_string(cfg.virtual_stages) + " chunks per stage" : "")
              << ", " << cfg.micro_batches() << " micro-batches\n";
  if (const AttentionRun a = attention_run(s.model->options()); !a.reason.empty())
    std::cerr << "shardrun: attention: " << a.kind << " (the plan's " << simulator::to_string(cfg.attention)
              << " cannot run: " << a.reason << ")\n";
}

// Rank 0's notes on what of the plan shardrun runs otherwise than the simulator predicts it, or
// as a no-op.
void print_setup_caveats(const TrainerState& s) {
  const auto& cfg = s.plan.config;
  if (cfg.zero3_fetch == simulator::Zero3Fetch::per_tensor_sync)
    std::cerr << "shardrun: zero3_fetch: per_tensor_sync replays DeepSpeed <= 0.4.0 in the simulator; shardrun "
                 "fetches unit by unit (prefetch), so its step is not that plan's prediction\n";
  if (cfg.fp32_grad_accum())
    std::cerr << "shardrun: grad_accum_dtype: fp32 replays DeepSpeed's BF16_Optimizer / Megatron's main_grad in the "
                 "simulator; shardrun accumulates in .grad (param), so its step and memory are not that plan's "
                 "prediction\n";
  if (cfg.packed_document_tokens > 0)
    std::cerr << "shardrun: packed_document_tokens: " << cfg.packed_document_tokens
              << " replays per-document attention in the simulator only; shardrun attends over the whole "
                 "sequence, so its step is not that plan's prediction\n";
  if (cfg.recompute != simulator::Recompute::none)
    std::cerr << "shardrun: activation recomputation: " << simulator::to_string(cfg.recompute) << "\n";
  if (cfg.offload_optimizer)
    std::cerr << "shardrun: offload_optimizer: a no-op on the CPU (the optimizer states already live in host memory, "
                 "and count in this rank's peak; the plan's prediction puts them in host memory)\n";
  if (cfg.offload_activations && !s.device.is_cuda())
    std::cerr << "shardrun: offload_activations: a no-op on the CPU (checkpointed layer inputs already live in host "
                 "memory)\n";
}

}  // namespace

Trainer::Trainer(MpiRuntime& runtime, RunOptions options)
    : s_(std::make_unique<TrainerState>(runtime, std::move(options))) {}

Trainer::~Trainer() = default;

int Trainer::run() {
  setup();
  train();
  finish();
  return s_->interrupted ? 130 : 0;
}

void Trainer::setup() {
  TrainerState& s = *s_;
  const RunOptions& o = s.opt;
  phase(s.runtime, [&] {
    s.plan = formats::load_plan(o.plan_path);
    s.precision = o.precision.empty() ? s.plan.config.precision : parse_precision(o.precision);
    s.mixed_precision =
        o.mixed_precision.empty() ? s.plan.config.mixed_precision : parse_mixed_precision(o.mixed_precision);
    s.device = pick_device(o.device, s.runtime.local_rank(), s.runtime.local_size(), /*training=*/true);
    make_current(s.device);  // before the NCCL communicators, which bind to the current device
    check_supported(s.plan, o.plan_path, s.precision, s.device);
    check_moe_supported(s.plan, o.plan_path);
    if (o.steps <= 0) throw InputError("--steps: expected a positive number of steps");
    if (o.moe_aux_loss_coeff < 0 || (o.moe_aux_loss_coeff > 0 && !s.plan.model.is_moe()))
      throw InputError(
          "--moe-aux-loss-coeff: expected 0, or a positive coefficient with a mixture-of-experts model "
          "(the plan's is '" +
          s.plan.model.name + "')");
    if (!o.save_nf4_base.empty() && !s.plan.config.lora.quantized_base())
      throw InputError("--save-nf4-base: the plan's base is not NF4 (config.lora.base nf4, QLoRA)");
    if (o.checkpoint_every < 0) s.opt.checkpoint_every = s.plan.prediction.goodput.interval_steps;  // the plan's
  });
  setup_process_groups(s);
  setup_model(s);
  setup_data(s);
  setup_engine(s);
  setup_restore(s);
  s.lr = LrSchedule{o.lr, o.lr * o.min_lr_ratio, o.warmup_steps, o.steps};
  setup_metrics(s);
  if (s.groups->coords().world == 0 && !o.quiet) {
    print_setup_summary(s);
    print_setup_caveats(s);
  }
  reset_peak_device_bytes(s.device);
}

}  // namespace shardplan::executor
