// Runs of the real shardrun under mpirun: LoRA, checkpoint/resume, loss scaling, memory by ZeRO
// stage, the report, and bad input (one clear error, every rank exits non-zero, no hang).
#include <gtest/gtest.h>

#include <strings.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "harness.hpp"

namespace shardplan::testing {
namespace runs_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;

// Every linear adapted: the base model is a random init, so the adapters must do the learning.
const nlohmann::json kLora = {
    {"rank", 8},
    {"alpha", 16},
    {"dropout", 0.0},
    {"targets", {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}};

std::vector<std::string> step_dirs(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void truncate_by(const std::string& path, uintmax_t bytes) { fs::resize_file(path, fs::file_size(path) - bytes); }

TEST(Lora, BaseWeightsStayBitIdenticalOnlyAdaptersTrainAndLossFalls) {
  TempDir dir("shardrun_lora");
  const std::string plan = write_plan(dir, "lora", "tiny-llama", {{"tensor_parallel", 2}, {"lora", kLora}});
  const std::string data = corpus_data_args(dir);
  const RunResult init = shardrun(2, plan, dir.file("init"),
                                  data + " --steps 1 --lr 0 --save-final " + dir.file("init.safetensors") +
                                      " --save-adapter " + dir.file("init_adapter"));
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const RunResult run = shardrun(2, plan, dir.file("run"),
                                 data + " --steps 20 --lr 3e-3 --save-final " + dir.file("final.safetensors") +
                                     " --save-adapter " + dir.file("adapter"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), 20u);
  EXPECT_LT(run.losses.back(), run.losses.front() - 0.3);

  const auto base0 = read_floats(dir.file("init.safetensors")), base1 = read_floats(dir.file("final.safetensors"));
  ASSERT_FALSE(base0.empty());
  ASSERT_EQ(base0.size(), base1.size());
  for (const auto& [name, w] : base0) {
    ASSERT_EQ(w.size(), base1.at(name).size());
    EXPECT_EQ(std::memcmp(w.data(), base1.at(name).data(), w.size() * sizeof(float)), 0) << name << " changed";
  }
  const auto a0 = read_floats(dir.file("init_adapter/adapter_model.safetensors"));
  const auto a1 = read_floats(dir.file("adapter/adapter_model.safetensors"));
  EXPECT_EQ(a1.size(), 4u * 7u * 2u);  // 4 layers x 7 linears x {A, B}
  const std::string b_name = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
  ASSERT_TRUE(a1.count(b_name));
  for (const auto& [name, w] : a1) {
    double moved = 0;
    for (size_t i = 0; i < w.size(); ++i) moved += std::abs(w[i] - a0.at(name)[i]);
    EXPECT_GT(moved, 0.0) << name << " did not train";
  }
  EXPECT_EQ(a1.at(b_name).size(), 256u * 8u);  // (out, r), gathered over tp
  const auto cfg = nlohmann::json::parse(std::ifstream(dir.file("adapter/adapter_config.json")));
  EXPECT_EQ(cfg["r"], 8);
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["target_modules"], kLora["targets"]);
}

TEST(Checkpoint, StoppedAndResumedRunReachesBitIdenticalLosses) {
  TempDir dir("shardrun_ckpt");
  const std::string plan = write_plan(dir, "z2", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 2}});
  const std::string common = corpus_data_args(dir) + " --steps 12 --lr 1e-3";
  const RunResult full = shardrun(2, plan, dir.file("full"), common);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_EQ(full.losses.size(), 12u);
  const std::string ck = " --checkpoint-dir " + quote(dir.file("ck")) + " --checkpoint-every 4 --keep-last 2";
  const RunResult first = shardrun(2, plan, dir.file("first"), common + ck + " --stop-after 6");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  ASSERT_EQ(first.losses.size(), 6u);
  const RunResult resumed = shardrun(2, plan, dir.file("resumed"), common + ck + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 8u);  // steps 5..12, from the step-4 checkpoint
  for (size_t i = 0; i < resumed.losses.size(); ++i)
    EXPECT_EQ(resumed.losses[i], full.losses[i + 4]) << "step " << i + 5;
  EXPECT_EQ(step_dirs(dir.file("ck")), (std::vector<std::string>{"step-00000008", "step-00000012"}));
}

// bf16 master weights under ZeRO-3: the checkpoint holds the fp32 master (not the rounded bf16
// weights), and a resumed run rounds it back into the gathered shards, so the losses match the
// uninterrupted run bit for bit.
TEST(Checkpoint, MasterWeightsRunResumesBitIdentically) {
  TempDir dir("shardrun_ckpt_bf16");
  const std::string plan = write_plan(dir, "z3", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 3}});
  const std::string common = corpus_data_args(dir) + " --steps 8 --lr 1e-3 --precision bf16";
  const RunResult full = shardrun(2, plan, dir.file("full"), common);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_EQ(full.report["precision"]["weights"], "bf16");
  const std::string ck = " --checkpoint-dir " + quote(dir.file("ck")) + " --checkpoint-every 4";
  ASSERT_EQ(shardrun(2, plan, dir.file("first"), common + ck + " --stop-after 5").exit_code, 0);
  const RunResult resumed = shardrun(2, plan, dir.file("resumed"), common + ck + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_EQ(resumed.losses.size(), 4u);  // steps 5..8, from the step-4 checkpoint
  for (size_t i = 0; i < resumed.losses.size(); ++i)
    EXPECT_EQ(resumed.losses[i], full.losses[i + 4]) << "step " << i + 5;
  bool fp32_master = false;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.file("ck"))) {
    if (entry.path().extension() != ".safetensors") continue;
    executor::io::SafetensorsReader reader(entry.path().string());
    for (const auto& t : reader.tensors())
      if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".param") == 0) {
        EXPECT_EQ(t.dtype, executor::io::DType::F32) << t.name;
        fp32_master = true;
      }
  }
  EXPECT_TRUE(fp32_master);
}

TEST(LossScaling, OverflowingStepsAreSkippedAndTheScaleBacksOff) {
  // Rank 1's gradients overflow in step 3 (as fp16 would): every rank must skip that update and
  // halve the scale; the others train normally.
  TempDir dir("shardrun_scale");
  const std::string plan = write_plan(dir, "dp2", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 1}});
  const RunResult run = shardrun(2, plan, dir.file("run"),
                                 "--steps 6 --loss-scaling --initial-loss-scale 1024 "
                                 "--inject-fault overflow:1:3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream metrics(dir.file("run/metrics.jsonl"));
  std::vector<nlohmann::json> steps;
  for (std::string line; std::getline(metrics, line);) steps.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(steps.size(), 6u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i]["skipped"].get<bool>(), i == 2) << "step " << i + 1;
  EXPECT_EQ(steps[2]["loss_scale"].get<double>(), steps[1]["loss_scale"].get<double>() / 2);
  for (const auto& s : steps) EXPECT_TRUE(std::isfinite(s["loss"].get<double>()));
}

TEST(Report, PeakMemoryFallsWithZeroStagesAsPredictedAndTheReportCarriesPredictions) {
  TempDir dir("shardrun_zero_mem");
  std::vector<double> peaks, predicted;
  for (const char* name : {"z0", "z1", "z2", "z3"}) {
    const int stage = name[1] - '0';
    const std::string attention = stage % 2 ? "eager" : "flash";  // both kinds of plan run on the CPU
    const std::string plan =
        write_plan(dir, name, "tiny-llama",
                   {{"data_parallel", 2}, {"zero_stage", stage}, {"micro_batch_size", 1}, {"attention", attention}});
    const RunResult r = shardrun(2, plan, dir.file(name), "--steps 3");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The CPU runs the explicit path whatever the plan says; report.json says what ran and why.
    EXPECT_EQ(r.report["attention"]["planned"], attention);
    EXPECT_EQ(r.report["attention"]["ran"], "eager");
    EXPECT_EQ(r.report["attention"]["reason"].get<std::string>().empty(), attention == "eager");
    // The kernel set OpenBLAS runs (a profile holds for runs on the same one): the one
    // OPENBLAS_CORETYPE forces where it is set, as on this project's machines.
    ASSERT_TRUE(r.report.contains("blas_kernels")) << r.report.dump();
    if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr && *forced != '\0') {
      EXPECT_EQ(strcasecmp(r.report["blas_kernels"].get<std::string>().c_str(), forced), 0) << r.report["blas_kernels"];
    }
    const auto& m = r.report["measured"];
    ASSERT_EQ(m["peak_memory_bytes_per_rank"].size(), 2u);
    EXPECT_GT(m["step_seconds"].get<double>(), 0.0);
    // The spread of the steps in the medians (after the first): with two, the 10th and 90th
    // percentiles are the faster and the slower of them.
    std::vector<double> later;
    std::ifstream metrics(dir.file(name) + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const nlohmann::json rec = nlohmann::json::parse(line);
      if (rec.contains("step_seconds") && rec["step"].get<int>() > 1) later.push_back(rec["step_seconds"]);
    }
    ASSERT_EQ(later.size(), 2u);
    EXPECT_DOUBLE_EQ(m["step_seconds_p10"].get<double>(), std::min(later[0], later[1]));
    EXPECT_DOUBLE_EQ(m["step_seconds_p90"].get<double>(), std::max(later[0], later[1]));
    // The machine's speed around the run: the profile's reference GEMM, before and after.
    ASSERT_TRUE(m.contains("reference_gemm_seconds")) << m.dump();
    EXPECT_GT(m["reference_gemm_seconds"]["start"].get<double>(), 0.0);
    EXPECT_GT(m["reference_gemm_seconds"]["end"].get<double>(), 0.0);
    EXPECT_GT(r.report["predicted"]["peak_memory_bytes"].get<double>(), 0.0);
    peaks.push_back(m["peak_memory_bytes"].get<double>());
    predicted.push_back(r.report["predicted"]["peak_memory_bytes"].get<double>());
  }
  EXPECT_GT(peaks[0], peaks[1]);
  EXPECT_GT(peaks[2], peaks[3]);
  EXPECT_GT(peaks[0], peaks[2]);
  EXPECT_GT(peaks[1], peaks[3]);
  // ZeRO-1 against ZeRO-2 depends on the model: ZeRO-2 halves the gradients but makes fresh ones
  // and their bucket copies, which ZeRO-1 adds into its flat buffer directly (zero_linear.hpp);
  // for a 5 M-parameter model the two are within a few per cent. The prediction orders them as measured.
  EXPECT_EQ(peaks[1] > peaks[2], predicted[1] > predicted[2])
      << peaks[1] << " " << peaks[2] << " predicted " << predicted[1] << " " << predicted[2];
}

// --trace: rank 0's per-op table of the steps after the first. Every linear runs three GEMMs
// per micro-batch (forward, input gradient, weight gradient): 7 per Llama block and the LM head.
TEST(Trace, OpTableCountsTheModelsGemmsPerStep) {
  TempDir dir("shardrun_trace");
  const std::string plan = write_plan(dir, "t", "tiny-llama", {{"micro_batch_size", 2}, {"global_batch_size", 4}});
  const std::string table = dir.file("ops.json");
  const RunResult r = shardrun(1, plan, dir.file("run"), "--steps 3 --trace " + quote(table));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json t = nlohmann::json::parse(std::ifstream(table));
  EXPECT_EQ(t["steps"].get<int>(), 2);
  double mm_calls = 0, self_s = 0, previous = 1e30;
  for (const auto& op : t["ops"]) {
    // shardrun's fp32 GEMMs (model/cpu_gemm.hpp), the weight gradients added into the flat
    // buffer (sgemm_add, zero_linear.hpp); LibTorch's own where an operand does not suit sgemm.
    for (const char* gemm : {"shardrun::sgemm", "shardrun::sgemm_add", "aten::mm", "aten::addmm_"})
      if (op["op"] == gemm) mm_calls += op["calls_per_step"].get<double>();
    const double s = op["self_seconds_per_step"].get<double>();
    EXPECT_LE(s, previous);  // sorted by self time
    previous = s;
    self_s += s;
  }
  const double micro_batches = 2, layers = 4;
  EXPECT_DOUBLE_EQ(mm_calls, micro_batches * 3 * (7 * layers + 1));
  EXPECT_NEAR(t["self_seconds_per_step"].get<double>(), self_s, 1e-9);
  EXPECT_GT(self_s, 0.0);
}

TEST(Weights, HuggingFaceSafetensorsLoadIntoAnotherLayoutUnchanged) {
  // GPT-2 naming and layout (Conv1D weights stored (in, out), tied head, no lm_head tensor).
  TempDir dir("shardrun_weights");
  const std::string one = write_plan(dir, "one", "tiny-gpt", nlohmann::json::object());
  const std::string tp2 = write_plan(dir, "tp2", "tiny-gpt", {{"tensor_parallel", 2}});
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors");
  ASSERT_EQ(shardrun(1, one, dir.file("ra"), "--steps 3 --dropout 0 --save-final " + a).exit_code, 0);
  const RunResult r =
      shardrun(2, tp2, dir.file("rb"), "--steps 1 --lr 0 --dropout 0 --init " + a + " --save-final " + b);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  executor::io::SafetensorsReader reader(a);
  EXPECT_EQ(reader.at("transformer.h.0.attn.c_attn.weight").shape, (std::vector<int64_t>{256, 768}));
  EXPECT_EQ(reader.find("lm_head.weight"), nullptr);
  const auto wa = read_floats(a), wb = read_floats(b);
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, w] : wa)
    EXPECT_EQ(std::memcmp(w.data(), wb.at(name).data(), w.size() * sizeof(float)), 0) << name;
}

TEST(Precision, Bf16TracksFp32UnderTensorParallelism) {  // the plan's recipe: master weights
  TempDir dir("shardrun_bf16");
  const std::string plan = write_plan(dir, "tp2", "tiny-llama", {{"tensor_parallel", 2}});
  const std::string args = corpus_data_args(dir) + " --steps 6 --lr 1e-3";
  const RunResult fp32 = shardrun(2, plan, dir.file("fp32"), args);
  const RunResult bf16 = shardrun(2, plan, dir.file("bf16"), args + " --precision bf16");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  ASSERT_EQ(bf16.losses.size(), fp32.losses.size());
  bool any_difference = false;
  for (size_t i = 0; i < fp32.losses.size(); ++i) {
    EXPECT_NEAR(bf16.losses[i], fp32.losses[i], 2e-2 * fp32.losses[i]) << "step " << i + 1;
    any_difference |= bf16.losses[i] != fp32.losses[i];
  }
  EXPECT_TRUE(any_difference) << "bf16 did not change any arithmetic";
}

// Master weights (the plan's default recipe) keep 16-bit weights and gradients with an fp32
// master in the optimizer; autocast keeps fp32 weights. Both track the fp32 run, and on dp 2 with
// ZeRO-1 (2 + 2 + 12/2 bytes per parameter against 4 + 4 + 8/2) master weights peak lower.
TEST(Precision, MasterWeightsAndAutocastTrackFp32AndDifferInMemory) {
  TempDir dir("shardrun_recipes");
  const std::string plan = write_plan(dir, "dp2z1", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 1}});
  const std::string args = corpus_data_args(dir) + " --steps 6 --lr 1e-3";
  const RunResult fp32 = shardrun(2, plan, dir.file("fp32"), args);
  const RunResult master = shardrun(2, plan, dir.file("master"), args + " --precision bf16");
  const RunResult autocast =
      shardrun(2, plan, dir.file("autocast"), args + " --precision bf16 --mixed-precision autocast");
  for (const RunResult* r : {&fp32, &master, &autocast}) ASSERT_EQ(r->exit_code, 0) << r->output;
  EXPECT_EQ(master.report["precision"]["weights"], "bf16");
  EXPECT_EQ(autocast.report["precision"]["weights"], "fp32");
  for (const RunResult* r : {&master, &autocast}) {
    ASSERT_EQ(r->losses.size(), fp32.losses.size());
    for (size_t i = 0; i < fp32.losses.size(); ++i)
      EXPECT_NEAR(r->losses[i], fp32.losses[i], 2e-2 * fp32.losses[i]) << "step " << i + 1;
  }
  EXPECT_NE(master.losses, autocast.losses) << "the recipes did the same arithmetic";
  const auto peak = [](const RunResult& r) { return r.report["measured"]["peak_memory_bytes"].get<double>(); };
  EXPECT_LT(peak(master), peak(autocast));
}

class BadInput : public ::testing::Test {
 protected:
  TempDir dir_{"shardrun_bad"};
  // Exit non-zero, and the message exactly once (printed by rank 0 only).
  static void expect_one_error(const RunResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(count_of(r.output, "shardrun: error:"), 1u) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  }
};

TEST_F(BadInput, PlanWorldSizeDiffersFromMpirun) {
  const std::string plan = write_plan(dir_, "four", "tiny-llama", {{"tensor_parallel", 2}, {"data_parallel", 2}});
  expect_one_error(shardrun(2, plan, dir_.file("out"), "--steps 2"), "the plan needs 4 ranks");
}

TEST_F(BadInput, MissingTokenizer) {
  const std::string plan = write_plan(dir_, "dp2", "tiny-llama", {{"data_parallel", 2}});
  expect_one_error(
      shardrun(2, plan, dir_.file("out"), "--data " + quote(corpus_dir()) + " --tokenizer /nonexistent/tok.model"),
      "/nonexistent/tok.model: tokenizer: no such file");
}

TEST_F(BadInput, TruncatedSafetensorsWeights) {
  const std::string plan = write_plan(dir_, "dp2", "tiny-llama", {{"data_parallel", 2}});
  const std::string weights = dir_.file("w.safetensors");
  ASSERT_EQ(shardrun(2, plan, dir_.file("one"), "--steps 1 --save-final " + weights).exit_code, 0);
  truncate_by(weights, 1000);
  expect_one_error(shardrun(2, plan, dir_.file("out"), "--steps 2 --init " + weights), "truncated");
}

TEST_F(BadInput, TruncatedCheckpointShard) {
  const std::string plan = write_plan(dir_, "z1", "tiny-llama", {{"data_parallel", 2}, {"zero_stage", 1}});
  const std::string ck = " --checkpoint-dir " + quote(dir_.file("ck"));
  ASSERT_EQ(shardrun(2, plan, dir_.file("one"), "--steps 2" + ck).exit_code, 0);
  truncate_by(dir_.file("ck/step-00000002/tp0-pp0-shard1.safetensors"), 64);
  expect_one_error(shardrun(2, plan, dir_.file("out"), "--steps 4 --resume " + quote(dir_.file("ck/step-00000002"))),
                   "tp0-pp0-shard1.safetensors");
  expect_one_error(shardrun(2, plan, dir_.file("out2"), "--steps 4 --resume auto" + ck),
                   "none of the 1 checkpoints passed verification");
}

TEST_F(BadInput, AHungRankEndsTheJobThroughTheCollectiveTimeout) {
  const std::string plan = write_plan(dir_, "tp2", "tiny-llama", {{"tensor_parallel", 2}});
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = shardrun(2, plan, dir_.file("out"), "--steps 6 --comm-timeout 5 --inject-fault hang:1:3");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("timed out"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 120.0);  // bounded by the 5 s timeout plus start-up, not by the harness's 600 s
}

}  // namespace runs_test
}  // namespace shardplan::testing
