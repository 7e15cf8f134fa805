// Hugging Face Accelerate (FSDP): the config YAML export (golden file, refusals, keys checked by
// parsing it back), the `accelerate launch` line (run against a fake `accelerate` with hostile
// paths) and round trips import(export(plan)); the import is in test_accelerate_import.cpp.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>
#include "interop/script_support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate_support.hpp"
#include "formats/shell_quote.hpp"
#include "golden.hpp"
#include "interop/accelerate.hpp"
#include "simulator/errors.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace accelerate_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

using namespace accelerate_test;  // NOLINT: p5_plan, devices, import_error, expect_round_trip, ...
namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using formats::Plan;
using formats::shell_quote;
using shardplan::testing::input_error_of;
using shardplan::testing::plan_of;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;
using shardplan::testing::golden::golden_plans;

}  // namespace accelerate_test

namespace accelerate_test {  // named, not anonymous: the files share a unity-build unit

// --- export: golden files and refusals -------------------------------------------------------

TEST(AccelerateExport, GoldenPlans) {
  int accepted = 0;
  for (const auto& g : golden_plans()) {
    SCOPED_TRACE(g.name);
    if (g.name == "zero3-lora") {
      expect_golden(g.name, "accelerate_fsdp.yaml", accelerate_yaml(g.plan));
      ++accepted;
      continue;
    }
    // The other three need pipeline or expert parallelism, which Accelerate + FSDP has not.
    const std::string why = input_error_of([&] { (void)accelerate_yaml(g.plan); });
    EXPECT_NE(why.find(g.plan.config.pp > 1 ? "pipeline parallelism (pp " : "expert parallelism (ep 4)"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("Accelerate + FSDP cannot run this plan"), std::string::npos) << why;
  }
  EXPECT_EQ(accepted, 1);
}

TEST(AccelerateExport, Zero3LoraKeysAsAccelerateReadsThem) {
  const Plan& plan = golden_plan("zero3-lora");
  const YAML::Node y = YAML::Load(accelerate_yaml(plan));
  EXPECT_EQ(y["compute_environment"].as<std::string>(), "LOCAL_MACHINE");
  EXPECT_EQ(y["distributed_type"].as<std::string>(), "FSDP");
  EXPECT_EQ(y["num_machines"].as<int>(), 1);
  EXPECT_EQ(y["num_processes"].as<int>(), 8);
  EXPECT_EQ(y["machine_rank"].as<int>(), 0);
  EXPECT_EQ(y["mixed_precision"].as<std::string>(), "bf16");
  EXPECT_EQ(y["rdzv_backend"].as<std::string>(), "static");
  EXPECT_TRUE(y["same_network"].as<bool>());
  EXPECT_FALSE(y["use_cpu"].as<bool>());
  const YAML::Node f = y["fsdp_config"];
  EXPECT_EQ(f["fsdp_version"].as<int>(), 2);
  EXPECT_TRUE(f["fsdp_reshard_after_forward"].as<bool>());     // ZeRO-3
  EXPECT_TRUE(f["fsdp_activation_checkpointing"].as<bool>());  // full recompute
  EXPECT_FALSE(f["fsdp_offload_params"].as<bool>());
  EXPECT_EQ(f["fsdp_auto_wrap_policy"].as<std::string>(), "TRANSFORMER_BASED_WRAP");
  EXPECT_EQ(f["fsdp_transformer_layer_cls_to_wrap"].as<std::string>(), "LlamaDecoderLayer");
  EXPECT_EQ(f["fsdp_state_dict_type"].as<std::string>(), "SHARDED_STATE_DICT");
  EXPECT_FALSE(f["fsdp_sharding_strategy"]);  // FSDP2 reads the bool only
  EXPECT_FALSE(y["parallelism_config"]);      // no tp, cp or HSDP
  const auto notes = accelerate_notes(plan);
  EXPECT_TRUE(any_mentions(notes,
                           "peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=[\"q_proj\", "
                           "\"v_proj\"])"));
  EXPECT_TRUE(any_mentions(notes, "Accelerator(gradient_accumulation_steps=1)"));
}

TEST(AccelerateExport, Fp32IsAQuotedNoAndZero0IsFsdp1NoShard) {
  const Plan plan = p5_plan(1, [](sim::ParallelConfig& c) {
    c.zero_stage = 0;
    c.precision = sim::Precision::fp32;
  });
  const std::string text = accelerate_yaml(plan);
  // Unquoted, PyYAML (YAML 1.1) would read `no` as False.
  EXPECT_NE(text.find("mixed_precision: 'no'\n"), std::string::npos) << text;
  const YAML::Node f = YAML::Load(text)["fsdp_config"];
  EXPECT_EQ(f["fsdp_version"].as<int>(), 1);
  // FSDP1 runs fsdp_sharding_strategy (accelerator.py:1940): both carry NO_SHARD.
  EXPECT_EQ(f["fsdp_sharding_strategy"].as<std::string>(), "NO_SHARD");
  EXPECT_EQ(f["fsdp_reshard_after_forward"].as<std::string>(), "NO_SHARD");
  EXPECT_EQ(f["fsdp_backward_prefetch"].as<std::string>(), "BACKWARD_PRE");
  EXPECT_TRUE(f["fsdp_use_orig_params"].as<bool>());
  EXPECT_TRUE(f["fsdp_sync_module_states"].as<bool>());
  EXPECT_TRUE(f["fsdp_cpu_ram_efficient_loading"].as<bool>());
  expect_round_trip(plan);
}

TEST(AccelerateExport, TensorContextAndHybridShardingGoToParallelismConfig) {
  // 4 nodes: tp 2 x cp 2 x dp 8, ZeRO-3 sharded over groups of 4 (HSDP: 2 replicas).
  const Plan plan = p5_plan(4, [](sim::ParallelConfig& c) {
    c.tp = 2, c.cp = 2, c.dp = 8, c.sharding_degree = 4;
    c.seq_len = 16384;
  });
  const std::string text = accelerate_yaml(plan);
  const YAML::Node y = YAML::Load(text);
  EXPECT_EQ(y["num_machines"].as<int>(), 4);
  EXPECT_EQ(y["num_processes"].as<int>(), 32);
  EXPECT_EQ(y["fsdp_config"]["fsdp_version"].as<int>(), 2);
  const YAML::Node p = y["parallelism_config"];
  EXPECT_EQ(p["parallelism_config_dp_replicate_size"].as<int>(), 2);
  EXPECT_EQ(p["parallelism_config_dp_shard_size"].as<int>(), 4);
  EXPECT_EQ(p["parallelism_config_tp_size"].as<int>(), 2);
  EXPECT_EQ(p["parallelism_config_cp_size"].as<int>(), 2);
  EXPECT_EQ(p["parallelism_config_cp_comm_strategy"].as<std::string>(), "alltoall");
  EXPECT_NE(text.find("is FSDP1's HYBRID_SHARD"), std::string::npos) << text;
  const auto notes = accelerate_notes(plan);
  EXPECT_TRUE(any_mentions(notes, "tp_plan=\"auto\""));
  EXPECT_TRUE(any_mentions(notes, "maybe_context_parallel"));
  expect_round_trip(plan);
}

TEST(AccelerateExport, LayerClassFromTheModelCard) {
  const auto cls = [](const std::string& model) {
    const Plan plan = p5_plan(
        1, [](sim::ParallelConfig& c) { c.seq_len = 1024; }, model);
    const YAML::Node n = YAML::Load(accelerate_yaml(plan))["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"];
    return n ? n.as<std::string>() : std::string("(none)");
  };
  EXPECT_EQ(cls("mistral-7b"), "MistralDecoderLayer");  // card family "llama": the name decides
  EXPECT_EQ(cls("qwen3-8b"), "Qwen3DecoderLayer");
  EXPECT_EQ(cls("qwen3-30b-a3b"), "Qwen3MoeDecoderLayer");
  EXPECT_EQ(cls("mixtral-8x7b"), "MixtralDecoderLayer");
  EXPECT_EQ(cls("gpt2-xl"), "GPT2Block");
  EXPECT_EQ(cls("gpt-neox-20b"), "GPTNeoXLayer");
  EXPECT_EQ(cls("gpt-j-6b"), "GPTJBlock");
  // A Llama-named MoE card matches no transformers class: left to _no_split_modules, with a note.
  EXPECT_EQ(cls("tiny-moe"), "(none)");
  EXPECT_TRUE(any_mentions(accelerate_notes(p5_plan(
                               1, [](sim::ParallelConfig& c) { c.seq_len = 1024; }, "tiny-moe")),
                           "_no_split_modules"));
}

TEST(AccelerateExport, ApproximationsAreNoted) {
  const Plan plan = p5_plan(1, [](sim::ParallelConfig& c) {
    c.zero_stage = 1;
    c.offload_optimizer = true;
    c.recompute = sim::Recompute::selective;
    c.mixed_precision = sim::MixedPrecision::autocast;
  });
  const auto notes = accelerate_notes(plan);
  EXPECT_TRUE(any_mentions(notes, "ZeRO-1"));
  EXPECT_TRUE(any_mentions(notes, "parameters and gradients to the CPU"));
  EXPECT_TRUE(any_mentions(notes, "selective recompute"));
  EXPECT_TRUE(any_mentions(notes, "autocast"));
  const YAML::Node f = YAML::Load(accelerate_yaml(plan))["fsdp_config"];
  EXPECT_FALSE(f["fsdp_reshard_after_forward"].as<bool>());  // ZeRO-1 runs as ZeRO-2
  EXPECT_TRUE(f["fsdp_offload_params"].as<bool>());
  EXPECT_FALSE(f["fsdp_activation_checkpointing"].as<bool>());
  // Every note is also a comment line of the YAML.
  const std::string text = accelerate_yaml(plan);
  for (const auto& n : notes) EXPECT_NE(text.find("# shardplan note: " + n + "\n"), std::string::npos) << n;
}

TEST(AccelerateExport, Fp8Recipes) {
  const Plan te = p5_plan(1, [](sim::ParallelConfig& c) { c.fp8 = sim::Fp8Recipe::delayed; });
  YAML::Node y = YAML::Load(accelerate_yaml(te));
  EXPECT_EQ(y["mixed_precision"].as<std::string>(), "fp8");
  EXPECT_EQ(y["fp8_config"]["backend"].as<std::string>(), "TE");
  EXPECT_EQ(y["fp8_config"]["fp8_format"].as<std::string>(), "HYBRID");
  expect_round_trip(te);
  const Plan ao = p5_plan(1, [](sim::ParallelConfig& c) {
    c.fp8 = sim::Fp8Recipe::tensorwise;
    c.fp8_param_gather = true;
  });
  y = YAML::Load(accelerate_yaml(ao));
  EXPECT_EQ(y["fp8_config"]["backend"].as<std::string>(), "AO");
  EXPECT_TRUE(y["fp8_config"]["enable_fsdp_float8_all_gather"].as<bool>());
  // torchao with FSDP and cpu_ram_efficient_loading is refused by Accelerate (accelerator.py:517-525).
  EXPECT_FALSE(y["fsdp_config"]["fsdp_cpu_ram_efficient_loading"].as<bool>());
  expect_round_trip(ao);
  const Plan block = p5_plan(1, [](sim::ParallelConfig& c) { c.fp8 = sim::Fp8Recipe::blockwise; });
  y = YAML::Load(accelerate_yaml(block));
  EXPECT_EQ(y["mixed_precision"].as<std::string>(), "bf16");
  EXPECT_FALSE(y["fp8_config"]);
  EXPECT_TRUE(any_mentions(accelerate_notes(block), "blockwise scaling has no Accelerate recipe"));
}

TEST(AccelerateExport, RefusesWhatAccelerateCannotRun) {
  const auto refusal = [](const Plan& plan) { return input_error_of([&] { (void)accelerate_yaml(plan); }); };
  struct Case {
    const char* text;
    std::function<void(sim::ParallelConfig&)> edit;
  };
  const std::vector<Case> cases = {
      {"Ulysses context parallelism",
       [](sim::ParallelConfig& c) { c.cp = 2, c.dp = 4, c.cp_kind = sim::CpKind::all_to_all; }},

      {"ZeRO 0 with tp/cp > 1", [](sim::ParallelConfig& c) { c.tp = 2, c.dp = 4, c.zero_stage = 0; }},
      {"a sharding group of 1 over dp 8", [](sim::ParallelConfig& c) { c.sharding_degree = 1; }},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.text);
    const Plan plan = p5_plan(1, k.edit);
    const std::string why = refusal(plan);
    EXPECT_NE(why.find(k.text), std::string::npos) << why;
    // The notes and the launch line refuse the same plan.
    EXPECT_THROW((void)accelerate_notes(plan), sim::InputError);
    EXPECT_THROW((void)accelerate_command_line(plan, "acc.yaml"), sim::InputError);
  }
  // validate_config refuses cp with eager attention too; the export says why Accelerate cannot.
  Plan eager_cp = p5_plan(1, [](sim::ParallelConfig& c) { c.cp = 2, c.dp = 4; });
  eager_cp.config.attention = sim::AttentionKind::eager;
  EXPECT_NE(refusal(eager_cp).find("context parallelism with attention eager: Accelerate's context parallelism "
                                   "runs only SDPA"),
            std::string::npos);
  sim::ParallelConfig neuron;
  neuron.tp = 8, neuron.dp = 4, neuron.zero_stage = 1, neuron.seq_len = 4096;
  EXPECT_NE(refusal(plan_of("llama2-70b", "trn1.32xlarge-neuroncore", 1, neuron)).find("Neuron devices"),
            std::string::npos);
  // The same plan on GPUs with tp 1 and ZeRO 0 over one replica is fine (nothing to shard).
  EXPECT_NO_THROW(
      (void)accelerate_yaml(p5_plan(1, [](sim::ParallelConfig& c) { c.tp = 8, c.dp = 1, c.zero_stage = 0; })));
}

}  // namespace accelerate_test

namespace accelerate_test {  // named, not anonymous: the files share a unity-build unit

// --- the launch line -------------------------------------------------------------------------

TEST(AccelerateLaunch, SingleAndMultiNodeLines) {
  EXPECT_EQ(accelerate_command_line(golden_plan("zero3-lora"), "accelerate_fsdp.yaml"),
            "accelerate launch --config_file accelerate_fsdp.yaml --num_processes 8 train.py");
  EXPECT_EQ(accelerate_command_line(p5_plan(4), "/cfg/acc.yaml", "run clm.py"),
            "accelerate launch --config_file /cfg/acc.yaml --num_machines 4 --num_processes 32 --machine_rank "
            "\"$MACHINE_RANK\" --main_process_ip \"$MAIN_PROCESS_IP\" --main_process_port 29500 'run clm.py'");
  EXPECT_THROW((void)accelerate_command_line(p5_plan(1), ""), sim::InputError);
  EXPECT_THROW((void)accelerate_command_line(p5_plan(1), "acc.yaml", ""), sim::InputError);
  EXPECT_THROW((void)accelerate_command_line(p5_plan(1), std::string("a\0b", 3)), sim::InputError);
}

TEST(AccelerateLaunch, HostilePathsReachAccelerateVerbatim) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  fake_recorder(dir, "accelerate");
  const Plan plan = p5_plan(2);
  for (const auto& config_path : hostile_strings(canary)) {
    if (config_path.empty()) continue;  // an empty path is refused (AccelerateLaunch.SingleAndMultiNodeLines)
    const std::string script = "train " + config_path + ".py";
    SCOPED_TRACE(config_path);
    const std::string line = accelerate_command_line(plan, config_path, script);
    write_text(dir.file("launch.sh"), line + "\n");
    const auto syntax = run_command("bash -n " + shell_quote(dir.file("launch.sh")));
    ASSERT_EQ(syntax.status, 0) << syntax.out << line;
    // The two node variables stay expandable; the user's words arrive as one argument each.
    const auto r =
        run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                    " MACHINE_RANK=1 MAIN_PROCESS_IP='10.0.0.7' bash " + shell_quote(dir.file("launch.sh")));
    ASSERT_EQ(r.status, 0) << r.out;
    // clang-format off
    const std::vector<std::string> expected = {"launch", "--config_file", config_path, "--num_machines", "2",
        "--num_processes", "16", "--machine_rank", "1", "--main_process_ip", "10.0.0.7", "--main_process_port",
        "29500", script};
    // clang-format on
    EXPECT_EQ(split_nul(read_text(dir.file("args"))), expected);
  }
  EXPECT_FALSE(fs::exists(canary)) << "a quoted string was executed";
}

TEST(AccelerateExport, HostileModelNameAndLoraTargetsStayInComments) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  Plan plan = golden_plan("zero3-lora");
  for (const auto& s : hostile_strings(canary)) {
    SCOPED_TRACE(s);
    plan.model.name = "llama\ndistributed_type: DEEPSPEED\n" + s;
    plan.config.lora.targets = {"q_proj", s + "\nnum_processes: 1"};
    const std::string text = accelerate_yaml(plan);
    // Still the same settings: nothing from the names escaped its comment line.
    const ImportResult r = import_accelerate(text, context_of(plan), "acc.yaml");
    EXPECT_EQ(r.config.dp, 8);
    EXPECT_EQ(r.config.zero_stage, 3);
    EXPECT_FALSE(any_mentions(r.warnings, "is not an Accelerate config key")) << text;
    std::istringstream lines(text);
    std::string l;
    bool in_header = true;
    while (std::getline(lines, l)) {
      if (l.rfind("# ", 0) != 0) in_header = false;
      if (in_header) continue;
      EXPECT_NE(l.rfind("#", 0), 0u) << "comment after the header: " << l;
    }
  }
}

// --- round trips -----------------------------------------------------------------------------

TEST(AccelerateRoundTrip, GoldenAndEditedPlans) {
  {
    SCOPED_TRACE("zero3-lora");
    expect_round_trip(golden_plan("zero3-lora"));
  }
  const std::vector<std::pair<const char*, std::function<void(sim::ParallelConfig&)>>> edits = {
      {"ZeRO-2", [](sim::ParallelConfig& c) { c.zero_stage = 2; }},
      {"ZeRO-1 as ZeRO-2, offload", [](sim::ParallelConfig& c) { c.zero_stage = 1, c.offload_optimizer = true; }},
      {"fp16, full recompute",
       [](sim::ParallelConfig& c) { c.precision = sim::Precision::fp16, c.recompute = sim::Recompute::full; }},
      {"HSDP over nodes", [](sim::ParallelConfig& c) { c.sharding_degree = 8; }},
      {"HSDP ZeRO-2", [](sim::ParallelConfig& c) { c.sharding_degree = 8, c.zero_stage = 2; }},
      {"tp 8 across the node", [](sim::ParallelConfig& c) { c.tp = 8, c.dp = 2, c.sequence_parallel = true; }},
      {"cp ring", [](sim::ParallelConfig& c) { c.cp = 2, c.dp = 8, c.seq_len = 32768; }},
  };
  for (const auto& [name, edit] : edits) {
    SCOPED_TRACE(name);
    expect_round_trip(p5_plan(2, edit));
  }
  // A Mixtral without expert parallelism (moe-cp with ep 1) runs: tp 2, cp 2, dp 8, ZeRO-1 -> 2.
  Plan moe = golden_plan("moe-cp");
  sim::ParallelConfig c = moe.config;
  c.ep = 1;
  c.fusion = sim::Fusion::eager;
  expect_round_trip(plan_of("mixtral-8x7b", "p5.48xlarge", 4, c));
}

}  // namespace accelerate_test
}  // namespace shardplan::interop
