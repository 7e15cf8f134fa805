// torchtitan (v0.2.2 TOML job config): golden exports, refusals, notes, the torchrun line (run by
// bash against a fake torchrun, with hostile config paths), round trips through the importer, the
// importer on torchtitan's own shipped configs and on malformed ones.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <toml++/toml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "formats/shell_quote.hpp"
#include "interop/golden.hpp"
#include "interop/script_support.hpp"
#include "interop/torchtitan.hpp"
#include "support/input_error.hpp"
#include "support/plan_of.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::interop {
namespace torchtitan_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::scripts;  // NOLINT: write_text, read_text, fake_recorder, hostile_strings, ...

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using formats::Plan;
using formats::shell_quote;
using shardplan::testing::input_error_of;
using shardplan::testing::run_command;
using shardplan::testing::TempDir;
using shardplan::testing::golden::expect_golden;
using shardplan::testing::golden::golden_plan;

// --- helpers ------------------------------------------------------------------------------

Plan make_plan(const std::string& model, int nodes, const std::function<void(sim::ParallelConfig&)>& edit) {
  sim::ParallelConfig c;
  c.seq_len = 4096;
  edit(c);
  return shardplan::testing::plan_of(model, "p5.48xlarge", nodes, c);
}

ImportContext context_of(const Plan& p) {
  ImportContext ctx;
  ctx.devices = p.cluster.devices();
  ctx.devices_per_node = p.cluster.per_node();
  return ctx;
}

ImportResult reimport(const Plan& p) { return import_torchtitan(torchtitan_toml(p), context_of(p), "torchtitan.toml"); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return contains(l, part); });
}

// --- golden exports -----------------------------------------------------------------------

TEST(TorchtitanExport, GoldenDense3d) {
  expect_golden("dense-3d", "torchtitan.toml", torchtitan_toml(golden_plan("dense-3d")));
}

TEST(TorchtitanExport, GoldenMoeCp) {
  expect_golden("moe-cp", "torchtitan.toml", torchtitan_toml(golden_plan("moe-cp")));
}

TEST(TorchtitanExport, Dense3dSaysWhatItApproximates) {
  const auto notes = torchtitan_notes(golden_plan("dense-3d"));
  EXPECT_TRUE(contains(notes.front(), "v0.2.2")) << notes.front();
  EXPECT_TRUE(contains(notes.front(), "--module")) << notes.front();
  EXPECT_TRUE(any_contains(notes, "ZeRO-1: torchtitan shards with FSDP2 only"));
  EXPECT_TRUE(any_contains(notes, "selective recompute"));
  EXPECT_TRUE(any_contains(notes, "fusion megatron"));
  EXPECT_FALSE(any_contains(notes, "no torchtitan v0.2.2 flavor"));  // llama3.1-70b is llama3 "70B"
  const std::string toml = torchtitan_toml(golden_plan("dense-3d"));
  for (const auto& n : notes) EXPECT_TRUE(contains(toml, "# shardplan note: " + n)) << n;
}

TEST(TorchtitanExport, MoeCpNamesTheNearestFlavorAndItsExperts) {
  const auto notes = torchtitan_notes(golden_plan("moe-cp"));
  EXPECT_TRUE(any_contains(notes, "'mixtral-8x7b' is no torchtitan v0.2.2 flavor")) << notes[1];
  const std::string toml = torchtitan_toml(golden_plan("moe-cp"));
  EXPECT_TRUE(contains(toml, "name = \"llama4\"")) << toml;
  EXPECT_TRUE(contains(toml, "expert_parallel_degree = 4")) << toml;
  EXPECT_TRUE(contains(toml, "expert_tensor_parallel_degree = 2")) << toml;
  EXPECT_TRUE(contains(toml, "context_parallel_degree = 2")) << toml;
}

// Python's tomllib (what torchtitan v0.2.2 reads the file with, config/manager.py) reads the goldens
// into the values torchtitan's dataclasses take.
TEST(TorchtitanExport, PythonTomllibReadsTheGoldens) {
  if (run_command("python3 -c 'import tomllib'").status != 0) GTEST_SKIP() << "python3 with tomllib not found";
  TempDir dir;
  const std::string path = dir.file("t.toml");
  write_text(path, torchtitan_toml(golden_plan("dense-3d")));
  const auto r = run_command(
      "python3 -c 'import tomllib,sys; t=tomllib.load(open(sys.argv[1],\"rb\")); p=t[\"parallelism\"]; "
      "print(p[\"tensor_parallel_degree\"], p[\"pipeline_parallel_degree\"], p[\"data_parallel_shard_degree\"], "
      "p[\"pipeline_parallel_schedule\"], p[\"pipeline_parallel_layers_per_stage\"], "
      "p[\"pipeline_parallel_first_stage_less_layers\"], p[\"pipeline_parallel_last_stage_less_layers\"], "
      "t[\"training\"][\"local_batch_size\"], t[\"model\"][\"flavor\"])' " +
      shell_quote(path));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "4 4 2 Interleaved1F1B 10 0 0 32 70B\n");  // 80 blocks / (4 x 2)
}

// --- refusals -----------------------------------------------------------------------------

TEST(TorchtitanExport, RefusesWhatTorchtitanCannotRun) {
  const std::string gaudi = input_error_of([] { (void)torchtitan_toml(golden_plan("zero3-lora")); });
  EXPECT_TRUE(contains(gaudi, "CUDA or ROCm")) << gaudi;
  const std::string neuron = input_error_of([] { (void)torchtitan_toml(golden_plan("neuron-3d")); });
  EXPECT_TRUE(contains(neuron, "Trainium")) << neuron;
  const auto refused = [](const Plan& p, const std::string& what) {
    const std::string why = input_error_of([&] { (void)torchtitan_toml(p); });
    EXPECT_TRUE(contains(why, what)) << why;
    EXPECT_TRUE(contains(why, "torchtitan")) << why;
    EXPECT_EQ(input_error_of([&] { (void)torchtitan_notes(p); }), why);
    EXPECT_EQ(input_error_of([&] { (void)torchtitan_command_line(p, "t.toml"); }), why);
  };
  refused(make_plan(
              "llama2-7b", 1,
              [](sim::ParallelConfig& c) { c.dp = 8, c.zero_stage = 3, c.lora.rank = 8, c.lora.targets = {"q_proj"}; }),
          "LoRA");
  refused(make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.precision = sim::Precision::fp16; }),
          "fp16");
  refused(make_plan("llama3.1-8b", 1,
                    [](sim::ParallelConfig& c) {
                      c.dp = 8, c.zero_stage = 3, c.recompute = sim::Recompute::full, c.offload_activations = true;
                    }),
          "activation offload");
  refused(make_plan("llama3.1-8b", 1,
                    [](sim::ParallelConfig& c) { c.tp = 8, c.zero_stage = 1, c.offload_optimizer = true; }),
          "optimizer offload");
  refused(make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.seq_len = 4095; }), "seq_len 4095");
  refused(make_plan("bert-large", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.seq_len = 512; }), "encoder");
  refused(make_plan("mixtral-8x7b", 1,
                    [](sim::ParallelConfig& c) {
                      c.tp = 4, c.dp = 2, c.ep = 2, c.etp = 2, c.zero_stage = 1, c.sequence_parallel = true;
                    }),
          "expert tensor parallel 2");
  refused(make_plan("mixtral-8x7b", 2,
                    [](sim::ParallelConfig& c) {  // HSDP: experts only within a shard group
                      c.tp = 1, c.dp = 16, c.ep = 8, c.etp = 1, c.zero_stage = 3, c.sharding_degree = 4;
                    }),
          "must divide data_parallel_shard_degree x cp x tp = 4");
}

// --- round trips --------------------------------------------------------------------------

// import(export(plan)) against the plan; `zero` and `mixed` are what torchtitan runs for them.
void expect_round_trip(const Plan& p, int zero, sim::MixedPrecision mixed) {
  SCOPED_TRACE(p.model.name + " " + torchtitan_toml(p));
  const ImportResult r = reimport(p);
  const auto& a = r.config;
  const auto& e = p.config;
  EXPECT_EQ(a.tp, e.tp);
  EXPECT_EQ(a.pp, e.pp);
  EXPECT_EQ(a.dp, e.dp);
  EXPECT_EQ(a.cp, e.cp);
  EXPECT_EQ(a.ep, e.ep);
  if (e.ep > 1) { EXPECT_EQ(a.expert_tp(), e.expert_tp()); }
  EXPECT_EQ(a.zero_stage, zero);
  if (zero > 0) { EXPECT_EQ(a.shard_group(), e.shard_group()); }
  EXPECT_EQ(a.micro_batch_size, e.micro_batch_size);
  EXPECT_EQ(a.global_batch_size, e.global_batch_size);
  EXPECT_EQ(a.seq_len, e.seq_len);
  if (e.pp > 1) { EXPECT_EQ(a.schedule, e.schedule); }
  EXPECT_EQ(a.virtual_stages, e.virtual_stages);
  EXPECT_EQ(a.partition, e.partition);
  // Megatron's selective recompute goes out as mode none (the same tensors under SDPA); the first k
  // blocks of each chunk as every N-th block, the same count in every chunk.
  EXPECT_EQ(a.recompute, e.recompute == sim::Recompute::selective ? sim::Recompute::none : e.recompute);
  if (e.recompute_num_layers == 0) {
    EXPECT_EQ(a.recompute_num_layers, 0);
    EXPECT_EQ(a.recompute_every, e.recompute_every);
  }
  for (int ch = 0; ch < e.virtual_stages; ++ch)
    for (int st = 0; st < e.pp; ++st)
      EXPECT_EQ(sim::chunk_shape(p.model, a, ch, st).recomputed, sim::chunk_shape(p.model, e, ch, st).recomputed);
  EXPECT_EQ(a.sequence_parallel, e.sequence_parallel);
  EXPECT_EQ(a.tp_comm_overlap, e.tp_comm_overlap);
  EXPECT_EQ(a.precision, e.precision);
  if (e.precision != sim::Precision::fp32) { EXPECT_EQ(a.mixed_precision, mixed); }
  EXPECT_EQ(a.fp8, e.fp8 == sim::Fp8Recipe::delayed ? sim::Fp8Recipe::tensorwise : e.fp8);
  EXPECT_EQ(a.fp8_param_gather, e.fp8_param_gather);
  EXPECT_EQ(a.lora.enabled(), false);
  EXPECT_EQ(a.offload_optimizer, e.offload_optimizer);
  EXPECT_EQ(a.offload_activations, false);
  sim::ParallelConfig valid = a;  // what the importer gives is a valid configuration of the plan's model
  EXPECT_NO_THROW(sim::validate_config(p.model, p.cluster, valid));
}

TEST(TorchtitanImport, RoundTripGoldenPlans) {
  expect_round_trip(golden_plan("dense-3d"), 2, sim::MixedPrecision::master_weights);  // ZeRO-1 runs as ZeRO-2
  expect_round_trip(golden_plan("moe-cp"), 2, sim::MixedPrecision::master_weights);
  EXPECT_TRUE(reimport(golden_plan("moe-cp")).warnings.empty()) << reimport(golden_plan("moe-cp")).warnings.front();
}

TEST(TorchtitanImport, RoundTripDdpAutocastAndAccumulation) {
  const Plan p = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) {
    c.dp = 8, c.micro_batch_size = 2, c.global_batch_size = 64, c.mixed_precision = sim::MixedPrecision::autocast;
  });
  expect_round_trip(p, 0, sim::MixedPrecision::autocast);
  const std::string toml = torchtitan_toml(p);
  EXPECT_TRUE(contains(toml, "data_parallel_replicate_degree = 8")) << toml;
  EXPECT_FALSE(contains(toml, "fsdp_reshard_after_forward")) << toml;
  EXPECT_TRUE(contains(toml, "local_batch_size = 2")) << toml;
  EXPECT_TRUE(contains(toml, "global_batch_size = 64")) << toml;
  // 16-bit master weights have no DDP counterpart in torchtitan: autocast, said in a note.
  const Plan master = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8; });
  expect_round_trip(master, 0, sim::MixedPrecision::autocast);
  EXPECT_TRUE(any_contains(torchtitan_notes(master), "torch.autocast over fp32 weights"));
}

TEST(TorchtitanImport, RoundTripZero3Fp8AsyncTpUnevenPipelineOffload) {
  const Plan p = make_plan("llama3.1-70b", 4, [](sim::ParallelConfig& c) {
    c.tp = 8, c.pp = 2, c.dp = 2, c.zero_stage = 3, c.micro_batch_size = 2, c.global_batch_size = 16;
    c.partition = {39, 41}, c.recompute = sim::Recompute::full, c.sequence_parallel = true, c.tp_comm_overlap = true;
    c.fp8 = sim::Fp8Recipe::tensorwise, c.fp8_param_gather = true, c.offload_optimizer = true;
  });
  expect_round_trip(p, 3, sim::MixedPrecision::master_weights);
  const std::string toml = torchtitan_toml(p);
  EXPECT_TRUE(contains(toml, "fsdp_reshard_after_forward = \"always\"")) << toml;
  EXPECT_TRUE(contains(toml, "local_batch_size = 8")) << toml;  // 4 micro-batches of 2 per pipeline step
  EXPECT_TRUE(contains(toml, "pipeline_parallel_microbatch_size = 2")) << toml;
  EXPECT_TRUE(contains(toml, "converters = [ \"quantize.linear.float8\" ]")) << toml;
  EXPECT_TRUE(contains(toml, "enable_fsdp_float8_all_gather = true")) << toml;
  EXPECT_TRUE(contains(toml, "enable_async_tensor_parallel = true")) << toml;
  EXPECT_TRUE(contains(toml, "[compile]")) << toml;
  // The uneven split as each stage's modules: embeddings and blocks 0-38, then 39-79 and the head.
  const toml::table t = toml::parse(toml, std::string_view("t.toml"));
  const auto* parts = t["parallelism"]["module_fqns_per_model_part"].as_array();
  ASSERT_NE(parts, nullptr);
  ASSERT_EQ(parts->size(), 2u);
  const auto& first = *parts->get(0)->as_array();
  const auto& last = *parts->get(1)->as_array();
  EXPECT_EQ(first.size(), 40u);
  EXPECT_EQ(first.get(0)->value<std::string>(), "tok_embeddings");
  EXPECT_EQ(first.get(39)->value<std::string>(), "layers.38");
  EXPECT_EQ(last.size(), 43u);
  EXPECT_EQ(last.get(0)->value<std::string>(), "layers.39");
  EXPECT_EQ(last.get(42)->value<std::string>(), "output");
  EXPECT_FALSE(contains(toml, "pipeline_parallel_layers_per_stage")) << toml;
  EXPECT_TRUE(contains(toml, "enable_cpu_offload = true")) << toml;
}

TEST(TorchtitanImport, RoundTripHsdpEveryNthBlockFp32) {
  const Plan p = make_plan("llama3.1-8b", 2, [](sim::ParallelConfig& c) {
    c.tp = 2, c.dp = 8, c.zero_stage = 3, c.sharding_degree = 4, c.sequence_parallel = true;
    c.recompute = sim::Recompute::full, c.recompute_num_layers = 8, c.precision = sim::Precision::fp32;
  });
  expect_round_trip(p, 3, sim::MixedPrecision::master_weights);
  const std::string toml = torchtitan_toml(p);
  EXPECT_TRUE(contains(toml, "data_parallel_replicate_degree = 2")) << toml;
  EXPECT_TRUE(contains(toml, "data_parallel_shard_degree = 4")) << toml;
  EXPECT_TRUE(contains(toml, "selective_ac_option = \"4\"")) << toml;  // every 4th of 32 blocks = 8
  EXPECT_TRUE(contains(toml, "mixed_precision_param = \"float32\"")) << toml;
}

TEST(TorchtitanImport, RoundTripGpipeZero2BlockwiseAndCpOnly) {
  const Plan gpipe = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) {
    c.tp = 2, c.pp = 2, c.dp = 2, c.zero_stage = 2, c.schedule = sim::PipelineSchedule::gpipe;
    c.sequence_parallel = true, c.global_batch_size = 8, c.fp8 = sim::Fp8Recipe::blockwise;
  });
  expect_round_trip(gpipe, 2, sim::MixedPrecision::master_weights);
  EXPECT_TRUE(contains(torchtitan_toml(gpipe), "recipe_name = \"rowwise\""));
  EXPECT_TRUE(any_contains(torchtitan_notes(gpipe), "blockwise FP8"));
  const Plan cp = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) {
    c.cp = 8, c.zero_stage = 3, c.seq_len = 16384, c.recompute = sim::Recompute::selective;
  });
  expect_round_trip(cp, 3, sim::MixedPrecision::master_weights);
  const Plan delayed = make_plan(
      "llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.zero_stage = 3, c.fp8 = sim::Fp8Recipe::delayed; });
  expect_round_trip(delayed, 3, sim::MixedPrecision::master_weights);
  EXPECT_TRUE(any_contains(torchtitan_notes(delayed), "delayed FP8 scaling"));
}

TEST(TorchtitanImport, TensorParallelWithoutFsdpTrainsPureBf16) {
  const Plan p = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.tp = 8, c.sequence_parallel = true; });
  const std::string toml = torchtitan_toml(p);
  EXPECT_TRUE(contains(toml, "dtype = \"bfloat16\"")) << toml;
  EXPECT_TRUE(any_contains(torchtitan_notes(p), "pure bf16"));
  const ImportResult r = reimport(p);
  EXPECT_EQ(r.config.precision, sim::Precision::bf16);
  EXPECT_TRUE(any_contains(r.warnings, "pure bf16 training")) << r.warnings.size();
  // ZeRO-0 with TP and dp > 1: torchtitan's DDP cannot run beside TP; sharded instead, noted.
  const Plan zero0 = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.tp = 4, c.dp = 2; });
  EXPECT_TRUE(contains(torchtitan_toml(zero0), "data_parallel_shard_degree = 2"));
  EXPECT_TRUE(any_contains(torchtitan_notes(zero0), "ZeRO-0 without sharding"));
  EXPECT_TRUE(any_contains(torchtitan_notes(zero0), "always sequence parallel"));
  EXPECT_EQ(reimport(zero0).config.zero_stage, 2);
}

// --- the launch line ----------------------------------------------------------------------

TEST(TorchtitanCommand, SingleNodeAsRunTrainShWithHostilePaths) {
  TempDir dir;
  fs::create_directories(dir.path() / "bin");
  write_text(dir.file("bin/torchrun"),
             "#!/bin/bash\n: > \"$RECORD\"\nprintf '%s\\0' \"$PYTORCH_ALLOC_CONF\" >> \"$RECORD\"\n"
             "for a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$RECORD\"; done\n",
             true);
  const std::string canary = dir.file("canary");
  const Plan p = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.zero_stage = 3; });
  for (const auto& path : hostile_strings(canary)) {
    const std::string cmd = torchtitan_command_line(p, path);
    write_text(dir.file("run.sh"), cmd);
    ASSERT_EQ(run_command("bash -n " + shell_quote(dir.file("run.sh"))).status, 0) << cmd;
    const auto r =
        run_command("PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args")) +
                    " bash " + shell_quote(dir.file("run.sh")));
    ASSERT_EQ(r.status, 0) << r.out;
    const std::vector<std::string> expected = {"expandable_segments:True",
                                               "--nnodes",
                                               "1",
                                               "--nproc_per_node",
                                               "8",
                                               "--rdzv_backend",
                                               "c10d",
                                               "--rdzv_endpoint",
                                               "localhost:0",
                                               "--local-ranks-filter",
                                               "0",
                                               "--role",
                                               "rank",
                                               "--tee",
                                               "3",
                                               "-m",
                                               "torchtitan.train",
                                               "--job.config_file",
                                               path};
    EXPECT_EQ(split_nul(read_text(dir.file("args"))), expected) << cmd;
    EXPECT_FALSE(fs::exists(canary)) << cmd;
  }
}

TEST(TorchtitanCommand, MultiNodeAsTheSlurmTrainerNeedsMasterAddr) {
  TempDir dir;
  fs::create_directories(dir.path() / "bin");
  write_text(dir.file("bin/torchrun"),
             "#!/bin/bash\n: > \"$RECORD\"\nfor a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$RECORD\"; done\n", true);
  const Plan& p = golden_plan("dense-3d");
  const std::string cmd = torchtitan_command_line(p, "my config.toml");
  write_text(dir.file("run.sh"), cmd);
  const std::string env = "PATH=" + shell_quote(dir.file("bin")) + ":\"$PATH\" RECORD=" + shell_quote(dir.file("args"));
  const auto unset = run_command("unset MASTER_ADDR; " + env + " bash " + shell_quote(dir.file("run.sh")));
  EXPECT_NE(unset.status, 0) << unset.out;
  EXPECT_TRUE(contains(unset.out, "set MASTER_ADDR")) << unset.out;
  const auto r = run_command("MASTER_ADDR=10.0.0.7 " + env + " bash " + shell_quote(dir.file("run.sh")));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<std::string> expected = {"--nnodes",
                                             "4",
                                             "--nproc_per_node",
                                             "8",
                                             "--rdzv_backend",
                                             "c10d",
                                             "--rdzv_id",
                                             "101",
                                             "--rdzv_endpoint",
                                             "10.0.0.7:29500",
                                             "-m",
                                             "torchtitan.train",
                                             "--job.config_file",
                                             "my config.toml"};
  EXPECT_EQ(split_nul(read_text(dir.file("args"))), expected) << cmd;
}

// Hostile model and hardware names reach the TOML (a quoted string) and its comment lines only.
TEST(TorchtitanExport, HostileNamesStayInsideStringsAndComments) {
  for (const auto& name : hostile_strings("/nonexistent/canary")) {
    Plan p = make_plan("llama3.1-8b", 1, [](sim::ParallelConfig& c) { c.dp = 8, c.zero_stage = 3; });
    p.model.name = name;
    p.cluster.hardware.name = name;
    const std::string text = torchtitan_toml(p);
    SCOPED_TRACE(text);
    toml::table t;
    ASSERT_NO_THROW(t = toml::parse(text, std::string_view("hostile.toml")));
    EXPECT_EQ(t["job"]["description"].value<std::string>(), "shardplan plan: " + name + " on 1 x " + name);
    EXPECT_EQ(t["parallelism"]["tensor_parallel_degree"].value<long long>(), 1);
    EXPECT_EQ(t["parallelism"].as_table()->size(), 6u);  // the injected "[parallelism] tp = 1" is not a key
    for (const auto& n : torchtitan_notes(p)) EXPECT_EQ(n.find('\n'), std::string::npos) << n;
    EXPECT_EQ(reimport(p).config.dp, 8);
  }
}

// --- torchtitan's own configs -------------------------------------------------------------

// torchtitan/models/llama3/train_configs/llama3_70b.toml at v0.2.2 (73a0e697), "a preset for 64 A100 GPUs".
constexpr const char* kLlama3_70b = R"(# NOTE: this toml config is a preset for 64 A100 GPUs.
[job]
dump_folder = "./outputs"
description = "Llama 3 70B training"
[profiling]
enable_profiling = true
save_traces_folder = "profile_trace"
profile_freq = 100
[metrics]
log_freq = 10
enable_tensorboard = true
save_tb_folder = "tb"
[model]
name = "llama3"
flavor = "70B"
hf_assets_path = "./assets/hf/Llama-3.1-70B"
# converters = ["float8"]
[optimizer]
name = "AdamW"
lr = 1.5e-4
eps = 1e-8
[lr_scheduler]
warmup_steps = 200  # lr scheduler warm up, normally 20% of the train steps
[training]
local_batch_size = 8
seq_len = 8192
max_norm = 1.0  # grad norm clipping
steps = 1000
dataset = "c4"
[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
tensor_parallel_degree = 8  # 8-way TP
pipeline_parallel_degree = 1
context_parallel_degree = 1
[checkpoint]
enable = false
folder = "checkpoint"
interval = 500
last_save_model_only = true
export_dtype = "float32"
async_mode = "disabled" # ["disabled", "async", "async_with_pinned_mem"]
[activation_checkpoint]
mode = "full"
[compile]
enable=false
components = ["model", "loss"]
[quantize.linear.float8]
enable_fsdp_float8_all_gather = false
precompute_float8_dynamic_scale_for_fsdp = false
filter_fqns = ["output"]
[validation]
enable = false
dataset = "c4_validation"
freq = 500
steps = 1200 # Recommend value for c4_validation with world-size=8 and seq_len=8192
)";

TEST(TorchtitanImport, ShippedLlama3_70bPreset) {
  ImportContext ctx;
  ctx.devices = 64;
  const ImportResult r = import_torchtitan(kLlama3_70b, ctx, "llama3_70b.toml");
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 8);
  EXPECT_EQ(c.dp, 8);  // data_parallel_shard_degree -1 = 64 / 8
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.shard_group(), 8);
  EXPECT_EQ(c.micro_batch_size, 8);
  EXPECT_EQ(c.global_batch_size, 64);
  EXPECT_EQ(c.seq_len, 8192);
  EXPECT_EQ(c.recompute, sim::Recompute::full);
  EXPECT_TRUE(c.sequence_parallel);
  EXPECT_EQ(c.fp8, sim::Fp8Recipe::none);  // the converter is commented out
  EXPECT_EQ(c.precision, sim::Precision::bf16);
}

TEST(TorchtitanImport, Shipped405bFloat8AsyncTpAndTheV01ConverterName) {
  std::string text = kLlama3_70b;
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  // The differences of llama3_405b.toml at v0.2.2 that matter.
  replace("flavor = \"70B\"", "flavor = \"405B\"");
  replace("# converters = [\"float8\"]", "converters = [\"float8\"]");
  replace("local_batch_size = 8", "local_batch_size = 2");
  replace("tensor_parallel_degree = 8  # 8-way TP", "tensor_parallel_degree = 8\nenable_async_tensor_parallel = true");
  replace("enable=false", "enable=true");
  replace("enable_fsdp_float8_all_gather = false\nprecompute_float8_dynamic_scale_for_fsdp = false",
          "enable_fsdp_float8_all_gather = true\nprecompute_float8_dynamic_scale_for_fsdp = true");
  ImportContext ctx;
  ctx.devices = 128;
  const ImportResult r = import_torchtitan(text, ctx, "llama3_405b.toml");
  EXPECT_EQ(r.config.fp8, sim::Fp8Recipe::tensorwise);
  EXPECT_TRUE(r.config.fp8_param_gather);
  EXPECT_TRUE(r.config.tp_comm_overlap);
  EXPECT_EQ(r.config.dp, 16);
  EXPECT_EQ(r.config.global_batch_size, 32);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(contains(r.warnings[0], "torchtitan v0.1's name")) << r.warnings[0];
}

TEST(TorchtitanImport, DefaultsFollowTorchtitanIncludingItsPipelineSplit) {
  ImportContext ctx;
  ctx.devices = 32;
  // llama3 70B, pp 4, 1F1B: generate_llm_fqn_per_model_part with the embeddings and the output
  // each counted as a layer: 82 / 4 -> 20, 21, 20, 19 blocks.
  auto r = import_torchtitan(
      "[model]\nname = \"llama3\"\nflavor = \"70B\"\n[parallelism]\npipeline_parallel_degree = 4\n"
      "tensor_parallel_degree = 8\n",
      ctx, "pp.toml");
  EXPECT_EQ(r.config.partition, (std::vector<int>{20, 21, 20, 19}));
  EXPECT_EQ(r.config.zero_stage, 0);        // dp 1: no FSDP
  EXPECT_EQ(r.config.micro_batch_size, 1);  // pipeline_parallel_microbatch_size 1 of local_batch_size 8
  EXPECT_EQ(r.config.global_batch_size, 8);
  EXPECT_EQ(r.config.recompute, sim::Recompute::full);  // selective, every 2nd block of each pipeline rank
  EXPECT_EQ(r.config.recompute_every, 2);
  EXPECT_EQ(r.config.precision, sim::Precision::fp32);  // TP and PP without FSDP: no mixed precision
  EXPECT_TRUE(any_contains(r.warnings, "has no effect with TP or PP"));
  r = import_torchtitan(
      "[model]\nname = \"llama3\"\nflavor = \"70B\"\n[parallelism]\npipeline_parallel_degree = 4\n"
      "pipeline_parallel_schedule = \"interleaved1f1b\"\n",
      ctx, "pp.toml");
  EXPECT_EQ(r.config.schedule, sim::PipelineSchedule::interleaved);
  EXPECT_EQ(r.config.virtual_stages, 2);
  EXPECT_EQ(r.config.partition, (std::vector<int>{10, 11, 10, 10, 10, 10, 10, 9}));
  EXPECT_EQ(r.config.dp, 8);
  EXPECT_EQ(r.config.zero_stage, 2);  // "default" does not reshard with PP
  // A flavor shardplan does not know: even split assumed, said.
  r = import_torchtitan("[model]\nname = \"mine\"\n[parallelism]\npipeline_parallel_degree = 4\n", ctx, "x.toml");
  EXPECT_TRUE(r.config.partition.empty());
  EXPECT_TRUE(any_contains(r.warnings, "no known flavor"));
}

TEST(TorchtitanImport, WarnsAboutWhatItDoesNotModel) {
  ImportContext ctx;
  ctx.devices = 8;
  const auto r = import_torchtitan(
      "[parallelism]\ntensor_parallel_degre = 2\ncontext_parallel_rotate_method = \"alltoall\"\n"
      "[training]\nsteps = 5\ndtype = \"bfloat16\"\n[mystery]\nx = 1\n[optimizer]\nlr = 1e-3\n"
      "[activation_checkpoint]\nmode = \"memory_budget\"\n[model]\nconverters = [\"quantize.grouped_mm.float8\"]\n",
      ctx, "w.toml");
  EXPECT_TRUE(any_contains(r.warnings, "w.toml: 'parallelism.tensor_parallel_degre' is not a torchtitan v0.2.2 key"));
  EXPECT_TRUE(any_contains(r.warnings, "w.toml: 'mystery' is not a torchtitan v0.2.2 section"));
  EXPECT_TRUE(any_contains(r.warnings, "pure bf16"));
  EXPECT_TRUE(any_contains(r.warnings, "memory_budget"));
  EXPECT_TRUE(any_contains(r.warnings, "MoE grouped GEMMs"));
  EXPECT_FALSE(any_contains(r.warnings, "rotate_method"));  // accepted silently
  EXPECT_FALSE(any_contains(r.warnings, "'optimizer"));
  EXPECT_EQ(r.warnings.size(), 5u);
}

// --- malformed imports --------------------------------------------------------------------

TEST(TorchtitanImport, MalformedConfigsNameTheFileTheFieldAndTheLine) {
  ImportContext ctx;
  ctx.devices = 16;
  const auto why = [&](const std::string& text) {
    return input_error_of([&] { (void)import_torchtitan(text, ctx, "job.toml"); });
  };
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = = 2\n"), "job.toml:2:"));
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = = 2\n"), "invalid TOML"));
  const std::string type = why("[job]\n[parallelism]\ntensor_parallel_degree = \"4\"\n");
  EXPECT_TRUE(contains(
      type, "job.toml:3: field 'parallelism.tensor_parallel_degree': expected an integer >= 1 (and < 2^31), got \"4\""))
      << type;
  EXPECT_TRUE(contains(why("parallelism = 3\n"), "field 'parallelism': expected a table")) << why("parallelism = 3\n");
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = 3\n"), "does not divide the 16 devices"));
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\n"),
                       "'parallelism.tensor_parallel_degree': expected data_parallel_replicate_degree x cp x tp x pp"));
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = 99999999999\n"), "(and < 2^31)"));
  EXPECT_TRUE(
      contains(why("[parallelism]\ndata_parallel_shard_degree = 4\n"), "'parallelism.data_parallel_shard_degree'"));
  EXPECT_TRUE(
      contains(why("[parallelism]\ndata_parallel_shard_degree = 0\n"), "expected -1 or an integer >= 1, got 0"));
  EXPECT_TRUE(
      contains(why("[training]\nlocal_batch_size = 2\nglobal_batch_size = 40\n"), "'training.global_batch_size'"));
  EXPECT_TRUE(
      contains(why("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 3\n"),
               "'parallelism.pipeline_parallel_microbatch_size': expected a divisor of training.local_batch_size (8)"));
  EXPECT_TRUE(contains(
      why("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"InterleavedZeroBubble\"\n"),
      "1F1B, Interleaved1F1B, GPipe, ZBVZeroBubble or DualPipeV"));
  EXPECT_TRUE(
      contains(why("[parallelism]\npipeline_parallel_degree = 2\nmodule_fqns_per_model_part = [[\"layers.0\"]]\n"),
               "one part per pipeline rank (2 ranks), got 1 parts"));
  EXPECT_TRUE(contains(
      why("[parallelism]\npipeline_parallel_degree = 2\nmodule_fqns_per_model_part = [[\"layers.0\"], [\"norm\"]]\n"),
      "part 1 has none"));
  EXPECT_TRUE(contains(why("[activation_checkpoint]\nmode = \"sometimes\"\n"), "'activation_checkpoint.mode'"));
  EXPECT_TRUE(contains(why("[activation_checkpoint]\nselective_ac_option = \"two\"\n"),
                       "'activation_checkpoint.selective_ac_option'"));
  EXPECT_TRUE(contains(
      why("[parallelism]\ntensor_parallel_degree = 4\nexpert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2\n"),
      "'parallelism.expert_tensor_parallel_degree': expected 1 or tensor_parallel_degree (4)"));
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n"),
                       "'parallelism.enable_async_tensor_parallel': expected compile.enable = true"));
  EXPECT_TRUE(
      contains(why("[training]\nseq_len = 2047\n"), "'training.seq_len': expected a multiple of tp x 2 x cp = 2"));
  EXPECT_TRUE(
      contains(why("[training]\nmixed_precision_reduce = \"bfloat16\"\n"), "'training.mixed_precision_reduce'"));
  EXPECT_TRUE(
      contains(why("[training]\ndtype = \"float16\"\n"), "expected \"bfloat16\" or \"float32\", got \"float16\""));
  EXPECT_TRUE(
      contains(why("[model]\nconverters = \"quantize.linear.float8\"\n"), "'model.converters': expected an array"));
  EXPECT_TRUE(contains(
      why("[model]\nconverters = [\"quantize.linear.float8\"]\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n"
          "enable_fsdp_float8_all_gather = true\n"),
      "'quantize.linear.float8.enable_fsdp_float8_all_gather'"));
  ctx.tp = 4;
  EXPECT_TRUE(contains(why("[parallelism]\ntensor_parallel_degree = 2\n"), "as given to the import (4)"));
  ctx.tp = 0;
  ctx.devices = 0;
  EXPECT_TRUE(contains(why(""), "job.toml: importing needs the cluster's device count"));
}

}  // namespace torchtitan_test
}  // namespace shardplan::interop
