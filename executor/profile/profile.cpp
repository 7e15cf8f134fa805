#include "profile.hpp"

#include <mpi.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "executor/comm/mpi_communicator.hpp"
#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"
#include "executor/model/transformer.hpp"
#include "executor/run/device.hpp"
#include "executor/run/threads.hpp"
#include "executor/run/trainer.hpp"
#include "host_overhead_bench.hpp"
#include "kernel_bench.hpp"
#include "link_bench.hpp"
#include "simulator/hardware_profile.hpp"
#include "sync_skew.hpp"
#include "timing_statistics.hpp"
#include "world_reduce.hpp"

namespace shardplan::executor {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<torch::ScalarType> parse_dtypes(const std::string& list, bool cuda) {
  const std::string s = list.empty() ? (cuda ? "fp32,bf16,fp16" : "fp32,bf16") : list;
  std::vector<torch::ScalarType> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = std::min(s.find(',', start), s.size());
    const std::string d = s.substr(start, end - start);
    if (d == "fp32") out.push_back(torch::kFloat);
    else if (d == "bf16") out.push_back(torch::kBFloat16);
    else if (d == "fp16" && cuda) out.push_back(torch::kHalf);
    else if (d == "fp16")
      throw InputError("--dtypes: fp16 GEMMs are not profiled on CPU (shardrun refuses fp16 there)");
    else throw InputError("--dtypes: unknown dtype '" + d + "' (expected fp32, bf16 or fp16)");
    start = end + 1;
  }
  if (out.empty() || out.front() != torch::kFloat) throw InputError("--dtypes: must start with fp32");
  return out;
}

// The machine's speed, before and after the kernels: the median of five reference GEMM timings.
// One timing at the start read about 2x the end one in every profile (6.0 vs 2.8 ms), and of
// eight in a row the 2nd and 3rd were slow, the others not: a passing slow window, not drift.
double reference_gemm_median_s(const BenchContext& ctx) {
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) t.push_back(reference_gemm_seconds(ctx));
  return upper_median(std::move(t));
}

std::atomic<bool> g_stop{false};

// Ranks reach each collective at different times, and the first waits for the last. Every rank
// runs the same compute phase, shaped like a slice of training (GEMMs, then dropout and GELU on
// freshly allocated 4 MB tensors: allocation and memory-bound work are what jitter; GEMMs alone
// barely do), about 10 ms on a CPU core; each iteration times it alone, then followed by a
// one-element all-reduce, then the all-reduce alone, each from a barrier (untimed) so that the
// ranks start together. Skew = (phase + all-reduce) - phase - all-reduce, relative to the phase,
// where the phase is the slowest rank's: every kernel is timed as the slowest rank's too
// (ctx.combine), so a rank that is slower throughout (a VM's vCPU slowed by its host) is already in
// them, and the skew is what a step waits beyond it (with two ranks, E[max of two phases] -
// max of E[phase]). Measured against each rank's own phase, averaged over ranks, a lasting gap
// between the ranks counted twice: in the kernels and again as half the gap. The three are
// interleaved, not timed in three blocks one after the other: on a shared VM the machine's state
// drifts within seconds, and blocks read that drift as skew. In blocks, two profiles' three
// passes read 18.7 / 2.3 / 4.0 % and 4.5 / 19.4 / 14.0 %; interleaved (medians then), three
// profiles' read 4.6 / 1.3 / 0.5, 17.0 / 1.9 / 1.8 and 1.1 / 1.5 / 0.8 %.
SyncSkew bench_sync_skew(Communicator& comm, torch::Device dev, bool quick) {
  torch::NoGradGuard no_grad;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(dev);
  const int64_t n = dev.is_cuda() ? 2048 : 256;
  const torch::Tensor a = torch::randn({n, n}, f32), b = torch::randn({n, n}, f32);
  torch::Tensor c, x = torch::randn({int64_t{1} << 18}, f32), one = torch::zeros({1}, f32);
  auto seconds_of = [&](const std::function<void()>& fn) {
    const auto s = Clock::now();
    fn();
    if (dev.is_cuda()) torch::cuda::synchronize();
    return std::chrono::duration<double>(Clock::now() - s).count();
  };
  auto phase = [&] {
    for (int i = 0; i < 6; ++i) c = torch::mm(a, b);
    torch::Tensor y = torch::gelu(torch::dropout(x.view({-1, n}).repeat({4, 1}), 0.1, true));
    x.add_(y.narrow(0, 0, x.numel() / n).reshape({-1}), 1e-6);
  };
  const int iters = quick ? 10 : 200;
  std::vector<double> alone, together, latency;
  seconds_of(phase);
  for (int i = 0; i < iters; ++i) {
    comm.barrier();
    alone.push_back(seconds_of(phase));
    comm.barrier();
    together.push_back(seconds_of([&] {
      phase();
      comm.all_reduce(one);
    }));
    comm.barrier();
    latency.push_back(seconds_of([&] { comm.all_reduce(one); }));
  }
  // Means, not medians: a step pays every wait, the rare long stall included (medians of the same
  // iterations read 1.8-2.8 % where the means read 5.2-5.9 %, three passes of one profile).
  auto every_rank = [&](double mine) {
    std::vector<double> all(static_cast<std::size_t>(comm.size()));
    MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    return all;
  };
  return sync_skew_of(every_rank(mean_of(alone)), every_rank(mean_of(together)), every_rank(mean_of(latency)));
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100 * fraction);
  return buf;
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf[0] ? buf : "localhost";
}

std::string cpu_model() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "CPU";
  char line[512];
  std::string model = "CPU";
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    if (s.rfind("model name", 0) == 0) {
      model = s.substr(s.find(':') + 2);
      if (!model.empty() && model.back() == '\n') model.pop_back();
      break;
    }
  }
  std::fclose(f);
  return model;
}

using Progress = std::function<void(const std::string&)>;

// The device, the dtypes to time and the base profile, agreed on by every rank (any rank's error
// is everyone's).
void resolve_profile_inputs(const MpiRuntime& rt, const ProfileOptions& o, ProfileRun& run, torch::Device& dev,
                            std::vector<torch::ScalarType>& dtypes) {
  std::string err;
  try {
    dev = pick_device(o.device, rt.local_rank(), 1, /*training=*/false);  // ranks may share a GPU
    dtypes = parse_dtypes(o.dtypes, dev.is_cuda());
    run.base_name = o.base.empty() ? "local-cpu-2core" : o.base;
    run.base = simulator::load_hardware(run.base_name);
  } catch (const std::exception& e) { err = e.what(); }
  if (const std::string all = rt.agree(err); !all.empty()) throw InputError(all);
}

// What is profiled: the device and its attention kernel, the ranks and threads, the host, the
// profile's name and date.
void describe_profiled_machine(const MpiRuntime& rt, const ProfileOptions& o, torch::Device dev,
                               const ThreadSetup& threads, ProfileRun& run) {
  run.cuda = dev.is_cuda();
  {
    ModelOptions mo;  // a flash plan of a model without attention dropout
    mo.device = dev;
    mo.fused_attention = true;
    mo.attention_dropout = 0.0;
    const AttentionRun a = attention_run(mo);
    run.fused_attention = a.kind == "flash";
    run.fused_attention_reason = a.reason;
  }
  run.world_size = rt.world_size();
  run.ranks_on_node = rt.local_size();
  run.threads_per_rank = threads.threads;
  run.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  run.host_memory_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  run.date = today();
  run.name = o.name.empty() ? hostname() + "-measured" : o.name;
  run.device_name = run.cuda
                        ? "CUDA device " + std::to_string(dev.index())
                        : std::to_string(threads.threads) + " thread(s) of " + cpu_model() + " (LibTorch, " +
                              (threads.openblas ? "OpenBLAS " + threads.blas_kernels + " kernels" : "no OpenBLAS") +
                              "; fp32 GEMMs: " + threads.cpu_gemm + ")";
}

// How the kernels are timed across ranks; `kernel_gaps` collects each timing's slowest / fastest
// rank and must outlive the context.
BenchContext profile_bench_context(const MpiRuntime& rt, const ProfileOptions& o, torch::Device dev,
                                   std::vector<double>& kernel_gaps, const Progress& progress) {
  BenchContext ctx;
  ctx.device = dev;
  ctx.quick = o.quick;
  ctx.min_time_s = o.quick ? 0.005 : o.min_time_s;
  // Each kernel's time is the slowest rank's median: every rank measures at once, and in training
  // each collective waits for the last rank to arrive, so a rank on a slower core (a VM's vCPU
  // slowed by its host: 1.75x slower than its sibling here while both were busy) sets the pace of
  // every multi-rank step; the mean over ranks predicted such runs 10-35 % too fast.
  // Each timing's slowest / fastest rank, kept: how far a job on fewer of the node's cores runs
  // ahead of these kernels (simulator/rank_pace.hpp).
  ctx.combine = [&kernel_gaps](double t) {
    const double slowest = reduce_over_ranks(t, MPI_MAX), fastest = reduce_over_ranks(t, MPI_MIN);
    if (fastest > 0) kernel_gaps.push_back(slowest / fastest - 1);
    return slowest;
  };
  ctx.stop_requested = [] { return any_rank(g_stop.load()); };
  if (rt.world_size() > 1) {
    ctx.start_together = [] { MPI_Barrier(MPI_COMM_WORLD); };
    ctx.agree = [](bool mine) { return any_rank(mine); };
  }
  ctx.progress = progress;
  return ctx;
}

// A CPU's last-level cache: what the OS reports, else assumed; cold operands sweep twice its size.
void measure_cache(ProfileRun& run, const Progress& progress) {
  const double reported = reported_last_level_cache_bytes();
  run.last_level_cache_bytes = reported > 0 ? reported : cold_cache_bytes();
  run.last_level_cache_source = reported > 0 ? "the OS (/sys/devices/system/cpu/cpu0/cache, the highest level)"
                                             : "not reported by the OS: one Zen 4/5 core complex's L3, assumed "
                                               "(profile/kernel_bench.cpp, cold_cache_bytes)";
  char line[200];
  std::snprintf(
      line, sizeof line, "cold operands and collectives: pools and cache sweeps of 2 x %.0f MiB (last-level cache %s)",
      cold_cache_bytes() / (1024.0 * 1024.0), reported > 0 ? "from sysfs" : "not reported by the OS: assumed");
  progress(line);
}

// Each pass's sync skew and the slowest rank's phase over the fastest's (multi-rank only).
struct PassSkews {
  std::vector<double> skews, gaps;
};

// o.repeats passes over the kernels (and, on CPU ranks, the host overhead; with several ranks, the
// sync skew), then each figure's median over the passes.
PassSkews measure_passes(const MpiRuntime& rt, const ProfileOptions& o, const BenchContext& ctx,
                         const std::vector<torch::ScalarType>& dtypes, std::optional<MpiCommunicator>& world,
                         const std::vector<double>& kernel_gaps, ProfileRun& run, const Progress& progress) {
  std::vector<std::vector<KernelSample>> passes;
  std::vector<simulator::HostOverhead> host;
  PassSkews k;
  for (int pass = 1; pass <= o.repeats; ++pass) {
    if (o.repeats > 1) progress("pass " + std::to_string(pass) + " of " + std::to_string(o.repeats));
    passes.push_back(bench_kernels(ctx, dtypes));
    // A GPU runs its kernels behind the host: the simulator charges host time on CPU ranks only.
    if (!run.cuda) host.push_back(bench_host_overhead(ctx));
    // The wait for the slower rank, once per pass like every other figure: on a shared VM it
    // came out 1.3 %, 15.9 % and 19.6 % in three single-pass profiles minutes apart.
    if (world) {
      const SyncSkew s = bench_sync_skew(*world, ctx.device, o.quick);
      k.skews.push_back(s.fraction);
      k.gaps.push_back(s.rank_gap);
    }
  }
  run.kernels = median_of_passes(passes);
  run.repeats = o.repeats;
  if (!host.empty()) run.host_overhead = median_of_passes(host);
  if (!k.skews.empty()) run.sync_skew_fraction = upper_median(k.skews);
  if (rt.world_size() > 1 && !kernel_gaps.empty()) run.rank_speed_gap_fraction = upper_median(kernel_gaps);
  return k;
}

// How far the machine's speed drifted over the kernels (the reference GEMM before and after).
void report_drift(const ProfileRun& run, const Progress& progress) {
  char drift[160];
  std::snprintf(
      drift, sizeof drift,
      "machine noise: a reference GEMM took %.3f ms before the kernels and %.3f ms after (%+.1f %%; medians of 5)",
      run.reference_start_s * 1e3, run.reference_end_s * 1e3, 100 * (run.reference_end_s / run.reference_start_s - 1));
  progress(drift);
}

// The collectives timed over the world, and the ranks' skew and speed gap reported.
void measure_links(const ProfileOptions& o, MpiCommunicator& world, torch::Device dev, const PassSkews& k,
                   const std::vector<double>& kernel_gaps, ProfileRun& run, const Progress& progress) {
  LinkBenchOptions lo;
  lo.quick = o.quick;
  lo.min_time_s = o.min_time_s;
  lo.cold_sweep_bytes = run.cuda ? 0.0 : 2 * cold_cache_bytes();
  lo.stop_requested = [] { return any_rank(g_stop.load()); };
  lo.progress = progress;
  run.links = bench_links(world, dev, lo);
  std::string line = "sync skew      " + percent(run.sync_skew_fraction) + " of the compute between two collectives";
  if (k.skews.size() > 1) {
    line += " (median of " + std::to_string(k.skews.size()) + " passes:";
    for (double s : k.skews) line += " " + percent(s);
    line += ")";
  }
  if (!k.gaps.empty())
    line += "; the slowest rank's phase " + percent(upper_median(k.gaps)) + " longer than the fastest's";
  progress(line);
  if (run.rank_speed_gap_fraction >= 0)
    progress("rank speeds   the slowest rank's kernel timing " + percent(run.rank_speed_gap_fraction) +
             " above the fastest's (median of " + std::to_string(kernel_gaps.size()) +
             " timings; the kernels are the slowest's)");
}

// Rank 0 writes the profile; a write error reaches every rank.
void write_measured_profile(const MpiRuntime& rt, const ProfileOptions& o, const ProfileRun& run) {
  std::string write_err;
  if (rt.world_rank() == 0) {
    try {
      io::atomic_write_file(o.out, measured_profile_json(run).dump(2) + "\n");
    } catch (const std::exception& e) { write_err = e.what(); }
  }
  if (const std::string all = rt.agree(write_err); !all.empty()) throw InputError(all);
}

}  // namespace

void request_profile_stop() { g_stop = true; }

int run_profile(MpiRuntime& rt, const ProfileOptions& o) {
  const bool lead = rt.world_rank() == 0;
  auto progress = [&](const std::string& line) {
    if (lead && !o.quiet) std::printf("[profile] %s\n", line.c_str()), std::fflush(stdout);
  };
  ProfileRun run;
  torch::Device dev(torch::kCPU);
  std::vector<torch::ScalarType> dtypes;
  resolve_profile_inputs(rt, o, run, dev, dtypes);
  const ThreadSetup threads = configure_threads(o.threads, rt.local_size());
  describe_profiled_machine(rt, o, dev, threads, run);
  progress("device " + run.device_name + "; " + std::to_string(rt.world_size()) + " rank(s), " + threads.describe());

  std::vector<double> kernel_gaps;
  const BenchContext ctx = profile_bench_context(rt, o, dev, kernel_gaps, progress);
  const auto start = Clock::now();
  try {
    if (!run.cuda) measure_cache(run, progress);
    run.reference_start_s = reference_gemm_median_s(ctx);
    std::optional<MpiCommunicator> world;
    if (rt.world_size() > 1) world.emplace(MPI_COMM_WORLD, "world", o.comm_timeout_s);
    const PassSkews skews = measure_passes(rt, o, ctx, dtypes, world, kernel_gaps, run, progress);
    run.reference_end_s = reference_gemm_median_s(ctx);
    report_drift(run, progress);
    if (world) measure_links(o, *world, dev, skews, kernel_gaps, run, progress);
  } catch (const ProfileInterrupted&) {
    if (lead) std::fprintf(stderr, "shardrun profile: interrupted; nothing written\n");
    return 130;
  }
  write_measured_profile(rt, o, run);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  progress("wrote " + o.out + " (" + std::to_string(run.kernels.size()) + " kernel and " +
           std::to_string(run.links.size()) + " collective samples in " + std::to_string(took).substr(0, 5) + " s)");
  return 0;
}

}  // namespace shardplan::executor
