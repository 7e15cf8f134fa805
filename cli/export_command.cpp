// `shardplan export plan.json --out-dir DIR`: launch files for a plan (mpirun, Slurm with
// auto-resume, and every framework that can run it: DeepSpeed, Megatron-LM, torchtitan, Accelerate
// FSDP, SageMaker model parallel v2 and v1, NeuronX Distributed, Optimum-Habana).
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "formats/plan.hpp"
#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"

namespace shardplan::cli {

namespace {

struct ExportCli {
  std::string plan, out_dir, data, checkpoint_dir = "checkpoints", job_name, time_limit = "24:00:00", hostfile;
  std::string shardrun = "shardrun", srun_mpi = "pmix";
  long long steps = 0;
  int max_retries = 3, retry_delay = 30;
  std::vector<std::string> extra;
};

}  // namespace

Run add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export",
                                 "Write launch files for a plan (mpirun, Slurm, DeepSpeed, Megatron, torchtitan, "
                                 "Accelerate, SMP, NxD, Optimum-Habana)");
  auto o = std::make_shared<ExportCli>();
  cmd->add_option("plan", o->plan, "plan.json written by `shardplan plan --out`")->required();
  cmd->add_option("--out-dir", o->out_dir, "Directory for the launch files")->required();
  cmd->add_option("--steps", o->steps, "Training steps for shardrun (0 = its default)");
  cmd->add_option("--data", o->data, "Training data for shardrun");
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir, "Checkpoint directory (auto-resume reads it)");
  cmd->add_option("--job-name", o->job_name, "Slurm job name (default: from the model)");
  cmd->add_option("--time-limit", o->time_limit, "Slurm time limit");
  cmd->add_option("--max-retries", o->max_retries, "Relaunches from the latest checkpoint before giving up");
  cmd->add_option("--hostfile", o->hostfile, "MPI hostfile");
  cmd->add_option("--shardrun", o->shardrun, "shardrun executable the scripts run (default: shardrun on PATH)");
  cmd->add_option("--retry-delay", o->retry_delay, "Slurm: seconds before the first relaunch (doubles each time)");
  cmd->add_option("--srun-mpi", o->srun_mpi, "Slurm: srun --mpi= plugin (pmix for OpenMPI; '' to omit)");
  cmd->add_option("--shardrun-arg", o->extra, "Extra shardrun argument (repeatable), e.g. --shardrun-arg=--threads=1");
  return [o]() {
    const formats::Plan plan = formats::load_plan(o->plan);
    std::error_code ec;
    std::filesystem::create_directories(o->out_dir, ec);
    if (ec) throw simulator::InputError("--out-dir: cannot create '" + o->out_dir + "': " + ec.message());
    interop::ExportOptions opt;
    interop::ShardrunArgs run;
    run.steps = o->steps;
    run.data = o->data;
    run.checkpoint_dir = o->checkpoint_dir;
    run.resume_auto = true;
    run.executable = o->shardrun;
    run.extra = o->extra;
    opt.mpirun.hostfile = o->hostfile;
    opt.mpirun.run = run;
    opt.slurm.job_name = o->job_name.empty() ? plan.model.name : o->job_name;
    opt.slurm.time_limit = o->time_limit;
    opt.slurm.max_retries = o->max_retries;
    opt.slurm.retry_delay_s = o->retry_delay;
    opt.slurm.srun_mpi = o->srun_mpi;
    opt.slurm.run = run;
    std::vector<std::string> skipped;
    for (const auto& f : interop::export_all(plan, o->out_dir, o->plan, opt, &skipped))
      std::cout << "wrote " << f << "\n";
    for (const auto& s : skipped) std::cout << "not exported: " << s << "\n";
    return 0;
  };
}

}  // namespace shardplan::cli
