// Megatron-Core's --pipeline-model-parallel-layout: the strings of Megatron's own tests and docs
// parsed into partitions (or refused in one line), partitions written as layouts, and plans with
// embedding-only / head-only chunks exported and imported back. Sources at NVIDIA/Megatron-LM
// d98e8a64ddf34856e74b24714e3bedb2f5a39553.
#include <gtest/gtest.h>

#include "interop/config_import.hpp"
#include "interop/golden.hpp"
#include "interop/launch_export.hpp"
#include "interop/megatron_layout.hpp"
#include "interop/neuron.hpp"
#include "simulator/errors.hpp"

namespace shardplan::interop {
namespace megatron_layout_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using shardplan::testing::golden::golden_plan;

constexpr const char* kFlag = "--pipeline-model-parallel-layout";

std::vector<int> parse(const std::string& layout, int pp, long long layers = 0) {
  return parse_megatron_layout(layout, pp, layers, kFlag);
}

std::string refusal(const std::string& layout, int pp, long long layers = 0) {
  try {
    parse(layout, pp, layers);
  } catch (const sim::InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// tests/unit_tests/transformer/test_transformer_block.py:884-916 (test_parsing_layout_from_str),
// the functional tests' model_config.yaml, and the docstrings; chunk i = virtual stage i / pp of
// rank i % pp, the partition's order.
TEST(MegatronLayout, TheStringsOfMegatronsTestsParseToTheirPartitions) {
  EXPECT_EQ(parse("Et|t*4|t|tL", 2), (std::vector<int>{1, 4, 1, 1}));  // :886-887
  EXPECT_EQ(parse("E|t*6|t|L", 2), (std::vector<int>{0, 6, 1, 0}));    // :889
  // tests/functional_tests/test_cases/moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_no_mtp_no_a2a_ovlp_
  // fine_grained_offloading/model_config.yaml:52-54, 15 layers over pp 2 x vpp 4.
  EXPECT_EQ(parse("Et*3|(tt|)*6L", 2, 15), (std::vector<int>{3, 2, 2, 2, 2, 2, 2, 0}));
  // The docstring's example without its MTP chunk (pipeline_parallel_layer_layout.py:285).
  const std::vector<int> deepseek = parse("Ettt|(tt|)*29,L", 31);
  ASSERT_EQ(deepseek.size(), 31u);
  EXPECT_EQ(deepseek.front(), 3);
  EXPECT_EQ(deepseek[15], 2);
  EXPECT_EQ(deepseek.back(), 0);
  // Commas are cosmetic; "x*0" is no x; "(...)*n" may hold separators on either side (:291-296).
  EXPECT_EQ(parse("E,|t*6|,t|L", 2), (std::vector<int>{0, 6, 1, 0}));
  EXPECT_EQ(parse("Et*0|t*4L", 2), (std::vector<int>{0, 4}));
  EXPECT_EQ(parse("E(|tt)*2|L", 4), (std::vector<int>{0, 2, 2, 0}));
  EXPECT_EQ(parse("EtttL", 1), (std::vector<int>{3}));
}

TEST(MegatronLayout, WhatShardplanDoesNotModelIsRefusedInOneLine) {
  // :892-902: an empty chunk (vp 1 of rank 0) in the middle.
  EXPECT_TRUE(contains(refusal("E|t|t*2|t||(t|)*2,t*2,L", 4), "chunk 4 is empty"));
  // MTP layers: :906, :911, transformer_config.py:114, arguments.py:3106.
  for (const auto& [layout, pp] : std::vector<std::pair<std::string, int>>{
           {"Et*3|(tt|)*29,m|L", 8}, {"Et*2|(tt|)*29,t|mL", 16}, {"E|(t|)*3,m|m||L", 4}})
    EXPECT_TRUE(contains(refusal(layout, pp), "no MTP layers (m)")) << layout;
  EXPECT_EQ(refusal("tE|tL", 2),
            std::string(kFlag) + ": expected the embedding E once, as the first layer, got 'tE|tL'");
  EXPECT_TRUE(contains(refusal("Et|LtL", 2), "the loss L once, as the last layer"));
  EXPECT_TRUE(contains(refusal("|Et|tL", 3), "E in the first chunk and L in the last"));
  EXPECT_TRUE(contains(refusal("Et|tL|", 3), "E in the first chunk and L in the last"));
  EXPECT_TRUE(contains(refusal("Et|t|tL", 2), "a multiple of the pipeline size (2) of '|'-separated chunks, 3 in all"));
  EXPECT_TRUE(contains(refusal("Et*4|t*4L", 2, 9), "9 transformer blocks (--num-layers), 8 in the layout"));
  // Python's re.sub leaves what it cannot unroll: nested groups and a doubled '*' stay as text.
  EXPECT_TRUE(contains(refusal("E((t|)*2)*2|L", 2), "found '('"));
  EXPECT_TRUE(contains(refusal("Et**2|tL", 2), "found '*'"));
  EXPECT_TRUE(contains(refusal("Ex|tL", 2), "found 'x'"));
  EXPECT_TRUE(contains(refusal("Et|\ntL", 2), "found '?'"));  // one line whatever the string holds
  EXPECT_TRUE(contains(refusal("Et*99999999999|tL", 2), "at most 1048576"));
}

TEST(MegatronLayout, PartitionsWriteAsLayoutsThatParseBack) {
  EXPECT_EQ(megatron_layout({1, 4, 1, 1}), "Et|t*4|t|tL");  // Megatron's own strings, as its tests write them
  EXPECT_EQ(megatron_layout({0, 6, 1, 0}), "E|t*6|t|L");
  EXPECT_EQ(megatron_layout({0, 16, 16, 0}), "E|(t*16|)*2,L");
  EXPECT_EQ(megatron_layout({3, 2, 2, 2, 2, 2, 2, 0}), "Et*3|(t*2|)*6,L");
  EXPECT_EQ(megatron_layout({5}), "Et*5L");
  const std::vector<std::vector<int>> partitions = {{0, 16, 16, 0},
                                                    {0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0},
                                                    {1, 1},
                                                    {0, 2},
                                                    {2, 0},
                                                    {7},
                                                    {3, 3, 3, 2, 2, 2, 3, 3},
                                                    {0, 1, 1, 2, 2, 1, 1, 0}};
  for (const auto& p : partitions) {
    long long layers = 0;
    for (int l : p) layers += l;
    EXPECT_EQ(parse(megatron_layout(p), static_cast<int>(p.size()), layers), p) << megatron_layout(p);
  }
}

ImportResult round_trip(const formats::Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  ctx.seq_len = 2048;
  return import_megatron(megatron_command_line(p), ctx, "megatron_args.sh");
}

std::string arg_after(const std::vector<std::string>& args, const std::string& flag) {
  const auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

// Llama 3.1 70B (80 layers) on 4 x p5: pp 4 1F1B and pp 4 x vpp 2 with edge-only chunks, and an
// uneven interleaved split no first/last flag can say.
TEST(MegatronLayout, PlansWithEdgeOnlyChunksExportAsALayoutAndReadBack) {
  struct Case {
    int virtual_stages;
    std::vector<int> partition;
    std::string layout;
  };
  const Case cases[] = {{1, {0, 40, 40, 0}, "E|(t*40|)*2,L"},
                        {2, {0, 13, 13, 14, 14, 13, 13, 0}, "E|(t*13|)*2,(t*14|)*2,(t*13|)*2,L"},
                        {2, {9, 10, 10, 11, 11, 10, 10, 9}, "Et*9|(t*10|)*2,(t*11|)*2,(t*10|)*2,t*9L"}};
  for (const Case& k : cases) {
    formats::Plan p = golden_plan("dense-3d");
    p.config.virtual_stages = k.virtual_stages;
    p.config.schedule = k.virtual_stages > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
    p.config.partition = k.partition;
    sim::validate_config(p.model, p.cluster, p.config);
    const auto args = megatron_args(p);
    EXPECT_EQ(arg_after(args, kFlag), k.layout);
    // The layout sets the virtual stages and excludes the uneven-stage flags (arguments.py:928-952).
    EXPECT_EQ(std::count(args.begin(), args.end(), "--num-virtual-stages-per-pipeline-rank"), 0);
    EXPECT_EQ(std::count(args.begin(), args.end(), "--decoder-first-pipeline-num-layers"), 0);
    EXPECT_TRUE(megatron_notes(p).empty()) << megatron_notes(p).front();
    const ImportResult r = round_trip(p);
    EXPECT_EQ(r.config.partition, k.partition);
    EXPECT_EQ(r.config.virtual_stages, k.virtual_stages);
    EXPECT_EQ(r.config.schedule, p.config.schedule);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    sim::ParallelConfig back = r.config;
    EXPECT_NO_THROW(sim::validate_config(p.model, p.cluster, back));
  }
}

std::string import_error(const std::string& script) {
  ImportContext ctx;
  ctx.devices = 8;
  try {
    import_megatron(script, ctx, "train.sh");
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

TEST(MegatronLayout, AHandWrittenLayoutAndTheUnevenStageFlagsImport) {
  ImportContext ctx;
  ctx.devices = 8;
  const ImportResult r = import_megatron(
      "--pipeline-model-parallel-size 4 --num-layers 32 --pipeline-model-parallel-layout 'E|(t*16|)*2,L' "
      "--micro-batch-size 1 --global-batch-size 16",
      ctx, "train.sh");
  EXPECT_EQ(r.config.pp, 4);
  EXPECT_EQ(r.config.partition, (std::vector<int>{0, 16, 16, 0}));
  EXPECT_EQ(r.config.virtual_stages, 1);
  // An even layout is no partition; two chunks per rank interleave.
  const ImportResult even = import_megatron(
      "--pipeline-model-parallel-size 2 --num-layers 8 --pipeline-model-parallel-layout 'Ett|(tt|)*2,ttL'", ctx,
      "a.sh");
  EXPECT_TRUE(even.config.partition.empty());
  EXPECT_EQ(even.config.virtual_stages, 2);
  EXPECT_EQ(even.config.schedule, sim::PipelineSchedule::interleaved);
  // --decoder-first/last-pipeline-num-layers: each > 0 (transformer_config.py:2303, 2322), and the
  // middle stages get the rest evenly, some when there are any (:2340-2353).
  const ImportResult uneven = import_megatron(
      "--pipeline-model-parallel-size 4 --num-layers 32 --decoder-first-pipeline-num-layers 6 "
      "--decoder-last-pipeline-num-layers 6",
      ctx, "b.sh");
  EXPECT_EQ(uneven.config.partition, (std::vector<int>{6, 10, 10, 6}));
  EXPECT_TRUE(contains(import_error("--pipeline-model-parallel-size 4 --num-layers 32 "
                                    "--decoder-first-pipeline-num-layers 0"),
                       "train.sh: --decoder-first-pipeline-num-layers: expected an integer >= 1"));
  EXPECT_TRUE(contains(import_error("--pipeline-model-parallel-size 4 --num-layers 32 "
                                    "--decoder-first-pipeline-num-layers 16 --decoder-last-pipeline-num-layers 16"),
                       "leave an even split of the rest"));
  // --account-for-embedding/loss-in-pipeline-split: each counts as a layer of an even split and
  // comes off the first / last chunk, which may keep none (transformer_block.py:148-201).
  const ImportResult accounted = import_megatron(
      "--pipeline-model-parallel-size 4 --num-layers 14 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split",
      ctx, "c.sh");
  EXPECT_EQ(accounted.config.partition, (std::vector<int>{3, 4, 4, 3}));
  EXPECT_TRUE(std::none_of(accounted.warnings.begin(), accounted.warnings.end(),
                           [](const std::string& w) { return contains(w, "account-for"); }));  // read, not ignored
  const ImportResult edge_chunks = import_megatron(
      "--pipeline-model-parallel-size 4 --num-layers 6 --num-virtual-stages-per-pipeline-rank 2 "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
      ctx, "d.sh");
  EXPECT_EQ(edge_chunks.config.partition, (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(edge_chunks.config.schedule, sim::PipelineSchedule::interleaved);
  EXPECT_TRUE(contains(import_error("--pipeline-model-parallel-size 4 --num-layers 32 "
                                    "--account-for-embedding-in-pipeline-split"),
                       "train.sh: --account-for-embedding-in-pipeline-split: expected --num-layers + 1 for each"));
  EXPECT_TRUE(
      contains(import_error("--pipeline-model-parallel-size 4 --num-layers 30 --account-for-loss-in-pipeline-split "
                            "--decoder-first-pipeline-num-layers 6"),
               "no --decoder-first/last-pipeline-num-layers with it"));
  EXPECT_EQ(import_error("--pipeline-model-parallel-size 4 --num-layers 32 --num-virtual-stages-per-pipeline-rank 2 "
                         "--pipeline-model-parallel-layout 'E|(t*4|)*8,L'"),
            "train.sh: --pipeline-model-parallel-layout: expected no --num-virtual-stages-per-pipeline-rank with it "
            "(Megatron refuses both)");
  EXPECT_EQ(import_error("--pipeline-model-parallel-size 4 --num-layers 32 --pipeline-model-parallel-layout 'E|t|L'"),
            "train.sh: --pipeline-model-parallel-layout: expected a multiple of the pipeline size (4) of "
            "'|'-separated chunks, 3 in all, got 'E|t|L'");
}

// Formats with no way to say an embedding-only or head-only stage refuse the plan in one line.
TEST(MegatronLayout, ExportersThatCannotSayAnEdgeOnlyStageRefuse) {
  formats::Plan p = golden_plan("dense-3d");
  p.config.virtual_stages = 1;
  p.config.schedule = sim::PipelineSchedule::one_f_one_b;
  p.config.partition = {0, 40, 40, 0};
  sim::validate_config(p.model, p.cluster, p.config);
  try {
    (void)deepspeed_config(p);
    ADD_FAILURE() << "the DeepSpeed export took an embedding-only stage";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("DeepSpeed: config.partition: an embedding-only first or head-only last", 0),
              0u)
        << e.what();
  }
  formats::Plan trn = golden_plan("neuron-3d");  // Llama 2 70B, pp 8
  trn.config.partition = {0, 14, 13, 13, 13, 13, 14, 0};
  sim::validate_config(trn.model, trn.cluster, trn.config);
  try {
    (void)neuron_command_line(trn);
    ADD_FAILURE() << "the NxD export took an embedding-only stage";
  } catch (const sim::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "an embedding-only first or head-only last pipeline stage")) << e.what();
  }
  // Megatron says it; so do the mpirun and Slurm scripts (shardrun builds the stages).
  EXPECT_EQ(arg_after(megatron_args(p), kFlag), "E|(t*40|)*2,L");
  EXPECT_NO_THROW((void)mpirun_command(p, "plan.json"));
}

}  // namespace megatron_layout_test
}  // namespace shardplan::interop
