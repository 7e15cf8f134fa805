#include "host_overhead.hpp"

#include <array>
#include <utility>

namespace shardplan::simulator {
namespace {

constexpr const char* kKey = "host_overhead_seconds";

std::array<std::pair<const char*, PassSeconds HostOverhead::*>, 5> parts() {
  return {{{"llama_block", &HostOverhead::llama_block},
           {"gpt2_block", &HostOverhead::gpt2_block},
           {"moe_layer", &HostOverhead::moe_layer},
           {"moe_expert", &HostOverhead::moe_expert},
           {"lora_adapter", &HostOverhead::lora_adapter}}};
}

}  // namespace

HostOverhead parse_host_overhead(const nlohmann::json& device, const JsonContext& ctx) {
  HostOverhead h;
  const auto it = device.find(kKey);
  if (it == device.end() || it->is_null()) return h;
  const char* expected =
      "an object {\"llama_block\": {\"forward\": s, \"backward\": s}, \"gpt2_block\": ..., "
      "\"moe_layer\": ..., \"moe_expert\": ..., \"lora_adapter\": ...}";
  if (!it->is_object()) ctx.fail(kKey, expected);
  const JsonContext hctx = ctx.child(kKey);
  for (const auto& [key, value] : it->items()) {
    PassSeconds HostOverhead::*member = nullptr;
    for (const auto& [name, m] : parts())
      if (key == name) member = m;
    if (member == nullptr)
      hctx.fail(key.c_str(), "one of llama_block, gpt2_block, moe_layer, moe_expert, lora_adapter");
    if (!value.is_object()) hctx.fail(key.c_str(), "an object {\"forward\": seconds, \"backward\": seconds}");
    const JsonContext pctx = hctx.child(key.c_str());
    h.*member = {get_non_negative(value, "forward", pctx), get_non_negative(value, "backward", pctx)};
  }
  h.measured = true;
  return h;
}

nlohmann::json to_json(const HostOverhead& h) {
  if (!h.measured) return nullptr;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, m] : parts()) j[name] = {{"forward", (h.*m).forward}, {"backward", (h.*m).backward}};
  return j;
}

}  // namespace shardplan::simulator
