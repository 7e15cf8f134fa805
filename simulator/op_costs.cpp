#include "op_costs.hpp"

#include <string>

#include "hardware_profile.hpp"  // Precision, to_string

namespace shardplan::simulator {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::dropout:
      return "dropout";
    case OpKind::causal_softmax:
      return "causal_softmax";
    case OpKind::layer_norm:
      return "layer_norm";
    case OpKind::rms_norm:
      return "rms_norm";
    case OpKind::gelu_tanh:
      return "gelu_tanh";
    case OpKind::swiglu:
      return "swiglu";
    case OpKind::rotary:
      return "rotary";
    case OpKind::weight_cast:
      return "weight_cast";
    case OpKind::adamw:
      return "adamw";
    case OpKind::attention_gemms:
      return "attention_gemms";
  }
  return "?";
}

OpCostTable parse_op_costs(const nlohmann::json& device, const JsonContext& ctx) {
  OpCostTable t{};
  const auto it = device.find("op_costs");
  if (it == device.end() || it->is_null()) return t;
  if (!it->is_object()) ctx.fail("op_costs", "an object {\"dropout\": {\"bf16\": {...}}, ...}");
  const JsonContext octx = ctx.child("op_costs");
  for (const auto& [name, by_precision] : it->items()) {
    int kind = -1;
    for (int k = 0; k < kOpKinds; ++k)
      if (name == op_kind_name(static_cast<OpKind>(k))) kind = k;
    if (kind < 0)
      octx.fail(name,
                "an op name: dropout, causal_softmax, layer_norm, rms_norm, gelu_tanh, swiglu, rotary, weight_cast, "
                "adamw or attention_gemms");
    if (!by_precision.is_object()) octx.fail(name, "an object keyed by precision (fp32, fp16, bf16)");
    const JsonContext kctx = octx.child(name);
    for (const auto& [prec, cost] : by_precision.items()) {
      int p = -1;
      for (int i = 0; i < 3; ++i)
        if (prec == to_string(static_cast<Precision>(i))) p = i;
      if (p < 0) kctx.fail(prec, "a precision name: fp32, fp16 or bf16");
      if (!cost.is_object())
        kctx.fail(prec,
                  "an object {forward_seconds_per_element_by_elements, backward_seconds_per_element_by_elements}");
      const JsonContext c = kctx.child(prec);
      OpCost& oc = t[static_cast<std::size_t>(p)][static_cast<std::size_t>(kind)];
      oc.forward_s_per_element = parse_positive_curve(cost, "forward_seconds_per_element_by_elements",
                                                      "[elements, seconds per element]", "elements", c);
      if (cost.contains("backward_seconds_per_element_by_elements"))
        oc.backward_s_per_element = parse_positive_curve(cost, "backward_seconds_per_element_by_elements",
                                                         "[elements, seconds per element]", "elements", c);
      if (cost.contains("backward_warm_seconds_per_element_by_elements"))
        oc.backward_warm_s_per_element = parse_positive_curve(cost, "backward_warm_seconds_per_element_by_elements",
                                                              "[elements, seconds per element]", "elements", c);
    }
  }
  return t;
}

nlohmann::json to_json(const OpCostTable& t) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < kOpKinds; ++k)
    for (int p = 0; p < 3; ++p) {
      const OpCost& c = t[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)];
      if (!c.measured()) continue;
      nlohmann::json& o = j[op_kind_name(static_cast<OpKind>(k))][to_string(static_cast<Precision>(p))];
      o["forward_seconds_per_element_by_elements"] = to_json(c.forward_s_per_element);
      if (!c.backward_s_per_element.log10_x.empty())
        o["backward_seconds_per_element_by_elements"] = to_json(c.backward_s_per_element);
      if (!c.backward_warm_s_per_element.log10_x.empty())
        o["backward_warm_seconds_per_element_by_elements"] = to_json(c.backward_warm_s_per_element);
    }
  return j.empty() ? nlohmann::json() : j;
}

}  // namespace shardplan::simulator
