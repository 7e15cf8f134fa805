// torchtitan's recompute policies across the interop layer: [activation_checkpoint]
// selective_ac_option "op" and "N" read as Recompute::op_sac and recompute_every N, written back as
// they were; the exporters of frameworks without them refuse in one line, those whose model code
// picks the checkpointed blocks (DeepSpeed, SMP v1) take every N-th block with a note.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "interop/accelerate.hpp"
#include "interop/launch_export.hpp"
#include "interop/smp_v2.hpp"
#include "interop/torchtitan.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"

namespace shardplan::interop {
namespace recompute_interop_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using formats::Plan;
using shardplan::testing::input_error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ImportResult import_ac(const std::string& option, int pp = 1) {
  ImportContext ctx;
  ctx.devices = 8;
  std::string text = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = 4096\n";
  text += "[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"" + option + "\"\n";
  if (pp > 1) text += "[parallelism]\npipeline_parallel_degree = " + std::to_string(pp) + "\n";
  return import_torchtitan(text, ctx, "ac.toml");
}

Plan plan_with(sim::Recompute r, int every = 0, int pp = 1) {
  sim::ParallelConfig c;
  c.seq_len = 4096, c.pp = pp, c.dp = 8 / pp, c.zero_stage = pp > 1 ? 1 : 3, c.recompute = r, c.recompute_every = every;
  return shardplan::testing::plan_of("llama3.1-8b", "p5.48xlarge", 1, c);
}

ImportResult reimport(const Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  return import_torchtitan(torchtitan_toml(p), ctx, "torchtitan.toml");
}

TEST(TorchtitanRecompute, OpImportsAsOpSacAndExportsBack) {
  const ImportResult r = import_ac("op");
  EXPECT_EQ(r.config.recompute, sim::Recompute::op_sac);
  EXPECT_EQ(r.config.recompute_every, 0);
  const Plan p = plan_with(sim::Recompute::op_sac);
  const std::string toml = torchtitan_toml(p);
  EXPECT_TRUE(contains(toml, "mode = \"selective\"")) << toml;
  EXPECT_TRUE(contains(toml, "selective_ac_option = \"op\"")) << toml;
  EXPECT_EQ(reimport(p).config.recompute, sim::Recompute::op_sac);
}

TEST(TorchtitanRecompute, DigitsImportAsEveryNthBlockAndExportBack) {
  for (const int n : {2, 3}) {
    SCOPED_TRACE(n);
    const ImportResult r = import_ac(std::to_string(n), 2);
    EXPECT_EQ(r.config.recompute, sim::Recompute::full);
    EXPECT_EQ(r.config.recompute_every, n);
    EXPECT_EQ(r.config.recompute_num_layers, 0);
    const Plan p = plan_with(sim::Recompute::full, n, 2);
    const std::string toml = torchtitan_toml(p);
    EXPECT_TRUE(contains(toml, "selective_ac_option = \"" + std::to_string(n) + "\"")) << toml;
    const ImportResult back = reimport(p);
    EXPECT_EQ(back.config.recompute, sim::Recompute::full);
    EXPECT_EQ(back.config.recompute_every, n);
  }
  // "0" and "1" checkpoint every block (activation_checkpoint.py:39-40): full, nothing more.
  for (const char* all : {"0", "1"}) {
    const ImportResult r = import_ac(all);
    EXPECT_EQ(r.config.recompute, sim::Recompute::full);
    EXPECT_EQ(r.config.recompute_every, 0);
  }
}

// Megatron's selective recompute has no torchtitan counterpart; SDPA stores no s x s tensors, so
// mode none keeps what it keeps.
TEST(TorchtitanRecompute, MegatronSelectiveExportsAsNoneWithANote) {
  const Plan p = plan_with(sim::Recompute::selective);
  EXPECT_TRUE(contains(torchtitan_toml(p), "mode = \"none\""));
  const auto notes = torchtitan_notes(p);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) { return contains(n, "op_sac"); }));
}

// One line, naming the policy.
void expect_refusal(const std::string& why, const char* framework, const char* what) {
  SCOPED_TRACE(framework);
  EXPECT_TRUE(contains(why, framework)) << why;
  EXPECT_TRUE(contains(why, what)) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

TEST(RecomputeExports, FrameworksWithoutThePerOpPolicyRefuseIt) {
  const Plan p = plan_with(sim::Recompute::op_sac);
  expect_refusal(input_error_of([&] { megatron_args(p); }), "Megatron-LM export", "op_sac");
  expect_refusal(input_error_of([&] { deepspeed_config(p); }), "DeepSpeed export", "op_sac");
  expect_refusal(input_error_of([&] { smp_parameters(p); }), "SageMaker model parallel v1", "op_sac");
  expect_refusal(input_error_of([&] { smp_v2_config(p); }), "SageMaker model parallel v2", "op_sac");
  expect_refusal(input_error_of([&] { accelerate_yaml(p); }), "Accelerate + FSDP", "op_sac");
}

TEST(RecomputeExports, EveryNthBlockRefusedWhereTheFrameworkPicksTheBlocks) {
  const Plan p = plan_with(sim::Recompute::full, 2);
  expect_refusal(input_error_of([&] { megatron_args(p); }), "Megatron-LM export", "recompute_every 2");
  expect_refusal(input_error_of([&] { accelerate_yaml(p); }), "Accelerate + FSDP", "recompute_every 2");
  expect_refusal(input_error_of([&] { smp_v2_config(p); }), "SageMaker model parallel v2", "recompute_every 2");
  // DeepSpeed's model code wraps the blocks it chooses: written, with a note.
  EXPECT_NO_THROW(deepspeed_config(p));
  const auto notes = deepspeed_notes(p);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) { return contains(n, "every"); }));
}

}  // namespace recompute_interop_test
}  // namespace shardplan::interop
