// `shardplan simulate --fp8` / `plan --fp8` and `--lora-base nf4` end to end: FP8 refused on an
// A100 profile with one line naming the flag, an unknown recipe refused, an H100 simulation that
// carries the recipe into its JSON and runs faster than the same bf16 configuration; QLoRA's
// 4-bit base in the JSON and the memory table, refused without adapters; packed documents
// (--packed-document-tokens) in the JSON, the report and the plan tag, refused with eager attention.
#include <gtest/gtest.h>

#include "cli/cli_support.hpp"

namespace precision_cli_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

const std::vector<std::string> kSim = {"simulate", "--model",   "llama2-7b", "--nodes", "1",
                                       "--tp",     "2",         "--zero",    "1",       "--global-batch-size",
                                       "8",        "--seq-len", "4096"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

TEST(Fp8Cli, RefusedOnA100AndForUnknownRecipes) {
  expect_one_line_error(with(kSim, {"--hardware", "p4d.24xlarge", "--fp8", "delayed"}), {"--fp8", "FP8"});
  expect_one_line_error(with(kSim, {"--hardware", "p5.48xlarge", "--fp8", "e4m3"}), {"--fp8", "e4m3"});
  expect_one_line_error(with(kSim, {"--hardware", "p5.48xlarge", "--fp8-param-gather"}), {"--fp8-param-gather"});
  expect_one_line_error(
      {"plan", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--fp8", "none,delayed", "--quiet"},
      {"--fp8", "FP8"});
}

TEST(Fp8Cli, SimulateCarriesTheRecipeAndIsFaster) {
  const json bf16 = run_json(with(kSim, {"--hardware", "p5.48xlarge", "--json"}));
  const json fp8 = run_json(with(kSim, {"--hardware", "p5.48xlarge", "--fp8", "delayed", "--json"}));
  ASSERT_TRUE(fp8.contains("config"));
  EXPECT_EQ(fp8["config"]["fp8"], "delayed");
  EXPECT_EQ(bf16["config"]["fp8"], "none");
  EXPECT_LT(fp8["time"]["step_seconds"].get<double>(), bf16["time"]["step_seconds"].get<double>());
}

TEST(QLoraCli, FourBitBaseInJsonAndTableRefusedWithoutAdapters) {
  const std::vector<std::string> lora =
      with(kSim, {"--hardware", "p4de.24xlarge", "--lora-rank", "16", "--lora-targets", "q_proj,v_proj"});
  const json q = run_json(with(lora, {"--lora-base", "nf4", "--json"}));
  const json l = run_json(with(lora, {"--json"}));
  EXPECT_EQ(q["config"]["lora"]["base"], "nf4");
  EXPECT_LT(q["memory"]["per_device_bytes"]["parameters"].get<double>(),
            0.4 * l["memory"]["per_device_bytes"]["parameters"].get<double>());
  const RunResult table = run_shardplan(with(lora, {"--lora-base", "nf4"}));
  EXPECT_EQ(table.exit_code, 0) << table;
  EXPECT_TRUE(contains(table.out, "QLoRA (NF4 base)")) << table;
  expect_one_line_error(with(kSim, {"--hardware", "p4de.24xlarge", "--lora-base", "nf4"}), {"--lora-base"});
}

// --fusion megatron (Megatron-Core's fused projections and SwiGLU): carried into the JSON and the
// report line, faster and lighter than eager layers for a Llama; an unknown kind refused; plan
// takes it for every plan.
TEST(FusionCli, SimulateAndPlanCarryTheKindAndBadKindsAreRefused) {
  const json eager = run_json(with(kSim, {"--hardware", "p5.48xlarge", "--json"}));
  const json fused = run_json(with(kSim, {"--hardware", "p5.48xlarge", "--fusion", "megatron", "--json"}));
  EXPECT_EQ(eager["config"]["fusion"], "eager");
  EXPECT_EQ(fused["config"]["fusion"], "megatron");
  EXPECT_LT(fused["time"]["step_seconds"].get<double>(), eager["time"]["step_seconds"].get<double>());
  EXPECT_LT(fused["memory"]["per_device_bytes"]["activations"].get<double>(),
            eager["memory"]["per_device_bytes"]["activations"].get<double>());
  const RunResult table = run_shardplan(with(kSim, {"--hardware", "p5.48xlarge", "--fusion", "megatron"}));
  EXPECT_EQ(table.exit_code, 0) << table;
  EXPECT_TRUE(contains(table.out, "fusion=megatron")) << table;
  expect_one_line_error(with(kSim, {"--hardware", "p5.48xlarge", "--fusion", "apex"}), {"--fusion", "apex"});
  const RunResult plan =
      run_shardplan({"plan", "--model", "llama2-7b", "--hardware", "p5.48xlarge", "--nodes", "1", "--global-batch-size",
                     "8", "--seq-len", "4096", "--fusion", "megatron", "--top", "1", "--quiet"});
  EXPECT_EQ(plan.exit_code, 0) << plan;
  EXPECT_TRUE(contains(plan.out, "megatron-fusion")) << plan;
}

TEST(GradAccumCli, SimulateAndPlanCarryTheDtypeAndRefuseItWhereItCannotApply) {
  const std::vector<std::string> zero1 = with(kSim, {"--hardware", "p4d.24xlarge", "--json"});  // kSim: ZeRO-1
  const json bf16 = run_json(zero1);
  const json fp32 = run_json(with(zero1, {"--grad-accum-dtype", "fp32"}));
  EXPECT_EQ(bf16["config"]["grad_accum_dtype"], "param");
  EXPECT_EQ(fp32["config"]["grad_accum_dtype"], "fp32");
  EXPECT_GT(fp32["memory"]["per_device_bytes"]["gradients"].get<double>(),
            bf16["memory"]["per_device_bytes"]["gradients"].get<double>());
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--nodes", "1", "--zero",
                         "3", "--seq-len", "4096", "--grad-accum-dtype", "fp32"},
                        {"--grad-accum-dtype", "--zero 0 or 1"});
  expect_one_line_error(with(kSim, {"--hardware", "p4d.24xlarge", "--grad-accum-dtype", "fp16"}),
                        {"--grad-accum-dtype", "fp16"});
  const RunResult plan = run_shardplan({"plan", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--nodes", "1",
                                        "--global-batch-size", "64", "--seq-len", "1024", "--zero-stages", "1",
                                        "--grad-accum-dtype", "fp32", "--top", "1", "--quiet"});
  EXPECT_EQ(plan.exit_code, 0) << plan;
  EXPECT_TRUE(contains(plan.out, "fp32-grad-accum")) << plan;
}

const std::vector<std::string> kPackSim = {"simulate", "--model",   "llama2-7b", "--hardware", "p5.48xlarge",
                                           "--nodes",  "1",         "--zero",    "1",          "--global-batch-size",
                                           "8",        "--seq-len", "8192"};

TEST(PackedCli, SimulateAndPlanCarryTheDocumentLengthAndRefuseWhatCannotPack) {
  const json whole = run_json(with(kPackSim, {"--json"}));
  const json docs = run_json(with(kPackSim, {"--json", "--packed-document-tokens", "256"}));
  EXPECT_EQ(whole["config"]["packed_document_tokens"], 0);
  EXPECT_EQ(docs["config"]["packed_document_tokens"], 256);
  EXPECT_LT(docs["time"]["step_seconds"].get<double>(), whole["time"]["step_seconds"].get<double>());
  const RunResult report = run_shardplan(with(kPackSim, {"--packed-document-tokens", "256"}));
  EXPECT_EQ(report.exit_code, 0) << report;
  EXPECT_TRUE(contains(report.out, "packed-docs=256")) << report;
  expect_one_line_error(with(kPackSim, {"--attention", "eager", "--packed-document-tokens", "256"}),
                        {"--packed-document-tokens", "flash or flash1"});
  expect_one_line_error(with(kPackSim, {"--packed-document-tokens", "8192"}), {"--packed-document-tokens", "8192"});
  const RunResult plan =
      run_shardplan({"plan", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--nodes", "1", "--global-batch-size",
                     "64", "--seq-len", "1024", "--packed-document-tokens", "128", "--top", "1", "--quiet"});
  EXPECT_EQ(plan.exit_code, 0) << plan;
  EXPECT_TRUE(contains(plan.out, "packed-docs-128")) << plan;
  expect_one_line_error({"plan", "--model", "gpt2", "--hardware", "p4d.24xlarge", "--nodes", "1", "--seq-len", "1024",
                         "--attention", "eager", "--packed-document-tokens", "128", "--quiet"},
                        {"--packed-document-tokens", "flash or flash1"});
}

}  // namespace precision_cli_test
