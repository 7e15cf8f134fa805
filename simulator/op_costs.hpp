#pragma once
// Measured costs of the model's non-GEMM ops (executor/model/ops.hpp: dropout, the causal
// softmax, norms, activations, rotary embedding, mixed-precision weight casts), per precision,
// forward and backward: time = elements x seconds per element at that size (a curve in
// log10(elements): small calls pay their fixed costs, large ones fall out of cache). `shardrun profile`
// times each op as training runs it; a datasheet profile has none and the simulator falls back
// on the memory roofline (bytes / bandwidth). On a CPU these ops are far from memory-bound
// (dropout draws a random number per element, tanh-GELU and exp are computed), so the roofline
// under-counts them many times over.
#include <array>
#include <nlohmann/json.hpp>

#include "efficiency_curve.hpp"
#include "json_fields.hpp"

namespace shardplan::simulator {

// attention_gemms: the attention core's batched GEMMs (Q K^T and P V, and their four backward
// GEMMs), charged per FLOP of the two forward GEMMs: small heads run far below the GEMM peak on
// a CPU; eager attention only (flash runs one fused kernel, layer_cost.cpp). adamw: the
// optimizer step per parameter of the rank's shard (gradient norm, clipping, AdamW;
// executor/engine/zero_optimizer.cpp), fp32, forward only.
enum class OpKind {
  dropout,
  causal_softmax,
  layer_norm,
  rms_norm,
  gelu_tanh,
  swiglu,
  rotary,
  weight_cast,
  adamw,
  attention_gemms
};
inline constexpr int kOpKinds = 10;
const char* op_kind_name(OpKind k);  // as in the profile's keys: "dropout", ...

struct OpCost {
  EfficiencyCurve forward_s_per_element;  // values: seconds per element, by elements
  EfficiencyCurve backward_s_per_element;
  // Backward with what forward saved still in the cache (a CPU profile times it after forward,
  // with no sweep between); empty: not measured, backward is always the cold figure above.
  EfficiencyCurve backward_warm_s_per_element;
  [[nodiscard]] bool measured() const { return !forward_s_per_element.log10_x.empty(); }
  [[nodiscard]] double forward_s(double n) const { return n * forward_s_per_element.at(n); }
  [[nodiscard]] double backward_s(double n) const {
    return backward_s_per_element.log10_x.empty() ? 0.0 : n * backward_s_per_element.at(n);
  }
  // Backward when a fraction `warm` (0..1) of the calls find their saved tensors in the cache.
  [[nodiscard]] double backward_s(double n, double warm) const {
    if (!(warm > 0) || backward_warm_s_per_element.log10_x.empty()) return backward_s(n);
    return (1 - warm) * backward_s(n) + warm * n * backward_warm_s_per_element.at(n);
  }
};

// [precision index (Precision as int)][OpKind]
using OpCostTable = std::array<std::array<OpCost, kOpKinds>, 3>;

// device.op_costs: {"dropout": {"bf16": {"forward_seconds_per_element_by_elements": [[elements, s], ...],
// "backward_seconds_per_element_by_elements": [...] (optional), "backward_warm_seconds_per_element_by_elements":
// [...] (optional)}, ...}, ...}; absent = none measured.
OpCostTable parse_op_costs(const nlohmann::json& device, const JsonContext& ctx);
nlohmann::json to_json(const OpCostTable& t);  // null when nothing is measured

}  // namespace shardplan::simulator
