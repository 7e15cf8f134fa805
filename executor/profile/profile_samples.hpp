#pragma once
// What `shardrun profile` measures, as plain data (no LibTorch): kernel samples and timed
// collectives, and everything the measured profile records about the run that took them.
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "simulator/efficiency_fit.hpp"
#include "simulator/hardware_profile.hpp"

namespace shardplan::executor {

struct KernelSample {
  // Kernels leave pass and elements out (a constructor rather than aggregate initialisation,
  // which would flag every kernel's missing fields).
  KernelSample(std::string kind_, std::string dtype_, std::string shape_, double flops_, double bytes_, double seconds_,
               std::string pass_ = "", double elements_ = 0)
      : kind(std::move(kind_)),
        dtype(std::move(dtype_)),
        shape(std::move(shape_)),
        flops(flops_),
        bytes(bytes_),
        seconds(seconds_),
        pass(std::move(pass_)),
        elements(elements_) {}
  std::string kind;     // gemm | gemm_stream | attention_gemm | lm_head | softmax | layer_norm | rms_norm |
                        // elementwise | embedding | optimizer | launch | h2d | d2h, or with a
                        // pass: one of the model's ops (simulator::op_kind_name: dropout, ...)
  std::string dtype;    // fp32 | bf16 | fp16
  std::string shape;    // e.g. "1024x1024x1024" (m x n x k), "65536" (elements)
  double flops = 0;     // 0 for memory-bound kinds
  double bytes = 0;     // bytes moved (memory-bound kinds; operands + result for GEMMs)
  double seconds = 0;   // median per call, the slowest rank's
  std::string pass;     // "" for kernels; forward | backward for the model's ops
  double elements = 0;  // the model's ops: elements of the tensor the op is charged by
  // GEMMs (m x k) @ (k x n): bytes of A (m x k), B (k x n) and C (m x n), whole batch.
  std::array<double, 3> operand_bytes{};
};

// A GEMM's sample (batch x (m x k) @ (k x n), elements of e bytes): 2 batch m k n FLOP, the
// three operands' bytes, and their sum as `bytes`, as layer_cost.cpp's gemm_time_s counts them.
inline KernelSample gemm_sample(std::string kind, std::string dtype, std::string shape, double m, double k, double n,
                                double e, double batch = 1) {
  KernelSample s(std::move(kind), std::move(dtype), std::move(shape), 2 * batch * m * k * n,
                 e * batch * (m * k + k * n + m * n), 0);
  s.operand_bytes = {e * batch * m * k, e * batch * k * n, e * batch * m * n};
  return s;
}

struct ProfileRun {
  simulator::HardwareProfile base;  // node/host/price figures not measured come from here
  std::string base_name;
  std::string name;         // of the measured profile
  std::string device_name;  // e.g. "1 CPU core (AMD EPYC 7B13), LibTorch 1.13 + OpenBLAS"
  bool cuda = false;
  // Whether shardrun's flash plans run a fused attention kernel here (model::attention_run on this
  // device and LibTorch, a model without attention dropout); the reason when not.
  bool fused_attention = false;
  std::string fused_attention_reason;
  // The cache the node's ranks share (CPU), bytes, and where the figure comes from.
  double last_level_cache_bytes = 0;
  std::string last_level_cache_source;
  int world_size = 1;
  int ranks_on_node = 1;
  int threads_per_rank = 1;
  int cpu_cores = 1;
  double host_memory_bytes = 0;
  std::string date;  // ISO date of the measurement
  std::vector<KernelSample> kernels;
  std::vector<simulator::LinkSample> links;  // empty with one rank
  double sync_skew_fraction = -1;            // < 0: not measured (one rank)
  double rank_speed_gap_fraction = -1;       // median over kernel timings of slowest / fastest rank - 1; < 0: one rank
  simulator::HostOverhead host_overhead;     // the model's host time per block (CPU runs only)
  // A reference GEMM timed before and after the kernel benchmarks: how much the machine drifted.
  double reference_start_s = 0, reference_end_s = 0;
  int repeats = 1;  // passes over the kernels; each kernel sample is their median
};

// The measured profile (schema shardplan.hardware/1, "measured": true) with fitted curves,
// sources per figure and the raw samples; loads back with simulator::hardware_from_json.
// InputError when a figure the profile needs was not measured (e.g. no GEMM of a dtype).
nlohmann::json measured_profile_json(const ProfileRun& run);

}  // namespace shardplan::executor
