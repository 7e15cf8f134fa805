#pragma once
// Efficiency of a fused attention kernel (FlashAttention-2, Dao 2023; PyTorch SDPA's flash
// backend): the fraction of the device's peak FLOP/s it executes, by sequence length, forward
// and backward, per head dim and mask. Optional in a profile
// (device.flash_attention_efficiency_by_seq_len, hardware_profiles/SCHEMA.md); without it the
// simulator times the kernel through the device's GEMM curve (layer_cost.cpp).
#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "efficiency_curve.hpp"
#include "json_fields.hpp"

namespace shardplan::simulator {

struct FlashAttentionCurves {
  struct HeadDim {
    int head_dim = 0;
    EfficiencyCurve forward;  // fraction of peak, by sequence length (tokens)
    EfficiencyCurve backward;
  };
  // [0] without a mask, [1] causal; each ascending in head_dim; either may be empty.
  std::array<std::vector<HeadDim>, 2> by_mask;
  [[nodiscard]] bool empty() const { return by_mask[0].empty() && by_mask[1].empty(); }
  // The forward (or backward) kernel's efficiency at `seq_len` for `head_dim`: the curves of the
  // mask asked for (else those of the other mask), linear in head dim between the given head
  // dims and clamped to the nearest outside them. Requires !empty().
  [[nodiscard]] double at(bool causal, double head_dim, double seq_len, bool backward) const;
};

// How much slower the first-generation fused kernels (attention kind flash1: FlashAttention v1,
// FlashAttention in Triton) run than the FlashAttention-2 rate above: each pass's efficiency is
// divided by its factor. Optional in a profile (device.flash_attention_v1_slowdown,
// {"forward": x, "backward": y}, each >= 1); absent: 1 (no comparison published for the device).
struct FlashV1Slowdown {
  double forward = 1.0;
  double backward = 1.0;
  [[nodiscard]] bool given() const { return forward != 1.0 || backward != 1.0; }
};
FlashV1Slowdown parse_flash_v1_slowdown(const nlohmann::json& device, const JsonContext& ctx);
nlohmann::json to_json(const FlashV1Slowdown& s);  // null when not given

// device.flash_attention_efficiency_by_seq_len (absent or null: empty):
//   {"causal" | "non_causal": {"head_dim_<N>": {"forward": [[seq_len, efficiency], ...],
//                                               "backward": [[seq_len, efficiency], ...]}, ...}}
FlashAttentionCurves parse_flash_attention_curves(const nlohmann::json& device, const JsonContext& ctx);
nlohmann::json to_json(const FlashAttentionCurves& c);  // null when empty

}  // namespace shardplan::simulator
