// The runtime's rows of the memory breakdown (runtime_memory.hpp): present, sourced, summed, and
// counted per communicator the configuration uses; the framework's figure picked like for like.
#include <gtest/gtest.h>

#include <fstream>

#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace {

using testing::cluster;
using testing::config;

TEST(RuntimeMemory, CommunicatorsAreTheGroupsAStepRunsCollectivesOn) {
  ParallelConfig c;
  c.dp = 8;
  EXPECT_EQ(communicators_used(c), 1);  // gradients
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  EXPECT_EQ(communicators_used(c), 3);  // tp, pp, dp
  c.cp = 2;
  EXPECT_EQ(communicators_used(c), 4);  // + cp (the gradient group is dp x cp)
  c = ParallelConfig{};
  c.dp = 16;
  c.zero_stage = 3;
  c.sharding_degree = 8;
  EXPECT_EQ(communicators_used(c), 2);  // HSDP: shard group and replica group
  c = ParallelConfig{};
  c.tp = 1;
  c.dp = 1;
  EXPECT_EQ(communicators_used(c), 0);  // one device: no communicator at all
}

TEST(RuntimeMemory, RowsComeFromTheProfileAndTheConfiguration) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 2);
  ParallelConfig cfg = config(c, 2, 2, 1, 1, 64, 2048);
  const Prediction p = simulate(m, c, cfg);
  const RuntimeMemory& rm = c.hardware.device.runtime_memory;
  ASSERT_GT(rm.context_bytes, 0);
  ASSERT_GT(rm.communicator_bytes, 0);
  for (const auto& st : p.stages) {
    EXPECT_EQ(st.memory.runtime_context, rm.context_bytes);
    EXPECT_EQ(st.memory.communicators, 3 * rm.communicator_bytes);  // tp, pp, dp
    EXPECT_EQ(st.memory.library_workspace, rm.library_workspace_bytes);
    const MemoryBreakdown& b = st.memory;
    EXPECT_DOUBLE_EQ(b.total(), b.parameters + b.gradients + b.optimizer_states + b.activations + b.lora +
                                    b.comm_buffers + b.workspace + b.runtime_context + b.communicators +
                                    b.library_workspace);
    EXPECT_DOUBLE_EQ(b.total(), b.allocated() + b.runtime());
  }
}

// Every row of the shipped GPU profiles says where its figure comes from.
TEST(RuntimeMemory, ShippedRowsAreSourced) {
  for (const char* name : {"p4d.24xlarge", "p5.48xlarge"}) {
    const nlohmann::json j = read_json_file(data_dir() + "/hardware_profiles/" + name + ".json");
    for (const char* row : {"context_MiB", "communicator_MiB", "library_workspace_MiB"}) {
      ASSERT_TRUE(j["device"]["runtime_memory"].contains(row)) << name << " " << row;
      const std::string key = std::string("device.runtime_memory.") + row;
      ASSERT_TRUE(j["sources"].contains(key)) << name << ": no source for " << key;
      EXPECT_GT(j["sources"][key].get<std::string>().size(), 40u) << name << " " << key;
    }
  }
}

// shardrun on the CPU counts tensor bytes exactly: no runtime rows there.
TEST(RuntimeMemory, TheCpuProfileHasNone) {
  const ClusterSpec c = cluster("local-cpu-2core", 1);
  ParallelConfig cfg = config(c, 1, 1, 0, 1, 2, 128);
  const Prediction p = simulate(load_model("tiny-llama"), c, cfg);
  EXPECT_EQ(p.worst.runtime(), 0);
  EXPECT_EQ(p.worst.total(), p.worst.allocated());
}

// A framework's caching-allocator slack shows in the reserved figure only: what must fit is the
// tensors and the runtime (the allocator frees its cache and retries before failing).
TEST(RuntimeMemory, AllocatorSlackIsReservedNotRequired) {
  const ModelSpec m = load_model("llama2-7b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = config(c, 1, 1, 3, 1, 8, 2048);
  const Prediction plain = simulate(m, c, cfg);
  cfg.framework.allocator_slack_fraction = 0.2;
  cfg.framework.reports = MemoryReport::reserved;
  cfg.framework.name = "test@1";
  const Prediction slack = simulate(m, c, cfg);
  EXPECT_DOUBLE_EQ(slack.worst.total(), plain.worst.total());
  EXPECT_EQ(slack.feasible, plain.feasible);
  EXPECT_DOUBLE_EQ(slack.worst.reserved(), 1.2 * slack.worst.allocated());
  EXPECT_DOUBLE_EQ(slack.worst.device(), slack.worst.reserved() + slack.worst.runtime());
  EXPECT_DOUBLE_EQ(slack.worst.reported(MemoryReport::reserved), slack.worst.reserved());
  EXPECT_DOUBLE_EQ(slack.worst.reported(MemoryReport::allocated), slack.worst.allocated());
  EXPECT_EQ(slack.framework_name, "test@1");
}

// An older profile's lump runtime_reserved is still read, as the context row.
TEST(RuntimeMemory, ALumpRuntimeReserveIsTheContext) {
  nlohmann::json over = {{"device", {{"runtime_memory", nullptr}, {"runtime_reserved_GiB", 1.5}}}};
  const HardwareProfile hw = load_hardware_with_overrides("p4d.24xlarge", over, "test");
  EXPECT_EQ(hw.device.runtime_memory.context_bytes, 1.5 * 1073741824.0);
  EXPECT_EQ(hw.device.runtime_memory.communicator_bytes, 0);
}

}  // namespace
}  // namespace shardplan::simulator
