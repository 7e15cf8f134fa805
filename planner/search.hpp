#pragma once
// The configuration search: enumerate every valid (tp, pp, dp) x ZeRO/MiCS x micro-batch x
// schedule x recompute x SP x offload x precision point for each candidate cluster size,
// screen all with the allocation-free analytical estimate (pruning whole sub-spaces whose
// model states alone cannot fit, and parts whose step-time lower bound can reach neither the
// ranked list nor the Pareto front), re-score the top K with the full event simulation, rank by
// the objective, keep the Pareto front of (time, cost, memory) and explain rejected regions.
// Multi-threaded; results are identical for any thread count.
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "frameworks/framework_model.hpp"
#include "simulator/evaluator.hpp"

namespace shardplan::planner {

enum class Objective { throughput, time_to_train, cost, memory };
}  // namespace shardplan::planner

template <>
struct shardplan::simulator::EnumNames<shardplan::planner::Objective> {
  using O = shardplan::planner::Objective;
  static constexpr NameTable<O, 4> table{
      {{O::throughput, "throughput"}, {O::time_to_train, "time"}, {O::cost, "cost"}, {O::memory, "memory"}}};
};

namespace shardplan::planner {

const char* to_string(Objective o);

struct Constraints;

struct SearchSpace {
  std::vector<int> node_counts{1};
  int devices_per_node = 0;                // 0 = the profile's
  std::vector<int> global_batch_sizes{0};  // sequences per step; 0 = smallest valid (mbs x dp)
  int seq_len = 2048;
  std::vector<int> micro_batch_sizes{1, 2, 4, 8};
  std::vector<int> zero_stages{0, 1, 2, 3};
  bool mics = true;  // also try sharding groups smaller than dp
  std::vector<simulator::PipelineSchedule> schedules{simulator::PipelineSchedule::one_f_one_b,
                                                     simulator::PipelineSchedule::gpipe,
                                                     simulator::PipelineSchedule::interleaved};
  std::vector<int> virtual_stages{2, 3, 4};
  std::vector<simulator::Recompute> recomputes{simulator::Recompute::none, simulator::Recompute::selective,
                                               simulator::Recompute::full};
  std::vector<bool> sequence_parallel{false, true};
  std::vector<bool> offload_optimizer{false, true};
  std::vector<bool> offload_activations{false, true};
  std::vector<simulator::Precision> precisions{simulator::Precision::bf16};
  // FP8 recipes to try; those other than none only on devices with FP8 tensor cores and 16-bit
  // precisions (skipped elsewhere). The CLI's default tries none and delayed where allowed.
  std::vector<simulator::Fp8Recipe> fp8_recipes{simulator::Fp8Recipe::none};
  // Context-parallel degrees to try (each must divide the devices left by tp and the sequence
  // into 2 x cp chunks); the CLI's `auto` tries 1, 2, 4, 8 for sequences of 8K tokens and more.
  std::vector<int> context_parallel{1};
  simulator::CpKind cp_kind = simulator::CpKind::ring;  // fixed: the framework's kind
  // Expert-parallel degrees to try on MoE models (divisors of the expert count); the CLI's `auto`
  // tries every power of two that divides it. Expert tensor parallel: 1 and tp are tried when
  // `expert_tp_search`, else etp = tp (Megatron-Core's default).
  std::vector<int> expert_parallel{1};
  bool expert_tp_search = true;
  simulator::LoraConfig lora;                                                             // fixed by the user
  simulator::MixedPrecision mixed_precision = simulator::MixedPrecision::master_weights;  // the framework's recipe
  // Fixed, not searched: the kind the user's framework runs (`--attention`); flash by default,
  // what Megatron-Core, torchtitan, DeepSpeed, FSDP and Hugging Face use on GPUs today.
  simulator::AttentionKind attention = simulator::AttentionKind::flash;
  // Fixed, not searched: the kernels the user's framework fuses (`--fusion`); eager by default.
  simulator::Fusion fusion = simulator::Fusion::eager;
  // Fixed, not searched: fp32 gradient accumulation (`--grad-accum-dtype`), applied to the ZeRO
  // 0/1 16-bit configurations (grad_accum_for).
  simulator::GradAccumDtype grad_accum_dtype = simulator::GradAccumDtype::param;
  // Fixed, not searched: how ZeRO-3 fetches parameters (the framework's; applies at stage 3).
  simulator::Zero3Fetch zero3_fetch = simulator::Zero3Fetch::prefetch;
  // Fixed, not searched: packed documents of this many tokens (ParallelConfig::packed_document_tokens).
  int packed_document_tokens = 0;
  // Fixed, not searched: the framework overlaps SP's collectives with the GEMMs (Megatron-Core
  // --tp-comm-overlap); applies to the points with sequence parallelism.
  bool tp_comm_overlap = false;
  // false: the framework steps after every micro-batch (no gradient accumulation), so a point's
  // micro-batch is the global batch over dp and micro_batch_sizes is not searched.
  bool gradient_accumulation = true;
  std::string rank_order = "tp-dp-pp";
  bool uneven_pipeline = true;  // pp not dividing layers, via auto-partition

  // A configuration with the fields the space fixes (sequence length, LoRA, mixed precision,
  // attention, fusion, packing, CP kind, rank order) and the constraints' memory headroom; the
  // searched fields are left for the caller.
  [[nodiscard]] simulator::ParallelConfig base_config(const Constraints& c) const;
  // Once the searched fields are set: the fields that follow from them (fp32 gradient
  // accumulation where the ZeRO stage and precision take it, the SP overlap where there is SP).
  void complete_config(simulator::ParallelConfig& cfg) const;
};

struct Constraints {
  int max_nodes = 0;            // 0 = no limit
  double max_usd_per_hour = 0;  // whole cluster; 0 = no limit
  int max_tp = 0;               // 0 = devices per node (TP inside a node)
  bool tp_across_nodes = false;
  double memory_headroom = 0.05;
  std::vector<std::string> require;  // features: pp, tp, zero, zero3, offload, recompute, lora, sp, interleaved
  std::vector<std::string> forbid;
  // Only configurations this framework runs (frameworks::why_not); see framework_space.hpp.
  std::optional<frameworks::FrameworkModel> framework;
};

struct Candidate {
  simulator::ClusterSpec cluster;    // nodes x profile
  simulator::ParallelConfig config;  // validated
  simulator::Estimate estimate;
  double score = 0;  // lower is better, by the objective
  double usd_per_token = 0;
  std::string key;  // canonical text of the configuration (ties, determinism)
};

struct Ranked {
  Candidate candidate;
  simulator::Prediction prediction;  // full simulation
  double score = 0;
  // Configurations predicted to behave identically (the same step time and memory: selective
  // recompute under flash attention recomputes nothing), folded into this, the simplest, row.
  std::vector<std::string> equivalents;
  // The frameworks (registry names) that run it; with Constraints::framework, that one only.
  std::vector<std::string> frameworks;
};

// The knobs two configurations differ in, as "tp 8->4 pp 4->2 recompute full->none" ("" if none).
std::string knob_differences(const simulator::ParallelConfig& from, const simulator::ParallelConfig& to);

// The candidates no other one beats on time per token, cost per token and memory, fastest first;
// of those predicted alike, the simplest only.
std::vector<Candidate> non_dominated(std::vector<Candidate> all);

struct RegionReport {
  std::string region;  // e.g. "pp=1", "tp=8 pp=2"
  long long evaluated = 0;
  long long infeasible = 0;
  std::string reason;  // one line for a fully rejected region
};

struct SearchResult {
  std::vector<Ranked> ranked;          // best first (top K re-scored with the full simulation)
  std::vector<Candidate> pareto;       // (step time per token, cost per token, memory) front, full simulation
  std::vector<RegionReport> rejected;  // regions where nothing fits or nothing meets constraints
  long long evaluated = 0;             // analytical evaluations
  long long pruned = 0;                // skipped by the model-state lower bound
  long long outranked = 0;             // skipped by the step-time lower bound (Evaluator::step_time_lower_bound)
  long long considered = 0;            // points of the space (evaluated + pruned + outranked)
  // Without a framework given: points that fit and would have been ranked or on the front, left
  // out because no framework runs them (a schedule or recipe only the simulator knows).
  long long unrun = 0;
  double seconds = 0;
  bool interrupted = false;
};

// What a running search has done so far (front ends: progress bars, streaming tables).
struct SearchProgress {
  std::size_t blocks_done = 0;  // outer-loop blocks (nodes x tp x pp x dp x ZeRO ...) finished
  std::size_t blocks_total = 0;
  long long considered = 0;  // points evaluated or pruned so far
  // The block just finished: its best point that fits and meets the constraints (by the
  // objective, analytical estimate), else the one closest to fitting (estimate.fits false).
  std::optional<Candidate> candidate;
};

struct SearchOptions {
  Objective objective = Objective::throughput;
  double train_tokens = 0;  // time-to-train / cost objectives report for this many tokens
  int top_k = 10;
  int threads = 0;                            // 0 = hardware concurrency
  bool progress = false;                      // progress bar on stderr
  const std::atomic<bool>* cancel = nullptr;  // set to stop early (Ctrl-C): best so far
  // Skip the parts of a block whose step-time lower bound cannot reach the ranked list or the
  // Pareto front (Evaluator::step_time_lower_bound). The result is the same either way; false
  // evaluates every point the model-state bound leaves (tests, benchmarks).
  bool bound_pruning = true;
  // Called after every block from the search threads, one call at a time; may be empty. The
  // result does not depend on it (it may set *cancel).
  std::function<void(const SearchProgress&)> on_block;
};

SearchResult search(const simulator::ModelSpec& model, const simulator::HardwareProfile& hw, const SearchSpace& space,
                    const Constraints& constraints, const SearchOptions& options);

// Lower is better: seconds per token (throughput, time to train), USD per token (cost), or
// device memory with speed as the tie-break (memory). Used for estimates and full predictions.
// Time-to-train and cost count the time lost to failures: they use tokens_per_s x goodput
// (simulator/goodput.hpp); throughput and memory do not.
double objective_score(Objective o, double tokens_per_s, double usd_per_hour, double worst_memory_bytes,
                       double goodput = 1.0);

// Canonical one-line description of a configuration ("tp=8 pp=4 dp=2 zero=1 mbs=1 ...").
std::string describe(const simulator::ParallelConfig& cfg, int nodes);

// Why a user-given configuration is not the plan: infeasible (why), violates a constraint, or
// slower/costlier than the best by how much and where the time goes. One line.
std::string why_not(const simulator::ModelSpec& model, const simulator::ClusterSpec& cluster,
                    simulator::ParallelConfig cfg, const SearchResult& result, const Constraints& constraints,
                    Objective objective);

}  // namespace shardplan::planner
