#pragma once
// RunOptions: everything `shardrun` takes besides the plan (which fixes the model, the
// layout and the batch). Plain data; the CLI fills it, the trainer reads it.
#include <cstdint>
#include <optional>
#include <string>

namespace shardplan::executor {

struct RunOptions {
  std::string plan_path;
  int64_t steps = 20;
  // Data: "synthetic", text files (comma-separated .txt), or one Alpaca-style .jsonl.
  std::string data = "synthetic";
  std::string tokenizer;  // sentencepiece tokenizer.model (text and jsonl data)
  int64_t synthetic_samples = 65536;
  // Weights: "seed" (seeded init) or Hugging Face safetensors (file or directory).
  std::string init = "seed";
  uint64_t seed = 1234;
  // Optimizer and schedule.
  double lr = 3e-4;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = 2;
  double weight_decay = 0.1;
  double clip_norm = 1.0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  std::string precision;              // override the plan's: fp32 | bf16 | fp16
  std::string mixed_precision;        // override the plan's: master_weights | autocast
  double initial_loss_scale = 65536;  // fp16 (and --loss-scaling) only
  bool loss_scaling = false;          // dynamic loss scaling even without fp16
  std::optional<double> dropout;      // override the card's hidden/attention dropout
  double moe_aux_loss_coeff = 0;      // MoE load-balancing auxiliary loss (0: none)
  // Outputs.
  std::string out_dir = "shardrun-out";  // metrics.jsonl, report.json
  std::string save_final;                // full weights, Hugging Face naming (.safetensors)
  std::string save_adapter;              // LoRA adapter directory (PEFT format)
  std::string save_nf4_base;             // QLoRA: the NF4 base as bitsandbytes serialises it (.safetensors)
  // Checkpoints.
  std::string checkpoint_dir;
  // Steps; 0 = only at the end (when a dir is given); -1 (not given) = the plan's optimal
  // interval (plan prediction's goodput.interval_steps, simulator/goodput.hpp).
  int64_t checkpoint_every = -1;
  int keep_last = 2;
  std::string resume = "none";  // none | auto | <checkpoint step directory>
  int64_t stop_after = -1;      // leave after this many steps (as an interrupted job)
  // Runtime.
  std::string device = "auto";  // auto | cpu | cuda (one GPU per rank on the node)
  int threads = 0;              // per rank; 0 = cores on the node / ranks on the node
  double comm_timeout_s = 300;
  // Progress watchdog (run/watchdog.hpp): no step for max(factor x predicted step, min) seconds
  // ends the rank with exit 75; both <= 0 disables it.
  double stall_factor = 20;
  double stall_min_s = 600;
  bool quiet = false;
  // Fault injection for resilience tests: "hang:RANK:STEP" (the rank stops taking part before
  // that step; its peers' collectives time out), "exit:RANK:STEP" (the rank dies abruptly) or
  // "overflow:RANK:STEP" (the rank's gradients become infinite in that step, as on fp16 overflow)
  // or "stall:RANK:STEP" (the rank stops making progress outside any collective, in the run's
  // first attempt only, for the watchdog to catch) or "ckptkill:RANK:STEP" (SIGKILL while the rank writes its shard of
  // the step-STEP checkpoint, after part of it is on disk and before the manifest commits it; run/checkpointing.cpp).
  std::string inject_fault;
  // Operator-level trace of rank 0's steps after the first (LibTorch's profiler, Chrome trace
  // format): where a step's time goes, op by op, to check the simulator's per-op costs.
  std::string trace;
};

}  // namespace shardplan::executor
