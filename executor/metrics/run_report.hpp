#pragma once
// What a run measured: one JSON line per step (metrics.jsonl) and a final report.json whose
// keys mirror the simulator's prediction (step_seconds, tokens_per_second, the time parts,
// peak memory per rank) so predicted and measured sit side by side.
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/run_report.hpp"
#include "simulator/prediction.hpp"

namespace shardplan::executor {

struct StepRecord {
  int64_t step = 0;  // 1-based: steps completed after this one
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;  // target tokens in the global batch
  double step_s = 0;
  double compute_s = 0;    // step minus the communication below
  double tp_comm_s = 0;    // time inside tensor-parallel collectives
  double dp_comm_s = 0;    // time inside data-parallel / ZeRO collectives (incl. optimizer's)
  double optimizer_s = 0;  // optimizer step without its communication
  double tokens_per_s = 0;
  double loss_scale = 1;
  bool skipped = false;    // non-finite gradients: no update
  int64_t peak_bytes = 0;  // this rank's peak tensor bytes so far
  // Pipeline, per stage (the slowest rank of each stage; one entry when pp = 1):
  std::vector<double> stage_bubble_s;  // blocked waiting for activations / gradients
  std::vector<double> stage_p2p_s;     // other point-to-point time
  // Per stage: forwards, backwards (B: input gradients under a split schedule), deferred W.
  std::vector<double> stage_forward_s, stage_input_grad_s, stage_weight_grad_s;
  std::vector<double> stage_in_flight_bytes;  // activation bytes held between F and B, at most
  std::vector<int> stage_max_in_flight;       // (chunk, micro-batch) pairs held at once
  double pp_comm_s = 0;                       // this rank: bubble + p2p
  // Context parallelism only (written when `cp`): rank 0's time inside the cp group's
  // exchanges (ring K,V and dK,dV steps, or the Ulysses all-to-alls), forward and backward.
  bool cp = false;
  double cp_comm_s = 0;
  // MoE cards only (written when `moe`): time inside the expert all-to-alls (dispatch and
  // combine, forward and backward), and the router's load imbalance (max over experts of the
  // tokens routed to one / their mean) per (MoE layer, micro-batch) of rank 0: mean and max.
  bool moe = false;
  double a2a_s = 0;
  double router_imbalance = 0;
  double router_imbalance_max = 0;
  // Routed copies (token, expert) dropped by the expert capacity this step, all MoE layers and
  // micro-batches of the global batch (0 when dropless).
  int64_t tokens_dropped = 0;
  // The load-balancing auxiliary loss (--moe-aux-loss-coeff > 0): per micro-batch of the
  // global batch (their mean), summed over the MoE layers; -1 when off (not written).
  double moe_aux_loss = -1;
  [[nodiscard]] nlohmann::json to_json() const;
};

class MetricsLog {
 public:
  MetricsLog() = default;
  // A fresh run truncates; one that continues a run (`continue_history`: --resume auto or a
  // checkpoint) appends as the next attempt (run_history.hpp). Returns the attempt number.
  int open(const std::string& path, bool continue_history = false);
  void write(const StepRecord& r);  // one line with the attempt and its wall-clock time, flushed
 private:
  std::ofstream out_;
  int attempt_ = 1;
};

struct ReportInputs {
  std::string plan_path;
  std::string model;
  int world_size = 1;
  nlohmann::json layout;
  nlohmann::json precision;       // {"compute", "weights", "optimizer"}: dtypes
  nlohmann::json attention;       // {"planned", "ran", "reason"}: the plan's kind, what ran, why not the plan's
  std::vector<StepRecord> steps;  // this run's steps (rank 0's view)
  std::vector<int64_t> peak_bytes_per_rank;
  std::string memory_source;  // "cpu-accounting-allocator" | "cuda-caching-allocator"
  std::string device;
  int threads_per_rank = 1;
  std::string blas_kernels;  // OpenBLAS's kernel set (run/threads.hpp); "": left out
  std::string cpu_gemm;      // what ran the fp32 CPU GEMMs (run/threads.hpp); "": left out
  std::string schedule;      // pipeline schedule run
  simulator::Prediction prediction;
  nlohmann::json attempts;  // summarize_attempts() of metrics.jsonl; null: left out
  // The machine's speed while the run ran: a reference GEMM (profile/kernel_bench.hpp, the one
  // `shardrun profile` times before and after its kernels) timed before the first step and after
  // the last, mean over the ranks; 0: not timed (left out of the report).
  double reference_gemm_start_s = 0, reference_gemm_end_s = 0;
};

// report.json (formats/run_report.hpp). Medians skip the warm-up steps (the first quarter, at least
// the first, of three or more).
formats::RunReport make_run_report(const ReportInputs& in);
nlohmann::json build_report(const ReportInputs& in);  // to_json(make_run_report(in))
double median(std::vector<double> v);

}  // namespace shardplan::executor
