// The training loop and the end of a run (final checkpoint, report, exports).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "device.hpp"
#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"
#include "executor/metrics/op_trace.hpp"
#include "executor/metrics/run_history.hpp"
#include "executor/profile/kernel_bench.hpp"
#include "moe_support.hpp"
#include "nf4_export.hpp"
#include "pipeline_step.hpp"
#include "tensor_io.hpp"
#include "trainer.hpp"
#include "trainer_state.hpp"
#include "watchdog.hpp"

namespace shardplan::executor {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};

Batch make_batch(const data::Dataset& ds, const std::vector<int64_t>& idx, size_t first, size_t n) {
  const int64_t S = ds.seq_len();
  Batch b;
  b.ids = torch::empty({static_cast<int64_t>(n), S}, torch::kLong);
  b.labels = torch::empty({static_cast<int64_t>(n), S}, torch::kLong);
  auto* ids = b.ids.data_ptr<int64_t>();
  auto* labels = b.labels.data_ptr<int64_t>();
  for (size_t i = 0; i < n; ++i) {
    const data::Sample s = ds.get(idx[first + i]);
    std::copy(s.input.begin(), s.input.end(), ids + i * S);
    std::copy(s.labels.begin(), s.labels.end(), labels + i * S);
    for (int64_t l : s.labels) b.tokens += l != data::kIgnoreLabel;
  }
  return b;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double dp_seconds(const ProcessGroups& g) {
  return g.dp().stats().seconds + g.shard().stats().seconds + g.replica().stats().seconds +
         g.expert_data().stats().seconds;
}

struct Fault {
  std::string kind;  // hang | exit | overflow | throw; empty = none
  int rank = -1;
  int64_t step = -1;  // 1-based
  [[nodiscard]] bool is(const char* k, int at_rank, int64_t at_step) const {
    return kind == k && rank == at_rank && step == at_step;
  }
};

// --inject-fault KIND:RANK:STEP; a malformed spec is the same InputError on every rank.
Fault parse_fault(const std::string& spec) {
  if (spec.empty()) return {};
  char kind[10] = {0};
  int at_rank = -1;
  long long at_step = -1;
  const std::string k = std::sscanf(spec.c_str(), "%9[a-z]:%d:%lld", kind, &at_rank, &at_step) == 3 ? kind : "";
  if (k != "hang" && k != "exit" && k != "stall" && k != "overflow" && k != "throw" &&
      k != "ckptkill")  // ckptkill: the Checkpointer's
    throw InputError(
        "--inject-fault: expected hang:RANK:STEP, exit:RANK:STEP, stall:RANK:STEP, overflow:RANK:STEP, "
        "throw:RANK:STEP or ckptkill:RANK:STEP, got '" +
        spec + "'");
  return {kind, at_rank, at_step};
}

// hang, exit and stall apply at the start of STEP (stall in the run's first attempt only, so
// that the relaunch runs through); overflow (the rank's scaled loss gradient infinite in STEP,
// as an fp16 overflow would make it) and throw (an exception halfway through the rank's
// pipeline schedule) are applied by the pipeline step.
void maybe_inject_fault(const Fault& f, int rank, int64_t step, int attempt) {
  const bool stall = f.is("stall", rank, step) && attempt == 1;
  if (!f.is("hang", rank, step) && !f.is("exit", rank, step) && !stall) return;
  std::fprintf(stderr, "shardrun: rank %d: injected fault '%s' at step %lld\n", rank, f.kind.c_str(),
               static_cast<long long>(f.step));
  if (f.kind == "exit") std::raise(SIGKILL);                      // as kill -9 would
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hang / stall: never join a collective again
}

}  // namespace

void request_stop() { g_stop = true; }

namespace {

// Context parallelism: this rank's positions of every sequence; only its own targets count.
void keep_cp_positions(Batch& b, const CpContext& cp) {
  const torch::Tensor pos = cp_positions(b.ids.size(1), cp, torch::kCPU);
  b.ids = b.ids.index_select(1, pos);
  b.labels = b.labels.index_select(1, pos);
  b.tokens = b.labels.ne(data::kIgnoreLabel).sum().item<int64_t>();
}

// The rank's micro-batches of `step` and the target tokens of the whole global batch (summed
// over the dp x cp ranks: each counts its own).
std::vector<Batch> load_step(TrainerState& s, int64_t step, double& global_tokens) {
  const auto& cfg = s.plan.config;
  const auto mbs = static_cast<size_t>(cfg.micro_batch_size);
  // The step's data (and dropout masks) are functions of (seed, step): nothing else to restore.
  const auto idx = s.sampler->rank_batch(step, s.groups->coords().dp, cfg.dp);
  std::vector<Batch> batches;
  int64_t mine = 0;
  for (int mb = 0; mb < cfg.micro_batches(); ++mb) {
    Batch b = make_batch(*s.dataset, idx, static_cast<size_t>(mb) * mbs, mbs);
    if (s.model->options().cp.active()) keep_cp_positions(b, s.model->options().cp);
    mine += b.tokens;
    b.ids = b.ids.to(s.device);
    b.labels = b.labels.to(s.device);
    batches.push_back(std::move(b));
  }
  torch::Tensor tokens = torch::tensor({mine}, torch::kLong).to(s.device);
  s.groups->dp().all_reduce(tokens, ReduceOp::sum);
  global_tokens = static_cast<double>(std::max<int64_t>(1, tokens.item<int64_t>()));
  return batches;
}

// Every rank's pipeline figures, reduced per stage (the slowest / fullest rank of each).
void record_pipeline(TrainerState& s, const PipelineFigures& f, StepRecord& r) {
  constexpr int kFields = 8;
  const int world = s.groups->world().size(), stages = s.plan.config.pp;
  torch::Tensor mine = torch::tensor({static_cast<double>(s.groups->coords().pp), f.bubble_s, f.p2p_s,
                                      static_cast<double>(f.peak_in_flight_bytes), static_cast<double>(f.max_in_flight),
                                      f.forward_s, f.input_grad_s, f.weight_grad_s},
                                     torch::kDouble)
                           .to(s.device);
  torch::Tensor all = torch::empty({world * kFields}, torch::TensorOptions().dtype(torch::kDouble).device(s.device));
  s.groups->world().all_gather(all, mine);
  all = all.cpu();
  for (auto* v : {&r.stage_bubble_s, &r.stage_p2p_s, &r.stage_in_flight_bytes, &r.stage_forward_s,
                  &r.stage_input_grad_s, &r.stage_weight_grad_s})
    v->assign(static_cast<size_t>(stages), 0.0);
  r.stage_max_in_flight.assign(static_cast<size_t>(stages), 0);
  const auto a = all.accessor<double, 1>();
  for (int i = 0; i < world; ++i) {
    const auto at = [&](int k) { return a[i * kFields + k]; };
    const auto st = static_cast<size_t>(at(0));
    r.stage_bubble_s[st] = std::max(r.stage_bubble_s[st], at(1));
    r.stage_p2p_s[st] = std::max(r.stage_p2p_s[st], at(2));
    r.stage_in_flight_bytes[st] = std::max(r.stage_in_flight_bytes[st], at(3));
    r.stage_max_in_flight[st] = std::max(r.stage_max_in_flight[st], static_cast<int>(at(4)));
    r.stage_forward_s[st] = std::max(r.stage_forward_s[st], at(5));
    r.stage_input_grad_s[st] = std::max(r.stage_input_grad_s[st], at(6));
    r.stage_weight_grad_s[st] = std::max(r.stage_weight_grad_s[st], at(7));
  }
  r.pp_comm_s = f.bubble_s + f.p2p_s;
}

void print_step(const StepRecord& r, int64_t steps) {
  std::fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.2e  |grad| %.3f  %.0f tok/s  %.3f s (tp %.3f, dp %.3f)%s\n",
               static_cast<long long>(r.step), static_cast<long long>(steps), r.loss, r.lr, r.grad_norm, r.tokens_per_s,
               r.step_s, r.tp_comm_s, r.dp_comm_s, r.skipped ? "  [skipped: non-finite]" : "");
}

// Checkpoint if due; returns false when the run must stop here (interrupt or --stop-after).
bool end_of_step(TrainerState& s) {
  // Interrupts are agreed on collectively so every rank stops at the same step boundary.
  torch::Tensor stop = torch::tensor({g_stop.load() ? 1 : 0}, torch::kInt).to(s.device);
  s.groups->world().all_reduce(stop, ReduceOp::max);
  const bool interrupted = stop.item<int>() != 0;
  const bool last = s.done_steps == s.opt.steps;
  const bool due = s.opt.checkpoint_every > 0 && s.done_steps % s.opt.checkpoint_every == 0;
  if (s.checkpointer->enabled() && (due || last || interrupted))
    s.checkpointer->save(*s.engine, {s.done_steps, s.engine->adam_step(), s.scaler.scale, s.scaler.good_steps, {}});
  s.interrupted = interrupted;
  s.stopped_early = !interrupted && !last && s.opt.stop_after >= 0 && s.done_steps >= s.opt.stop_after;
  return !s.interrupted && !s.stopped_early;
}

// The machine's speed now: the profile's reference GEMM (a few tens of milliseconds), the slowest
// rank's, as the profile takes it. validate sets it beside the profile's own, so a run on a slowed
// machine shows as one.
double reference_gemm(TrainerState& s) {
  BenchContext ctx;
  ctx.device = s.device;
  ctx.combine = [&s](double t) {
    torch::Tensor v = torch::tensor({t}, torch::kDouble).to(s.device);
    s.groups->world().all_reduce(v, ReduceOp::max);
    return v.item<double>();
  };
  return reference_gemm_seconds(ctx);
}

}  // namespace

void Trainer::train() {
  TrainerState& s = *s_;
  const auto& c = s.groups->coords();
  const Fault fault = parse_fault(s.opt.inject_fault);
  StepTimer timer(s.device);       // CUDA: events around the step
  std::unique_ptr<OpTrace> trace;  // rank 0, the steps after the first
  Watchdog watchdog(stall_limit_s(s.opt.stall_factor, s.plan.prediction.time.step_s, s.opt.stall_min_s), c.world);
  s.reference_gemm_start_s = reference_gemm(s);
  reset_peak_device_bytes(s.device);  // the reference GEMM's buffers are not the run's
  for (int64_t step = s.start_step; step < s.opt.steps; ++step) {
    watchdog.phase("between steps");
    maybe_inject_fault(fault, c.world, step + 1, s.attempt);
    if (!s.opt.trace.empty() && c.world == 0 && step == s.start_step + 1)
      trace = std::make_unique<OpTrace>(s.opt.trace, s.device.is_cuda());
    timer.start();
    const double tp0 = s.groups->tp().stats().seconds, dp0 = dp_seconds(*s.groups);
    const double cp0 = s.groups->cp().stats().seconds;
    const double a2a0 = moe_a2a_seconds();
    s.model->moe_stats() = {};
    double global_tokens = 0;
    watchdog.phase("loading the step's data (and its token count all-reduce)");
    const std::vector<Batch> batches = load_step(s, step, global_tokens);
    s.engine->begin_step();
    // Aux losses reach the router with the LM loss's multiplier, averaged over the global
    // batch's micro-batches (moe_aux_loss.hpp).
    set_moe_aux_loss_scale(s.scaler.loss_multiplier() /
                           static_cast<double>(s.plan.config.global_batch_size / s.plan.config.micro_batch_size));
    StepFaults faults;
    faults.overflow = fault.is("overflow", c.world, step + 1);
    if (fault.is("throw", c.world, step + 1)) faults.throw_at_op = static_cast<int>(s.pipeline_ops.size() / 2);
    watchdog.phase("forward and backward (the pipeline schedule, its p2p and TP/ZeRO collectives)");
    const PipelineStepResult pipe = run_pipeline_step(s, step, batches, global_tokens, faults);

    StepRecord r;
    r.step = step + 1;
    r.lr = s.lr.at(step);
    watchdog.phase("optimizer step (gradient sync, clipping, AdamW)");
    // CUDA: the backward pass's queued kernels finish here and stay compute; else the optimizer's
    // first host wait (or a collective's) would carry them. One drain a step, a few microseconds.
    synchronize_device(s.device);
    const auto t_opt = Clock::now();
    const double dp_before_opt = dp_seconds(*s.groups);
    const StepOutcome res = s.engine->step(r.lr, 1.0 / s.scaler.loss_multiplier());
    r.optimizer_s = seconds_since(t_opt) - (dp_seconds(*s.groups) - dp_before_opt);  // without its communication
    r.skipped = !s.scaler.update(res.finite);
    // The loss lives on the stage holding the head (the last; the first in a V), whole on every
    // tp rank: sum it over dp there.
    const auto& chunks = s.model->chunks();
    const bool counts =
        c.tp == 0 && std::any_of(chunks.begin(), chunks.end(), [](const ModelChunk& k) { return k.last; });
    torch::Tensor loss_t = torch::tensor({counts ? pipe.loss_sum : 0.0}, torch::kDouble).to(s.device);
    s.groups->world().all_reduce(loss_t, ReduceOp::sum);
    r.loss = loss_t.item<double>() / global_tokens;
    record_pipeline(s, pipe.figures, r);
    r.grad_norm = res.grad_norm;
    r.tokens = static_cast<int64_t>(global_tokens);
    r.step_s = timer.seconds();
    r.tp_comm_s = s.groups->tp().stats().seconds - tp0;
    r.dp_comm_s = dp_seconds(*s.groups) - dp0;
    record_moe(s, a2a0, r);  // moe_support.hpp
    r.cp = s.plan.config.cp > 1;
    r.cp_comm_s = s.groups->cp().stats().seconds - cp0;
    r.compute_s = r.step_s - r.tp_comm_s - r.dp_comm_s - r.optimizer_s - r.pp_comm_s - r.a2a_s - r.cp_comm_s;
    r.tokens_per_s = global_tokens / r.step_s;
    r.loss_scale = s.scaler.loss_multiplier();
    r.peak_bytes = peak_device_bytes(s.device);
    s.records.push_back(r);
    s.metrics.write(r);
    s.done_steps = step + 1;
    watchdog.step_done();
    if (c.world == 0 && !s.opt.quiet) print_step(r, s.opt.steps);
    watchdog.phase("end of step (stop agreement, checkpoint)");
    if (!end_of_step(s)) break;
  }
  if (trace) trace->finish(static_cast<int>(s.done_steps - s.start_step - 1));
}

void Trainer::finish() {
  TrainerState& s = *s_;
  const auto& c = s.groups->coords();
  if (s.stopped_early) {
    if (c.world == 0 && !s.opt.quiet)
      std::cerr << "shardrun: stopped after step " << s.done_steps << " (--stop-after)\n";
    return;
  }
  torch::Tensor peak = torch::tensor({peak_device_bytes(s.device)}, torch::kLong).to(s.device);
  s.reference_gemm_end_s = reference_gemm(s);  // after the peak is read: its buffers are not the run's
  const auto i64 = torch::TensorOptions().dtype(torch::kLong).device(s.device);
  torch::Tensor peaks = torch::empty({s.groups->world().size()}, i64);
  s.groups->world().all_gather(peaks, peak);
  peaks = peaks.cpu();
  if (!s.opt.save_final.empty()) export_full_weights(*s.model, *s.engine, *s.groups, s.opt.save_final);
  if (!s.opt.save_adapter.empty()) export_lora_adapter(*s.model, *s.engine, *s.groups, s.opt.save_adapter);
  if (!s.opt.save_nf4_base.empty()) export_nf4_base(*s.model, *s.engine, *s.groups, s.opt.save_nf4_base);
  if (c.world != 0) return;
  ReportInputs in;
  in.plan_path = s.opt.plan_path;
  in.model = s.plan.model.name;
  in.world_size = s.groups->world().size();
  in.layout = s.layout;
  in.precision = {{"compute", simulator::to_string(s.precision)},
                  {"weights", s.weight_dtype() == torch::kFloat ? "fp32" : simulator::to_string(s.precision)},
                  {"optimizer", "fp32"}};
  const AttentionRun attention = attention_run(s.model->options());
  in.attention = {{"planned", simulator::to_string(s.plan.config.attention)},
                  {"ran", attention.kind},
                  {"reason", attention.reason}};
  in.steps = s.records;
  for (int64_t i = 0; i < peaks.numel(); ++i) in.peak_bytes_per_rank.push_back(peaks[i].item<int64_t>());
  in.memory_source = memory_source(s.device);
  in.device = describe_device(s.device);
  in.threads_per_rank = s.threads.threads;
  in.blas_kernels = s.device.is_cpu() ? s.threads.blas_kernels : "";
  in.cpu_gemm = s.device.is_cpu() ? s.threads.cpu_gemm : "";
  in.schedule = simulator::to_string(s.plan.config.schedule);
  in.prediction = s.plan.prediction;
  in.reference_gemm_start_s = s.reference_gemm_start_s;
  in.reference_gemm_end_s = s.reference_gemm_end_s;
  in.attempts = summarize_attempts(read_metrics((fs::path(s.opt.out_dir) / "metrics.jsonl").string()));
  const nlohmann::json report = build_report(in);
  io::atomic_write_file((fs::path(s.opt.out_dir) / "report.json").string(), report.dump(2) + "\n");
  if (!s.opt.quiet) {
    const auto& me = report["measured"];
    const auto& pr = report["predicted"];
    std::fprintf(stderr,
                 "shardrun: done: %lld steps, loss %.4f -> %.4f\n"
                 "                     %14s %14s\n"
                 "  step time [s]      %14.4f %14.4f\n"
                 "  tokens/s           %14.0f %14.0f\n"
                 "  peak memory [MiB]  %14.1f %14.1f\n"
                 "  step time error %+.1f %% (predicted vs measured median); steps ran %.4f-%.4f s (10th-90th "
                 "percentile: the machine's noise, %.1f %% of the median)\n"
                 "  report: %s\n",
                 static_cast<long long>(s.records.size()), me["first_loss"].get<double>(),
                 me["final_loss"].get<double>(), "measured", "predicted", me["step_seconds"].get<double>(),
                 pr["step_seconds"].get<double>(), me["tokens_per_second"].get<double>(),
                 pr["tokens_per_second"].get<double>(), me["peak_memory_bytes"].get<double>() / 1048576.0,
                 pr["peak_memory_bytes"].get<double>() / 1048576.0,
                 100 * (pr["step_seconds"].get<double>() / std::max(me["step_seconds"].get<double>(), 1e-12) - 1),
                 me["step_seconds_p10"].get<double>(), me["step_seconds_p90"].get<double>(),
                 100 * (me["step_seconds_p90"].get<double>() - me["step_seconds_p10"].get<double>()) /
                     std::max(me["step_seconds"].get<double>(), 1e-12),
                 (fs::path(s.opt.out_dir) / "report.json").string().c_str());
  }
}

}  // namespace shardplan::executor
