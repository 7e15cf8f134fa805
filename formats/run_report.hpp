#pragma once
// RunReport: report.json, what one `shardrun` run measured beside what its plan predicted. The
// executor writes it (executor/metrics/run_report.cpp fills it from its step records); `shardplan
// validate` and the GUI read it. Keys carry their unit; times are medians over the steps after
// the warm-up.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace shardplan::formats {

inline constexpr const char* kRunReportSchema = "shardplan.report/1";

struct RunReport {
  struct Moe {                       // MoE cards only
    double a2a_s = 0;                // expert all-to-alls (dispatch + combine, fwd + bwd)
    double router_imbalance = 0;     // max over experts of routed tokens / their mean
    double tokens_dropped = 0;       // per step
    std::optional<double> aux_loss;  // with --moe-aux-loss-coeff > 0
  };
  struct Measured {
    int64_t steps = 0, steps_in_medians = 0;
    double step_s = 0, step_s_p10 = 0, step_s_p90 = 0, tokens_per_s = 0;
    double compute_s = 0, tp_comm_s = 0, dp_comm_s = 0, optimizer_s = 0, pp_comm_s = 0;
    nlohmann::json pipeline;  // per-stage summary: stages, schedule, bubble/p2p seconds, in-flight
    int64_t peak_bytes = 0;   // the largest rank's
    std::vector<int64_t> peak_bytes_per_rank;
    std::string memory_source;  // "cpu-accounting-allocator" | "cuda-caching-allocator"
    double first_loss = 0, final_loss = 0;
    // The reference GEMM (profile/kernel_bench.hpp) timed before the first step and after the last.
    std::optional<double> reference_gemm_start_s, reference_gemm_end_s;
    std::optional<double> cp_comm_s;  // context parallelism only
    std::optional<Moe> moe;
  };
  struct Predicted {
    bool feasible = true;
    double step_s = 0, tokens_per_s = 0, tp_comm_s = 0, dp_comm_s = 0, optimizer_s = 0, sync_wait_s = 0;
    double pipeline_bubble_s = 0, pp_p2p_s = 0;
    std::vector<int> max_in_flight_per_stage;
    std::vector<double> in_flight_activation_bytes_per_stage;
    double peak_bytes = 0;
    // parameters, gradients, optimizer_states, activations, lora, comm_buffers, workspace
    nlohmann::json memory_bytes = nlohmann::json::object();
    std::optional<double> cp_comm_s, a2a_s;  // written when measured has them
  };

  std::string plan;  // the plan file it ran
  std::string model;
  int world_size = 1;
  std::string device;
  int threads_per_rank = 1;
  nlohmann::json layout;     // rank layout (order, degrees), as the executor resolved it
  nlohmann::json precision;  // {"compute", "weights", "optimizer"}: dtypes
  nlohmann::json attention;  // {"planned", "ran", "reason"}
  nlohmann::json attempts;   // summary of metrics.jsonl's attempts; null: left out
  std::string blas_kernels;  // OpenBLAS's kernel set; "": left out
  std::string cpu_gemm;      // what ran the fp32 CPU GEMMs; "": left out
  Measured measured;
  std::optional<Predicted> predicted;  // absent in reports written by hand
};

// (predicted - measured) / measured; 0 when nothing was measured.
double relative_error(double measured, double predicted);

// JSON: the schema above plus "error": {"step_seconds_relative", "peak_memory_relative"}.
nlohmann::json to_json(const RunReport& r);
// Reads a report; errors name `source` and the field. Required: measured.step_seconds > 0 and
// measured.peak_memory_bytes > 0; a "schema" present must be kRunReportSchema (`require_schema`:
// it must be present).
RunReport run_report_from_json(const nlohmann::json& j, const std::string& source, bool require_schema = false);
// A report.json from disk: the schema is required.
RunReport load_run_report(const std::string& path);
// Atomic write (temp + rename).
void save_run_report(const RunReport& r, const std::string& path);

}  // namespace shardplan::formats
