// shardrun: train from a shardplan plan, under mpirun (one process per device).
//   mpirun -np N shardrun --plan plan.json [--data ...] [--steps 20] [--out-dir run/]
//   [mpirun -np N] shardrun profile [--out measured.json] [--quick]   (measure this machine)
//   mpirun -np N shardrun health [--comm-timeout 30]   (device + all-reduce check of every rank)
// Exit codes: 0 done, 2 bad input (printed once, by rank 0), 3 internal error, 4 communication
// failure (the job is aborted so no rank waits), 130 interrupted (checkpoint written if a
// directory was given).
#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>

#include "executor/comm/mpi_runtime.hpp"
#include "executor/errors.hpp"
#include "executor/health/health_check.hpp"
#include "executor/metrics/memory_accounting.hpp"
#include "executor/profile/profile.hpp"
#include "executor/run/trainer.hpp"

namespace ex = shardplan::executor;

namespace {

void on_signal(int) {
  ex::request_stop();
  ex::request_profile_stop();
}

void add_profile_options(CLI::App& app, ex::ProfileOptions& o) {
  app.add_option("--out", o.out, "Where the measured profile (hardware_profiles/ schema) is written");
  app.add_option("--base", o.base, "Profile the unmeasured figures (network, price, ...) come from")
      ->default_str("local-cpu-2core");
  app.add_option("--name", o.name, "Name of the written profile (default: <hostname>-measured)");
  app.add_option("--dtypes", o.dtypes, "GEMM dtypes, comma-separated, fp32 first (default fp32,bf16; +fp16 on CUDA)");
  app.add_option("--device", o.device, "auto | cpu | cuda");
  app.add_option("--min-time", o.min_time_s, "Seconds each measurement runs (after a warm-up call)");
  app.add_option("--repeats", o.repeats,
                 "Passes over the kernels and the host overhead, minutes apart; each "
                 "figure is their median (a noisy machine: 3)")
      ->check(CLI::Range(1, 9));
  app.add_option("--threads", o.threads, "Threads per rank (0 = cores / ranks on the node)");
  app.add_option("--comm-timeout", o.comm_timeout_s, "Seconds before a collective is declared hung");
  app.add_flag("--quick", o.quick, "Small grids and short timings (a smoke test, not a profile to plan with)");
  app.add_flag("--quiet", o.quiet, "No progress lines");
}

// `shardrun profile ...`: its own option set; returns the exit code.
int profile_main(ex::MpiRuntime& runtime, int argc, char** argv) {
  const bool lead = runtime.world_rank() == 0;
  CLI::App app{"shardrun profile: measure this machine and write a hardware profile (under mpirun for links)"};
  ex::ProfileOptions options;
  add_profile_options(app, options);
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    const int code = lead ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    return code == 0 ? 0 : 2;
  }
  return ex::run_profile(runtime, options);
}

// `shardrun health ...`: returns the exit code (0 healthy, 1 a check failed, 2 bad options).
int health_main(ex::MpiRuntime& runtime, int argc, char** argv) {
  CLI::App app{"shardrun health: check every rank's device and a short all-reduce (under mpirun)"};
  ex::HealthOptions o;
  app.add_option("--comm-timeout", o.comm_timeout_s, "Seconds before the all-reduce is declared hung");
  app.add_option("--allreduce-mib", o.allreduce_mib, "All-reduce payload, MiB");
  app.add_option("--device", o.device, "auto | cpu | cuda");
  app.add_option("--out", o.out, "Write the per-rank report (JSON) here");
  app.add_option("--inject-fault", o.inject_fault, "Testing: hang:RANK or fail:RANK");
  app.add_flag("--quiet", o.quiet, "Only failing ranks and the verdict");
  try {
    app.parse(argc - 1, argv + 1);
  } catch (const CLI::ParseError& e) {
    const int code = runtime.world_rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    return code == 0 ? 0 : 2;
  }
  return ex::run_health_check(runtime, o);
}

void add_options(CLI::App& app, ex::RunOptions& o) {
  app.add_option("--plan", o.plan_path, "plan.json written by `shardplan plan --out`")->required();
  app.add_option("--steps", o.steps, "Training steps (optimizer updates)");
  app.add_option("--data", o.data, "synthetic | text files or folders (comma-separated) | Alpaca-style .jsonl");
  app.add_option("--tokenizer", o.tokenizer, "sentencepiece tokenizer.model (text and JSONL data)");
  app.add_option("--synthetic-samples", o.synthetic_samples, "Samples in the synthetic data set");
  app.add_option("--init", o.init, "seed (seeded init) or Hugging Face safetensors file/directory");
  app.add_option("--seed", o.seed, "Seed of the init, the data order and dropout");
  app.add_option("--lr", o.lr, "Peak learning rate");
  app.add_option("--min-lr-ratio", o.min_lr_ratio, "Final learning rate / peak (cosine decay)");
  app.add_option("--warmup-steps", o.warmup_steps, "Linear warm-up steps");
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (not on biases and norms)");
  app.add_option("--clip-grad", o.clip_norm, "Clip the global gradient norm to this (0 = off)");
  app.add_option("--precision", o.precision, "Override the plan's precision: fp32 | bf16 | fp16");
  app.add_option("--mixed-precision", o.mixed_precision,
                 "Override the plan's mixed-precision recipe: master_weights (16-bit weights and gradients, fp32 "
                 "master in the optimizer) | autocast (fp32 weights, 16-bit matmuls)");
  app.add_flag("--loss-scaling", o.loss_scaling, "Dynamic loss scaling even without fp16");
  app.add_option("--initial-loss-scale", o.initial_loss_scale, "Starting loss scale (fp16 / --loss-scaling)");
  app.add_option("--dropout", o.dropout, "Override the card's hidden and attention dropout");
  app.add_option("--moe-aux-loss-coeff", o.moe_aux_loss_coeff,
                 "MoE cards: the load-balancing auxiliary loss's coefficient (Switch Transformer; Megatron's "
                 "--moe-aux-loss-coeff, e.g. 1e-2); 0 (default): none");
  app.add_option("--out-dir", o.out_dir, "Where metrics.jsonl and report.json go");
  app.add_option("--save-final", o.save_final, "Write the trained weights (Hugging Face names) to this .safetensors");
  app.add_option("--save-adapter", o.save_adapter, "Write the LoRA adapter (PEFT format) to this directory");
  app.add_option("--save-nf4-base", o.save_nf4_base,
                 "QLoRA: write the frozen NF4 base (bitsandbytes' Linear4bit serialisation) to this .safetensors");
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "Sharded checkpoints go here");
  app.add_option(
      "--checkpoint-every", o.checkpoint_every,
      "Checkpoint every N steps (and at the end); default: the plan's optimal interval (checkpoint.interval_steps), "
      "0 = only at the end");
  app.add_option("--keep-last", o.keep_last, "Complete checkpoints to keep (0 = all)");
  app.add_option("--resume", o.resume, "none | auto (latest valid in --checkpoint-dir) | a checkpoint directory");
  app.add_option("--stop-after", o.stop_after, "Leave after this many steps, as an interrupted job would");
  app.add_option("--device", o.device, "auto (a GPU per rank when LibTorch sees CUDA) | cpu | cuda");
  app.add_option("--threads", o.threads, "Threads per rank (0 = cores / ranks on the node)");
  app.add_option("--comm-timeout", o.comm_timeout_s, "Seconds before a collective is declared hung");
  app.add_option("--stall-factor", o.stall_factor,
                 "Watchdog: a rank with no step for max(this x the plan's predicted step time, --stall-min-s) seconds "
                 "names its phase and exits 75 (restartable); both <= 0 disable it");
  app.add_option("--stall-min-s", o.stall_min_s, "Watchdog: the shortest stall limit, seconds");
  app.add_flag("--quiet", o.quiet, "No progress lines");
  app.add_option("--inject-fault", o.inject_fault,
                 "Resilience testing: hang:RANK:STEP, exit:RANK:STEP (SIGKILL), "
                 "stall:RANK:STEP (no progress outside any collective, first attempt only), overflow:RANK:STEP, "
                 "or ckptkill:RANK:STEP (SIGKILL while writing the checkpoint of STEP)");
  app.add_option("--trace", o.trace,
                 "Write rank 0's per-op time table (op, input shapes, calls, self seconds per step) of the steps after "
                 "the first here (JSON)");
}

}  // namespace

int main(int argc, char** argv) {
  ex::install_memory_accounting();  // before any tensor exists
  (void)ex::keep_freed_host_memory();
  ex::MpiRuntime runtime(&argc, &argv);
  const bool lead = runtime.world_rank() == 0;
  const bool profile = argc > 1 && std::string(argv[1]) == "profile";
  const bool health = argc > 1 && std::string(argv[1]) == "health";
  CLI::App app{"shardrun: train a model from a shardplan plan (launch with mpirun -np <ranks>)"};
  ex::RunOptions options;
  add_options(app, options);
  if (!profile && !health) {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int code = lead ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
      return code == 0 ? 0 : 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  try {
    if (profile) return profile_main(runtime, argc, argv);
    if (health) return health_main(runtime, argc, argv);
    ex::Trainer trainer(runtime, options);
    return trainer.run();
  } catch (const ex::InputError& e) {
    if (lead) std::cerr << "shardrun: error: " << e.what() << "\n";
    return 2;
  } catch (const ex::CommError& e) {
    std::cerr << "shardrun: rank " << runtime.world_rank() << ": error: " << e.what() << "; aborting the job\n";
    ex::MpiRuntime::abort(4);
  } catch (const c10::Error& e) {
    std::cerr << "shardrun: rank " << runtime.world_rank() << ": internal error: " << e.what_without_backtrace()
              << "; aborting the job\n";
    ex::MpiRuntime::abort(3);
  } catch (const std::exception& e) {
    std::cerr << "shardrun: rank " << runtime.world_rank() << ": internal error: " << e.what()
              << "; aborting the job\n";
    ex::MpiRuntime::abort(3);
  }
}
