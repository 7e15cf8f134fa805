// Tensor-parallel communication overlap (tp_comm_overlap; Megatron-Core --tp-comm-overlap): SP's
// all-gathers and reduce-scatters pipelined with the GEMMs beside them hide at most all but one
// chunk (1/t) of their time, never add any, leave FLOPs and memory unchanged, need SP, and travel
// through plan JSON and the Megatron export. Without it, SP's backward re-gathers each column
// region's input beside the dgrad GEMM and reduce-scatters its gradient beside the wgrad GEMM
// (Megatron-Core, TE): 3 half-all-reduces a region where forward has 2, of which only the
// row output's all-gather must block.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "interop/launch_export.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace tp_overlap_test {  // named, not anonymous: the files share a unity-build unit

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

// TP collectives per step, SP against the all-reduce form (2 all-reduces each way a block):
// SP's backward adds the re-gather (3 half-all-reduces a region against forward's 2: a block's
// collectives 5/4 of the all-reduce form where nothing overlaps, as on CPU ranks under MPI); on
// GPUs the async re-gather and reduce-scatter hide behind the GEMMs down to the blocking
// all-gather (3/4).
TEST(SpBackward, ReGathersBesideDgradAndReduceScattersBesideWgrad) {
  struct Case {
    const char* model;
    const char* hw;
    int tp, seq;
  };
  for (const Case& k : {Case{"tiny-llama", "local-cpu-2core", 2, 128}, Case{"llama2-13b", "p5.48xlarge", 4, 4096},
                        Case{"llama2-13b", "p4de.24xlarge", 8, 4096}}) {
    const ModelSpec m = load_model(k.model);
    const ClusterSpec c = cluster(k.hw, 1);
    ParallelConfig cfg = config(c, k.tp, 1, 1, 1, c.devices() / k.tp, k.seq);
    const double all_reduce_form = run(m, c, cfg).time.tp_comm_s;
    cfg.sequence_parallel = true;
    const double sp = run(m, c, cfg).time.tp_comm_s;
    const double overlap = c.hardware.node.intra.compute_overlap;
    // (The embedding's and head's collectives are the same in both forms, so the ratios sit
    // inside the blocks' 5/4 and 3/4.)
    if (overlap == 0.0) {
      EXPECT_GT(sp, all_reduce_form * 1.1) << k.hw;
      EXPECT_LE(sp, all_reduce_form * 1.25) << k.hw;
    } else {
      EXPECT_GE(sp, all_reduce_form * 0.75) << k.hw;
      EXPECT_LT(sp, all_reduce_form * 0.9) << k.hw;  // these GEMMs are long enough to hide them
    }
    // A frozen base (LoRA) has no wgrad GEMM to hide the reduce-scatter behind.
    cfg.lora.rank = 8;
    cfg.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
    const double lora_sp = run(m, c, cfg).time.tp_comm_s;
    if (overlap > 0.0) { EXPECT_GT(lora_sp, sp) << k.hw; }
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
  formats::Plan p;
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

}  // namespace tp_overlap_test
}  // namespace shardplan::simulator
