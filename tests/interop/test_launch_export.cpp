// Launch exports: shell quoting (checked by running bash), mpirun line, Slurm script (syntax and an
// actual run of its auto-resume loop against a fake srun), ds_config / Megatron / SMP exports and
// their round trips through the importers.
#include <gtest/gtest.h>

#include "interop/script_support.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "formats/shell_quote.hpp"
#include "interop/config_import.hpp"
#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::interop {
namespace launch_export_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

namespace sim = shardplan::simulator;
using namespace shardplan::formats;
namespace fs = std::filesystem;
using nlohmann::json;

// --- helpers ------------------------------------------------------------------------------

Plan make_plan(const std::function<void(sim::ParallelConfig&)>& edit, const char* hw = "gaudi2-hls2", int nodes = 1) {
  sim::ParallelConfig c;
  c.tp = 8;
  c.pp = 1;
  c.dp = sim::ClusterSpec{sim::load_hardware(hw), nodes, 0}.devices() / 8;
  c.micro_batch_size = 1;
  c.seq_len = 4096;
  c.fusion = sim::Fusion::megatron;  // what Megatron-Core runs: its export needs no fusion note
  edit(c);
  return shardplan::testing::plan_of("llama2-70b", hw, nodes, c);
}

Plan default_plan() {
  return make_plan([](sim::ParallelConfig&) {});
}

using shardplan::testing::TempDir;

using shardplan::testing::run_command;
using Result = shardplan::testing::CommandResult;

// --- shell quoting -------------------------------------------------------------------------

TEST(ShellQuote, PlainWordsStayReadableEverythingElseIsSingleQuoted) {
  EXPECT_EQ(shell_quote("plan.json"), "plan.json");
  EXPECT_EQ(shell_quote("/data/run-1/ckpt_2@x:y,z+%"), "/data/run-1/ckpt_2@x:y,z+%");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(shell_quote("`id`"), "'`id`'");
  EXPECT_EQ(shell_quote("a=b"), "'a=b'");  // would be an assignment in command position
  EXPECT_EQ(shell_join({"echo", "a b", "c"}), "echo 'a b' c");
  EXPECT_THROW(shell_quote(std::string("a\0b", 3)), sim::InputError);
}

TEST(ShellQuote, SafeTokenAndCommentText) {
  EXPECT_EQ(safe_token("llama2-70b_run.1"), "llama2-70b_run.1");
  EXPECT_EQ(safe_token("a b\n$(x)'"), "a_b___x__");
  EXPECT_EQ(safe_token(""), "shardplan");
  EXPECT_EQ(comment_text("a\nb\rc"), "a b c");
}

TEST(ShellQuote, HostileStringsRoundTripThroughBash) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  for (const auto& s : hostile_strings(canary)) {
    SCOPED_TRACE(s);
    // From a script file, as the generated scripts are run.
    const std::string script = "printf %s " + shell_quote(s) + "\n";
    ASSERT_EQ(bash_syntax(dir, script).status, 0);
    write_text(dir.file("print.sh"), script);
    const Result direct = run_command("bash " + shell_quote(dir.file("print.sh")));
    EXPECT_EQ(direct.status, 0);
    EXPECT_EQ(direct.out, s);
    // Nested: through /bin/sh (popen) into bash -c, quoted twice.
    const Result nested = run_command("bash -c " + shell_quote("printf %s " + shell_quote(s)));
    EXPECT_EQ(nested.status, 0);
    EXPECT_EQ(nested.out, s);
  }
  EXPECT_FALSE(fs::exists(canary)) << "a quoted string was executed";
}

TEST(ShellQuote, RmRfRootIsOnlyEverText) {
  TempDir dir;
  // Syntax check only (bash -n executes nothing): the payload stays one quoted word.
  EXPECT_EQ(bash_syntax(dir, "printf %s " + shell_quote("$(rm -rf /)") + "\n").status, 0);
  EXPECT_EQ(shell_join({"--plan", "$(rm -rf /)"}), "--plan '$(rm -rf /)'");
}

// --- mpirun ---------------------------------------------------------------------------------

TEST(Mpirun, DefaultLine) {
  const Plan plan = default_plan();
  // Gaudi2 HLS-2: 160 host CPUs / 8 devices = 20 threads per rank.
  EXPECT_EQ(mpirun_command(plan, "plan.json"),
            "mpirun -np 8 --map-by ppr:8:node -x OMP_NUM_THREADS=20 shardrun --plan plan.json");
}

TEST(Mpirun, MultiNodeWithAllOptions) {
  const Plan plan = make_plan([](sim::ParallelConfig& c) { c.dp = 2; }, "gaudi2-hls2", 2);
  MpirunOptions o;
  o.hostfile = "hosts";
  o.omp_num_threads = 4;
  o.run.steps = 100;
  o.run.data = "/data/tokens";
  o.run.checkpoint_dir = "/ckpt";
  o.run.resume_auto = true;
  o.run.extra = {"--log-every", "10"};
  EXPECT_EQ(mpirun_command(plan, "/plans/p.json", o),
            "mpirun -np 16 --map-by ppr:8:node --hostfile hosts -x OMP_NUM_THREADS=4 shardrun --plan /plans/p.json "
            "--steps 100 --data /data/tokens --checkpoint-dir /ckpt --resume auto --log-every 10");
  o.omp_num_threads = -1;
  EXPECT_THROW(mpirun_command(plan, "p.json", o), sim::InputError);
  EXPECT_THROW(mpirun_command(plan, "", {}), sim::InputError);
}

TEST(Mpirun, HostilePathsReachMpirunVerbatim) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  fake_recorder(dir, "mpirun");
  const Plan plan = default_plan();
  MpirunOptions o;
  o.hostfile = "hosts $(touch " + canary + ")";
  o.run.executable = "/opt/my tools/shardrun";
  o.run.data = "data'`touch " + canary + "`";
  o.run.checkpoint_dir = "ck\npt; touch " + canary;
  o.run.extra = hostile_strings(canary);
  const std::string plan_path = "plans/it's $(touch " + canary + ").json";
  const std::string line = mpirun_command(plan, plan_path, o);
  ASSERT_EQ(bash_syntax(dir, line + "\n").status, 0) << line;
  write_text(dir.file("launch.sh"), line + "\n");
  const Result r =
      run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                  " bash " + shell_quote(dir.file("launch.sh")));
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> expected = {
      "-np",      "8",      "--map-by",           "ppr:8:node",       "--hostfile",
      o.hostfile, "-x",     "OMP_NUM_THREADS=20", o.run.executable,   "--plan",
      plan_path,  "--data", o.run.data,           "--checkpoint-dir", o.run.checkpoint_dir};
  expected.insert(expected.end(), o.run.extra.begin(), o.run.extra.end());
  EXPECT_EQ(split_nul(read_text(dir.file("args"))), expected);
  EXPECT_FALSE(fs::exists(canary));
}

// --- Slurm ----------------------------------------------------------------------------------

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l))
    if (l == line) return true;
  return false;
}

TEST(Slurm, DirectivesForGaudi) {
  const std::string s = slurm_script(default_plan(), "plan.json");
  EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u);
  for (const char* line :
       {"#SBATCH --job-name=shardplan-llama2-70b", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=8",
        "#SBATCH --time=24:00:00", "#SBATCH --requeue", "#SBATCH --open-mode=append", "set -euo pipefail",
        "MAX_RETRIES=3", "export OMP_NUM_THREADS=20"})
    EXPECT_TRUE(has_line(s, line)) << line << "\n" << s;
  EXPECT_EQ(s.find("--gpus-per-task"), std::string::npos);
  EXPECT_NE(s.find("# Intel Gaudi2 (HL-225): not a Slurm GPU"), std::string::npos);
  EXPECT_NE(s.find("--resume auto"), std::string::npos);
  EXPECT_NE(s.find("--checkpoint-dir \"${CHECKPOINT_DIR}\""), std::string::npos);
  TempDir dir;
  const Result syntax = bash_syntax(dir, s);
  EXPECT_EQ(syntax.status, 0) << syntax.out;
}

TEST(Slurm, GpuKindsGetGpusPerTask) {
  EXPECT_TRUE(is_gpu_hardware(sim::load_hardware("p4d.24xlarge")));
  EXPECT_TRUE(is_gpu_hardware(sim::load_hardware("p5.48xlarge")));
  EXPECT_TRUE(is_gpu_hardware(sim::load_hardware("g5.48xlarge")));
  EXPECT_FALSE(is_gpu_hardware(sim::load_hardware("gaudi2-hls2")));
  EXPECT_FALSE(is_gpu_hardware(sim::load_hardware("trn1.32xlarge")));
  const Plan plan = make_plan(
      [](sim::ParallelConfig& c) {
        c.dp = 2;
        c.zero_stage = 3;
      },
      "p5.48xlarge", 2);
  const std::string s = slurm_script(plan, "plan.json");
  EXPECT_TRUE(has_line(s, "#SBATCH --gpus-per-task=1"));
  EXPECT_TRUE(has_line(s, "#SBATCH --nodes=2"));
  EXPECT_TRUE(has_line(s, "#SBATCH --ntasks-per-node=8"));
}

TEST(Slurm, RejectsBadDirectiveValues) {
  const Plan plan = default_plan();
  SlurmOptions o;
  o.time_limit = "24:00:00\nrm -rf ~";
  EXPECT_THROW(slurm_script(plan, "p.json", o), sim::InputError);
  o.time_limit = "2-12:00:00";
  EXPECT_NO_THROW(slurm_script(plan, "p.json", o));
  o.partition = "gpu queue";
  EXPECT_THROW(slurm_script(plan, "p.json", o), sim::InputError);
  o.partition = "gpu,gpu-long";
  o.account = "proj$(x)";
  EXPECT_THROW(slurm_script(plan, "p.json", o), sim::InputError);
  o.account = "";
  o.max_retries = -1;
  EXPECT_THROW(slurm_script(plan, "p.json", o), sim::InputError);
}

struct SlurmRun {
  Result result;
  int attempts = 0;
  int health_checks = 0;
  std::vector<std::string> last_args;
};

// Runs the generated script with a fake srun that fails `fail_times` times with `code`; its
// health checks (`srun ... shardrun health ...`) fail `health_fails` times with exit 1.
SlurmRun run_slurm(const TempDir& dir, const std::string& script, int fail_times, int code, int health_fails = 0) {
  fs::create_directories(dir.path() / "bin");
  write_text(dir.file("bin/srun"),
             "#!/bin/bash\n"
             "for a in \"$@\"; do if [ \"$a\" = health ]; then\n"
             "  h=$(cat \"$STATE/health\" 2>/dev/null || echo 0); h=$((h + 1)); echo \"$h\" > \"$STATE/health\"\n"
             "  if [ \"$h\" -le " +
                 std::to_string(health_fails) +
                 " ]; then exit 1; fi; exit 0; fi; done\n"
                 "n=$(cat \"$STATE/count\" 2>/dev/null || echo 0); n=$((n + 1)); echo \"$n\" > \"$STATE/count\"\n"
                 ": > \"$STATE/args\"; for a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$STATE/args\"; done\n"
                 "echo \"fake srun attempt $n\"\n"
                 "if [ \"$n\" -le \"$FAIL_TIMES\" ]; then exit \"$FAIL_CODE\"; fi\n",
             true);
  fs::create_directories(dir.path() / "state");
  fs::remove(dir.path() / "state" / "count");
  fs::remove(dir.path() / "state" / "health");
  write_text(dir.file("job.sbatch"), script);
  SlurmRun r;
  r.result =
      run_command("cd " + shell_quote(dir.path().string()) + " && PATH=" + shell_quote(dir.file("bin")) +
                  ":\"$PATH\" STATE=" + shell_quote(dir.file("state")) + " FAIL_TIMES=" + std::to_string(fail_times) +
                  " FAIL_CODE=" + std::to_string(code) + " SLURM_JOB_ID=4242 bash job.sbatch");
  r.attempts = std::atoi(read_text(dir.file("state/count")).c_str());
  r.health_checks = std::atoi(read_text(dir.file("state/health")).c_str());
  r.last_args = split_nul(read_text(dir.file("state/args")));
  return r;
}

TEST(Slurm, AutoResumeLoopWithHostileNames) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  Plan plan = default_plan();
  plan.model.name = "llama'; touch " + canary + "; echo '$(touch " + canary + ")\nrm";
  SlurmOptions o;
  o.job_name = "job $(touch " + canary + ")\n#SBATCH --nodes=99";
  o.retry_delay_s = 0;
  o.log_dir = dir.file("logs 'x' $(touch " + canary + ")");
  o.run.executable = "/opt/my tools/shardrun";
  o.run.steps = 50;
  o.run.data = dir.file("data `touch " + canary + "`");
  o.run.checkpoint_dir = dir.file("ck\npt\"; touch " + canary);
  o.run.extra = hostile_strings(canary);
  const std::string plan_path = dir.file("plan it's $(touch " + canary + ").json");
  const std::string script = slurm_script(plan, plan_path, o);
  ASSERT_EQ(bash_syntax(dir, script).status, 0) << script;
  // The newline in the job name cannot start a directive of its own: sbatch reads directives up
  // to the first command, and there the name is a safe token. (Later, inside JOB_LABEL's quotes,
  // the text is data.)
  EXPECT_TRUE(has_line(script, "#SBATCH --job-name=" + safe_token(o.job_name))) << script;
  const std::string directives = script.substr(0, script.find("\nset -euo pipefail"));
  EXPECT_EQ(directives.find("--nodes=99"), std::string::npos) << directives;

  const SlurmRun ok = run_slurm(dir, script, 2, 7);  // two failures, then success
  EXPECT_EQ(ok.result.status, 0) << ok.result.out;
  EXPECT_EQ(ok.attempts, 3);
  EXPECT_EQ(ok.health_checks, 2);  // before each relaunch
  std::vector<std::string> expected = {
      "--mpi=pmix", "--kill-on-bad-exit=1", o.run.executable,     "--plan",   plan_path, "--steps", "50", "--data",
      o.run.data,   "--checkpoint-dir",     o.run.checkpoint_dir, "--resume", "auto"};
  expected.insert(expected.end(), o.run.extra.begin(), o.run.extra.end());
  EXPECT_EQ(ok.last_args, expected);
  for (int k = 1; k <= 3; ++k) {
    const std::string log = read_text(o.log_dir + "/4242-attempt-" + std::to_string(k) + ".log");
    EXPECT_NE(log.find("fake srun attempt " + std::to_string(k)), std::string::npos);
  }
  EXPECT_NE(ok.result.out.find(plan.model.name), std::string::npos);  // echoed verbatim
  EXPECT_TRUE(fs::is_directory(o.run.checkpoint_dir));
  EXPECT_FALSE(fs::exists(canary)) << "a quoted string was executed";
}

TEST(Slurm, GivesUpAfterMaxRetriesWithTheFailureStatus) {
  TempDir dir;
  SlurmOptions o;
  o.max_retries = 2;
  o.retry_delay_s = 0;
  const SlurmRun r = run_slurm(dir, slurm_script(default_plan(), "plan.json", o), 100, 7);
  EXPECT_EQ(r.result.status, 7) << r.result.out;
  EXPECT_EQ(r.attempts, 3);
  EXPECT_NE(r.result.out.find("no retries left"), std::string::npos);
  EXPECT_EQ(r.result.out.find("scontrol"), std::string::npos);
  o.max_retries = 0;
  const SlurmRun once = run_slurm(dir, slurm_script(default_plan(), "plan.json", o), 100, 3);
  EXPECT_EQ(once.result.status, 3);
  EXPECT_EQ(once.attempts, 1);
}

TEST(Slurm, BadInputIsNotRetriedAndAFailedHealthCheckCountsAsAnAttempt) {
  TempDir dir;
  SlurmOptions o;
  o.max_retries = 5;
  o.retry_delay_s = 0;
  const std::string script = slurm_script(default_plan(), "plan.json", o);
  const SlurmRun bad = run_slurm(dir, script, 100, 2);
  EXPECT_EQ(bad.result.status, 2) << bad.result.out;
  EXPECT_EQ(bad.attempts, 1);
  EXPECT_NE(bad.result.out.find("not retrying"), std::string::npos) << bad.result.out;
  // Attempt 1 fails; the health check before attempt 2 fails (no launch); attempt 3 succeeds.
  const SlurmRun sick = run_slurm(dir, script, 1, 4, 1);
  EXPECT_EQ(sick.result.status, 0) << sick.result.out;
  EXPECT_EQ(sick.attempts, 2);
  EXPECT_EQ(sick.health_checks, 2);
  EXPECT_NE(sick.result.out.find("health check failed"), std::string::npos) << sick.result.out;
  EXPECT_NE(sick.result.out.find("finished after 3 attempt(s)"), std::string::npos) << sick.result.out;
  // Back-off doubles up to the cap (RETRY_DELAY_S << (attempt-1), at most RETRY_DELAY_MAX_S).
  o.retry_delay_s = 7;
  o.retry_delay_max_s = 20;
  const std::string delays = slurm_script(default_plan(), "plan.json", o);
  EXPECT_NE(delays.find("RETRY_DELAY_MAX_S=20"), std::string::npos);
  o.srun_mpi = "pmix;rm";
  EXPECT_THROW(slurm_script(default_plan(), "plan.json", o), sim::InputError);
}

// --- DeepSpeed ----------------------------------------------------------------------------

ImportContext context_for(const Plan& plan) {
  ImportContext ctx;
  ctx.devices = plan.cluster.devices();
  ctx.devices_per_node = plan.cluster.per_node();
  ctx.seq_len = plan.config.seq_len;
  return ctx;
}

void expect_same_layout(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.shard_group(), want.shard_group());
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.offload_activations, want.offload_activations);
  EXPECT_EQ(got.seq_len, want.seq_len);
}

Plan zero3_offload_plan() {
  return make_plan([](sim::ParallelConfig& c) {
    c.tp = 1;
    c.dp = 8;
    c.zero_stage = 3;
    c.sharding_degree = 4;
    c.offload_optimizer = true;
    c.micro_batch_size = 2;
    c.global_batch_size = 64;
    c.recompute = sim::Recompute::full;
    c.offload_activations = true;
    c.lora.rank = 16;
    c.lora.targets = {"q_proj", "v_proj"};
  });
}

TEST(DeepSpeedExport, Zero3OffloadFields) {
  const Plan plan = zero3_offload_plan();
  const json ds = deepspeed_config(plan);
  EXPECT_EQ(ds["train_batch_size"], 64);
  EXPECT_EQ(ds["train_micro_batch_size_per_gpu"], 2);
  EXPECT_EQ(ds["gradient_accumulation_steps"], 4);
  EXPECT_EQ(ds["gradient_clipping"], 1.0);
  EXPECT_EQ(ds["zero_optimization"]["stage"], 3);
  EXPECT_EQ(ds["zero_optimization"]["offload_optimizer"]["device"], "cpu");
  EXPECT_EQ(ds["zero_optimization"]["mics_shard_size"], 4);
  EXPECT_EQ(ds["zero_optimization"]["reduce_bucket_size"], 8192LL * 8192);
  EXPECT_EQ(ds["zero_optimization"]["stage3_param_persistence_threshold"], 81920);
  EXPECT_EQ(ds["bf16"]["enabled"], true);
  EXPECT_EQ(ds["fp16"]["enabled"], false);
  EXPECT_EQ(ds["activation_checkpointing"]["cpu_checkpointing"], true);
  EXPECT_EQ(ds["activation_checkpointing"]["partition_activations"], true);
  EXPECT_FALSE(ds.contains("tensor_parallel"));
  EXPECT_FALSE(ds.contains("pipeline"));
  const std::string note = ds["shardplan_note"];
  EXPECT_NE(note.find("PEFT"), std::string::npos);
  EXPECT_EQ(json::parse(ds.dump(2)), ds);
}

TEST(DeepSpeedExport, NoCheckpointingSectionWithoutRecompute) {
  const json ds = deepspeed_config(default_plan());
  EXPECT_FALSE(ds.contains("activation_checkpointing"));
  EXPECT_FALSE(ds["zero_optimization"].contains("offload_optimizer"));
  EXPECT_FALSE(ds["zero_optimization"].contains("mics_shard_size"));
  EXPECT_EQ(ds["tensor_parallel"]["autotp_size"], 8);
}

TEST(DeepSpeedExport, ReimportGivesTheSameConfig) {
  std::vector<Plan> plans = {zero3_offload_plan(), default_plan(),
                             make_plan(
                                 [](sim::ParallelConfig& c) {
                                   c.tp = 2;
                                   c.pp = 2;
                                   c.dp = 4;
                                   c.zero_stage = 1;
                                   c.micro_batch_size = 2;
                                   c.global_batch_size = 64;
                                   c.precision = sim::Precision::fp16;
                                 },
                                 "gaudi2-hls2", 2)};
  for (const auto& plan : plans) {
    const json ds = json::parse(deepspeed_config(plan).dump());
    const ImportResult r = import_deepspeed(ds, context_for(plan), "exported ds_config");
    expect_same_layout(r.config, plan.config);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  }
}

// --- Megatron -----------------------------------------------------------------------------

std::string arg_after(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  if (it == args.end() || it + 1 == args.end()) return "<absent>";
  return *(it + 1);
}

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

TEST(MegatronExport, InterleavedGqaLlama) {
  const Plan plan = make_plan(
      [](sim::ParallelConfig& c) {
        c.pp = 2;
        c.dp = 1;
        c.schedule = sim::PipelineSchedule::interleaved;
        c.virtual_stages = 2;
        c.micro_batch_size = 1;
        c.global_batch_size = 8;
        c.sequence_parallel = true;
        c.zero_stage = 1;
        c.recompute = sim::Recompute::full;
      },
      "gaudi2-hls2", 2);
  const auto a = megatron_args(plan);
  EXPECT_EQ(arg_after(a, "--tensor-model-parallel-size"), "8");
  EXPECT_EQ(arg_after(a, "--pipeline-model-parallel-size"), "2");
  // Chunks per rank (the form Megatron also accepts with uneven first/last stages, arguments.py:955).
  EXPECT_EQ(arg_after(a, "--num-virtual-stages-per-pipeline-rank"), "2");
  EXPECT_FALSE(has_flag(a, "--num-layers-per-virtual-pipeline-stage"));
  EXPECT_TRUE(has_flag(a, "--sequence-parallel"));
  EXPECT_EQ(arg_after(a, "--micro-batch-size"), "1");
  EXPECT_EQ(arg_after(a, "--global-batch-size"), "8");
  EXPECT_EQ(arg_after(a, "--seq-length"), "4096");
  EXPECT_EQ(arg_after(a, "--num-layers"), "80");
  EXPECT_EQ(arg_after(a, "--hidden-size"), "8192");
  EXPECT_EQ(arg_after(a, "--num-attention-heads"), "64");
  EXPECT_EQ(arg_after(a, "--ffn-hidden-size"), "28672");
  EXPECT_TRUE(has_flag(a, "--group-query-attention"));
  EXPECT_EQ(arg_after(a, "--num-query-groups"), "8");
  EXPECT_TRUE(has_flag(a, "--swiglu"));
  EXPECT_EQ(arg_after(a, "--normalization"), "RMSNorm");
  EXPECT_EQ(arg_after(a, "--position-embedding-type"), "rope");
  EXPECT_TRUE(has_flag(a, "--untie-embeddings-and-output-weights"));
  EXPECT_TRUE(has_flag(a, "--disable-bias-linear"));
  EXPECT_TRUE(has_flag(a, "--bf16"));
  EXPECT_FALSE(has_flag(a, "--fp16"));
  EXPECT_EQ(arg_after(a, "--recompute-granularity"), "full");
  EXPECT_EQ(arg_after(a, "--recompute-method"), "uniform");
  EXPECT_EQ(arg_after(a, "--recompute-num-layers"), "1");
  EXPECT_TRUE(has_flag(a, "--use-distributed-optimizer"));
  EXPECT_FALSE(has_flag(a, "--decoder-first-pipeline-num-layers"));
  EXPECT_TRUE(megatron_notes(plan).empty());
}

// A plan simulated with eager layers says that Megatron-Core fuses them, where the model has
// something to fuse (separate q/k/v or gate/up, SwiGLU); GPT-2's c_attn and GELU have nothing.
TEST(MegatronExport, EagerLayersAreNotedWhereMegatronWouldFuseThem) {
  auto mentions_fusion = [](const Plan& p) {
    for (const auto& n : megatron_notes(p))
      if (n.find("--fusion megatron") != std::string::npos) return true;
    return false;
  };
  const Plan eager = make_plan([](sim::ParallelConfig& c) { c.fusion = sim::Fusion::eager; });
  EXPECT_TRUE(mentions_fusion(eager));
  EXPECT_NE(megatron_command_line(eager).find("# shardplan note: eager layers"), std::string::npos);
  EXPECT_FALSE(mentions_fusion(default_plan()));
  sim::ParallelConfig g;
  g.dp = 8;
  g.micro_batch_size = 1;
  g.seq_len = 1024;
  EXPECT_FALSE(mentions_fusion(shardplan::testing::plan_of("gpt2", "p4d.24xlarge", 1, g)));
}

// recompute_num_layers k: Megatron's block method, the first k layers of each stage recomputed.
TEST(MegatronExport, RecomputingTheFirstLayersOfEachStageIsTheBlockMethod) {
  const Plan plan = make_plan([](sim::ParallelConfig& c) {
    c.tp = 2;
    c.pp = 4;
    c.dp = 1;
    c.global_batch_size = 4;
    c.recompute = sim::Recompute::full;
    c.recompute_num_layers = 5;
  });
  const auto a = megatron_args(plan);
  EXPECT_EQ(arg_after(a, "--recompute-granularity"), "full");
  EXPECT_EQ(arg_after(a, "--recompute-method"), "block");
  EXPECT_EQ(arg_after(a, "--recompute-num-layers"), "5");
  const auto notes = deepspeed_notes(plan);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(),
                          [](const std::string& n) { return n.find("recompute_num_layers 5") != std::string::npos; }));
}

TEST(MegatronExport, UnevenEdgesAreFlagsAnyOtherSplitALayout) {
  const auto with_partition = [](std::vector<int> part) {
    return make_plan([part](sim::ParallelConfig& c) {
      c.tp = 2;
      c.pp = 4;
      c.dp = 1;
      c.global_batch_size = 4;
      c.partition = part;
      c.recompute = sim::Recompute::selective;
    });
  };
  const Plan edges = with_partition({19, 21, 21, 19});
  const auto a = megatron_args(edges);
  EXPECT_EQ(arg_after(a, "--decoder-first-pipeline-num-layers"), "19");
  EXPECT_EQ(arg_after(a, "--decoder-last-pipeline-num-layers"), "19");
  EXPECT_EQ(arg_after(a, "--recompute-granularity"), "selective");
  EXPECT_FALSE(has_flag(a, "--recompute-method"));
  EXPECT_TRUE(megatron_notes(edges).empty());
  const Plan first_only = with_partition({17, 21, 21, 21});
  EXPECT_EQ(arg_after(megatron_args(first_only), "--decoder-first-pipeline-num-layers"), "17");
  EXPECT_FALSE(has_flag(megatron_args(first_only), "--decoder-last-pipeline-num-layers"));
  EXPECT_FALSE(has_flag(megatron_args(first_only), "--pipeline-model-parallel-layout"));
  // Uneven middle stages: Megatron-Core's layout string, quoted for the shell.
  const Plan middle = with_partition({20, 22, 18, 20});
  EXPECT_FALSE(has_flag(megatron_args(middle), "--decoder-first-pipeline-num-layers"));
  EXPECT_EQ(arg_after(megatron_args(middle), "--pipeline-model-parallel-layout"), "Et*20|t*22|t*18|t*20L");
  EXPECT_TRUE(megatron_notes(middle).empty());
  EXPECT_NE(megatron_command_line(middle).find("--pipeline-model-parallel-layout 'Et*20|t*22|t*18|t*20L'"),
            std::string::npos);
}

TEST(MegatronExport, CommandLineRunsVerbatim) {
  TempDir dir;
  fake_recorder(dir, "torchrun");
  const Plan plan = make_plan([](sim::ParallelConfig& c) { c.zero_stage = 3; });
  const std::string cmd = megatron_command_line(plan);
  ASSERT_EQ(bash_syntax(dir, cmd).status, 0) << cmd;
  // ZeRO-3 runs as Megatron-FSDP sharding optimizer states, gradients and parameters: no note.
  EXPECT_EQ(cmd.rfind("torchrun", 0), 0u) << cmd;
  EXPECT_NE(cmd.find("--use-megatron-fsdp \\\n  --data-parallel-sharding-strategy optim_grads_params"),
            std::string::npos)
      << cmd;
  write_text(dir.file("megatron.sh"), cmd);
  const Result r =
      run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                  " bash " + shell_quote(dir.file("megatron.sh")));
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> expected = {"--nnodes", "1", "--nproc-per-node", "8", "pretrain_gpt.py"};
  const auto args = megatron_args(plan);
  expected.insert(expected.end(), args.begin(), args.end());
  EXPECT_EQ(split_nul(read_text(dir.file("args"))), expected);
}

// --- SageMaker model parallel -------------------------------------------------------------

TEST(SmpExport, ParametersAndReimport) {
  const Plan plan = make_plan(
      [](sim::ParallelConfig& c) {
        c.tp = 8;
        c.pp = 4;
        c.dp = 4;
        c.zero_stage = 3;
        c.sharding_degree = 2;
        c.micro_batch_size = 2;
        c.global_batch_size = 64;
        c.offload_activations = true;
        c.recompute = sim::Recompute::full;
      },
      "gaudi2-hls2", 16);
  const json p = json::parse(smp_parameters(plan).dump());
  EXPECT_EQ(p["partitions"], 4);
  EXPECT_EQ(p["microbatches"], 8);
  EXPECT_EQ(p["pipeline"], "interleaved");
  EXPECT_EQ(p["optimize"], "speed");
  EXPECT_EQ(p["placement_strategy"], "cluster");
  EXPECT_EQ(p["tensor_parallel_degree"], 8);
  EXPECT_EQ(p["ddp"], true);
  EXPECT_EQ(p["sharded_data_parallel_degree"], 2);
  EXPECT_EQ(p["offload_activations"], true);
  EXPECT_EQ(p["activation_loading_horizon"], 4);
  EXPECT_EQ(p["auto_partition"], true);
  EXPECT_EQ(p["bf16"], true);
  ImportContext ctx = context_for(plan);
  ctx.micro_batch_size = 2;
  const ImportResult r = import_smp(p, ctx, "exported smp");
  expect_same_layout(r.config, plan.config);
  EXPECT_EQ(r.config.schedule, sim::PipelineSchedule::one_f_one_b);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(SmpExport, GpipeExplicitPartitionFp16ZeroOne) {
  const Plan plan = make_plan([](sim::ParallelConfig& c) {
    c.tp = 4;
    c.pp = 2;
    c.dp = 1;
    c.zero_stage = 0;
    c.schedule = sim::PipelineSchedule::gpipe;
    c.partition = {38, 42};
    c.global_batch_size = 4;
    c.precision = sim::Precision::fp16;
  });
  const json p = smp_parameters(plan);
  EXPECT_EQ(p["pipeline"], "simple");
  EXPECT_EQ(p["auto_partition"], false);
  EXPECT_EQ(p["fp16"], true);
  EXPECT_FALSE(p.contains("bf16"));
  EXPECT_FALSE(p.contains("sharded_data_parallel_degree"));
  ImportContext ctx = context_for(plan);
  ctx.micro_batch_size = 1;
  const ImportResult r = import_smp(p, ctx, "exported smp");
  expect_same_layout(r.config, plan.config);
  EXPECT_EQ(r.config.schedule, sim::PipelineSchedule::gpipe);
}

// --- export_all ---------------------------------------------------------------------------

TEST(ExportAll, WritesEveryFrameworkThatCanRunThePlanAndSaysWhyNotTheOthers) {
  TempDir dir;
  const Plan plan = zero3_offload_plan();  // Gaudi2: Optimum-Habana yes; torchtitan, SMP v2 no
  ExportOptions o;
  o.slurm.job_name = "it's a job";
  std::vector<std::string> skipped;
  const auto written = export_all(plan, dir.file("out/launch"), "/plans/plan 1.json", o, &skipped);
  std::set<std::string> names;
  for (const auto& path : written) {
    EXPECT_TRUE(fs::is_regular_file(path)) << path;
    names.insert(fs::path(path).filename().string());
  }
  for (const char* f : {"launch_mpirun.sh", "launch_slurm.sbatch", "ds_config.json", "megatron_args.sh",
                        "smp_parameters.json", "habana_ds_config.json", "habana_launch.sh", "NOTES.txt"})
    EXPECT_TRUE(names.count(f)) << f;
  for (const char* f : {"torchtitan.toml", "smp_v2.json", "neuron_launch.sh"}) EXPECT_FALSE(names.count(f)) << f;
  EXPECT_EQ(json::parse(read_text(dir.file("out/launch/ds_config.json"))), deepspeed_config(plan));
  EXPECT_EQ(json::parse(read_text(dir.file("out/launch/smp_parameters.json"))), smp_parameters(plan));
  for (const auto& name : names) {
    if (!name.ends_with(".sh") && !name.ends_with(".sbatch")) continue;
    const std::string path = dir.file("out/launch/" + name);
    EXPECT_EQ(run_command("bash -n " + shell_quote(path)).status, 0) << name;
    EXPECT_NE(fs::status(path).permissions() & fs::perms::owner_exec, fs::perms::none) << name;
  }
  const std::string notes = read_text(dir.file("out/launch/NOTES.txt"));
  EXPECT_NE(notes.find("LoRA"), std::string::npos);
  // The frameworks that cannot run it are named with the reason, in NOTES.txt and to the caller.
  EXPECT_NE(notes.find("Not exported"), std::string::npos);
  const auto refused = [&](const std::string& title) {
    return std::any_of(skipped.begin(), skipped.end(), [&](const std::string& s) { return s.rfind(title, 0) == 0; });
  };
  EXPECT_TRUE(refused("torchtitan"));
  EXPECT_TRUE(refused("SageMaker model parallel v2"));
  for (const auto& s : skipped) EXPECT_NE(notes.find(s.substr(s.find(": ") + 2)), std::string::npos) << s;
  // A bad option fails before anything is written.
  o.slurm.time_limit = "soon";
  EXPECT_THROW(export_all(plan, dir.file("other"), "p.json", o), sim::InputError);
  EXPECT_FALSE(fs::exists(dir.file("other")));
}

}  // namespace launch_export_test
}  // namespace shardplan::interop
