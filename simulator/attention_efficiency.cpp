#include "attention_efficiency.hpp"

#include <algorithm>
#include <string>

namespace shardplan::simulator {
namespace {

constexpr const char* kKey = "flash_attention_efficiency_by_seq_len";
constexpr const char* kMasks[2] = {"non_causal", "causal"};

// "head_dim_<N>" -> N (1..9999); 0 when the name is not of that form.
int head_dim_of(const std::string& name) {
  const std::string prefix = "head_dim_";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 4) return 0;
  int n = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return 0;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

EfficiencyCurve efficiency_curve(const nlohmann::json& obj, const char* key, const JsonContext& ctx) {
  EfficiencyCurve c = parse_positive_curve(obj, key, "[seq_len, efficiency]", "sequence lengths", ctx);
  for (double e : c.efficiency)
    if (e > 1) ctx.fail(key, "efficiencies in (0, 1] (fractions of the device's peak FLOP/s)");
  return c;
}

// {"head_dim_64": {"forward": [...], "backward": [...]}, ...} -> ascending in head dim.
std::vector<FlashAttentionCurves::HeadDim> parse_mask(const nlohmann::json& obj, const char* mask,
                                                      const JsonContext& parent) {
  if (!obj.is_object() || obj.empty())
    parent.fail(mask,
                "an object {\"head_dim_64\": {\"forward\": [[seq_len, efficiency], ...], "
                "\"backward\": [...]}, ...}");
  const JsonContext ctx = parent.child(mask);
  std::vector<FlashAttentionCurves::HeadDim> out;
  for (const auto& [name, curves] : obj.items()) {
    FlashAttentionCurves::HeadDim h;
    h.head_dim = head_dim_of(name);
    if (h.head_dim <= 0) ctx.fail(name, "a key head_dim_<N> (N the head dimension, e.g. head_dim_128)");
    if (!curves.is_object())
      ctx.fail(name, "an object {\"forward\": [[seq_len, efficiency], ...], \"backward\": [...]}");
    const JsonContext hctx = ctx.child(name);
    h.forward = efficiency_curve(curves, "forward", hctx);
    h.backward = efficiency_curve(curves, "backward", hctx);
    out.push_back(std::move(h));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.head_dim < b.head_dim; });
  return out;
}

}  // namespace

double FlashAttentionCurves::at(bool causal, double head_dim, double seq_len, bool backward) const {
  const auto& dims = by_mask[causal ? 1 : 0].empty() ? by_mask[causal ? 0 : 1] : by_mask[causal ? 1 : 0];
  auto eff = [&](const HeadDim& h) { return (backward ? h.backward : h.forward).at(seq_len); };
  if (head_dim <= dims.front().head_dim) return eff(dims.front());
  if (head_dim >= dims.back().head_dim) return eff(dims.back());
  std::size_t i = 1;
  while (dims[i].head_dim < head_dim) ++i;
  const double t = (head_dim - dims[i - 1].head_dim) / (dims[i].head_dim - dims[i - 1].head_dim);
  return eff(dims[i - 1]) + t * (eff(dims[i]) - eff(dims[i - 1]));
}

FlashAttentionCurves parse_flash_attention_curves(const nlohmann::json& device, const JsonContext& ctx) {
  FlashAttentionCurves c;
  const auto it = device.find(kKey);
  if (it == device.end() || it->is_null()) return c;
  if (!it->is_object() || it->empty())
    ctx.fail(kKey, "an object {\"causal\": {...}, \"non_causal\": {...}} (at least one of them)");
  const JsonContext fctx = ctx.child(kKey);
  for (const auto& [name, obj] : it->items()) {
    int mask = -1;
    for (int m = 0; m < 2; ++m)
      if (name == kMasks[m]) mask = m;
    if (mask < 0) fctx.fail(name, "a mask name: causal or non_causal");
    c.by_mask[static_cast<std::size_t>(mask)] = parse_mask(obj, kMasks[mask], fctx);
  }
  return c;
}

nlohmann::json to_json(const FlashAttentionCurves& c) {
  if (c.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::object();
  for (int m = 0; m < 2; ++m)
    for (const auto& h : c.by_mask[static_cast<std::size_t>(m)])
      j[kMasks[m]]["head_dim_" + std::to_string(h.head_dim)] = {{"forward", to_json(h.forward)},
                                                                {"backward", to_json(h.backward)}};
  return j;
}

FlashV1Slowdown parse_flash_v1_slowdown(const nlohmann::json& device, const JsonContext& ctx) {
  constexpr const char* key = "flash_attention_v1_slowdown";
  FlashV1Slowdown s;
  const auto it = device.find(key);
  if (it == device.end() || it->is_null()) return s;
  if (!it->is_object()) ctx.fail(key, "an object {\"forward\": factor, \"backward\": factor} (each >= 1)");
  const JsonContext sctx = ctx.child(key);
  s.forward = get_positive(*it, "forward", sctx);
  s.backward = get_positive(*it, "backward", sctx);
  if (s.forward < 1) sctx.fail("forward", "a factor >= 1 (how many times slower than FlashAttention-2)");
  if (s.backward < 1) sctx.fail("backward", "a factor >= 1 (how many times slower than FlashAttention-2)");
  return s;
}

nlohmann::json to_json(const FlashV1Slowdown& s) {
  if (!s.given()) return nullptr;
  return {{"forward", s.forward}, {"backward", s.backward}};
}

}  // namespace shardplan::simulator
