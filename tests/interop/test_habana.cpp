// Optimum-Habana: the gaudi_spawn.py command and DeepSpeed JSON of the language-modeling examples
// (golden files, refusals, a run through an emulation of gaudi_spawn.py's second shell with hostile
// strings), their import back (round trips), and imports of the README's command and of
// malformed ones.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "formats/shell_quote.hpp"
#include "interop/golden.hpp"
#include "interop/habana.hpp"
#include "interop/script_support.hpp"
#include "simulator/errors.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace habana_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using formats::Plan;
using formats::shell_quote;
using nlohmann::json;
using shardplan::testing::input_error_of;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

// --- helpers ---------------------------------------------------------------------------------

// The zero3-lora layout (Llama 2 70B LoRA on Gaudi2), edited.
Plan gaudi_plan(int nodes, const std::function<void(sim::ParallelConfig&)>& edit, const char* model = "llama2-70b",
                const char* hw = "gaudi2-hls2") {
  sim::ParallelConfig c;
  c.dp = 8 * nodes, c.zero_stage = 3, c.micro_batch_size = 10, c.global_batch_size = 80 * nodes, c.seq_len = 2048;
  c.recompute = sim::Recompute::full;
  c.lora.rank = 8, c.lora.alpha = 16, c.lora.dropout = 0.05, c.lora.targets = {"q_proj", "v_proj"};
  edit(c);
  return shardplan::testing::plan_of(model, hw, nodes, c);
}

ImportContext context_for(const Plan& plan) {
  ImportContext ctx;
  ctx.devices = plan.cluster.devices();
  ctx.devices_per_node = plan.cluster.per_node();
  ctx.seq_len = 999;  // the command carries its own
  return ctx;
}

void expect_same_config(const sim::ParallelConfig& got, const sim::ParallelConfig& want) {
  EXPECT_EQ(got.tp, want.tp);
  EXPECT_EQ(got.pp, want.pp);
  EXPECT_EQ(got.dp, want.dp);
  EXPECT_EQ(got.cp, want.cp);
  if (want.cp > 1) { EXPECT_EQ(got.cp_kind, want.cp_kind); }
  EXPECT_EQ(got.ep, want.ep);
  EXPECT_EQ(got.zero_stage, want.zero_stage);
  EXPECT_EQ(got.shard_group(), want.shard_group());
  EXPECT_EQ(got.micro_batch_size, want.micro_batch_size);
  EXPECT_EQ(got.global_batch_size, want.global_batch_size);
  EXPECT_EQ(got.seq_len, want.seq_len);
  EXPECT_EQ(got.schedule, want.schedule);
  EXPECT_EQ(got.recompute, want.recompute);
  EXPECT_EQ(got.sequence_parallel, want.sequence_parallel);
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(got.mixed_precision, want.mixed_precision);
  EXPECT_EQ(got.grad_accum_dtype, want.grad_accum_dtype);
  EXPECT_EQ(got.attention, want.attention);
  EXPECT_EQ(got.fp8, want.fp8);
  EXPECT_EQ(got.lora.rank, want.lora.rank);
  EXPECT_EQ(got.lora.enabled(), want.lora.enabled());
  if (want.lora.enabled()) {
    EXPECT_DOUBLE_EQ(got.lora.alpha, want.lora.alpha);
    EXPECT_DOUBLE_EQ(got.lora.dropout, want.lora.dropout);
    EXPECT_EQ(got.lora.targets, want.lora.targets);
  }
  EXPECT_EQ(got.offload_optimizer, want.offload_optimizer);
  EXPECT_EQ(got.offload_activations, want.offload_activations);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// --- export ----------------------------------------------------------------------------------

TEST(HabanaExport, GoldenZero3Lora) {
  const Plan& plan = golden_plan("zero3-lora");
  expect_golden("zero3-lora", "habana_launch.sh", habana_command_line(plan, "habana_ds_config.json"));
  expect_golden("zero3-lora", "habana_ds_config.json", habana_deepspeed_config(plan).dump(4) + "\n");
}

TEST(HabanaExport, CommandAndConfigOfTheLlama70bLoraExample) {
  const Plan& plan = golden_plan("zero3-lora");
  const std::string s = habana_command_line(plan, "llama2_ds_zero3_config.json");
  for (const char* want :
       {"PT_HPU_LAZY_MODE=1 PT_HPU_MAX_COMPOUND_OP_SIZE=10 python3 ../gaudi_spawn.py --use_deepspeed --world_size 8 "
        "run_lora_clm.py",
        "--model_name_or_path meta-llama/Llama-2-70b-hf", "--deepspeed llama2_ds_zero3_config.json", "--bf16 True",
        "--max_seq_length 2048", "--per_device_train_batch_size 10", "--gradient_accumulation_steps 1",
        "--gradient_checkpointing", "--lora_rank 8", "--lora_alpha 16", "--lora_dropout 0.05",
        "--lora_target_modules q_proj v_proj", "--attn_implementation gaudi_fused_sdpa", "--use_habana",
        "--use_lazy_mode", "--dataset_concatenation"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  const json ds = habana_deepspeed_config(plan);
  EXPECT_EQ(ds["train_batch_size"], "auto");
  EXPECT_EQ(ds["train_micro_batch_size_per_gpu"], "auto");
  EXPECT_EQ(ds["gradient_accumulation_steps"], "auto");
  EXPECT_EQ(ds["bf16"]["enabled"], true);
  EXPECT_EQ(ds["zero_optimization"]["stage"], 3);
  EXPECT_EQ(ds["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"], true);
  EXPECT_EQ(ds["timers"]["throughput"]["synchronized"], false);
}

TEST(HabanaExport, FullTrainingRunsRunClmWithItsFlags) {
  const Plan plan = gaudi_plan(
      2,
      [](sim::ParallelConfig& c) {
        c.lora = {}, c.zero_stage = 1, c.micro_batch_size = 2, c.global_batch_size = 128, c.seq_len = 1024;
        c.recompute = sim::Recompute::selective, c.attention = sim::AttentionKind::eager;
      },
      "llama2-7b");
  const std::string s = habana_command_line(plan, "ds.json");
  for (const char* want :
       {"python3 ../gaudi_spawn.py --use_deepspeed --hostfile \"$HOSTFILE\" run_clm.py", "--block_size 1024",
        "--gradient_accumulation_steps 4", "--gaudi_config_name Habana/gpt2", "--attn_implementation eager",
        "--gradient_checkpointing", ": \"${HOSTFILE:?", "# shardplan note: selective recompute"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  for (const char* absent : {"--lora_", "--max_seq_length", "--world_size", "PT_HPU_MAX_COMPOUND_OP_SIZE"})
    EXPECT_EQ(s.find(absent), std::string::npos) << absent;
  TempDir dir;
  EXPECT_EQ(run_command("bash -n " + shell_quote(dir.write("launch.sh", s))).status, 0) << s;
  // Without HOSTFILE the script stops before launching anything.
  const auto r = run_command("env -u HOSTFILE PATH=/nonexistent /bin/bash " + shell_quote(dir.file("launch.sh")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("set HOSTFILE to a DeepSpeed hostfile of the 2 nodes"), std::string::npos) << r.out;
  EXPECT_EQ(habana_deepspeed_config(plan)["zero_optimization"]["stage"], 1);
  EXPECT_FALSE(
      habana_deepspeed_config(plan)["zero_optimization"].contains("stage3_gather_16bit_weights_on_model_save"));
}

TEST(HabanaExport, RefusesPlansItCannotRun) {
  for (const char* name : {"dense-3d", "moe-cp", "neuron-3d"}) {
    const std::string why = input_error_of([&] { (void)habana_command_line(golden_plan(name), "ds.json"); });
    EXPECT_NE(why.find("is not Intel Gaudi"), std::string::npos) << name << ": " << why;
    EXPECT_NE(input_error_of([&] { (void)habana_deepspeed_config(golden_plan(name)); }).find("is not Intel Gaudi"),
              std::string::npos);
  }
  const auto refused = [](const Plan& p, const char* text) {
    const std::string why = input_error_of([&] { (void)habana_command_line(p, "ds.json"); });
    EXPECT_NE(why.find(text), std::string::npos) << why;
  };
  refused(gaudi_plan(1, [](sim::ParallelConfig& c) { c.tp = 8, c.dp = 1, c.global_batch_size = 10; }),
          "tensor (8), pipeline (1) or expert (1) parallelism");
  refused(gaudi_plan(1, [](sim::ParallelConfig& c) { c.pp = 2, c.dp = 4, c.global_batch_size = 80; }), "pipeline (2)");
  refused(gaudi_plan(1, [](sim::ParallelConfig& c) { c.cp = 2, c.dp = 4, c.global_batch_size = 40; }),
          "--cp-kind all_to_all");
  refused(gaudi_plan(1, [](sim::ParallelConfig& c) { c.precision = sim::Precision::fp16; }), "fp16");
  refused(gaudi_plan(1, [](sim::ParallelConfig& c) { c.lora.base = sim::LoraBase::nf4; }), "QLoRA");
}

// --- round trips -----------------------------------------------------------------------------

void expect_round_trip(const Plan& plan) {
  const std::string cmd = habana_command_line(plan, "cfg/ds.json");
  const ImportResult r = import_habana(cmd, habana_deepspeed_config(plan), context_for(plan), "habana_launch.sh");
  expect_same_config(r.config, plan.config);
  EXPECT_TRUE(r.warnings.empty()) << joined(r.warnings) << cmd;
}

TEST(HabanaRoundTrip, GoldenPlan) { expect_round_trip(golden_plan("zero3-lora")); }

TEST(HabanaRoundTrip, EditedVariants) {
  expect_round_trip(gaudi_plan(
      1,
      [](sim::ParallelConfig& c) {  // full training, ZeRO-2, accumulation
        c.lora = {}, c.zero_stage = 2, c.micro_batch_size = 2, c.global_batch_size = 64, c.seq_len = 1024;
        c.recompute = sim::Recompute::none, c.attention = sim::AttentionKind::eager;
      },
      "llama2-7b"));
  expect_round_trip(gaudi_plan(1, [](sim::ParallelConfig& c) {  // DeepSpeed-Ulysses
    c.cp = 2, c.dp = 4, c.cp_kind = sim::CpKind::all_to_all, c.global_batch_size = 80, c.seq_len = 8192;
    c.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"}, c.lora.rank = 4, c.lora.alpha = 32;
  }));
  expect_round_trip(gaudi_plan(
      1,
      [](sim::ParallelConfig& c) {  // ZeRO-1, fp32 accumulation
        c.zero_stage = 1, c.grad_accum_dtype = sim::GradAccumDtype::fp32, c.micro_batch_size = 1;
        c.global_batch_size = 16, c.lora.dropout = 0.1;
      },
      "llama2-7b"));
  expect_round_trip(gaudi_plan(2, [](sim::ParallelConfig& c) {  // offload, MiCS-style shard group
    c.offload_optimizer = true, c.sharding_degree = 4, c.fp8 = sim::Fp8Recipe::delayed;
  }));
  expect_round_trip(gaudi_plan(
      1,
      [](sim::ParallelConfig& c) {
        c.precision = sim::Precision::fp32, c.zero_stage = 0, c.micro_batch_size = 1, c.global_batch_size = 8;
        c.lora.dropout = 0.0;
      },
      "tinyllama-1.1b"));
}

// --- the README's command (examples/language-modeling/README.md lines 406-440, verbatim) -------

const char* const kReadmeCommand = R"SH(PT_HPU_LAZY_MODE=1 PT_HPU_MAX_COMPOUND_OP_SIZE=10 \
python3 ../gaudi_spawn.py --use_deepspeed --world_size 8 run_lora_clm.py \
  --model_name_or_path meta-llama/Llama-2-70b-hf \
  --deepspeed llama2_ds_zero3_config.json \
  --dataset_name tatsu-lab/alpaca \
  --bf16 True \
  --output_dir ./lora_out \
  --num_train_epochs 2 \
  --max_seq_len 2048 \
  --per_device_train_batch_size 10 \
  --per_device_eval_batch_size 1 \
  --gradient_checkpointing \
  --eval_strategy epoch \
  --eval_delay 2 \
  --save_strategy no \
  --learning_rate 0.0018 \
  --warmup_ratio 0.03 \
  --lr_scheduler_type "cosine" \
  --logging_steps 1 \
  --dataset_concatenation \
  --attn_softmax_bf16 True \
  --do_train \
  --do_eval \
  --use_habana \
  --use_lazy_mode \
  --pipelining_fwd_bwd \
  --throughput_warmup_steps 3 \
  --lora_rank 4 \
  --lora_target_modules "q_proj" "v_proj" "k_proj" "o_proj" \
  --validation_split_percentage 4 \
  --attn_implementation gaudi_fused_sdpa \
  --flash_attention_causal_mask True \
  --fp8 True
)SH";

// examples/language-modeling/llama2_ds_zero3_config.json (029f8fb), verbatim.
const json kExampleDsConfig = json::parse(R"({
    "steps_per_print": 64, "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "bf16": {"enabled": true}, "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 3, "overlap_comm": false, "contiguous_gradients": false,
                          "stage3_gather_16bit_weights_on_model_save": true},
    "timers": {"throughput": {"enabled": true, "synchronized": false}}})");

ImportContext cards(int n) {
  ImportContext ctx;
  ctx.devices = n;
  ctx.devices_per_node = 8;
  return ctx;
}

TEST(HabanaImport, ReadmeCommandWithItsDeepSpeedConfig) {
  const ImportResult r = import_habana(kReadmeCommand, kExampleDsConfig, cards(8), "README.md");
  const auto& c = r.config;
  EXPECT_EQ(c.dp, 8);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.micro_batch_size, 10);
  EXPECT_EQ(c.global_batch_size, 80);
  EXPECT_EQ(c.seq_len, 2048);  // --max_seq_len, the prefix of --max_seq_length
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_EQ(c.fp8, sim::Fp8Recipe::delayed);
  EXPECT_EQ(c.recompute, sim::Recompute::full);
  EXPECT_EQ(c.attention, sim::AttentionKind::flash);
  EXPECT_EQ(c.lora.rank, 4);
  EXPECT_DOUBLE_EQ(c.lora.alpha, 16);
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.05);
  EXPECT_EQ(c.lora.targets, (std::vector<std::string>{"q_proj", "v_proj", "k_proj", "o_proj"}));
  EXPECT_TRUE(r.warnings.empty()) << joined(r.warnings);
  // The imported configuration is one the planner accepts for the model and cluster.
  sim::ParallelConfig cfg = c;
  EXPECT_NO_THROW(sim::validate_config(sim::load_model("llama2-70b"),
                                       sim::ClusterSpec{sim::load_hardware("gaudi2-hls2"), 1, 0}, cfg));
}

TEST(HabanaImport, DefaultsAndUnknownFlagsAreSaid) {
  const ImportResult r = import_habana(
      "python3 ../gaudi_spawn.py --world_size 8 --use_mpi run_lora_clm.py --bf16 "
      "--no_such_flag 1 --lr_scheduler_type cosine --attn_implementation sdpa",
      json(), cards(8), "cmd");
  const std::string w = joined(r.warnings);
  for (const char* want : {"--per_device_train_batch_size not given",
                           "--max_seq_length not given: run_lora_clm.py's "
                           "default 512",
                           "--lora_target_modules not given", "--no_such_flag is not a setting",
                           "sdpa: the Gaudi models run their fused kernel only with gaudi_fused_sdpa"})
    EXPECT_NE(w.find(want), std::string::npos) << want << "\n" << w;
  EXPECT_EQ(w.find("--lr_scheduler_type"), std::string::npos);
  EXPECT_EQ(r.config.zero_stage, 0);  // no --deepspeed: DDP
  EXPECT_EQ(r.config.global_batch_size, 64);
  EXPECT_EQ(r.config.attention, sim::AttentionKind::eager);
}

// The simple command around the script is read, whatever shell operators stand before or after it
// (an operator before the script used to cut the script away: fuzz/regressions/text_import).
TEST(HabanaImport, TheCommandBetweenShellOperatorsIsRead) {
  const ImportResult r = import_habana(
      "cd examples/language-modeling && python3 ../gaudi_spawn.py --world_size 8 --use_mpi run_lora_clm.py "
      "--bf16 True --per_device_train_batch_size 4 --max_seq_length 1024 --lora_rank 16 --lora_target_modules q_proj "
      "| tee train.log",
      json(), cards(8), "cmd");
  EXPECT_EQ(r.config.micro_batch_size, 4);
  EXPECT_EQ(r.config.seq_len, 1024);
  EXPECT_EQ(r.config.lora.rank, 16);
  EXPECT_EQ(r.config.dp, 8);
  // The script right after an operator, with the words before it on the same line.
  EXPECT_EQ(import_habana("echo start && run_lora_clm.py --lora_rank 2 ; echo done", json(), cards(8), "cmd")
                .config.lora.rank,
            2);
}

TEST(HabanaImport, MalformedInputsNameTheSourceAndField) {
  const std::string head = "python3 ../gaudi_spawn.py --use_deepspeed --world_size 8 run_lora_clm.py ";
  const auto error = [](const std::string& text, const json& ds = json(), int devices = 8) {
    return input_error_of([&] { (void)import_habana(text, ds, cards(devices), "launch.sh"); });
  };
  EXPECT_NE(error(head + "--per_device_train_batch_size x")
                .find("launch.sh: --per_device_train_batch_size: expected an integer"),
            std::string::npos);
  EXPECT_NE(error(head + "--peft_type ia3").find("launch.sh: --peft_type: expected lora"), std::string::npos);
  EXPECT_NE(error(head + "--fp16").find("launch.sh: --fp16"), std::string::npos);
  EXPECT_NE(error(head + "--attn_implementation flash").find("launch.sh: --attn_implementation: expected eager"),
            std::string::npos);
  EXPECT_NE(
      error(head + "--lora_target_modules --bf16").find("launch.sh: --lora_target_modules: expected at least one"),
      std::string::npos);
  EXPECT_NE(error(head + "--bf16 True", json(), 16).find("launch.sh: --world_size: expected the cluster's 16 devices"),
            std::string::npos);
  EXPECT_NE(
      error(head + "--deepspeed ds.json --bf16 True").find("launch.sh: --deepspeed ds.json: the DeepSpeed config"),
      std::string::npos);
  json ds = kExampleDsConfig;
  ds["gradient_accumulation_steps"] = 4;
  EXPECT_NE(
      error(head + "--deepspeed ds.json --bf16 True", ds)
          .find(
              "ds.json: field 'gradient_accumulation_steps': expected the command's --gradient_accumulation_steps (1)"),
      std::string::npos);
  EXPECT_NE(error(head + "--deepspeed ds.json", kExampleDsConfig).find("ds.json: field 'bf16.enabled': expected false"),
            std::string::npos);
  ds = kExampleDsConfig;
  ds["train_micro_batch_size_per_gpu"] = 2;
  EXPECT_NE(error(head + "--deepspeed ds.json --bf16 True --per_device_train_batch_size 4", ds)
                .find("ds.json: field 'train_micro_batch_size_per_gpu'"),
            std::string::npos);
  EXPECT_NE(error(head + "--max_seq_len 'open").find("launch.sh: unterminated single quote"), std::string::npos);
  EXPECT_NE(error("echo hello").find("launch.sh: no run_lora_clm.py or run_clm.py command"), std::string::npos);
}

// --- hostile strings through gaudi_spawn.py's second shell --------------------------------------

// A fake python3 doing what gaudi_spawn.py and DistributedRunner do with the arguments (join,
// wrap those with a space in double quotes, hand "deepspeed ... <joined>" to /bin/bash), and a
// fake deepspeed recording what the training script would receive.
void fake_gaudi_spawn(const TempDir& dir) {
  fs::create_directories(dir.path() / "bin");
  const std::string py = dir.file("bin/python3"), ds = dir.file("bin/deepspeed");
  std::ofstream(py)
      << "#!/bin/bash\nshift\nworld=1\n"
         "while [[ $# -gt 0 && \"$1\" == --* ]]; do case \"$1\" in\n"
         "  --world_size) world=\"$2\"; shift 2;;\n  --hostfile|--master_port) shift 2;;\n"
         "  *) shift;;\nesac; done\ncmd=\"\"\n"
         "for a in \"$@\"; do\n"
         "  if [[ \"$a\" == *\" \"* && \"${a:0:1}\" != '\"' && \"${a: -1}\" != '\"' ]]; then a=\"\\\"$a\\\"\"; fi\n"
         "  cmd+=\"$a \"\ndone\n"
         "exec /bin/bash -c \"deepspeed --num_nodes 1 --num_gpus $world --no_local_rank --master_port 29500 $cmd\"\n";
  std::ofstream(ds) << "#!/bin/bash\n: > \"$RECORD\"\nfor a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$RECORD\"; done\n";
  ::chmod(py.c_str(), 0755);
  ::chmod(ds.c_str(), 0755);
}

// The value of `flag` as the script receives it: "--flag value" or "--flag=value".
std::string value_of(const std::vector<std::string>& args, const std::string& flag) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return "<absent>";
}

TEST(HabanaExport, HostileStringsReachTheTrainingScriptVerbatim) {
  TempDir dir;
  const std::string canary = dir.file("CANARY");
  fake_gaudi_spawn(dir);
  for (const auto& s : hostile_strings(canary)) {
    SCOPED_TRACE(s);
    Plan plan = golden_plan("zero3-lora");
    plan.model.name = s;
    plan.config.lora.targets = {s, "v_proj"};  // after validation: only the quoting is under test
    const std::string cmd = habana_command_line(plan, "cfg dir/" + s + ".json");
    const std::string path = dir.write("launch.sh", cmd);
    ASSERT_EQ(run_command("bash -n " + shell_quote(path)).status, 0) << cmd;
    const auto r = run_command("PATH=" + shell_quote(dir.file("bin")) +
                               ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) + " bash " + shell_quote(path));
    ASSERT_EQ(r.status, 0) << r.out << cmd;
    const auto args = split_nul(read_text(dir.file("args")));
    const auto script = std::find(args.begin(), args.end(), "run_lora_clm.py");
    ASSERT_NE(script, args.end());
    EXPECT_EQ(value_of(args, "--model_name_or_path"), s);
    EXPECT_EQ(value_of(args, "--deepspeed"), "cfg dir/" + s + ".json");
    const auto targets = std::find(args.begin(), args.end(), "--lora_target_modules");
    ASSERT_LT(targets + 2, args.end());
    EXPECT_EQ(*(targets + 1), s);
    EXPECT_EQ(*(targets + 2), "v_proj");
  }
  EXPECT_FALSE(fs::exists(canary)) << "a quoted string was executed";
}

TEST(HabanaExport, MultiNodeRefusesWhatPdshWouldReparse) {
  const Plan plan = gaudi_plan(2, [](sim::ParallelConfig&) {});
  EXPECT_NO_THROW((void)habana_command_line(plan, "/shared/ds_zero3.json"));
  const std::string why = input_error_of([&] { (void)habana_command_line(plan, "/shared/my config.json"); });
  EXPECT_NE(why.find("multi-node run cannot pass"), std::string::npos) << why;
}

}  // namespace habana_test
}  // namespace shardplan::interop
