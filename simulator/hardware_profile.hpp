#pragma once
// HardwareProfile: one node type of a cluster — device, intra-node links, network, host,
// price. Read from hardware_profiles/<name>.json (datasheet) or a measured profile written by
// `shardrun profile`; both use the same schema (hardware_profiles/SCHEMA.md). All members are
// SI: bytes, bytes/s, seconds, FLOP/s.
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention_efficiency.hpp"
#include "efficiency_curve.hpp"
#include "enum_names.hpp"
#include "host_overhead.hpp"
#include "op_costs.hpp"
#include "runtime_memory.hpp"

namespace shardplan::simulator {

enum class Precision { fp32, fp16, bf16 };
template <>
struct EnumNames<Precision> {
  static constexpr NameTable<Precision, 3> table{
      {{Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}, {Precision::fp32, "fp32"}}};
};
enum class IntraTopology { switch_fabric, pcie, all_to_all, torus };

// The software stack that drives the device (which frameworks run on it, which runtime's memory
// it holds): CUDA (NVIDIA GPUs), the Neuron runtime (Trainium), SynapseAI (Gaudi), the CPU.
enum class DeviceRuntime { cuda, neuron, synapse, cpu };
template <>
struct EnumNames<DeviceRuntime> {
  static constexpr NameTable<DeviceRuntime, 4> table{{{DeviceRuntime::cuda, "cuda"},
                                                      {DeviceRuntime::neuron, "neuron"},
                                                      {DeviceRuntime::synapse, "synapse"},
                                                      {DeviceRuntime::cpu, "cpu"}}};
};

struct DeviceProfile {
  std::string name;
  DeviceRuntime runtime = DeviceRuntime::cuda;
  double memory_bytes = 0;
  double memory_bandwidth_Bps = 0;
  // Dense peak FLOP/s per precision; 0 = unsupported.
  std::array<double, 3> peak_flops{};  // indexed by Precision
  EfficiencyCurve gemm_efficiency;     // by GEMM FLOP (2mnk)
  // Optional per-precision GEMM curves (measured profiles: bf16 kernels on a CPU scale with size
  // quite unlike fp32 ones); an empty one falls back to gemm_efficiency.
  std::array<EfficiencyCurve, 3> gemm_efficiency_by_precision;
  // FP8 tensor cores (H100, Gaudi2): dense peak FLOP/s of an e4m3 x e4m3 GEMM with 16-bit output,
  // 0 = none (A100, A10G: FP8 runs are refused); its own GEMM curve by FLOP, else the 16-bit one.
  double peak_fp8_flops = 0;
  EfficiencyCurve gemm_efficiency_fp8;
  EfficiencyCurve memory_efficiency;     // by bytes moved
  double kernel_launch_s = 0;            // fixed cost per kernel
  RuntimeMemory runtime_memory;          // context, communicator buffers, library workspaces
  OpCostTable op_costs{};                // measured non-GEMM ops (op_costs.hpp); none = roofline
  FlashAttentionCurves flash_attention;  // fused attention kernel by seq len; none = GEMM curve
  // Whether flash attention runs as one fused kernel (FlashAttention-2, SDPA: every GPU profile);
  // false where the framework runs the same algorithm as separate ops (shardrun on a CPU: the
  // explicit path, ring steps blockwise), which layer_cost.cpp charges op by op.
  bool fused_attention = true;
  // The last-level cache the node's ranks share, bytes (measured CPU profiles); 0 = unknown or
  // negligible against a step's data (GPUs): every backward reads what forward saved cold.
  double last_level_cache_bytes = 0;
  // The rate at which a GEMM streams its operands, bytes/s (measured CPU profiles: a CPU BLAS
  // packs them between its FMA loops, efficiency_fit.hpp fit_gemm_stream); 0 = they overlap the
  // FMAs (GPUs): a GEMM takes the longer of its compute and its memory time (the roofline).
  double gemm_operand_stream_Bps = 0;
  FlashV1Slowdown flash_attention_v1_slowdown;  // attention kind flash1 against the curve above
  HostOverhead host_overhead;                   // measured framework host time per block (host_overhead.hpp); none = 0
  [[nodiscard]] double peak(Precision p) const { return peak_flops[static_cast<int>(p)]; }
  // The measured cost of op `k` in precision `p`, or nullptr (use the memory roofline).
  [[nodiscard]] const OpCost* op_cost(Precision p, OpKind k) const {
    const OpCost& c = op_costs[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)];
    return c.measured() ? &c : nullptr;
  }
  [[nodiscard]] bool has_fp8() const { return peak_fp8_flops > 0; }
  [[nodiscard]] const EfficiencyCurve& fp8_gemm_curve() const {
    return gemm_efficiency_fp8.log10_x.empty() ? gemm_curve(Precision::bf16) : gemm_efficiency_fp8;
  }
  [[nodiscard]] const EfficiencyCurve& gemm_curve(Precision p) const {
    const auto& c = gemm_efficiency_by_precision[static_cast<int>(p)];
    return c.log10_x.empty() ? gemm_efficiency : c;
  }
};

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, send_recv };

struct LinkProfile {
  double bandwidth_Bps = 0;  // per device (intra) or per node (network), one direction
  double latency_s = 0;
  double efficiency = 1.0;  // achievable fraction of bandwidth for large messages
  // Measured bus bandwidth by buffer size, per collective kind (`shardrun profile`, nccl-tests'
  // convention: the bytes each rank puts on the wire / the time, latency included). Where a
  // kind has one it replaces bandwidth, efficiency and latency for that kind inside a node.
  // Stored as an EfficiencyCurve whose values are bytes/s.
  std::array<EfficiencyCurve, 4> busbw_by_bytes;
  // Fraction of this link's collective time that can run behind compute: 1 for GPUs (NCCL on
  // its own stream), 0 for CPU ranks under MPI (non-blocking collectives progress only inside
  // MPI calls, and the rank's core is busy computing).
  double compute_overlap = 1.0;
  // Ranks reach a collective at different times: the wait for the slower of two ranks, as a
  // fraction of the compute between two collectives (`shardrun profile`: compute then a
  // one-element all-reduce, against the compute alone). 0 = not measured.
  double sync_skew_fraction = 0.0;
  // How much slower the slowest of the ranks profiled at once ran the same work than the
  // fastest (`shardrun profile`: the median over its kernel timings), over rank_speed_gap_ranks; the
  // kernels are the slowest rank's, so a job on fewer of the node's cores runs faster
  // (rank_pace.hpp). 0 = not measured.
  double rank_speed_gap_fraction = 0.0;
  int rank_speed_gap_ranks = 0;
  [[nodiscard]] const EfficiencyCurve* busbw(CollectiveKind k) const {
    const auto& c = busbw_by_bytes[static_cast<std::size_t>(k)];
    return c.log10_x.empty() ? nullptr : &c;
  }
};
const char* to_string(CollectiveKind k);

struct NodeProfile {
  int devices_per_node = 0;
  IntraTopology topology = IntraTopology::switch_fabric;
  LinkProfile intra;  // bandwidth per device, one direction (all_to_all: summed over peers)
};

struct HostProfile {
  double memory_bytes = 0;          // per node
  double memory_bandwidth_Bps = 0;  // per node
  double link_bandwidth_Bps = 0;    // host<->device, per device, one direction
  int cpu_cores = 0;                // per node
};

struct PriceInfo {
  double usd_per_hour = 0;  // per node, 0 = unknown
  std::string as_of;        // date of the price
  std::string note;
};

// Failure and checkpoint figures for the goodput model (simulator/goodput.hpp). Optional in a
// profile ("resilience" section); the defaults are documented in hardware_profiles/SCHEMA.md.
inline constexpr double kDefaultNodeMtbfHours = 6300;     // Llama 3 (Dubey et al. 2024), see SCHEMA.md
inline constexpr double kDefaultCheckpointWriteGBps = 1;  // per node, to shared storage (SCHEMA.md)
inline constexpr double kDefaultRestartSeconds = 300;     // detect + reschedule + reload
struct ResilienceProfile {
  double node_mtbf_s = kDefaultNodeMtbfHours * 3600;                // mean time between failures of one node
  double checkpoint_write_Bps = kDefaultCheckpointWriteGBps * 1e9;  // per node
  double restart_s = kDefaultRestartSeconds;                        // failure to training again
};

// Terms fitted to measured runs (`shardplan calibrate`; the shipped GPU profiles carry a fit to
// the public record, runs/published.json). Applied once at load on top of the datasheet-derived
// curves: compute scales every 16-bit/fp32 GEMM and fused-attention efficiency curve, fp8_compute
// the FP8 GEMM curve (its own term: FP8 GEMMs run through Transformer Engine's kernels, which
// the 16-bit stacks' fit says nothing about), memory the memory-bound efficiency curve, network
// the intra-node and network efficiencies (and measured bus-bandwidth curves). The peaks stay the
// datasheet's, so MFU keeps its usual denominator.
struct FittedTerms {
  bool present = false;
  double compute_efficiency_scale = 1.0;
  double fp8_compute_efficiency_scale = 1.0;
  double memory_efficiency_scale = 1.0;
  double network_efficiency_scale = 1.0;
  std::string source;  // what it was fitted to, and its held-out error
};

// Whether the profile's efficiency terms were fitted to measured runs, and if not, the rule its
// curves and terms come from (a 2026 instance type with no published run, say). Optional in a
// profile ("calibration": {"status": "calibrated" | "uncalibrated", "rule": "..."}); absent, a
// profile with fitted terms or one measured by `shardrun profile` counts as calibrated.
struct CalibrationInfo {
  bool calibrated = false;
  std::string rule;
};

struct HardwareProfile {
  std::string name;
  std::string description;
  std::string source_file;
  bool measured = false;
  DeviceProfile device;
  NodeProfile node;
  LinkProfile network;  // per node
  HostProfile host;
  PriceInfo price;
  ResilienceProfile resilience;
  FittedTerms fitted;
  CalibrationInfo calibration;
};

const char* to_string(Precision p);
const char* to_string(IntraTopology t);

// Load from a file; resolves "base" (a built-in name or a path) and overlays this file's
// fields on it (JSON merge patch), then validates. Errors name the file and the field.
HardwareProfile load_hardware_file(const std::string& path);
// A built-in profile name (hardware_profiles/<name>.json) or a path.
HardwareProfile load_hardware(const std::string& name_or_path);
std::vector<std::string> builtin_hardware_names();
// `name_or_path` with `overrides` (profile fields in the schema's unit keys, e.g.
// {"network": {"bandwidth_Gbps": 1600}}) overlaid as "base" + file would be; errors name `source`.
HardwareProfile load_hardware_with_overrides(const std::string& name_or_path, const nlohmann::json& overrides,
                                             const std::string& source);

// A resolved profile (no "base") from parsed JSON, e.g. embedded in a plan.
HardwareProfile hardware_from_json(const nlohmann::json& j, const std::string& source);
// The resolved profile in the same schema (SI unit keys); hardware_from_json inverts it.
nlohmann::json to_json(const HardwareProfile& hw);

}  // namespace shardplan::simulator
