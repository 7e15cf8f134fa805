// Properties of `plan` over seeded random scenarios (model, cluster size, batch, sequence):
// every row of `plan --framework F` is one F's export writes and reads back with the same
// memory-relevant knobs (so no export note changes its memory), rows predicted alike are folded,
// no Pareto point is dominated by a ranked row, and FP8 appears only when asked for.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "formats/plan.hpp"
#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "interop/accelerate.hpp"
#include "interop/config_import.hpp"
#include "interop/habana.hpp"
#include "interop/launch_export.hpp"
#include "interop/neuron.hpp"
#include "interop/smp_v2.hpp"
#include "interop/torchtitan.hpp"
#include "planner/framework_space.hpp"
#include "simulator/errors.hpp"
#include "support/framework_cluster.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::planner {
namespace plan_properties_test {  // named: the files share a unity-build unit

namespace sim = shardplan::simulator;
namespace fw = shardplan::frameworks;
using Files = std::vector<std::pair<std::string, std::string>>;
using Export = std::function<Files(const formats::Plan&)>;

struct Scenario {
  sim::ModelSpec model;
  SearchSpace space;
  std::string name;
};

Scenario draw(std::mt19937& rng, int nodes, bool gradient_accumulation, int devices) {
  static const char* models[] = {"llama3.1-8b", "llama2-13b", "llama2-7b", "mistral-7b"};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Scenario s{sim::load_model(models[pick(4)]), {}, ""};
  s.space.node_counts = {nodes};
  s.space.seq_len = pick(2) ? 4096 : 2048;
  // Without gradient accumulation a step is one micro-batch per rank: a batch a few per rank.
  s.space.global_batch_sizes = {gradient_accumulation ? 32 * (1 + pick(4)) : devices * (1 + pick(2))};
  s.name = s.model.name + ", " + std::to_string(nodes) + " node(s), seq " + std::to_string(s.space.seq_len) + ", gbs " +
           std::to_string(s.space.global_batch_sizes.front());
  return s;
}

// The knobs that set a configuration's memory, as the import reads them back.
void expect_same_memory_knobs(const sim::ParallelConfig& want, const sim::ParallelConfig& got,
                              const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.cp, want.cp);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.recompute, want.recompute);
  EXPECT_EQ(got.sequence_parallel, want.sequence_parallel);
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  if (want.pp > 1) {
    EXPECT_EQ(got.virtual_stages, want.virtual_stages);
    EXPECT_EQ(got.schedule, want.schedule);
  }
}

void check_framework_rows(const std::string& spec, const Export& make, std::mt19937& rng) {
  int rows = 0;
  const fw::FrameworkModel model = fw::parse_framework_spec(spec, "test");
  const sim::ClusterSpec cluster = testing::cluster_for(model.runs);
  for (int draw_index = 0; draw_index < 3; ++draw_index) {
    Scenario s = draw(rng, cluster.nodes, model.runs.gradient_accumulation, cluster.devices());
    Constraints c;
    narrow_to_framework(model, s.space, c, {});
    SearchOptions o;
    o.top_k = 6;
    o.threads = 2;
    const SearchResult r = search(s.model, cluster.hardware, s.space, c, o);
    EXPECT_FALSE(r.ranked.empty()) << spec << ": " << s.name;
    for (const auto& x : r.ranked) {
      const std::string what = spec + ", " + s.name + ": " + x.candidate.key;
      ++rows;
      formats::Plan p;
      p.model = s.model;
      p.cluster = x.candidate.cluster;
      p.config = x.candidate.config;
      p.prediction = x.prediction;
      p.framework = model;
      interop::ImportContext ctx;
      ctx.devices = p.cluster.devices();
      ctx.devices_per_node = p.cluster.per_node();
      ctx.seq_len = p.config.seq_len;
      ctx.micro_batch_size = p.config.micro_batch_size;
      ctx.global_batch_size = p.config.global_batch_size;
      try {
        const Files files = make(p);
        const testing::TempDir dir("plan_properties");
        for (const auto& [name, text] : files) dir.write(name, text);
        const interop::ImportResult back = interop::import_config_file(dir.file(files.front().first), ctx);
        expect_same_memory_knobs(p.config, back.config, what);
      } catch (const sim::InputError& e) { ADD_FAILURE() << what << "\n  export or import refused: " << e.what(); }
    }
  }
  EXPECT_GE(rows, 6) << spec << ": too few rows to say anything";
}

std::string with_newline(std::string s) { return s.empty() || s.back() == '\n' ? s : s + "\n"; }

TEST(PlanProperties, EveryFrameworkRowExportsAndReadsBackWithItsMemoryKnobs) {
  std::mt19937 rng(20261129);
  check_framework_rows(
      "megatron",
      [](const formats::Plan& p) {
        return Files{{"megatron_args.sh", with_newline(interop::megatron_command_line(p))}};
      },
      rng);
  check_framework_rows(
      "torchtitan",
      [](const formats::Plan& p) {
        return Files{{"job.toml", interop::torchtitan_toml(p)}};
      },
      rng);
  check_framework_rows(
      "deepspeed",
      [](const formats::Plan& p) {
        return Files{{"ds_config.json", interop::deepspeed_config(p).dump(2)}};
      },
      rng);
  check_framework_rows(
      "accelerate-fsdp",
      [](const formats::Plan& p) {
        return Files{{"accelerate.yaml", interop::accelerate_yaml(p)}};
      },
      rng);
  check_framework_rows(
      "smp-v2",
      [](const formats::Plan& p) {
        return Files{{"smp_v2.json", interop::smp_v2_config(p).dump(2)}};
      },
      rng);
  check_framework_rows(
      "neuronx-distributed",
      [](const formats::Plan& p) {
        return Files{{"neuron_launch.sh", with_newline(interop::neuron_command_line(p))}};
      },
      rng);
  check_framework_rows(
      "optimum-habana",
      [](const formats::Plan& p) {
        return Files{{"habana_launch.sh", with_newline(interop::habana_command_line(p, "habana_ds_config.json"))},
                     {"habana_ds_config.json", interop::habana_deepspeed_config(p).dump(2)}};
      },
      rng);
}

// Without a framework: folded rows, an undominated front, FP8 only when the space has it.
TEST(PlanProperties, RowsFoldTheFrontIsUndominatedAndFp8OnlyWhenAsked) {
  std::mt19937 rng(7);
  for (int i = 0; i < 6; ++i) {
    const bool fp8 = i % 2 == 1;
    Scenario s = draw(rng, 1 + static_cast<int>(rng() % 2), true, 16);
    if (fp8) s.space.fp8_recipes = {sim::Fp8Recipe::none, sim::Fp8Recipe::delayed};
    SearchOptions o;
    o.top_k = 8;
    o.threads = 2;
    const SearchResult r = search(s.model, sim::load_hardware("p5.48xlarge"), s.space, Constraints{}, o);
    ASSERT_FALSE(r.ranked.empty()) << s.name;
    for (std::size_t a = 0; a < r.ranked.size(); ++a) {
      const auto& x = r.ranked[a];
      if (!fp8) EXPECT_FALSE(x.candidate.config.uses_fp8()) << s.name << ": " << x.candidate.key;
      for (std::size_t b = a + 1; b < r.ranked.size(); ++b) {
        const auto& y = r.ranked[b];
        const bool alike = x.prediction.time.step_s == y.prediction.time.step_s &&
                           x.prediction.worst.total() == y.prediction.worst.total();
        EXPECT_FALSE(alike) << s.name << ": not folded: " << x.candidate.key << " / " << y.candidate.key;
      }
    }
    for (const auto& point : r.pareto) {
      if (!fp8) EXPECT_FALSE(point.config.uses_fp8()) << s.name << ": " << point.key;
      for (const auto& x : r.ranked) {
        const double tp = 1 / point.estimate.tokens_per_s, tx = 1 / x.prediction.tokens_per_s;
        const double mp = point.estimate.worst_memory_bytes, mx = x.prediction.worst.total();
        const bool dominated = tx <= tp && mx <= mp && x.candidate.usd_per_token <= point.usd_per_token &&
                               (tx < tp || mx < mp || x.candidate.usd_per_token < point.usd_per_token);
        EXPECT_FALSE(dominated) << s.name << ": front point " << point.key << " dominated by " << x.candidate.key;
      }
    }
  }
}

}  // namespace plan_properties_test
}  // namespace shardplan::planner
