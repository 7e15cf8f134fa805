// The run device: --device choice (cpu works, cuda without a GPU is one clear error), subnormals
// flushed by the thread setup, and on a machine with a CUDA GPU and a CUDA build, runs on it
// (skipped, with the reason, elsewhere).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "executor/errors.hpp"
#include "executor/run/device.hpp"
#include "executor/run/threads.hpp"
#include "harness.hpp"

namespace device_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing;
namespace ex = shardplan::executor;

bool gpu_here() { return ex::cuda_build() && torch::cuda::is_available(); }

std::string input_error_of(const std::string& want, int local_size = 1) {
  try {
    (void)ex::pick_device(want, 0, local_size, /*training=*/true);
  } catch (const ex::InputError& e) { return e.what(); }
  return "";
}

TEST(Device, CpuIsAlwaysAvailableAndAutoFallsBackToIt) {
  EXPECT_EQ(ex::pick_device("cpu", 0, 1, true), torch::Device(torch::kCPU));
  const torch::Device autod = ex::pick_device("auto", 0, 1, true);
  EXPECT_EQ(autod.is_cuda(), gpu_here());
  EXPECT_EQ(ex::memory_source(torch::Device(torch::kCPU)), "cpu-accounting-allocator");
  EXPECT_EQ(ex::describe_device(torch::Device(torch::kCPU)), "cpu");
}

// Threads are set up for training and profiling alike with subnormals flushed to zero: a
// subnormal input reads as 0 (DAZ) and a product that would be subnormal comes out 0 (FTZ).
TEST(Device, ThreadSetupFlushesSubnormalsToZero) {
  (void)ex::configure_threads(1, 1);
  const float tiny = 1e-39F;  // subnormal in fp32 (smallest normal ~1.18e-38)
  const torch::Tensor x = torch::full({64}, tiny);
  EXPECT_EQ((x * 2.0F).abs().max().item<float>(), 0.0F);
  EXPECT_EQ((torch::full({64}, 1e-30F) * 1e-10F).abs().max().item<float>(), 0.0F);
  EXPECT_GT((torch::full({64}, 1e-30F) * 1e-5F).abs().max().item<float>(), 0.0F);  // normal results stay
}

TEST(Device, UnknownChoiceNamesTheOption) {
  const std::string msg = input_error_of("tpu");
  EXPECT_NE(msg.find("--device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'tpu'"), std::string::npos) << msg;
}

TEST(Device, CudaWithoutAGpuIsAOneLineInputError) {
  if (gpu_here()) GTEST_SKIP() << "a CUDA GPU is available to this build: nothing to refuse";
  const std::string msg = input_error_of("cuda");
  EXPECT_EQ(msg.rfind("--device cuda: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Device, CudaWithFewerGpusThanRanksOnTheNodeIsRefused) {
  if (!gpu_here()) GTEST_SKIP() << "no CUDA GPU (or a CPU-only LibTorch build): checked where there is one";
  const int n = static_cast<int>(torch::cuda::device_count());
  EXPECT_NE(input_error_of("cuda", n + 1).find("one GPU per rank"), std::string::npos);
  EXPECT_FALSE(ex::pick_device("auto", 0, n + 1, true).is_cuda());
}

TEST(DeviceRun, CudaWithoutAGpuEndsTheRunWithExitTwo) {
  if (gpu_here()) GTEST_SKIP() << "a CUDA GPU is available to this build: nothing to refuse";
  TempDir dir("shardrun_device");
  const std::string plan = write_plan(dir, "one", "tiny-llama", nlohmann::json::object());
  const RunResult r = shardrun(1, plan, dir.file("cuda"), "--steps 1 --device cuda");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(count_of(r.output, "shardrun: error:"), 1u) << r.output;
  EXPECT_NE(r.output.find("--device cuda: "), std::string::npos) << r.output;
}

TEST(DeviceRun, CpuRunReportsTheAccountingAllocator) {
  TempDir dir("shardrun_device");
  const std::string plan = write_plan(dir, "one", "tiny-llama", nlohmann::json::object());
  const RunResult r = shardrun(1, plan, dir.file("cpu"), "--steps 2 --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.losses.size(), 2u);
  EXPECT_EQ(r.report["device"], "cpu") << r.report.dump(2);
  EXPECT_EQ(r.report["measured"]["memory_source"], "cpu-accounting-allocator") << r.report.dump(2);
}

// ----- on a CUDA GPU only ---------------------------------------------------------------------

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_here())
      GTEST_SKIP() << "no CUDA GPU visible to this build (CPU LibTorch, or no device): the GPU path is "
                      "verified on a GPU machine (scripts/gpu-run.sh)";
  }
  TempDir dir_{"shardrun_cuda"};
};

// fp32 on the GPU (fused attention, cuBLAS, CUDA reductions) follows the CPU run closely; the
// report names the device and the caching allocator, whose peak is real.
TEST_F(Cuda, Fp32RunTracksTheCpuRunAndReportsTheCachingAllocator) {
  const std::string plan = write_plan(dir_, "one", "tiny-llama", nlohmann::json::object());
  const std::string args = "--steps 4 --lr 1e-3 --dropout 0 ";
  const RunResult cpu = shardrun(1, plan, dir_.file("cpu"), args + "--device cpu");
  const RunResult gpu = shardrun(1, plan, dir_.file("gpu"), args + "--device cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i)
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-3 * cpu.losses[i]) << "step " << i + 1;
  const auto& m = gpu.report["measured"];
  EXPECT_EQ(m["memory_source"], "cuda-caching-allocator") << m.dump(2);
  EXPECT_EQ(gpu.report["device"].get<std::string>().rfind("cuda:0 (", 0), 0u) << gpu.report.dump(2);
  EXPECT_GT(m["peak_memory_bytes"].get<double>(), 0.0) << m.dump(2);
}

// bf16 and fp16 autocast on CUDA (fp16 with dynamic loss scaling) follow the fp32 run.
TEST_F(Cuda, Bf16AndFp16AutocastTrackFp32) {
  const std::string plan = write_plan(dir_, "one", "tiny-llama", nlohmann::json::object());
  const std::string args = "--steps 4 --lr 1e-3 --device cuda ";
  const RunResult fp32 = shardrun(1, plan, dir_.file("fp32"), args);
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  for (const char* p : {"bf16", "fp16"}) {
    SCOPED_TRACE(p);
    const RunResult r = shardrun(1, plan, dir_.file(p), args + "--precision " + p);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(r.losses.size(), fp32.losses.size());
    for (size_t i = 0; i < r.losses.size(); ++i)
      EXPECT_NEAR(r.losses[i], fp32.losses[i], 2e-2 * fp32.losses[i]) << "step " << i + 1;
  }
}

// Recomputation with offload to pinned host memory gives the gradients of the plain run.
TEST_F(Cuda, FullRecomputeWithOffloadMatchesThePlainRun) {
  const std::string plain = write_plan(dir_, "plain", "tiny-llama", nlohmann::json::object());
  const std::string off = write_plan(dir_, "off", "tiny-llama", {{"recompute", "full"}, {"offload_activations", true}});
  const std::string args = "--steps 3 --device cuda --dropout 0.1";
  const RunResult a = shardrun(1, plain, dir_.file("plain"), args);
  const RunResult b = shardrun(1, off, dir_.file("off"), args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(b.losses[i], a.losses[i], 1e-5 * a.losses[i]);
}

}  // namespace device_test
