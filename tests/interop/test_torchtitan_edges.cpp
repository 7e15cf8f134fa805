// torchtitan (v0.2.2) pipelines whose first part holds only tok_embeddings and whose last holds
// only norm and output: module_fqns_per_model_part written and read back, torchtitan's own
// example of such a split, the first/last_stage_less_layers keys that generate one, and the
// empty parts shardplan does not model refused. Sources at pytorch/torchtitan 73a0e697 (v0.2.2).
#include <gtest/gtest.h>

#include <toml++/toml.h>
#include <string>
#include <vector>

#include "interop/torchtitan.hpp"
#include "support/plan_of.hpp"

namespace shardplan::interop {
namespace torchtitan_edges_test {  // named, not anonymous: the files share a unity-build unit

namespace sim = shardplan::simulator;
using formats::Plan;

std::vector<std::vector<std::string>> parts_of(const std::string& text) {
  const toml::table t = toml::parse(text, std::string_view("t.toml"));
  std::vector<std::vector<std::string>> out;
  const auto* parts = t["parallelism"]["module_fqns_per_model_part"].as_array();
  if (parts == nullptr) return out;
  for (const auto& part : *parts) {
    out.emplace_back();
    for (const auto& fqn : *part.as_array()) out.back().push_back(fqn.value<std::string>().value_or("?"));
  }
  return out;
}

ImportResult reimport(const Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  return import_torchtitan(torchtitan_toml(p), ctx, "torchtitan.toml");
}

// Llama 3.1 70B (80 layers) on 4 x p5, tp 8: pp 4 1F1B, and pp 2 x 2 chunks interleaved.
TEST(TorchtitanEdges, EdgeOnlyPartsExportAsModuleListsAndReadBack) {
  for (const int v : {1, 2}) {
    sim::ParallelConfig c;
    c.tp = 8, c.pp = 4 / v, c.dp = v, c.seq_len = 4096;
    c.micro_batch_size = 1, c.global_batch_size = 16;
    c.schedule = v > 1 ? sim::PipelineSchedule::interleaved : sim::PipelineSchedule::one_f_one_b;
    c.virtual_stages = v;
    c.partition = {0, 40, 40, 0};
    const Plan p = shardplan::testing::plan_of("llama3.1-70b", "p5.48xlarge", 4, c);
    const std::string text = torchtitan_toml(p);
    const auto parts = parts_of(text);
    ASSERT_EQ(parts.size(), 4u) << text;
    EXPECT_EQ(parts[0], std::vector<std::string>{"tok_embeddings"});
    EXPECT_EQ(parts[1].size(), 40u);
    EXPECT_EQ(parts[1].front(), "layers.0");
    EXPECT_EQ(parts[2].back(), "layers.79");
    EXPECT_EQ(parts[3], (std::vector<std::string>{"norm", "output"}));
    const ImportResult r = reimport(p);
    EXPECT_EQ(r.config.partition, p.config.partition) << text;
    EXPECT_EQ(r.config.pp, p.config.pp);
    EXPECT_EQ(r.config.virtual_stages, v);
    EXPECT_EQ(r.config.schedule, p.config.schedule);
    sim::ParallelConfig back = r.config;
    EXPECT_NO_THROW(sim::validate_config(p.model, p.cluster, back));
  }
}

ImportResult import_text(const std::string& text, int devices) {
  ImportContext ctx;
  ctx.devices = devices;
  return import_torchtitan(text, ctx, "job.toml");
}

std::string error_of(const std::string& text, int devices) {
  try {
    import_text(text, devices);
  } catch (const sim::InputError& e) { return e.what(); }
  return "";
}

TEST(TorchtitanEdges, TorchtitansOwnExampleAndTheLessLayersKeys) {
  // pipeline_module_split's docstring (torchtitan/distributed/pipeline_parallel.py:380-384): the
  // last stage only norm and output.
  const ImportResult doc = import_text(
      "[parallelism]\npipeline_parallel_degree = 3\nmodule_fqns_per_model_part = [[\"tok_embeddings\", "
      "\"layers.0\"], [\"layers.1\", \"layers.2\"], [\"norm\", \"output\"]]\n",
      3);
  EXPECT_EQ(doc.config.partition, (std::vector<int>{1, 2, 0}));
  // generate_llm_fqn_per_model_part (:236-344) with the embeddings and the output each weighing a
  // whole stage (job_config.py:377-387; allowed up to the layers per stage, :289-296): llama3 8B's
  // 32 layers over 4 stages of 16 effective layers give the first and the last none.
  const ImportResult gen = import_text(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\npipeline_parallel_degree = 4\n"
      "pipeline_parallel_first_stage_less_layers = 16\npipeline_parallel_last_stage_less_layers = 16\n",
      4);
  EXPECT_EQ(gen.config.partition, (std::vector<int>{0, 16, 16, 0}));
  // An empty part anywhere else, or an edge part without its modules, is refused in one line.
  const std::string middle = error_of(
      "[parallelism]\npipeline_parallel_degree = 3\nmodule_fqns_per_model_part = [[\"tok_embeddings\", "
      "\"layers.0\"], [], [\"layers.1\", \"norm\", \"output\"]]\n",
      3);
  EXPECT_NE(middle.find("'parallelism.module_fqns_per_model_part'"), std::string::npos) << middle;
  EXPECT_NE(middle.find("part 1 has none"), std::string::npos) << middle;
  EXPECT_EQ(middle.find('\n'), std::string::npos) << middle;
  const std::string no_embeddings = error_of(
      "[parallelism]\npipeline_parallel_degree = 2\nmodule_fqns_per_model_part = [[\"norm\"], [\"layers.0\", "
      "\"output\"]]\n",
      2);
  EXPECT_NE(no_embeddings.find("part 0 has none"), std::string::npos) << no_embeddings;
}

}  // namespace torchtitan_edges_test
}  // namespace shardplan::interop
