// The search space as text (planner/space_parse.hpp): a configuration spec (`plan --why`) takes
// every field the space fixes from SearchSpace::base_config, packing included; list flags read
// the enum name tables and name the flag when a name is unknown; the front ends' default texts
// (search_defaults) parse back to SearchSpace{}'s own lists.
#include <gtest/gtest.h>

#include <string>

#include "planner/search_defaults.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {
namespace space_parse_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;

TEST(SpaceParse, AWhySpecIsJudgedWithTheSpacesPacking) {
  const sim::ModelSpec m = sim::load_model("llama2-7b");
  const sim::HardwareProfile hw = sim::load_hardware("p4de.24xlarge");
  SearchSpace space;
  space.seq_len = 8192;
  space.global_batch_sizes = {64};
  space.packed_document_tokens = 512;
  space.fusion = sim::Fusion::megatron;
  space.rank_order = "tp-pp-dp";
  Constraints c;
  c.memory_headroom = 0.1;
  const auto [cluster, cfg] = parse_config_spec("tp=2,pp=1,zero=1,mbs=1", m, hw, space, c);
  EXPECT_EQ(cfg.packed_document_tokens, 512);
  EXPECT_EQ(cfg.seq_len, 8192);
  EXPECT_EQ(cfg.fusion, sim::Fusion::megatron);
  EXPECT_EQ(cfg.rank_order, "tp-pp-dp");
  EXPECT_DOUBLE_EQ(cfg.memory_headroom, 0.1);
  EXPECT_EQ(cfg.dp, 4);
  // And so is its prediction: packed documents shorten the attention core.
  space.packed_document_tokens = 0;
  auto [cluster0, whole] = parse_config_spec("tp=2,pp=1,zero=1,mbs=1", m, hw, space, c);
  sim::ParallelConfig packed_cfg = cfg;
  const sim::Prediction packed = sim::simulate(m, cluster, packed_cfg);
  const sim::Prediction unpacked = sim::simulate(m, cluster0, whole);
  EXPECT_LT(packed.time.step_s, unpacked.time.step_s);
}

TEST(SpaceParse, BaseConfigAndCompleteConfigSetWhatTheSpaceFixes) {
  SearchSpace space;
  space.grad_accum_dtype = sim::GradAccumDtype::fp32;
  space.tp_comm_overlap = true;
  sim::ParallelConfig cfg = space.base_config(Constraints{});
  cfg.zero_stage = 1;
  cfg.sequence_parallel = true;
  space.complete_config(cfg);
  EXPECT_EQ(cfg.grad_accum_dtype, sim::GradAccumDtype::fp32);
  EXPECT_TRUE(cfg.tp_comm_overlap);
  cfg.zero_stage = 2;  // reduces every micro-batch: no fp32 accumulation buffer
  cfg.sequence_parallel = false;
  space.complete_config(cfg);
  EXPECT_EQ(cfg.grad_accum_dtype, sim::GradAccumDtype::param);
  EXPECT_FALSE(cfg.tp_comm_overlap);
}

TEST(SpaceParse, ListsReadTheNameTablesAndNameTheFlag) {
  EXPECT_EQ(
      parse_schedules("interleaved,1f1b"),
      (std::vector<sim::PipelineSchedule>{sim::PipelineSchedule::interleaved, sim::PipelineSchedule::one_f_one_b}));
  EXPECT_EQ(parse_precisions("fp16").front(), sim::Precision::fp16);
  try {
    parse_recomputes("none,sometimes");
    FAIL() << "accepted an unknown recompute mode";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--recompute: expected none, selective, full or op_sac, got 'sometimes'");
  }
  EXPECT_THROW(parse_attention("flash2"), sim::InputError);
  EXPECT_THROW(parse_schedules(""), sim::InputError);
}

TEST(SpaceParse, TheDefaultTextsParseBackToTheSearchSpacesDefaults) {
  const SearchDefaults& d = search_defaults();
  const SearchSpace s;
  EXPECT_EQ(parse_int_list("--nodes", d.nodes, true), s.node_counts);
  EXPECT_EQ(parse_int_list("--micro-batch-sizes", d.micro_batch_sizes, false), s.micro_batch_sizes);
  EXPECT_EQ(parse_int_list("--zero-stages", d.zero_stages, false), s.zero_stages);
  EXPECT_EQ(parse_int_list("--virtual-stages", d.virtual_stages, false), s.virtual_stages);
  EXPECT_EQ(parse_schedules(d.schedules), s.schedules);
  EXPECT_EQ(parse_recomputes(d.recomputes), s.recomputes);
  EXPECT_EQ(parse_precisions(d.precisions), s.precisions);
  EXPECT_EQ(parse_attention(d.attention), s.attention);
  EXPECT_EQ(parse_fusion(d.fusion), s.fusion);
  EXPECT_EQ(d.objective, "throughput");
  EXPECT_EQ(number_text(d.memory_headroom), "0.05");
}

}  // namespace space_parse_test
}  // namespace shardplan::planner
