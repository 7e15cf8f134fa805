// Exports and imports through the real binary: `shardplan export` writes every framework that can
// run a plan (and says which cannot), `simulate --import` reads each file back to the plan's
// layout, and `plan --from` compares a current setup with the best plan.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace interop_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

// A plan for Llama 2 7B on 2 x p4de (16 A100): ZeRO-3 over 8 (HSDP), micro-batch 2, full recompute.
std::string make_plan(const TempDir& tmp) {
  const std::string plan = tmp.file("plan.json");
  const RunResult r = run_shardplan({"plan",
                                     "--model",
                                     "llama2-7b",
                                     "--hardware",
                                     "p4de.24xlarge",
                                     "--nodes",
                                     "2",
                                     "--seq-len",
                                     "4096",
                                     "--global-batch-size",
                                     "64",
                                     "--micro-batch-sizes",
                                     "2",
                                     "--zero-stages",
                                     "3",
                                     "--recompute",
                                     "full",
                                     "--forbid",
                                     "pp,tp,offload",
                                     "--fp8",
                                     "none",
                                     "--quiet",
                                     "--out",
                                     plan});
  EXPECT_EQ(r.exit_code, 0) << r;
  return plan;
}

TEST(CliInterop, ExportedFilesImportBackToThePlansLayout) {
  TempDir tmp;
  const std::string plan = make_plan(tmp), out = tmp.file("launch");
  const RunResult e = run_shardplan({"export", plan, "--out-dir", out});
  ASSERT_EQ(e.exit_code, 0) << e;
  EXPECT_TRUE(contains(e.out, "not exported: NeuronX") || !contains(e.out, "neuron_launch.sh")) << e;
  const json cfg = read_json(plan)["config"];
  for (const char* file :
       {"ds_config.json", "megatron_args.sh", "torchtitan.toml", "accelerate_fsdp.yaml", "smp_v2.json"}) {
    SCOPED_TRACE(file);
    const RunResult s = run_shardplan({"simulate", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--nodes",
                                       "2", "--seq-len", "4096", "--micro-batch-size", "2", "--global-batch-size", "64",
                                       "--import", out + "/" + file, "--json"});
    ASSERT_EQ(s.exit_code, 0) << s;
    const json got = json::parse(s.out)["config"];
    for (const char* key : {"tensor_parallel", "pipeline_parallel", "data_parallel", "micro_batch_size", "seq_len"})
      EXPECT_EQ(got[key], cfg[key]) << key;
    // ZeRO-3 comes back from every format: FSDP full/hybrid sharding, Megatron-FSDP optim_grads_params.
    EXPECT_EQ(got["zero_stage"], cfg["zero_stage"]);
    if (std::string(file) != "smp_v2.json") { EXPECT_EQ(got["global_batch_size"], cfg["global_batch_size"]); }
  }
}

TEST(CliInterop, PlanFromACurrentSetupSaysWhatItCostsAgainstTheBest) {
  TempDir tmp;
  const std::string plan = make_plan(tmp), out = tmp.file("launch");
  ASSERT_EQ(run_shardplan({"export", plan, "--out-dir", out}).exit_code, 0);
  const RunResult r = run_shardplan({"plan", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--nodes", "2",
                                     "--from", out + "/ds_config.json", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(contains(r.out, "why not your setup (" + out + "/ds_config.json)")) << r;
  // The search keeps the setup's training job: its global batch (64) in every ranked row.
  EXPECT_TRUE(contains(r.out, "gbs=64")) << r;
  EXPECT_FALSE(contains(r.out, "gbs=16 ")) << r;
  const RunResult many = run_shardplan({"plan", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--nodes", "2,4",
                                        "--from", out + "/ds_config.json", "--quiet"});
  EXPECT_EQ(many.exit_code, 2) << many;
  EXPECT_TRUE(contains(many.err, "--from: expected one --nodes count")) << many;
}

TEST(CliInterop, AFileOfNoKnownFormatIsNamed) {
  TempDir tmp;
  const std::string file = tmp.file("notes.txt");
  std::ofstream(file) << "just some text\n";
  const RunResult r =
      run_shardplan({"simulate", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--import", file});
  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_TRUE(contains(r.err, file + ": not a format shardplan imports")) << r;
}

}  // namespace interop_cli_test
