#pragma once
// Golden-file support for the interop tests: the plans every format is exported from, and a
// comparison with the expected text in tests/data/interop/golden/<plan>/<file>.
//
// Regenerate after an intended change of an exporter (then review the diff):
//   SHARDPLAN_UPDATE_GOLDEN=1 build/release/tests/interop_tests
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/plan_of.hpp"

namespace shardplan::testing::golden {

struct GoldenPlan {
  std::string name;
  formats::Plan plan;
};

// dense-3d:   Llama 3.1 70B on 4 x p5.48xlarge (32 H100): tp 4, pp 4, dp 2, ZeRO-1 (distributed
//             optimizer), 1F1B with 2 virtual stages, sequence parallel, selective recompute,
//             bf16, flash attention, Megatron-style fused kernels.
// zero3-lora: Llama 2 70B LoRA (rank 8 on q_proj, v_proj) on one Gaudi2 HLS-2 (8 cards): ZeRO-3,
//             micro-batch 10, full recompute, bf16 — the Optimum-Habana Llama-2-70B LoRA example.
// moe-cp:     Mixtral 8x7B on 4 x p5.48xlarge: tp 2, cp 2 (ring), ep 4, dp 8, ZeRO-1, bf16.
// neuron-3d:  Llama 2 70B on 32 x trn1.32xlarge counted in NeuronCores: tp 8, pp 8, dp 16,
//             ZeRO-1, sequence parallel, full recompute (tp 8: the card has 8 KV heads).
inline std::vector<GoldenPlan> golden_plans() {
  namespace sim = shardplan::simulator;
  std::vector<GoldenPlan> out;
  {
    sim::ParallelConfig c;
    c.tp = 4, c.pp = 4, c.dp = 2, c.zero_stage = 1;
    c.micro_batch_size = 1, c.global_batch_size = 64, c.seq_len = 8192;
    c.schedule = sim::PipelineSchedule::interleaved, c.virtual_stages = 2;
    c.sequence_parallel = true, c.recompute = sim::Recompute::selective;
    c.precision = sim::Precision::bf16, c.attention = sim::AttentionKind::flash, c.fusion = sim::Fusion::megatron;
    out.push_back({"dense-3d", plan_of("llama3.1-70b", "p5.48xlarge", 4, c)});
  }
  {
    sim::ParallelConfig c;
    c.tp = 1, c.pp = 1, c.dp = 8, c.zero_stage = 3;
    c.micro_batch_size = 10, c.global_batch_size = 80, c.seq_len = 2048;
    c.recompute = sim::Recompute::full, c.precision = sim::Precision::bf16;
    c.lora.rank = 8, c.lora.alpha = 16, c.lora.dropout = 0.05, c.lora.targets = {"q_proj", "v_proj"};
    out.push_back({"zero3-lora", plan_of("llama2-70b", "gaudi2-hls2", 1, c)});
  }
  {
    sim::ParallelConfig c;
    c.tp = 2, c.cp = 2, c.pp = 1, c.dp = 8, c.ep = 4, c.zero_stage = 1;
    c.micro_batch_size = 1, c.global_batch_size = 64, c.seq_len = 16384;
    c.sequence_parallel = true, c.precision = sim::Precision::bf16, c.fusion = sim::Fusion::megatron;
    out.push_back({"moe-cp", plan_of("mixtral-8x7b", "p5.48xlarge", 4, c)});
  }
  {
    sim::ParallelConfig c;
    c.tp = 8, c.pp = 8, c.dp = 16, c.zero_stage = 1;
    c.micro_batch_size = 1, c.global_batch_size = 1024, c.seq_len = 4096;
    c.sequence_parallel = true, c.recompute = sim::Recompute::full, c.precision = sim::Precision::bf16;
    c.attention = sim::AttentionKind::eager;
    out.push_back({"neuron-3d", plan_of("llama2-70b", "trn1.32xlarge-neuroncore", 32, c)});
  }
  return out;
}

inline const formats::Plan& golden_plan(const std::string& name) {
  static const std::vector<GoldenPlan> plans = golden_plans();
  for (const auto& p : plans)
    if (p.name == name) return p.plan;
  throw std::runtime_error("no golden plan " + name);
}

// Compares `text` with tests/data/interop/golden/<plan>/<file>; with SHARDPLAN_UPDATE_GOLDEN=1
// writes it instead.
inline void expect_golden(const std::string& plan, const std::string& file, const std::string& text) {
  const std::filesystem::path path =
      std::filesystem::path(SHARDPLAN_TEST_DATA_DIR) / "interop" / "golden" / plan / file;
  const char* update = std::getenv("SHARDPLAN_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " is missing (SHARDPLAN_UPDATE_GOLDEN=1 writes it)";
  std::ostringstream s;
  s << in.rdbuf();
  EXPECT_EQ(text, s.str()) << "golden file " << path << " differs (SHARDPLAN_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace shardplan::testing::golden
