// Legend: m, n, k GEMM dims ((m x k) @ (k x n)), e bytes per element, B batch (micro-batch x
// heads), s sequence, d head dim, h hidden, V vocabulary, M tokens.
// FLOP and byte counts are the ones the simulator charges for the same op
// (simulator/layer_cost.cpp, step_model.cpp), so an efficiency sample means the same thing there.
#include "kernel_bench.hpp"

#include "executor/engine/adamw_kernel.hpp"
#include "executor/model/attention_gemms.hpp"
#include "executor/model/cpu_gemm.hpp"
#include "executor/model/ops.hpp"
#include "executor/parallel/layers.hpp"
#include "simulator/hardware_profile.hpp"
#include "timed_calls.hpp"
#include "timing_statistics.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace shardplan::executor {
namespace {

using Clock = std::chrono::steady_clock;

double element_bytes(torch::ScalarType t) { return static_cast<double>(c10::elementSize(t)); }

class Bench {
 public:
  explicit Bench(const BenchContext& c) : c_(c) {}

  // Mean seconds per call of `fn` (after a warm-up call), the slowest rank's; `between`, if
  // given, runs untimed before each call, the warm-up's included. The mean, not the median: a
  // step is a sum of its kernels and pays every call's time, the ones a stall lands on included.
  // On this project's Zen 5 VM (python3-torch, one thread, 3,000 calls each, 2026-11-27) the mean
  // came out 1.02-1.12x the median: 256^3 GEMM 1.10x, 512x688x256 GEMM 1.02x, an RMSNorm 1.08x, a
  // 4 MB add 1.12x. (Across passes the profile keeps the median: a pass is a window of the
  // machine's state, as a step is, and a run's step time is a median over steps.)
  // Calls go on until the timed calls add up to min_time_s (at least min_reps of them, at most
  // 2,000), or until 4 x min_time_s of wall time have passed: a call behind a cache sweep (a few
  // ms) would otherwise be timed only a handful of times. Under mpirun the ranks start each
  // call together and make the same number of calls (BenchContext::start_together, agree).
  double time(const std::function<void()>& fn, const std::function<void()>& between = {}) {
    if (c_.stop_requested && c_.stop_requested()) throw ProfileInterrupted{};
    if (between) between();
    fn();
    sync();
    const auto begin = Clock::now();
    TimedCallHooks hooks{between, c_.start_together, [this] { sync(); }, c_.agree};
    double timed = 0;  // seconds of the timed calls so far (asked once after each call)
    const std::vector<double> t = timed_calls(fn, hooks, [&](const std::vector<double>& so_far) {
      if (!so_far.empty()) timed += so_far.back();
      const double wall = std::chrono::duration<double>(Clock::now() - begin).count();
      return static_cast<int>(so_far.size()) < c_.min_reps ||
             (timed < c_.min_time_s && wall < 4 * c_.min_time_s && so_far.size() < 2000);
    });
    const double mean = mean_of(t);
    return c_.combine ? c_.combine(mean) : mean;
  }

  void add(KernelSample s, const std::function<void()>& fn) {
    s.seconds = time(fn);
    record(std::move(s));
  }

  void record(KernelSample s) {
    if (c_.progress && !s.pass.empty()) {
      char line[200];
      std::snprintf(line, sizeof line, "%-14s %-4s %-18s %9.3f ms  %8.3f ns/element (%s)", s.kind.c_str(),
                    s.dtype.c_str(), s.shape.c_str(), s.seconds * 1e3, s.seconds / s.elements * 1e9, s.pass.c_str());
      c_.progress(line);
    } else if (c_.progress) {
      char line[200];
      if (s.flops > 0)
        std::snprintf(line, sizeof line, "%-14s %-4s %-18s %9.3f ms  %8.2f GFLOP/s", s.kind.c_str(), s.dtype.c_str(),
                      s.shape.c_str(), s.seconds * 1e3, s.flops / s.seconds / 1e9);
      else
        std::snprintf(line, sizeof line, "%-14s %-4s %-18s %9.3f ms  %8.2f GB/s", s.kind.c_str(), s.dtype.c_str(),
                      s.shape.c_str(), s.seconds * 1e3, s.bytes / s.seconds / 1e9);
      c_.progress(line);
    }
    samples_.push_back(std::move(s));
  }

  torch::TensorOptions opts(torch::ScalarType t) const { return torch::TensorOptions().dtype(t).device(c_.device); }
  [[nodiscard]] bool quick() const { return c_.quick; }
  [[nodiscard]] bool cuda() const { return c_.device.is_cuda(); }
  std::vector<KernelSample> take() { return std::move(samples_); }

 private:
  void sync() const {
    if (c_.device.is_cuda()) torch::cuda::synchronize();
  }
  const BenchContext& c_;
  std::vector<KernelSample> samples_;
};

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t x : d) {
    if (!s.empty()) s += 'x';
    s += std::to_string(x);
  }
  return s;
}

}  // namespace

double reported_last_level_cache_bytes() {
  for (const char* path :
       {"/sys/devices/system/cpu/cpu0/cache/index3/size", "/sys/devices/system/cpu/cpu0/cache/index2/size"}) {
    std::ifstream f(path);
    std::string v;
    if (!(f >> v) || v.empty()) continue;
    double n = std::atof(v.c_str());
    if (v.back() == 'K') n *= 1024;
    if (v.back() == 'M') n *= 1024 * 1024;
    if (n > 0) return n;
  }
  return 0;
}

// A VM may hide the cache: this project's firecracker VM has no /sys/.../cpu0/cache and its CPUID
// L3 field reads 508 MiB (getconf LEVEL3_CACHE_SIZE), so without a sysfs figure 32 MiB is taken,
// the L3 of one AMD Zen 4/5 core complex (AMD EPYC 9004/9005 product briefs: 32 MB per CCD), the
// largest slice one core reads from. Capped at 64 MiB: pools of 128 MiB overflow every L3 slice
// a core of today's servers reads from, and the sweep stays a few ms.
double cold_cache_bytes() {
  constexpr double kMiB = 1024.0 * 1024.0;
  const double reported = reported_last_level_cache_bytes();
  return std::min(reported > 0 ? reported : 32 * kMiB, 64 * kMiB);
}

namespace {

// GEMMs as a linear layer runs them in training, x: (m, k), W: (n, k), dY: (m, n):
//   forward y = x W^T, input gradient dX = dY W, weight gradient dW = dY^T x (2mnk FLOP each).
// Training touches far more memory between two uses of a weight than the last-level cache
// holds, so on a CPU each call takes its operands from a pool of copies twice cold_cache_bytes(),
// in turn: the rate of cold operands, ~5-10 % below a hot loop's on this project's 2-core VM
// (and what --trace shows training's shardrun::sgemm calls run at). The grid spans cache-resident to
// bandwidth- and compute-bound shapes.
void gemms(Bench& b, torch::ScalarType t) {
  std::vector<int64_t> grid = b.quick()  ? std::vector<int64_t>{64, 512}
                              : b.cuda() ? std::vector<int64_t>{256, 1024, 4096, 8192}
                                         : std::vector<int64_t>{64, 256, 1024};
  std::vector<std::array<int64_t, 3>> shapes;
  for (int64_t m : grid)
    for (int64_t n : grid)
      for (int64_t k : grid) shapes.push_back({m, n, k});
  if (!b.quick())
    shapes.push_back(b.cuda() ? std::array<int64_t, 3>{16384, 8192, 8192} : std::array<int64_t, 3>{2048, 2048, 2048});
  const double e = element_bytes(t);
  const double cache = b.cuda() ? 0.0 : cold_cache_bytes();
  for (const auto& [m, n, k] : shapes) {
    const double set_bytes = e * static_cast<double>(m * k + n * k + m * n);
    const int sets = static_cast<int>(std::clamp(std::ceil(2 * cache / set_bytes), 1.0, 256.0));
    std::vector<torch::Tensor> x, w, dy;
    for (int i = 0; i < sets; ++i) {
      x.push_back(torch::randn({m, k}, b.opts(t)));
      w.push_back(torch::randn({n, k}, b.opts(t)));
      dy.push_back(torch::randn({m, n}, b.opts(t)));
    }
    int i = 0;
    auto next = [&] { return i = (i + 1) % sets; };
    auto sample = [&](const char* layout) {
      return gemm_sample("gemm", dtype_name(t), dims({m, n, k}) + layout, m, k, n, e);
    };
    b.add(sample("/fwd"), [&] {
      const int j = next();
      (void)cpu::linear(x[j], w[j]);
    });
    b.add(sample("/dgrad"), [&] {
      const int j = next();
      (void)cpu::mm(dy[j], w[j]);
    });
    b.add(sample("/wgrad"), [&] {
      const int j = next();
      (void)cpu::mm(dy[j].t(), x[j]);
    });
  }
}

// GEMMs whose weight streams from memory, to part the operands' packing from the FMAs (the
// profile fits t = F / R + streamed bytes / B_stream over them: simulator/efficiency_fit.hpp,
// fit_gemm_stream). An LM head's layouts: k = 1024, a weight (n, k) three times
// cold_cache_bytes() (each call reads it from DRAM), m = 32, 128 and 512 tokens (the output
// streams too at 512); fp32, CPU only (a GPU overlaps its loads with the FMAs). On this project's
// 2-vCPU VM (python3-torch, one thread, 2026-11-28) GPT-2's 768 x 50257 head ran at 67, 105 and
// 118 GFLOP/s at 32, 128 and 512 tokens, against 125 for a 2048^3 cube.
void gemm_operand_stream(Bench& b) {
  if (b.cuda()) return;
  const int64_t k = 1024;
  const double e = element_bytes(torch::kFloat);
  const int64_t n = static_cast<int64_t>(std::ceil((b.quick() ? 2.0 : 3.0) * cold_cache_bytes() / (e * k)));
  const torch::Tensor w = torch::randn({n, k}, b.opts(torch::kFloat));
  for (int64_t m : b.quick() ? std::vector<int64_t>{32, 128} : std::vector<int64_t>{32, 128, 512}) {
    const torch::Tensor x = torch::randn({m, k}, b.opts(torch::kFloat)),
                        dy = torch::randn({m, n}, b.opts(torch::kFloat));
    auto sample = [&](const char* layout) {
      return gemm_sample("gemm_stream", "fp32", dims({m, n, k}) + layout, m, k, n, e);
    };
    b.add(sample("/fwd"), [&] { (void)cpu::linear(x, w); });
    b.add(sample("/dgrad"), [&] { (void)cpu::mm(dy, w); });
    b.add(sample("/wgrad"), [&] { (void)cpu::mm(dy.t(), x); });
  }
}

void attention(Bench& b, torch::ScalarType t) {
  const double e = element_bytes(t);
  const std::vector<int64_t> seqs = b.quick()  ? std::vector<int64_t>{128}
                                    : b.cuda() ? std::vector<int64_t>{512, 2048}
                                               : std::vector<int64_t>{128, 512};
  for (int64_t s : seqs)
    for (int64_t d : {int64_t{64}, int64_t{128}}) {
      const int64_t B = b.cuda() ? 64 : 8;
      torch::Tensor q = torch::randn({B, s, d}, b.opts(t)), k = torch::randn({B, d, s}, b.opts(t));
      torch::Tensor p = torch::randn({B, s, s}, b.opts(t)), v = torch::randn({B, s, d}, b.opts(t));
      // q @ k^T: (B, s, s); p @ v: (B, s, d)
      b.add(gemm_sample("attention_gemm", dtype_name(t), dims({B, s, s, d}), s, d, s, e, B),
            [&] { (void)torch::bmm(q, k); });
      b.add(gemm_sample("attention_gemm", dtype_name(t), dims({B, s, d, s}), s, s, d, e, B),
            [&] { (void)torch::bmm(p, v); });
      if (d == 64)  // softmax over the scores: read + write (B, s, s)
        b.add({"softmax", dtype_name(t), dims({B, s, s}), 0, 2 * e * B * s * s, 0},
              [&] { (void)torch::softmax(p, -1); });
    }
}

void memory_bound(Bench& b, torch::ScalarType t) {
  const double e = element_bytes(t);
  // Elementwise a + b -> c over 4 KB .. 256 MB (operands + result).
  const int64_t top = b.quick() ? (int64_t{1} << 20) : (int64_t{1} << 24);
  for (int64_t n = 1024; n <= top; n *= 4) {
    torch::Tensor x = torch::randn({n}, b.opts(t)), y = torch::randn({n}, b.opts(t));
    b.add({"elementwise", dtype_name(t), std::to_string(n), 0, 3 * e * n, 0}, [&] { (void)torch::add(x, y); });
  }
  // Norms over (M, h): read x, write y (the simulator's 2eMh).
  const std::vector<int64_t> tokens = b.quick() ? std::vector<int64_t>{512} : std::vector<int64_t>{512, 8192};
  for (int64_t M : tokens)
    for (int64_t h : {int64_t{256}, int64_t{1024}}) {
      torch::Tensor x = torch::randn({M, h}, b.opts(t)), w = torch::ones({h}, b.opts(t)),
                    bias = torch::zeros({h}, b.opts(t));
      b.add({"layer_norm", dtype_name(t), dims({M, h}), 0, 2 * e * M * h, 0},
            [&] { (void)torch::layer_norm(x, {h}, w, bias, 1e-5); });
      b.add({"rms_norm", dtype_name(t), dims({M, h}), 0, 2 * e * M * h, 0},
            [&] { (void)(x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w); });
    }
}

void embedding_and_head(Bench& b, torch::ScalarType t) {
  const double e = element_bytes(t);
  const int64_t M = b.quick() ? 512 : 2048;
  for (int64_t V : {int64_t{4096}, int64_t{32000}})
    for (int64_t h : {int64_t{256}, int64_t{1024}}) {
      if (b.quick() && V > 4096) continue;
      torch::Tensor table = torch::randn({V, h}, b.opts(t));
      torch::Tensor ids = torch::randint(V, {M}, torch::TensorOptions().dtype(torch::kLong).device(table.device()));
      torch::Tensor x = torch::randn({M, h}, b.opts(t));
      // Gather M rows of (V, h): read + write (M, h); logits (M, h) @ (h, V).
      b.add({"embedding", dtype_name(t), dims({M, V, h}), 0, 2 * e * M * h, 0},
            [&] { (void)torch::embedding(table, ids); });
      b.add(gemm_sample("lm_head", dtype_name(t), dims({M, V, h}), M, h, V, e), [&] { (void)cpu::linear(x, table); });
    }
}

void optimizer(Bench& b) {
  // The optimizer step over a flat fp32 shard, the very calls of engine/zero_optimizer.cpp
  // (engine/adamw_kernel.hpp): the gradient's squared norm (in double), then clipping, decoupled
  // weight decay and AdamW in one update. Charged per parameter of the shard (simulator op
  // "adamw"). Training runs it once per step, after the backward pass has swept the caches: on a
  // CPU each call takes its shard from a pool twice cold_cache_bytes(), in turn (as the GEMMs
  // do), so a shard that fits the cache is not timed hot. On a GPU the grid goes on to 2^28
  // elements (4.3 GB of state): below ~2^26 the step's dozen kernels are launch-bound (an H200,
  // 2026-11-26: 0.037 ns/element at 2^24 against 0.016 measured on a 1.1 B-parameter step).
  const std::vector<int64_t> sizes = b.quick()  ? std::vector<int64_t>{1 << 18}
                                     : b.cuda() ? std::vector<int64_t>{1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28}
                                                : std::vector<int64_t>{1 << 18, 1 << 20, 1 << 22, 1 << 24};
  const double cache = b.cuda() ? 0.0 : cold_cache_bytes();
  for (int64_t n : sizes) {
    const auto o = b.opts(torch::kFloat);
    const int sets = static_cast<int>(std::clamp(std::ceil(2 * cache / (16.0 * n)), 1.0, 64.0));
    std::vector<std::array<torch::Tensor, 4>> pool;  // p, g, m, v
    for (int i = 0; i < sets; ++i)
      pool.push_back({torch::randn({n}, o), torch::randn({n}, o), torch::zeros({n}, o), torch::zeros({n}, o)});
    torch::NoGradGuard no_grad;
    KernelSample s{simulator::op_kind_name(simulator::OpKind::adamw),
                   "fp32",
                   std::to_string(n),
                   0,
                   32.0 * n,
                   0,
                   "forward",
                   static_cast<double>(n)};
    int i = 0;
    int64_t step = 0;
    b.add(s, [&] {
      i = (i + 1) % sets;
      auto& [p, g, m, v] = pool[static_cast<std::size_t>(i)];
      const double sq = squared_sum(g).item<double>();
      const AdamWScalars scalars{1e-4, 0.9, 0.95, 1e-8, 0.1, ++step, 1.0 / (1.0 + 1e-6 * sq)};
      adamw_update(p, g, m, v, scalars, {{0, n, true}});
    });
  }
}

void launch_and_copies(Bench& b) {
  torch::Tensor one = torch::ones({1}, b.opts(torch::kFloat));
  b.add({"launch", "fp32", "1", 0, 12, 0}, [&] { (void)torch::add(one, one); });
  if (!b.cuda()) return;
  for (int64_t n : {int64_t{1} << 20, int64_t{1} << 26}) {  // 4 MB, 256 MB
    torch::Tensor host = torch::empty({n}, torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true));
    torch::Tensor dev = torch::empty({n}, b.opts(torch::kFloat));
    b.add({"h2d", "fp32", std::to_string(n), 0, 4.0 * n, 0}, [&] { dev.copy_(host, true); });
    b.add({"d2h", "fp32", std::to_string(n), 0, 4.0 * n, 0}, [&] { host.copy_(dev, true); });
  }
}

// The model's non-GEMM ops (model/ops.hpp, parallel/layers.hpp: the functions training calls)
// forward and backward with autograd on, as in training; backward timed alone (pair()). Over a
// range of sizes: small calls pay fixed costs, large ones leave the cache. Elements: of the
// tensor the simulator charges the op by (layer_cost.cpp).
class OpBench {
 public:
  OpBench(Bench& b, torch::ScalarType t) : b_(b), t_(t), o_(b.opts(t)), f32_(b.opts(torch::kFloat)) {
    rng_.device = o_.device();
    rng_.key = 1;
    rng_.reseed(0);
    ctx_.rng = &rng_;
    // Backward reaches each op's saved tensors out of the cache (the step touches far more
    // memory than the cache holds in between): on a CPU those timings follow a sweep over twice
    // cold_cache_bytes() (pair()).
    if (const double cache = b.cuda() ? 0.0 : cold_cache_bytes(); cache > 0) {
      sweep_ = torch::zeros({static_cast<int64_t>(2 * cache / 4)}, f32_);
      evict_ = [this] { sweep_.add_(1.0f); };
    }
  }

  void run() {
    const std::vector<int64_t> sizes = b_.quick()  ? std::vector<int64_t>{1 << 16}
                                       : b_.cuda() ? std::vector<int64_t>{1 << 20, 1 << 23, 1 << 26}
                                                   : std::vector<int64_t>{1 << 16, 1 << 18, 1 << 20, 1 << 22};
    const int64_t h = 256, S = 256, hd = 32, heads = 8;
    for (int64_t n : sizes) {
      const std::string rows = dims({n / h, h});
      auto x = leaf({n / h, h}), g = leaf({n / h, h}), u = leaf({n / h, h});
      auto w = torch::ones({h}, f32_).requires_grad_(true), bias = torch::zeros({h}, f32_).requires_grad_(true);
      pair(simulator::OpKind::dropout, n, rows, {x}, [&] { return dropout(x, 0.1, ctx_, true); });
      pair(simulator::OpKind::layer_norm, n, rows, {x, w, bias}, [&] { return layer_norm(x, w, bias, 1e-5); });
      pair(simulator::OpKind::rms_norm, n, rows, {x, w}, [&] { return rms_norm(x, w, 1e-5); });
      pair(simulator::OpKind::gelu_tanh, n, rows, {x}, [&] { return gelu_tanh(x); });
      pair(simulator::OpKind::swiglu, n, rows, {g, u}, [&] { return swiglu(g, u); });
      auto scores = leaf({std::max<int64_t>(1, n / (S * S)), S, S});  // (B*heads, S, S)
      pair(simulator::OpKind::causal_softmax, static_cast<double>(scores.numel()), dims({scores.size(0), S, S}),
           {scores}, [&] { return causal_softmax(scores, 1, 0.125, t_); });
      auto q = leaf({std::max<int64_t>(1, n / (heads * S * hd)), heads, S, hd});  // (B, n, S, hd)
      pair(simulator::OpKind::rotary, static_cast<double>(q.numel()), dims({q.size(0), heads, S, hd}), {q},
           [&] { return rotary(q, hd); });
      if (t_ != torch::kFloat) weight_cast(n, rows);
    }
    attention_gemms();
  }

 private:
  torch::Tensor leaf(at::IntArrayRef shape) const { return torch::randn(shape, o_).requires_grad_(true); }

  void pair(simulator::OpKind k, double elements, const std::string& shape, std::vector<torch::Tensor> inputs,
            const std::function<torch::Tensor()>& fwd) {
    torch::AutoGradMode grad_on(true);
    const torch::Tensor gy = torch::randn_like(fwd().detach());
    // Forward reads what the op before it just wrote (warm): timed as it is. Backward reads what
    // forward saved long before (cold) and the gradient the op after it just wrote (warm): each
    // call is timed alone, after an untimed forward, the cache sweep and a read of gy. (Timing
    // forward + backward and subtracting forward left the difference of two noisy figures: on
    // the VM, 2026-11-27, backward's spread over three passes was a median 46-143 % per op, and
    // some sizes came out <= 0.)
    torch::Tensor y;
    const double f = b_.time([&] { (void)fwd(); });
    const auto [bwd, warm] = time_backward(
        [&] {
          y.backward(gy);
          y = torch::Tensor();
        },
        [&] {
          for (auto& in : inputs) in.mutable_grad().reset();
          y = fwd();
        },
        [&] { (void)gy.sum(); });
    emit(k, shape, elements, "forward", f);
    emit(k, shape, elements, "backward", bwd);
    if (warm >= 0) emit(k, shape, elements, "backward_warm", warm);
  }

  // A backward timed alone: each call after an untimed `prepare` (the inputs' gradients reset and
  // a fresh forward), then, on a CPU, the cache sweep and `read_incoming` (the gradient the op
  // after it just wrote, warm in training). Returns that cold time and, on a CPU, the same backward
  // warm, right after its forward (a small model's saved tensors are still cached when its
  // backward comes: simulator/cache_reuse.hpp says when); -1 where there is no sweep (GPUs).
  std::pair<double, double> time_backward(const std::function<void()>& backward, const std::function<void()>& prepare,
                                          const std::function<void()>& read_incoming) {
    const double cold = b_.time(backward, [&] {
      prepare();
      if (evict_) {
        evict_();
        read_incoming();
      }
    });
    return {cold, evict_ ? b_.time(backward, prepare) : -1.0};
  }

  // The attention core's GEMMs as the model runs them (model/attention_gemms.hpp, B heads of
  // one sequence, causal: p is 0 above the diagonal): scores = q k^T, out = p v; backward the
  // four GEMMs autograd runs. Charged per model FLOP of the two forward GEMMs (the whole s x s
  // scores, as the simulator counts them), so on a CPU the masked blocks the causal pass skips
  // are in the rate; over head dims 32..128 and a few lengths.
  void attention_gemms() {
    torch::AutoGradMode grad_on(true);
    const std::vector<int64_t> seqs = b_.quick()  ? std::vector<int64_t>{128}
                                      : b_.cuda() ? std::vector<int64_t>{512, 2048}
                                                  : std::vector<int64_t>{128, 256, 512};
    const int64_t B = b_.cuda() ? 128 : 16;  // micro-batch x heads
    for (int64_t s : seqs)
      for (int64_t d : {int64_t{32}, int64_t{64}, int64_t{128}}) {
        if (b_.quick() && d != 64) continue;
        auto q = leaf({1, B, s, d}), k = leaf({1, B, s, d}), v = leaf({1, B, s, d});
        auto p = torch::tril(torch::rand({1, B, s, s}, o_)).requires_grad_(true);
        const auto fwd = [&] {
          return std::make_pair(attention_scores(q, k, /*causal=*/true), attention_values(p, v, B, /*causal=*/true));
        };
        const auto [s0, o0] = fwd();
        const torch::Tensor gs = torch::randn_like(s0.detach()), go = torch::randn_like(o0.detach());
        // Backward as pair() times it: alone, after an untimed forward and the cache sweep.
        std::pair<torch::Tensor, torch::Tensor> y;
        const double f = b_.time([&] { (void)fwd(); });
        const auto [bwd, warm] = time_backward(
            [&] {
              torch::autograd::backward({y.first, y.second}, {gs, go});
              y = {};
            },
            [&] {
              for (auto* x : {&q, &k, &v, &p}) x->mutable_grad().reset();
              y = fwd();
            },
            [&] {
              (void)gs.sum();
              (void)go.sum();
            });
        const double flops = 4.0 * B * s * s * d;
        emit(simulator::OpKind::attention_gemms, dims({B, s, d}), flops, "forward", f);
        emit(simulator::OpKind::attention_gemms, dims({B, s, d}), flops, "backward", bwd);
        if (warm >= 0) emit(simulator::OpKind::attention_gemms, dims({B, s, d}), flops, "backward_warm", warm);
      }
  }

  // Mixed precision: each linear casts its fp32 weight to the compute dtype in forward, again in
  // backward, and its gradient back to fp32 (parallel/zero_linear.cpp).
  void weight_cast(int64_t n, const std::string& shape) {
    torch::NoGradGuard no_grad;
    const torch::Tensor w = torch::randn({n / 256, 256}, f32_), lo = w.to(t_);
    emit(simulator::OpKind::weight_cast, shape, static_cast<double>(n), "forward", b_.time([&] { (void)w.to(t_); }));
    emit(simulator::OpKind::weight_cast, shape, static_cast<double>(n), "backward", b_.time([&] {
      (void)w.to(t_);
      (void)lo.to(torch::kFloat);
    }));
  }

  void emit(simulator::OpKind k, const std::string& shape, double elements, const char* pass, double seconds) {
    KernelSample s{simulator::op_kind_name(k), dtype_name(t_), shape, 0, 0, seconds, pass, elements};
    b_.record(std::move(s));
  }

  Bench& b_;
  torch::ScalarType t_;
  torch::TensorOptions o_, f32_;
  DropoutRng rng_;
  TpContext ctx_;
  torch::Tensor sweep_;
  std::function<void()> evict_;
};

}  // namespace

const char* dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat:
      return "fp32";
    case torch::kBFloat16:
      return "bf16";
    case torch::kHalf:
      return "fp16";
    default:
      return "?";
  }
}

std::vector<KernelSample> median_of_passes(const std::vector<std::vector<KernelSample>>& passes) {
  std::vector<KernelSample> out = passes.at(0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<double> t;
    for (const auto& pass : passes) {
      const KernelSample& s = pass.at(i);
      if (s.kind != out[i].kind || s.shape != out[i].shape || s.dtype != out[i].dtype || s.pass != out[i].pass)
        throw std::logic_error("profile passes measured different samples");
      t.push_back(s.seconds);
    }
    out[i].seconds = upper_median(std::move(t));
  }
  return out;
}

double reference_gemm_seconds(const BenchContext& ctx) {
  torch::NoGradGuard no_grad;
  Bench b(ctx);
  const auto o = b.opts(torch::kFloat);
  const torch::Tensor x = torch::randn({512, 512}, o), w = torch::randn({512, 512}, o);
  return b.time([&] { (void)cpu::linear(x, w); });
}

std::vector<KernelSample> bench_kernels(const BenchContext& ctx, const std::vector<torch::ScalarType>& dtypes) {
  torch::NoGradGuard no_grad;
  Bench b(ctx);
  launch_and_copies(b);
  gemm_operand_stream(b);
  for (auto t : dtypes) {
    gemms(b, t);
    attention(b, t);
    memory_bound(b, t);
    embedding_and_head(b, t);
    OpBench(b, t).run();
  }
  optimizer(b);
  return b.take();
}

}  // namespace shardplan::executor
