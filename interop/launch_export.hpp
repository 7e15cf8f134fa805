#pragma once
// Launch exports: turn a Plan into what starts a training job — an mpirun line and a Slurm batch
// script for the executor `shardrun`, and the equivalent settings for other stacks (DeepSpeed
// ds_config, Megatron-LM arguments, SageMaker model parallel v1 parameters).
//
// Everything a script embeds from user input (plan path, data and checkpoint paths, hostfile,
// job name, model name, extra arguments) goes through shell_quote(); values sbatch reads itself
// (`#SBATCH` lines) are reduced to safe tokens or validated, since sbatch does not parse shell
// quotes and a newline there would end the comment.
//
// What a format cannot express is listed by its *_notes() function (written into NOTES.txt by
// export_all, and into "shardplan_note" of the ds_config).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/plan.hpp"

namespace shardplan::interop {

using formats::Plan;

// Arguments of the executor (`shardrun --plan P [--steps N] [--data D] [--checkpoint-dir C]
// [--resume auto] extra...`).
struct ShardrunArgs {
  std::string executable = "shardrun";
  long long steps = 0;             // --steps; 0 = omitted (the executor's default)
  std::string data;                // --data; empty = omitted
  std::string checkpoint_dir;      // --checkpoint-dir; empty = omitted (Slurm: "checkpoints")
  bool resume_auto = false;        // --resume auto (the Slurm script always passes it)
  std::vector<std::string> extra;  // appended last, each shell-quoted
};

struct MpirunOptions {
  std::string hostfile;     // --hostfile; empty = omitted (mpirun's default hosts)
  int omp_num_threads = 0;  // 0 = default_omp_threads(cluster)
  ShardrunArgs run;
};

struct SlurmOptions {
  std::string job_name;                 // empty = "shardplan-<model>"; #SBATCH gets safe_token()
  std::string time_limit = "24:00:00";  // sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
  int max_retries = 3;                  // relaunches after a failed attempt (0 = none)
  int retry_delay_s = 30;               // pause before the first relaunch; doubles each time
  int retry_delay_max_s = 600;          // longest pause before a relaunch
  std::string srun_mpi = "pmix";        // srun --mpi=<this> (OpenMPI direct launch); empty = omitted
  bool health_check = true;             // `srun shardrun health` before each relaunch
  int health_timeout_s = 60;            // its --comm-timeout
  std::string log_dir = "logs";         // one log file per attempt
  std::string partition;                // #SBATCH --partition; empty = omitted
  std::string account;                  // #SBATCH --account; empty = omitted
  int omp_num_threads = 0;              // 0 = default_omp_threads(cluster)
  ShardrunArgs run;                     // checkpoint_dir empty = "checkpoints"; --resume auto always
};

// Whether the hardware is a Slurm GPU (gres) kind: the device name contains NVIDIA, A100, H100
// or A10G (case-insensitive). Gaudi and Trainium devices are not.
bool is_gpu_hardware(const simulator::HardwareProfile& hw);
// Host CPU cores per device (at least 1): OMP_NUM_THREADS for one rank.
int default_omp_threads(const simulator::ClusterSpec& cluster);

// `mpirun -np <devices> --map-by ppr:<per node>:node [--hostfile H] -x OMP_NUM_THREADS=<n>
// shardrun --plan <plan> ...` on one line (no trailing newline). Throws InputError on bad options.
std::string mpirun_command(const Plan& plan, const std::string& plan_path, const MpirunOptions& options = {});

// An sbatch script (bash, `set -euo pipefail`) with a bounded auto-resume loop, the Slurm
// counterpart of shardrun-launch: each attempt runs `srun --mpi=pmix shardrun --plan ...
// --checkpoint-dir ... --resume auto`, logs to <log_dir>/<job id>-attempt-<k>.log; exit 0 ends
// the job, exit 2 (bad input) ends it at once, any other failure is relaunched (resuming from
// the latest checkpoint) up to max_retries times after an exponential back-off and, unless
// disabled, `srun shardrun health` (a failed health check counts as a failed attempt); then the
// script exits with the failure's status.
// Throws InputError on a malformed time limit, partition or account, or negative counts.
std::string slurm_script(const Plan& plan, const std::string& plan_path, const SlurmOptions& options = {});

// DeepSpeed ds_config: batch sizes, zero_optimization (offload, MiCS, stage-3 buckets sized from
// the hidden size), bf16/fp16, gradient_clipping 1.0, activation_checkpointing when recomputing,
// tensor_parallel.autotp_size (tp > 1), pipeline.stages (pp > 1), and "shardplan_note".
// InputError for recompute op_sac (torchtitan_only_recompute); so megatron_args (also for every
// N-th block) and smp_parameters;
// InputError for an embedding-only first or head-only last stage (no ds_config key says so).
nlohmann::json deepspeed_config(const Plan& plan);
std::vector<std::string> deepspeed_notes(const Plan& plan);

// Megatron-LM (pretrain_gpt.py) arguments, one token per element, e.g.
// {"--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2", ...}.
std::vector<std::string> megatron_args(const Plan& plan);
std::vector<std::string> megatron_notes(const Plan& plan);
// Notes as '# ' comment lines, then `<launcher...> <args...>` shell-quoted with line
// continuations. Empty launcher = {"torchrun", "--nnodes", N, "--nproc-per-node", D,
// "pretrain_gpt.py"}.
std::string megatron_command_line(const Plan& plan, const std::vector<std::string>& launcher = {});

// SageMaker model parallel v1 "parameters" (distribution.smdistributed.modelparallel.parameters).
nlohmann::json smp_parameters(const Plan& plan);
std::vector<std::string> smp_notes(const Plan& plan);

// Where a framework without an attention setting of its own (ds_config, SMP parameters) takes the
// plan's attention kind: the model code (Hugging Face attn_implementation, Megatron flags). One
// line, for the *_notes() lists.
std::string attention_note(simulator::AttentionKind kind);
// Why a framework that checkpoints whole blocks cannot run the plan's recompute, or empty:
// torchtitan's per-op policy (op_sac) never; full recompute of every N-th block only where the
// model code picks the checkpointed blocks (`model_code_picks_blocks`: DeepSpeed, SMP v1).
std::string torchtitan_only_recompute(const simulator::ParallelConfig& c, bool model_code_picks_blocks);
// What shardrun runs for the plan's attention kind, as a one-line comment text for the launch
// scripts (fused SDPA on CUDA with LibTorch >= 2, the explicit path elsewhere; report.json says).
std::string shardrun_attention_comment(const Plan& plan);

struct ExportOptions {
  MpirunOptions mpirun;
  SlurmOptions slurm;
};

// Writes, atomically, into `dir` (created if missing): launch_mpirun.sh, launch_slurm.sbatch, and
// every framework's files that can run the plan — ds_config.json, megatron_args.sh,
// torchtitan.toml + torchtitan_launch.sh, accelerate_fsdp.yaml + accelerate_launch.sh, smp_v2.json,
// smp_parameters.json (v1), neuron_launch.sh (Trainium plans), habana_ds_config.json +
// habana_launch.sh (Gaudi plans) — and NOTES.txt (what each cannot express, and which frameworks
// cannot run the plan and why; those reasons also go to `skipped`). A plan that names its
// framework (plan --framework) gets only that framework's files beside the launch scripts
// (shardrun: the launch scripts alone), unless the framework has no export of its own.
// `plan_path` is what the scripts pass to shardrun --plan. Returns the paths written.
std::vector<std::string> export_all(const Plan& plan, const std::string& dir, const std::string& plan_path,
                                    const ExportOptions& options = {}, std::vector<std::string>* skipped = nullptr);

}  // namespace shardplan::interop
