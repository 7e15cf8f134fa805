// `shardrun profile`: a quick profile under mpirun writes a measured hardware profile that the
// simulator and the planner load; its fitted figures agree with its own raw samples; bad
// options fail on every rank with one line and write nothing. The fit from samples to profile
// figures is also checked on synthetic samples from a known device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "executor/profile/host_overhead_bench.hpp"
#include "executor/profile/kernel_bench.hpp"
#include "executor/profile/link_bench.hpp"
#include "executor/profile/profile_samples.hpp"
#include "executor/profile/sync_skew.hpp"
#include "harness.hpp"
#include "simulator/errors.hpp"
#include "simulator/hardware_profile.hpp"

namespace shardplan::testing {
namespace profile_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
namespace sim = shardplan::simulator;

CommandResult profile(int ranks, const std::string& args) {
  return run_command("timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
                     std::to_string(ranks) + " " + SHARDRUN_BINARY + " profile --threads 1 " + args);
}

TEST(Profile, QuickTwoRankProfileLoadsEverywhere) {
  TempDir dir;
  const std::string out = dir.file("measured.json");
  const CommandResult r = profile(2, "--quick --name test-measured --out " + quote(out));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("[profile] gemm"), std::string::npos) << r.out;  // progress lines
  EXPECT_NE(r.out.find("[profile] all_reduce"), std::string::npos) << r.out;

  const sim::HardwareProfile hw = sim::load_hardware(out);
  EXPECT_TRUE(hw.measured);
  EXPECT_EQ(hw.name, "test-measured");
  EXPECT_EQ(hw.node.devices_per_node, 2);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
  // The fitted figures are the raw samples' best rates: a GEMM's with its launch and, on a CPU,
  // its streamed operands (those over the rank's cache share, at gemm_operand_stream_bytes_per_s)
  // taken out.
  double best_fp32 = 0, launch = 0;
  const double stream = j["device"].value("gemm_operand_stream_bytes_per_s", 0.0);
  const double share = j["device"].value("last_level_cache_bytes", 0.0) / 2;  // two ranks
  int stream_samples = 0;
  for (const auto& s : j["samples"]["kernels"]) {
    if (s["kind"] == "launch") launch = s["seconds"].get<double>();
    if (s["kind"] == "gemm_stream") ++stream_samples;
  }
  for (const auto& s : j["samples"]["kernels"])
    if (s["dtype"] == "fp32" && s["flops"].get<double>() > 0) {
      const double busy = s["seconds"].get<double>() - launch;
      const double streamed = sim::streamed_operand_bytes(s["operand_bytes"].get<std::array<double, 3>>(), share);
      const double fma = stream > 0 ? std::max(busy - streamed / stream, 0.5 * busy) : busy;
      best_fp32 = std::max(best_fp32, s["flops"].get<double>() / fma);
    }
  EXPECT_NEAR(hw.device.peak(sim::Precision::fp32), best_fp32, 1e-6 * best_fp32);
  // The LM-head GEMMs that part the stream from the FMAs: two token counts, three layouts each.
  EXPECT_EQ(stream_samples, 2 * 3);
  EXPECT_EQ(hw.device.gemm_operand_stream_Bps, stream);
  if (stream > 0) { EXPECT_TRUE(j["sources"].contains("device.gemm_operand_stream_bytes_per_s")); }
  // GEMMs as a linear layer runs them: each (m, n, k) in its forward, input-gradient and
  // weight-gradient layouts, the same FLOP each.
  std::map<std::string, std::map<std::string, double>> layouts;  // dtype/shape -> layout -> FLOP
  for (const auto& s : j["samples"]["kernels"]) {
    if (s["kind"] != "gemm") continue;
    const std::string shape = s["shape"];
    const auto slash = shape.find('/');
    ASSERT_NE(slash, std::string::npos) << shape;
    layouts[s["dtype"].get<std::string>() + " " + shape.substr(0, slash)][shape.substr(slash + 1)] = s["flops"];
  }
  EXPECT_GE(layouts.size(), 2u * 8u);  // two dtypes, a 2x2x2 grid
  for (const auto& [shape, by] : layouts) {
    ASSERT_EQ(by.size(), 3u) << shape;
    EXPECT_TRUE(by.count("fwd") && by.count("dgrad") && by.count("wgrad")) << shape;
    for (const auto& [layout, flops] : by) EXPECT_EQ(flops, by.begin()->second) << shape << " " << layout;
  }
  EXPECT_GT(hw.device.peak(sim::Precision::bf16), 0.0);
  EXPECT_FALSE(hw.device.gemm_curve(sim::Precision::bf16).log10_x.empty());
  EXPECT_DOUBLE_EQ(hw.device.kernel_launch_s, launch);
  EXPECT_GT(hw.device.memory_bandwidth_Bps, 0.0);
  EXPECT_GE(j["samples"]["collectives"].size(), 8u);
  EXPECT_GT(hw.node.intra.bandwidth_Bps, 0.0);
  EXPECT_NE(j["sources"]["node.intra_node.bandwidth_bytes_per_s"].get<std::string>().find("shardrun profile"),
            std::string::npos);
  // Two ranks: the wait at a collective for the slower one was measured and has its source.
  ASSERT_TRUE(j["node"]["intra_node"].contains("sync_skew_fraction"));
  EXPECT_GE(hw.node.intra.sync_skew_fraction, 0.0);
  EXPECT_LT(hw.node.intra.sync_skew_fraction, 1.0);
  EXPECT_EQ(hw.node.intra.sync_skew_fraction, j["node"]["intra_node"]["sync_skew_fraction"].get<double>());
  EXPECT_TRUE(j["sources"].contains("node.intra_node.sync_skew_fraction"));
  EXPECT_NE(r.out.find("[profile] sync skew"), std::string::npos) << r.out;
  // ... and how much slower the slowest rank timed the kernels than the fastest, over both ranks.
  EXPECT_GE(hw.node.intra.rank_speed_gap_fraction, 0.0);
  EXPECT_EQ(hw.node.intra.rank_speed_gap_ranks, 2);
  EXPECT_TRUE(j["sources"].contains("node.intra_node.rank_speed_gap_fraction"));

  // The model's ops: a curve per op (weight casts: mixed precision only) whose points are the
  // samples' seconds per element (one size each in a quick profile).
  for (int k = 0; k < sim::kOpKinds; ++k) {
    const auto kind = static_cast<sim::OpKind>(k);
    const auto p = kind == sim::OpKind::weight_cast ? sim::Precision::bf16 : sim::Precision::fp32;
    EXPECT_NE(hw.device.op_cost(p, kind), nullptr) << sim::op_kind_name(kind);
  }
  EXPECT_EQ(hw.device.op_cost(sim::Precision::fp32, sim::OpKind::weight_cast), nullptr);
  int op_samples = 0, warm_samples = 0;
  for (const auto& s : j["samples"]["kernels"]) {
    if (!s.contains("pass")) continue;
    ++op_samples;
    const auto prec = s["dtype"] == "bf16" ? sim::Precision::bf16 : sim::Precision::fp32;
    std::string name = s["kind"];
    int k = 0;
    while (k < sim::kOpKinds && name != sim::op_kind_name(static_cast<sim::OpKind>(k))) ++k;
    ASSERT_LT(k, sim::kOpKinds) << name;
    const sim::OpCost* c = hw.device.op_cost(prec, static_cast<sim::OpKind>(k));
    ASSERT_NE(c, nullptr) << name;
    const double n = s["elements"], t = std::max(s["seconds"].get<double>(), 1e-9);
    const double curve = s["pass"] == "forward"    ? c->forward_s(n)
                         : s["pass"] == "backward" ? c->backward_s(n)
                                                   : c->backward_s(n, 1.0);  // backward_warm
    EXPECT_NEAR(curve, t, 1e-6 * t) << name << " " << s["pass"];
    if (s["pass"] == "backward_warm") ++warm_samples;
  }
  EXPECT_GE(op_samples, 2 * 8 * 2);  // forward and backward, 8 ops, 2 dtypes (+ the optimizer)
  // A CPU times each op's backward warm too (right after its forward), and says how big its cache is.
  EXPECT_GE(warm_samples, 2 * 7);  // the 7 ops with a backward (+ the attention GEMMs), 2 dtypes
  EXPECT_GT(hw.device.last_level_cache_bytes, 0.0);
  EXPECT_TRUE(j["sources"].contains("device.last_level_cache_bytes"));

  // The model's host time per block, measured on shardrun's own Transformer (CPU): every part,
  // each pass; a block costs more than one adapter or one expert.
  const sim::HostOverhead& ho = hw.device.host_overhead;
  ASSERT_TRUE(ho.measured);
  ASSERT_TRUE(j["device"].contains("host_overhead_seconds"));
  EXPECT_EQ(j["device"]["host_overhead_seconds"].size(), 5u);
  EXPECT_TRUE(j["sources"].contains("device.host_overhead_seconds"));
  EXPECT_NE(r.out.find("[profile] host overhead  llama_block"), std::string::npos) << r.out;
  EXPECT_GT(ho.llama_block.forward + ho.llama_block.backward, 0.0);
  EXPECT_GT(ho.gpt2_block.forward + ho.gpt2_block.backward, 0.0);
  EXPECT_GT(ho.llama_block.forward + ho.llama_block.backward, ho.lora_adapter.forward + ho.lora_adapter.backward);
  EXPECT_GT(ho.moe_layer.forward + ho.moe_layer.backward, ho.moe_expert.forward + ho.moe_expert.backward);

  // How much the machine drifted while it was profiled: a reference GEMM at the start and the end.
  const auto& ref = j["profiled"]["reference_gemm_seconds"];
  EXPECT_GT(ref["start"].get<double>(), 0.0);
  EXPECT_GT(ref["end"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["profiled"]["drift_fraction"].get<double>(),
                   ref["end"].get<double>() / ref["start"].get<double>() - 1);
  EXPECT_NE(r.out.find("[profile] machine noise"), std::string::npos) << r.out;

  // A CPU runs no fused attention kernel (model/transformer_forward.cpp): the profile says so, and why.
  EXPECT_FALSE(hw.device.fused_attention);
  EXPECT_NE(j["sources"]["device.fused_attention"].get<std::string>().find("no fused kernel ("), std::string::npos)
      << j["sources"]["device.fused_attention"];

  // The planner plans with it.
  const CommandResult plan =
      run_command(std::string(SHARDPLAN_BINARY) + " simulate --model tiny-llama --hardware " + quote(out) +
                  " --nodes 1 --dp 2 --zero 1 --seq-len 128 --micro-batch-size 4 --precision fp32");
  EXPECT_EQ(plan.status, 0) << plan.out;
}

TEST(Profile, BadOptionsFailOnEveryRankAndWriteNothing) {
  TempDir dir;
  const std::string out = dir.file("never.json");
  for (const char* bad : {"--dtypes fp16", "--dtypes int8", "--base no-such-profile", "--device tpu"}) {
    const CommandResult r = profile(2, "--quick --out " + quote(out) + " " + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_EQ(count_of(r.out, "shardrun: error:"), 1u) << bad << ": " << r.out;
    EXPECT_FALSE(fs::exists(out)) << bad;
  }
}

// Synthetic samples from a device with known figures come back as those figures.
// --repeats: each sample's seconds are the median over the passes, which must have measured the
// same samples; the host overhead per part and pass likewise.
TEST(ProfileWriter, RepeatedPassesGiveEachSampleItsMedian) {
  using executor::KernelSample;
  auto pass = [](double gemm, double op) {
    return std::vector<KernelSample>{{"gemm", "fp32", "64x64x64/fwd", 5e5, 0, gemm},
                                     {"rms_norm", "fp32", "256x256", 0, 0, op, "forward", 65536}};
  };
  const auto median = executor::median_of_passes({pass(3e-3, 1e-4), pass(1e-3, 9e-4), pass(2e-3, 5e-4)});
  ASSERT_EQ(median.size(), 2u);
  EXPECT_DOUBLE_EQ(median[0].seconds, 2e-3);
  EXPECT_DOUBLE_EQ(median[1].seconds, 5e-4);
  EXPECT_EQ(median[1].pass, "forward");
  auto other = pass(1e-3, 1e-4);
  other[1].shape = "512x256";
  EXPECT_THROW((void)executor::median_of_passes({pass(1e-3, 1e-4), other}), std::logic_error);

  auto host = [](double block, double expert) {
    sim::HostOverhead h;
    h.llama_block = {block, 2 * block};
    h.moe_expert = {expert, expert};
    h.measured = true;
    return h;
  };
  const sim::HostOverhead h = executor::median_of_passes({host(3e-4, 1e-5), host(2e-4, 5e-5), host(9e-4, 2e-5)});
  EXPECT_DOUBLE_EQ(h.llama_block.forward, 3e-4);
  EXPECT_DOUBLE_EQ(h.llama_block.backward, 6e-4);
  EXPECT_DOUBLE_EQ(h.moe_expert.forward, 2e-5);
  EXPECT_TRUE(h.measured);
}

// The CPU benchmarks time cold operands (GEMM pools, the sweep before each backward timing) only
// when they know a cache size to overflow: a VM that hides its cache (no sysfs entry, as on this
// project's firecracker VM) must still get one, or every figure is timed hot.
TEST(Profile, ColdOperandsHaveACacheToOverflowEvenWhenTheOsHidesIt) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const double reported = executor::reported_last_level_cache_bytes();
  const double cold = executor::cold_cache_bytes();
  EXPECT_GE(cold, 1 * kMiB) << "reported " << reported;
  EXPECT_LE(cold, 64 * kMiB);
  if (reported > 0) EXPECT_DOUBLE_EQ(cold, std::min(reported, 64 * kMiB));
  else EXPECT_DOUBLE_EQ(cold, 32 * kMiB);
}

// A CPU profile times each collective after its own untimed cache sweep (in training the buffers
// come cold, after compute): never two timed calls in a row, the sweep never inside the timing,
// and every rank makes as many calls as the rank that wants the most.
TEST(Profile, EachTimedCollectiveFollowsItsUntimedSweep) {
  std::string events;
  int rounds = 0;
  const auto call = [&] { events += 'c'; };
  const auto sweep = [&] { events += 's'; };
  const auto alone = [&](bool mine) {
    ++rounds;
    return mine;
  };
  const double t = executor::median_call_seconds(call, sweep, 0.0, alone);
  EXPECT_EQ(events, "scscscscsc");  // at least five timed calls, each after its sweep
  EXPECT_EQ(rounds, 6);             // the ranks agree before each call, and once more to stop
  EXPECT_GE(t, 0.0);
  // Another rank wants seven calls: this one keeps calling with it.
  events.clear();
  rounds = 0;
  executor::median_call_seconds(call, sweep, 0.0, [&](bool mine) {
    ++rounds;
    return mine || rounds < 8;
  });
  EXPECT_EQ(events.size(), 14u);
  EXPECT_EQ(events.find("cc"), std::string::npos);
  // No sweep (a GPU): the calls alone.
  events.clear();
  executor::median_call_seconds(call, nullptr, 0.0, alone);
  EXPECT_EQ(events, "ccccc");
}

// Under mpirun the ranks run each timed kernel call together, as training's ranks run the same op
// at once: a barrier before every timed call, and as many calls as the rank that wants the most.
// (Timed out of step, one rank's cache sweep lands on the other's timed call: the per-sample
// spread over three passes was a median 46-47 % for the model ops on this VM, 16-26 % in step.)
TEST(Profile, KernelCallsStartTogetherAndEveryRankMakesAsMany) {
  executor::BenchContext ctx;
  ctx.min_time_s = 0.0;
  ctx.min_reps = 3;
  int starts = 0, rounds = 0;
  ctx.start_together = [&] { ++starts; };
  ctx.agree = [&](bool mine) {
    ++rounds;
    return mine;
  };
  EXPECT_GT(executor::reference_gemm_seconds(ctx), 0.0);
  EXPECT_EQ(rounds, 4);  // three calls wanted, then the round that ends it
  EXPECT_EQ(starts, 3);
  // Another rank wants twenty calls: this one keeps calling with it, each call started together.
  starts = rounds = 0;
  ctx.agree = [&](bool mine) {
    ++rounds;
    return mine || rounds <= 20;
  };
  executor::reference_gemm_seconds(ctx);
  EXPECT_EQ(starts, 20);
  EXPECT_EQ(rounds, 21);
}

// Each model op's backward is timed alone (after an untimed forward and the cache sweep), not as
// (forward + backward) - forward: a difference of two noisy figures came out <= 0 for some sizes.
TEST(Profile, EveryModelOpBackwardIsTimedAndPositive) {
  executor::BenchContext ctx;
  ctx.quick = true;
  ctx.min_time_s = 0.001;
  int backward = 0;
  for (const auto& s : executor::bench_kernels(ctx, {torch::kFloat})) {
    if (s.pass != "backward") continue;
    ++backward;
    EXPECT_GT(s.seconds, 0.0) << s.kind << " " << s.shape;
  }
  EXPECT_GE(backward, 8);  // dropout, norms, activations, softmax, rotary, attention GEMMs
}

// The skew a step pays beyond its slowest rank: kernels are timed as the slowest rank's, so a rank
// slower throughout is not a wait on top of them; stalls that land on either rank are.
TEST(Profile, SyncSkewIsTheWaitBeyondTheSlowestRank) {
  // Rank 1 20 % slower in every phase; the pair finishes with it: nothing beyond it.
  executor::SyncSkew k = executor::sync_skew_of({10e-3, 12e-3}, {12.1e-3, 12.1e-3}, {0.1e-3, 0.1e-3});
  EXPECT_NEAR(k.fraction, 0.0, 1e-12);
  EXPECT_NEAR(k.rank_gap, 0.2, 1e-12);
  // Equal means, but each phase's stall makes the other rank wait: 0.5 ms per 10 ms phase.
  k = executor::sync_skew_of({10e-3, 10e-3}, {10.6e-3, 10.6e-3}, {0.1e-3, 0.1e-3});
  EXPECT_NEAR(k.fraction, 0.05, 1e-12);
  EXPECT_NEAR(k.rank_gap, 0.0, 1e-12);
  // Both at once: only the part beyond the slower rank counts; never negative.
  k = executor::sync_skew_of({10e-3, 11e-3}, {11.55e-3, 11.55e-3}, {0.0, 0.0});
  EXPECT_NEAR(k.fraction, 0.05, 1e-12);
  EXPECT_EQ(executor::sync_skew_of({10e-3, 11e-3}, {10.5e-3, 10.5e-3}, {0.0, 0.0}).fraction, 0.0);
}

TEST(ProfileWriter, FitsAKnownDevice) {
  executor::ProfileRun run;
  run.base = sim::load_hardware("local-cpu-2core");
  run.base_name = "local-cpu-2core";
  run.name = "synthetic";
  run.device_name = "synthetic device";
  run.world_size = run.ranks_on_node = 2;
  run.host_memory_bytes = 8e9;
  run.date = "2026-11-21";
  const double peak = 2e11, bw = 4e10, launch = 3e-6;
  run.kernels.push_back({"launch", "fp32", "1", 0, 12, launch});
  for (double f = 1e5; f <= 1e11; f *= 10) {
    const double eff = f >= 1e9 ? 1.0 : 0.5 + 0.5 * (std::log10(f) - 5) / 4;  // rises to 1 at 1e9
    run.kernels.push_back({"gemm", "fp32", "g", f, 0, launch + f / (peak * eff)});
  }
  for (double b = 1e4; b <= 1e9; b *= 10) run.kernels.push_back({"elementwise", "fp32", "e", 0, b, launch + b / bw});
  for (double S = 64; S <= 1e7; S *= 4) run.links.push_back({"all_reduce", S, 2, S, 2 * 5e-6 + S / 2e9});
  const nlohmann::json j = executor::measured_profile_json(run);
  const sim::HardwareProfile hw = sim::hardware_from_json(j, "synthetic");
  EXPECT_NEAR(hw.device.peak(sim::Precision::fp32), peak, 1e-6 * peak);
  EXPECT_NEAR(hw.device.memory_bandwidth_Bps, bw, 1e-6 * bw);
  EXPECT_NEAR(hw.device.memory_efficiency.at(1e6), 1.0, 1e-6);
  EXPECT_NEAR(hw.device.gemm_efficiency.at(1e11), 1.0, 0.02);
  EXPECT_LT(hw.device.gemm_efficiency.at(1e5), 0.6);
  EXPECT_NEAR(hw.node.intra.latency_s, 5e-6, 1e-9);
  EXPECT_NEAR(hw.node.intra.bandwidth_Bps, 2e9, 1e3);
  EXPECT_NEAR(hw.device.memory_bytes, 0.85 * 8e9 / 2, 1.0);
  EXPECT_EQ(hw.device.peak(sim::Precision::fp16), run.base.device.peak(sim::Precision::fp16));  // not measured
  EXPECT_NE(j["sources"]["device.peak_TFLOPs.fp16"].get<std::string>().find("not measured"), std::string::npos);

  EXPECT_EQ(hw.device.op_cost(sim::Precision::fp32, sim::OpKind::dropout), nullptr);  // none sampled

  // An op sampled at two sizes: seconds per element by size; equal sizes (other shapes) average.
  executor::ProfileRun ops = run;
  auto op = [&](const char* kind, const char* pass, double n, double seconds) {
    executor::KernelSample k{kind, "fp32", "x", 0, 0, seconds, pass, n};
    ops.kernels.push_back(k);
  };
  op("dropout", "forward", 1e5, 6e-4);
  op("dropout", "forward", 1e6, 8e-3);
  op("dropout", "backward", 1e5, 1e-4);
  op("dropout", "backward", 1e6, 2e-3);
  op("dropout", "backward", 1e6, 4e-3);
  const sim::HardwareProfile with_ops = sim::hardware_from_json(executor::measured_profile_json(ops), "ops");
  const sim::OpCost* d = with_ops.device.op_cost(sim::Precision::fp32, sim::OpKind::dropout);
  ASSERT_NE(d, nullptr);
  EXPECT_NEAR(d->forward_s(1e5), 6e-4, 1e-12);
  EXPECT_NEAR(d->forward_s(1e6), 8e-3, 1e-12);
  EXPECT_NEAR(d->backward_s(1e6), 3e-3, 1e-12);
  EXPECT_NEAR(d->forward_s(1e7), 1e7 * 8e-9, 1e-9);  // clamped beyond the largest size
  // Samples of ops are not memory-bound kernels: the bandwidth fit is unchanged.
  EXPECT_DOUBLE_EQ(with_ops.device.memory_bandwidth_Bps, hw.device.memory_bandwidth_Bps);

  executor::ProfileRun empty = run;
  empty.kernels.erase(empty.kernels.begin() + 1, empty.kernels.begin() + 8);  // no GEMMs
  EXPECT_THROW(executor::measured_profile_json(empty), sim::InputError);
}

}  // namespace profile_test
}  // namespace shardplan::testing
