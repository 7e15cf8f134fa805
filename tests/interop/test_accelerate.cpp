// Hugging Face Accelerate (FSDP): the config YAML export (golden file, refusals, keys checked by
// parsing it back), the `accelerate launch` line (run against a fake `accelerate` with hostile
// paths), the import (Accelerate's own shipped configs, FSDP1 and FSDP2 forms, errors naming the
// field and line) and round trips import(export(plan)).
#include <gtest/gtest.h>

#include "interop/script_support.hpp"
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "golden.hpp"
#include "interop/accelerate.hpp"
#include "planner/shell_quote.hpp"
#include "simulator/errors.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace {

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using planner::Plan;
using planner::shell_quote;
using shardplan::testing::input_error_of;
using shardplan::testing::plan_of;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;
using shardplan::testing::golden::golden_plans;

// --- helpers ------------------------------------------------------------------------------

// Llama 3.1 8B on `nodes` x p5.48xlarge (8 H100 each), data parallel over all, ZeRO-3, edited.
Plan p5_plan(int nodes, const std::function<void(sim::ParallelConfig&)>& edit = {},
             const std::string& model = "llama3.1-8b") {
  sim::ParallelConfig c;
  c.dp = 8 * nodes;
  c.zero_stage = 3;
  c.micro_batch_size = 2;
  c.seq_len = 4096;
  c.precision = sim::Precision::bf16;
  if (edit) edit(c);
  return plan_of(model, "p5.48xlarge", nodes, c);
}

ImportContext context_of(const Plan& plan) {
  ImportContext ctx;
  ctx.devices = plan.cluster.devices();
  ctx.devices_per_node = plan.cluster.per_node();
  ctx.seq_len = plan.config.seq_len;
  ctx.micro_batch_size = plan.config.micro_batch_size;
  return ctx;
}

ImportContext devices(int n, int per_node = 8) {
  ImportContext ctx;
  ctx.devices = n;
  ctx.devices_per_node = per_node;
  ctx.seq_len = 2048;
  ctx.micro_batch_size = 4;
  return ctx;
}

bool any_mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string import_error(const std::string& yaml, const ImportContext& ctx = devices(8)) {
  return input_error_of([&] { (void)import_accelerate(yaml, ctx, "acc.yaml"); });
}

// The configuration fields an Accelerate config carries, compared after import(export(plan)).
// ZeRO-1 comes back as 2 (FSDP has no ZeRO-1); selective recompute and sequence parallelism, which
// have no Accelerate setting, come back off; LoRA lives in the training script.
void expect_round_trip(const Plan& plan) {
  const auto& c = plan.config;
  const std::string yaml = accelerate_yaml(plan);
  const ImportResult r = import_accelerate(yaml, context_of(plan), "accelerate_fsdp.yaml");
  const auto& got = r.config;
  EXPECT_EQ(got.tp, c.tp);
  EXPECT_EQ(got.pp, 1);
  EXPECT_EQ(got.dp, c.dp);
  EXPECT_EQ(got.cp, c.cp);
  EXPECT_EQ(got.ep, 1);
  EXPECT_EQ(got.zero_stage, c.zero_stage == 1 ? 2 : c.zero_stage);
  if (c.zero_stage > 0) {
    EXPECT_EQ(got.shard_group(), c.shard_group());
  }
  EXPECT_EQ(got.micro_batch_size, c.micro_batch_size);
  if (c.micro_batches() == 1) {
    EXPECT_EQ(got.global_batch_size, c.global_batch_size);
  }
  EXPECT_EQ(got.seq_len, c.seq_len);
  EXPECT_EQ(got.recompute, c.recompute == sim::Recompute::full ? sim::Recompute::full : sim::Recompute::none);
  EXPECT_FALSE(got.sequence_parallel);
  EXPECT_EQ(got.precision, c.uses_fp8() && c.fp8 != sim::Fp8Recipe::blockwise ? sim::Precision::bf16 : c.precision);
  EXPECT_EQ(got.fp8, c.fp8 == sim::Fp8Recipe::blockwise ? sim::Fp8Recipe::none : c.fp8);
  EXPECT_EQ(got.fp8_param_gather, c.fp8_param_gather && c.fp8 == sim::Fp8Recipe::tensorwise);
  EXPECT_EQ(got.offload_optimizer, c.offload_optimizer);
  EXPECT_EQ(got.cp_kind, c.cp_kind);
  EXPECT_FALSE(got.lora.enabled());
  sim::ParallelConfig checked = got;
  checked.sequence_parallel = c.sequence_parallel;  // not in the file: the caller says it, as for the attention
  EXPECT_NO_THROW(sim::validate_config(plan.model, plan.cluster, checked)) << yaml;
  // What the importer has to assume is said, never silent.
  EXPECT_TRUE(any_mentions(r.warnings, "gradient accumulation"));
}

}  // namespace

namespace {

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

}  // namespace

namespace {

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

// --- import ----------------------------------------------------------------------------------

// examples/config_yaml_templates/fsdp.yaml at huggingface/accelerate 16cb6eb8 (comments dropped).
const char* kShippedFsdpTemplate = R"(distributed_type: FSDP
mixed_precision: 'bf16'
num_processes: 2
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: true
)";

// examples/torch_native_parallelism/configs/tp_hsdp.yaml at the same commit.
const char* kShippedTpHsdp = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
enable_cpu_affinity: false
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: false
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
parallelism_config:
  parallelism_config_cp_size: 1
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 2
  parallelism_config_tp_size: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

TEST(AccelerateImport, ShippedFsdp1Template) {
  const ImportResult r = import_accelerate(kShippedFsdpTemplate, devices(2, 2), "fsdp.yaml");
  const auto& c = r.config;
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.sharding_degree, 0);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_EQ(c.recompute, sim::Recompute::none);
  EXPECT_FALSE(c.offload_optimizer);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.global_batch_size, 8);
  EXPECT_EQ(c.seq_len, 2048);
  // Only the assumed gradient accumulation is worth a warning: every key is known.
  ASSERT_EQ(r.warnings.size(), 1u) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("gradient accumulation"), std::string::npos);
}

TEST(AccelerateImport, ShippedTpHsdpExample) {
  const ImportResult r = import_accelerate(kShippedTpHsdp, devices(8), "tp_hsdp.yaml");
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.dp, 4);
  EXPECT_EQ(c.sharding_degree, 2);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.cp, 1);
  EXPECT_FALSE(any_mentions(r.warnings, "ignored")) << r.warnings[0];
  // The same file on another cluster size does not add up.
  const std::string why = import_error(kShippedTpHsdp, devices(16));
  EXPECT_NE(why.find("acc.yaml:18:16: field 'num_processes': expected the cluster's 16 devices"), std::string::npos)
      << why;
}

TEST(AccelerateImport, Fsdp1StrategiesNamesNumbersAndHybrid) {
  const auto zero = [](const std::string& fsdp) {
    return import_accelerate("distributed_type: FSDP\nfsdp_config:\n" + fsdp, devices(16), "a.yaml").config;
  };
  EXPECT_EQ(zero("  fsdp_sharding_strategy: SHARD_GRAD_OP\n").zero_stage, 2);
  EXPECT_EQ(zero("  fsdp_sharding_strategy: 2\n").zero_stage, 2);  // ShardingStrategy(2)
  EXPECT_EQ(zero("  fsdp_sharding_strategy: no_shard\n").zero_stage, 0);
  EXPECT_EQ(zero("  sharding_strategy: 3\n").zero_stage, 0);  // unprefixed key, as launch.py maps it
  const auto hybrid = zero("  fsdp_sharding_strategy: HYBRID_SHARD\n");
  EXPECT_EQ(hybrid.zero_stage, 3);
  EXPECT_EQ(hybrid.sharding_degree, 8);  // within a node of 8
  const auto hybrid2 = zero("  fsdp_sharding_strategy: 5\n");
  EXPECT_EQ(hybrid2.zero_stage, 2);
  EXPECT_EQ(hybrid2.sharding_degree, 8);
  // Without the devices per node, num_machines tells the node size.
  ImportContext ctx = devices(16, 0);
  EXPECT_EQ(import_accelerate("distributed_type: FSDP\nnum_machines: 4\nfsdp_config:\n  fsdp_sharding_strategy: "
                              "HYBRID_SHARD\n",
                              ctx, "a.yaml")
                .config.sharding_degree,
            4);
}

TEST(AccelerateImport, Fsdp1RunsTheShardingStrategyNotReshardAfterForward) {
  // What `accelerate config` writes for FSDP1 ZeRO-2 — but launch passes fsdp_sharding_strategy
  // (default FULL_SHARD), which FSDP1 prefers.
  const ImportResult r = import_accelerate(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n",
      devices(8), "a.yaml");
  EXPECT_EQ(r.config.zero_stage, 3);
  EXPECT_TRUE(any_mentions(r.warnings,
                           "a.yaml:4:31: 'fsdp_config.fsdp_reshard_after_forward' is SHARD_GRAD_OP, "
                           "but accelerate launch runs FSDP1 with fsdp_sharding_strategy (FULL_SHARD, its "
                           "default)"));
}

TEST(AccelerateImport, Fsdp2BoolsAndStrings) {
  const auto cfg = [](const std::string& raf) {
    return import_accelerate(
               "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: " + raf + "\n",
               devices(8), "a.yaml")
        .config;
  };
  EXPECT_EQ(cfg("true").zero_stage, 3);
  EXPECT_EQ(cfg("false").zero_stage, 2);
  EXPECT_EQ(cfg("'False'").zero_stage, 2);  // the launch flag's string form (str_to_bool)
  EXPECT_EQ(cfg("no").zero_stage, 2);
  const std::string why = import_error(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: FULL_SHARD\n");
  EXPECT_NE(why.find("acc.yaml:4:31: field 'fsdp_config.fsdp_reshard_after_forward': expected true or false with "
                     "fsdp_version 2"),
            std::string::npos)
      << why;
}

TEST(AccelerateImport, DdpAndOtherTypes) {
  const ImportResult ddp = import_accelerate("distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: fp16\n",
                                             devices(8), "ddp.yaml");
  EXPECT_EQ(ddp.config.zero_stage, 0);
  EXPECT_EQ(ddp.config.dp, 8);
  EXPECT_EQ(ddp.config.precision, sim::Precision::fp16);
  EXPECT_EQ(import_accelerate("distributed_type: MULTI_HPU\n", devices(8), "hpu.yaml").config.zero_stage, 0);
  EXPECT_EQ(import_accelerate("distributed_type: 'NO'\n", devices(1), "one.yaml").config.dp, 1);
  const std::string ds = import_error("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n");
  EXPECT_NE(ds.find("acc.yaml:1:19: field 'distributed_type': expected FSDP, got DEEPSPEED"), std::string::npos) << ds;
  EXPECT_NE(ds.find("import its DeepSpeed config"), std::string::npos) << ds;
  EXPECT_NE(import_error("distributed_type: XLA\n").find("field 'distributed_type'"), std::string::npos);
  EXPECT_NE(import_error("distributed_type: 'NO'\n").find("got NO (one process)"), std::string::npos);
}

TEST(AccelerateImport, PrecisionOffloadCheckpointingAndFp8) {
  const std::string base =
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  offload_params: true\n"
      "  activation_checkpointing: 'true'\n";
  const ImportResult r = import_accelerate(base + "mixed_precision: no\n", devices(8), "a.yaml");
  EXPECT_EQ(r.config.precision, sim::Precision::fp32);  // unquoted `no`: YAML 1.1 false, Accelerate's "no"
  EXPECT_TRUE(r.config.offload_optimizer);
  EXPECT_TRUE(any_mentions(r.warnings, "offloads the parameters and gradients too"));
  EXPECT_EQ(r.config.recompute, sim::Recompute::full);
  // No mixed_precision: the context's precision, else fp32 (launch's "no").
  ImportContext ctx = devices(8);
  EXPECT_EQ(import_accelerate(base, ctx, "a.yaml").config.precision, sim::Precision::fp32);
  ctx.precision = sim::Precision::bf16;
  EXPECT_EQ(import_accelerate(base, ctx, "a.yaml").config.precision, sim::Precision::bf16);
  const auto fp8 = [&](const std::string& section) {
    return import_accelerate(base + "mixed_precision: fp8\n" + section, devices(8), "a.yaml");
  };
  EXPECT_EQ(fp8("fp8_config:\n  backend: TE\n").config.fp8, sim::Fp8Recipe::delayed);
  const ImportResult ao = fp8("fp8_config:\n  fp8_backend: AO\n");
  EXPECT_EQ(ao.config.fp8, sim::Fp8Recipe::tensorwise);
  EXPECT_TRUE(ao.config.fp8_param_gather);  // AORecipeKwargs' default under FSDP2
  EXPECT_EQ(ao.config.precision, sim::Precision::bf16);
  const ImportResult mx = fp8("fp8_config:\n  backend: TE\n  use_mxfp8_block_scaling: true\n");
  EXPECT_EQ(mx.config.fp8, sim::Fp8Recipe::blockwise);
  EXPECT_TRUE(any_mentions(mx.warnings, "MXFP8"));
  EXPECT_TRUE(any_mentions(fp8("").warnings, "without fp8_config.backend"));
}

TEST(AccelerateImport, ContextParallelAndUnknownKeys) {
  const ImportResult r = import_accelerate(R"(distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_turbo: true
parallelism_config:
  parallelism_config_dp_shard_size: 2
  parallelism_config_cp_size: 4
  tp_size: 2
num_processes: 8
wandb_project: x
)",
                                           devices(8), "cp.yaml");
  EXPECT_EQ(r.config.cp, 4);
  EXPECT_EQ(r.config.dp, 2);
  EXPECT_EQ(r.config.tp, 1);  // tp_size without the prefix is not read by accelerate launch
  EXPECT_EQ(r.config.cp_kind, sim::CpKind::ring);
  EXPECT_TRUE(any_mentions(r.warnings, "is allgather"));
  EXPECT_TRUE(any_mentions(r.warnings, "cp.yaml:5:15: 'fsdp_config.fsdp_turbo' is not an fsdp_config setting"));
  EXPECT_TRUE(any_mentions(r.warnings, "'parallelism_config.tp_size' is not a parallelism_config key"));
  EXPECT_TRUE(any_mentions(r.warnings, "cp.yaml:11:16: 'wandb_project' is not an Accelerate config key"));
  // A key holding a newline still makes a one-line warning.
  const ImportResult odd = import_accelerate("distributed_type: FSDP\n\"evil\\nkey\": 1\n", devices(8), "o.yaml");
  EXPECT_TRUE(any_mentions(odd.warnings, "o.yaml:2:14: 'evil key' is not an Accelerate config key"));
  for (const auto& w : odd.warnings) EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  // Missing micro-batch size: 1, said.
  ImportContext ctx = devices(8);
  ctx.micro_batch_size = 0;
  const ImportResult one = import_accelerate(kShippedTpHsdp, ctx, "t.yaml");
  EXPECT_EQ(one.config.micro_batch_size, 1);
  EXPECT_TRUE(any_mentions(one.warnings, "no micro-batch size"));
}

TEST(AccelerateImport, MalformedFilesNameTheFieldAndLine) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::string fsdp2 = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n";
  const std::vector<Case> cases = {
      {"distributed_type: [FSDP\n", "acc.yaml:2:1: not valid YAML"},
      {"- FSDP\n", "acc.yaml: expected a YAML mapping"},
      {"mixed_precision: bf16\n",
       "acc.yaml:1:1: field 'distributed_type': expected FSDP (or MULTI_GPU, NO), it is missing"},
      {"distributed_type: FSDP\nnum_processes: 4\n", "acc.yaml:2:16: field 'num_processes': expected the cluster's 8"},
      {"distributed_type: FSDP\nnum_processes: eight\n",
       "field 'num_processes': expected an integer >= -1, got 'eight'"},
      {"distributed_type: FSDP\nnum_machines: 3\n", "field 'num_machines': expected a divisor of the 8 processes"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 3\n",
       "acc.yaml:3:17: field 'fsdp_config.fsdp_version': expected 1 or 2, got '3'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n",
       "field 'fsdp_config.fsdp_reshard_after_forward': expected with fsdp_version 1 a sharding strategy"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SOME_SHARD\n",
       "field 'fsdp_config.fsdp_sharding_strategy'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: maybe\n",
       "field 'fsdp_config.fsdp_offload_params': expected true or false, got 'maybe'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: EVERYTHING\n", "fsdp_auto_wrap_policy"},
      {"distributed_type: FSDP\nfsdp_config: 3\n", "field 'fsdp_config': expected a mapping, got '3'"},
      {"distributed_type: FSDP\nparallelism_config:\n  parallelism_config_tp_size: 2\n",
       "field 'parallelism_config': expected no parallelism_config with fsdp_version 1"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_tp_size: 2\n",
       "acc.yaml:5:3: field 'parallelism_config': expected dp_replicate_size x dp_shard_size x tp_size x cp_size = "
       "the cluster's 8 devices (parallelism_config.py:372-377), got 1 x 1 x 2 x 1 = 2"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_dp_replicate_size: 8\n",
       "field 'parallelism_config.parallelism_config_dp_shard_size': expected a size > 1"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_sp_size: 8\n",
       "parallelism_config.parallelism_config_sp_size"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_cp_size: 8\n  parallelism_config_cp_comm_strategy: ring\n",
       "field 'parallelism_config.parallelism_config_cp_comm_strategy': expected allgather or alltoall, got 'ring'"},
      {"distributed_type: FSDP\nmixed_precision: fp64\n",
       "acc.yaml:2:18: field 'mixed_precision': expected no, fp16, bf16 or fp8, got 'fp64'"},
      {"distributed_type: FSDP\nmixed_precision: fp8\nfp8_config:\n  backend: NV\n",
       "field 'fp8_config.backend': expected TE, AO or MSAMP, got 'NV'"},
      {"compute_environment: AMAZON_SAGEMAKER\ndistributed_type: FSDP\n", "field 'compute_environment'"},
      {"distributed_type: FSDP\ndistributed_type: FSDP\n",
       "field 'distributed_type': expected one value, got it twice"},
      {"distributed_type: MULTI_GPU\nparallelism_config:\n  parallelism_config_tp_size: 2\n",
       "field 'parallelism_config': expected no parallelism_config with distributed_type MULTI_GPU"},
      {"distributed_type: FSDP\nnum_processes: \"8\\n9\"\n", "got '8 9'"},  // one line, even for a multi-line value
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.yaml);
    const std::string why = import_error(k.yaml);
    EXPECT_NE(why.find(k.expected), std::string::npos) << why;
    EXPECT_EQ(why.rfind("acc.yaml", 0), 0u) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // The import settings themselves.
  ImportContext ctx = devices(8);
  ctx.tp = 2;
  EXPECT_NE(import_error("distributed_type: FSDP\n", ctx).find("tensor-parallel degree given to the import (2)"),
            std::string::npos);
  ctx = devices(8);
  ctx.pp = 2;
  EXPECT_NE(import_error("distributed_type: FSDP\n", ctx).find("no pipeline parallelism"), std::string::npos);
  EXPECT_NE(import_error("distributed_type: FSDP\n", devices(0)).find("device count"), std::string::npos);
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

}  // namespace
}  // namespace shardplan::interop
