// Checkpoint and resume of the layouts whose ranks hold different state beyond tp/pp/ZeRO shards:
// expert parallelism (each ep rank its own experts; at ZeRO-0 the first rank of every
// expert-data group writes, keys carry the ep index) and context parallelism (weights replicated
// over dp x cp, ZeRO-sharded over it). A run stopped after a checkpoint and resumed reaches the
// uninterrupted run's losses bit for bit.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace shardplan::testing {
namespace checkpoint_layouts_test {  // named, not anonymous: the files share a unity-build unit

struct CkLayout {
  std::string name;
  std::string model;
  int ranks;
  nlohmann::json config;
};

std::ostream& operator<<(std::ostream& os, const CkLayout& l) { return os << l.name; }

class CheckpointLayouts : public ::testing::TestWithParam<CkLayout> {};

TEST_P(CheckpointLayouts, StoppedAndResumedRunReachesBitIdenticalLosses) {
  const CkLayout& l = GetParam();
  TempDir dir("shardrun_ckpt_" + l.name);
  nlohmann::json cfg = {{"expert_parallel", 1}, {"expert_tensor_parallel", 0}};
  for (auto& [k, v] : l.config.items()) cfg[k] = v;
  const std::string plan = write_plan(dir, l.name, l.model, cfg);
  const std::string common = corpus_data_args(dir) + " --steps 8 --lr 1e-3 --dropout 0";
  const RunResult full = shardrun(l.ranks, plan, dir.file("full"), common);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_EQ(full.losses.size(), 8u);
  const std::string ck = " --checkpoint-dir " + quote(dir.file("ck")) + " --checkpoint-every 3";
  const RunResult first = shardrun(l.ranks, plan, dir.file("first"), common + ck + " --stop-after 4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const RunResult resumed = shardrun(l.ranks, plan, dir.file("resumed"), common + ck + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 5u);  // steps 4..8, from the step-3 checkpoint
  for (size_t i = 0; i < resumed.losses.size(); ++i)
    EXPECT_EQ(resumed.losses[i], full.losses[i + 3]) << "step " << i + 4;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CheckpointLayouts,
    ::testing::Values(
        CkLayout{"moe_dp2_ep2_zero0", "tiny-moe", 2, {{"data_parallel", 2}, {"expert_parallel", 2}, {"zero_stage", 0}}},
        CkLayout{"moe_dp4_ep2_zero1", "tiny-moe", 4, {{"data_parallel", 4}, {"expert_parallel", 2}, {"zero_stage", 1}}},
        CkLayout{
            "llama_cp2_dp2_zero3",
            "tiny-llama",
            4,
            {{"context_parallel", 2}, {"context_parallel_kind", "ring"}, {"data_parallel", 2}, {"zero_stage", 3}}}),
    [](const ::testing::TestParamInfo<CkLayout>& info) { return info.param.name; });

}  // namespace checkpoint_layouts_test
}  // namespace shardplan::testing
