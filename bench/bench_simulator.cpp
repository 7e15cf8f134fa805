// Evaluations per second of the simulator, one core.
//   BM_Estimate/*  — the fast analytical path the planner screens the space with
//                    (target for the planner: >= 1,000,000 evaluations/s).
//   BM_Simulate/*  — the full path (event-simulated pipeline, per-stage memory, trace).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "simulator/evaluator.hpp"

namespace sim = shardplan::simulator;

// Count heap allocations, to show the analytical path makes none per evaluation.
// (operator new/delete replaced with malloc/free, which GCC cannot pair up by itself.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
static std::atomic<long long> g_allocations{0};
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

struct Case {
  const char* model;
  const char* hardware;
  int nodes, tp, pp, zero, mbs, gbs, seq;
  sim::Recompute recompute;
  int lora_rank;
};

const Case kCases[] = {
    {"llama2-7b", "p4d.24xlarge", 1, 1, 1, 1, 1, 8, 4096, sim::Recompute::none, 0},
    {"gpt3-175b", "p4de.24xlarge", 16, 8, 4, 1, 1, 512, 2048, sim::Recompute::selective, 0},
    {"llama2-70b", "gaudi2-hls2", 1, 1, 1, 3, 1, 8, 4096, sim::Recompute::full, 8},
};

sim::ParallelConfig make_config(const Case& c, int devices) {
  sim::ParallelConfig cfg;
  cfg.tp = c.tp;
  cfg.pp = c.pp;
  cfg.dp = devices / (c.tp * c.pp);
  cfg.zero_stage = c.zero;
  cfg.micro_batch_size = c.mbs;
  cfg.global_batch_size = c.gbs;
  cfg.seq_len = c.seq;
  cfg.recompute = c.recompute;
  if (c.lora_rank > 0) {
    cfg.lora.rank = c.lora_rank;
    cfg.lora.targets = {"q_proj", "k_proj", "v_proj", "o_proj"};
  }
  return cfg;
}

void run(benchmark::State& state, bool full) {
  const Case& c = kCases[state.range(0)];
  sim::ClusterSpec cluster{sim::load_hardware(c.hardware), c.nodes, 0};
  const sim::ModelSpec model = sim::load_model(c.model);
  sim::ParallelConfig cfg = make_config(c, cluster.devices());
  sim::validate_config(model, cluster, cfg);
  const sim::Evaluator ev(model, cluster, cfg.lora);
  state.SetLabel(std::string(c.model) + " on " + std::to_string(c.nodes) + "x" + c.hardware);
  const long long before = g_allocations.load();
  for (auto _ : state) {
    if (full) {
      auto p = ev.simulate(cfg);
      benchmark::DoNotOptimize(p.time.step_s);
    } else {
      auto e = ev.estimate(cfg);
      benchmark::DoNotOptimize(e.step_s);
    }
  }
  state.counters["allocations_per_eval"] =
      static_cast<double>(g_allocations.load() - before) / static_cast<double>(state.iterations());
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Estimate(benchmark::State& state) { run(state, false); }
void BM_Simulate(benchmark::State& state) { run(state, true); }

}  // namespace

BENCHMARK(BM_Estimate)->DenseRange(0, 2);
BENCHMARK(BM_Simulate)->DenseRange(0, 2);
BENCHMARK_MAIN();
