// Legend: n ranks, S buffer bytes of a collective (nccl-tests' convention: the full buffer;
// all-gather's output, reduce-scatter's input), t seconds per call (slowest rank).
// Bus bandwidth (nccl-tests, doc/PERFORMANCE.md): all-reduce S/t * 2(n-1)/n, all-gather and
// reduce-scatter S/t * (n-1)/n, send/recv S/t.
#include "link_bench.hpp"

#include <chrono>
#include <cstdio>

#include "kernel_bench.hpp"
#include "timed_calls.hpp"
#include "timing_statistics.hpp"
#include "world_reduce.hpp"

namespace shardplan::executor {

double median_call_seconds(const std::function<void()>& call, const std::function<void()>& before, double min_time_s,
                           const std::function<bool(bool)>& more) {
  const auto begin = std::chrono::steady_clock::now();
  std::vector<double> t =
      timed_calls(call, TimedCallHooks{before, {}, {}, more}, [&](const std::vector<double>& so_far) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        return so_far.size() < 5 || (elapsed < min_time_s && so_far.size() < 1000);
      });
  return upper_median(std::move(t));
}

// On a CPU the ranks' collectives copy through shared memory, and in training they follow
// compute that has long since evicted the buffers (a gradient bucket after the backward of a
// unit, a ZeRO-3 gather after a block's GEMMs). Timed back to back they run from the cache, so
// a CPU run sweeps twice the cache before each call, then a barrier starts the ranks together
// (neither is timed). Two ranks on this project's Zen 5 VM, hot against cold, two interleaved
// pairs (2026-11-27): all-gather 1 MB 61-67 against 130-140 us, reduce-scatter 4 MB 238-253
// against 505-591 us, send/recv 4 MB 414-432 against 632-746 us, all-reduce 4 MB 736-795 against
// 856-1387 us; at 64 MB, past the cache either way, the same within noise. In training, the hot
// timings predicted tiny-llama ZeRO-0's gradient all-reduce (six 3-4 MB buckets) at 3.3 ms a step
// where it took 7-8 ms, and GPT-2 ZeRO-3's gathers and reduce-scatters at 128-141 against 213 ms.
// A GPU's collectives (NCCL, device memory) are timed as they are. Each figure is the median of
// the calls, where the kernels take the mean (kernel_bench.cpp); the two have not been compared
// for collectives on this VM yet.
std::vector<simulator::LinkSample> bench_links(Communicator& comm, torch::Device dev, const LinkBenchOptions& o) {
  const int n = comm.size(), r = comm.rank();
  torch::Tensor sweep;
  std::function<void()> before;
  if (o.cold_sweep_bytes > 0 && !dev.is_cuda()) {
    sweep = torch::zeros({static_cast<int64_t>(o.cold_sweep_bytes / 4)}, torch::kFloat);
    before = [&] {
      sweep.add_(1.0f);
      comm.barrier();
    };
  }
  const auto more = [](bool mine) { return any_rank(mine); };
  std::vector<simulator::LinkSample> out;
  // Up to 256 MB: ZeRO-3 gathers and reduce-scatters a unit whole, and GPT-2's tied embedding
  // alone is 154 MB in fp32 (50257 x 768 x 4 B); a curve that stopped at 64 MB extrapolated it.
  const int64_t top = o.quick ? (int64_t{1} << 20) : (int64_t{1} << 28);  // bytes: 1 MB / 256 MB
  for (int64_t bytes = 64; bytes <= top; bytes *= 4) {
    const int64_t elems = std::max<int64_t>(n, bytes / 4 / n * n);
    const double S = 4.0 * static_cast<double>(elems);
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(dev);
    torch::Tensor full = torch::ones({elems}, f32), part = torch::ones({elems / n}, f32);
    struct Op {
      const char* name;
      double hops, wire, bus;
      std::function<void()> fn;
    };
    const double k = n - 1.0;
    std::vector<Op> ops{{"all_reduce", 2 * k, 2 * k / n * S, 2 * k / n, [&] { comm.all_reduce(full); }},
                        {"all_gather", k, k / n * S, k / n, [&] { comm.all_gather(full, part); }},
                        {"reduce_scatter", k, k / n * S, k / n, [&] { comm.reduce_scatter(part, full); }},
                        // Pairs (0,1), (2,3), ...: one message each way per call, so a call is two transfers.
                        {"send_recv", 2, 2 * S, 1, [&] {
                           const int peer = r ^ 1;
                           if (peer >= n) return;
                           if (r % 2 == 0) {
                             comm.send(full, peer);
                             comm.recv(full, peer);
                           } else {
                             comm.recv(full, peer);
                             comm.send(full, peer);
                           }
                         }}};
    for (auto& op : ops) {
      if (o.stop_requested && o.stop_requested()) throw ProfileInterrupted{};
      op.fn();  // warm-up: first-touch of the buffers and MPI's own
      comm.barrier();
      const double t =
          reduce_over_ranks(median_call_seconds(op.fn, before, o.quick ? 0.01 : o.min_time_s, more), MPI_MAX);
      out.push_back({op.name, S, op.hops, op.wire, t});
      char line[160];
      const double per = std::string(op.name) == "send_recv" ? t / 2 : t;
      std::snprintf(line, sizeof line, "%-14s %10.0f B  %9.3f us  bus %8.3f GB/s", op.name, S, per * 1e6,
                    op.bus * S / per / 1e9);
      if (o.progress) o.progress(line);
    }
  }
  return out;
}

}  // namespace shardplan::executor
