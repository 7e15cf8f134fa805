// Tensor-parallel communication overlap (tp_comm_overlap; Megatron-Core --tp-comm-overlap): SP's
// all-gathers and reduce-scatters pipelined with the GEMMs beside them hide at most all but one
// chunk (1/t) of their time, never add any, leave FLOPs and memory unchanged, need SP, and travel
// through plan JSON and the Megatron export.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace {

using testing::cluster;
using testing::config;
using testing::run;

ParallelConfig sp_config(const ClusterSpec& c, int tp) {
  ParallelConfig cfg = config(c, tp, 1, 1, 1, 8 / tp * c.nodes, 4096);
  cfg.sequence_parallel = true;
  return cfg;
}

TEST(TpOverlap, HidesAtMostAllButOneChunkOfTheTpCollectives) {
  const ModelSpec m = load_model("llama2-13b");
  for (const char* hw : {"p4de.24xlarge", "p5.48xlarge"})
    for (int tp : {2, 4, 8}) {
      const ClusterSpec c = cluster(hw, 1);
      ParallelConfig cfg = sp_config(c, tp);
      const Prediction plain = run(m, c, cfg);
      cfg.tp_comm_overlap = true;
      const Prediction over = run(m, c, cfg);
      EXPECT_LT(over.time.tp_comm_s, plain.time.tp_comm_s) << hw << " tp " << tp;
      EXPECT_GE(over.time.tp_comm_s, plain.time.tp_comm_s / tp * (1 - 1e-9)) << hw << " tp " << tp;
      EXPECT_LT(over.time.step_s, plain.time.step_s);
      EXPECT_DOUBLE_EQ(over.model_flops_per_step, plain.model_flops_per_step);
      EXPECT_DOUBLE_EQ(over.worst.total(), plain.worst.total());
    }
}

TEST(TpOverlap, NeedsSequenceParallelism) {
  const ModelSpec m = load_model("llama2-13b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = sp_config(c, 4);
  cfg.sequence_parallel = false;
  cfg.tp_comm_overlap = true;
  try {
    validate_config(m, c, cfg);
    FAIL() << "accepted without SP";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--tp-comm-overlap"), std::string::npos) << e.what();
  }
}

TEST(TpOverlap, PlanJsonAndMegatronExport) {
  planner::Plan p;
  p.model = load_model("llama2-13b");
  p.cluster = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = sp_config(p.cluster, 4);
  cfg.tp_comm_overlap = true;
  validate_config(p.model, p.cluster, cfg);
  p.config = cfg;
  EXPECT_TRUE(config_from_json(to_json(cfg), "round trip").tp_comm_overlap);
  const auto args = interop::megatron_args(p);
  EXPECT_NE(std::find(args.begin(), args.end(), "--tp-comm-overlap"), args.end());
}

}  // namespace
}  // namespace shardplan::simulator
