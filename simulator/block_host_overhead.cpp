#include "layer_cost.hpp"

namespace shardplan::simulator {

PassSeconds block_host_overhead_s(const CostEnv& env) {
  const HostOverhead& ho = env.hw->device.host_overhead;
  PassSeconds out;
  if (!ho.measured) return out;
  const ModelSpec& m = *env.model;
  auto add = [&](const PassSeconds& p, double times) {
    out.forward += times * p.forward;
    out.backward += times * p.backward;
  };
  auto adapted = [&](const std::vector<char>* mask) {
    double n = 0;
    for (std::size_t i = 0; env.lora && mask != nullptr && i < mask->size(); ++i) n += (*mask)[i] ? 1 : 0;
    return n;
  };
  double adapters = adapted(env.lora_mask);
  if (env.moe) {
    const double local_experts = static_cast<double>(m.moe.num_experts) / env.ep;
    add(ho.moe_layer, 1);
    add(ho.moe_expert, local_experts);
    adapters += local_experts * adapted(env.expert_lora_mask);
  } else {
    add(m.norm_kind == NormKind::rmsnorm ? ho.llama_block : ho.gpt2_block, 1);
  }
  add(ho.lora_adapter, adapters);
  return out;
}

}  // namespace shardplan::simulator
