#pragma once
// Host time an eager framework spends per micro-batch outside the kernels it runs: operator
// dispatch, autograd graph nodes and saved tensors, views and reshapes, Python-free LibTorch in
// shardrun's case. On a CPU it adds to the kernels (the same core runs both); a GPU runs its
// kernels asynchronously behind the host, so datasheet profiles leave it out (0).
// `shardrun profile` measures it on the executor's own model at micro shapes, where the kernels
// take under a tenth of the time (executor/profile/host_overhead_bench.cpp): the difference
// between 1 and 3 blocks (or 2 and 8 experts, 0 and 7 adapters per block) per added part.
#include <nlohmann/json.hpp>

#include "json_fields.hpp"

namespace shardplan::simulator {

struct PassSeconds {
  double forward = 0;
  double backward = 0;
};

// device.host_overhead_seconds: {"<part>": {"forward": s, "backward": s}, ...}; absent = none.
struct HostOverhead {
  PassSeconds llama_block;   // RMSNorm, RoPE, grouped-query attention, SwiGLU (Llama style)
  PassSeconds gpt2_block;    // LayerNorm, fused QKV, GELU, dropout (GPT-2 style)
  PassSeconds moe_layer;     // an MoE block with its router, dispatch and 2 experts, less those experts
  PassSeconds moe_expert;    // each further routed expert on the rank
  PassSeconds lora_adapter;  // each adapted linear
  bool measured = false;
};

HostOverhead parse_host_overhead(const nlohmann::json& device, const JsonContext& ctx);
nlohmann::json to_json(const HostOverhead& h);  // null when not measured

}  // namespace shardplan::simulator
