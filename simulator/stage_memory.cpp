// Per-device memory of one pipeline stage (stage_memory, step_model.hpp): model states by ZeRO
// stage, activations in flight, the ZeRO engine's gradient-phase buffers, FP8 weight copies and
// the experts' states. Legend and sources: step_model.cpp.
#include <algorithm>
#include <cmath>

#include "errors.hpp"
#include "flat_grad_fusion.hpp"
#include "step_model.hpp"
#include "zero3_fetch.hpp"

namespace shardplan::simulator {

namespace {

// Gradient-phase buffers of shardrun's ZeRO engine (executor/engine/zero_engine.hpp), which keeps
// one flat buffer per unit (the embedding, each block, the head), as FSDP does:
//   stage 0/1  gradients accumulate in place in the flat buffer and are all-reduced in place;
//              autograd's fresh gradient of the largest parameter exists before it is added in,
//              except where shardrun adds it in directly: fp32 linears inside the weight-gradient
//              GEMM (executor/parallel/zero_linear.hpp; not the column linears under sequence
//              parallelism, LoRA adapters, experts or a tied head) and an untied embedding's rows
//              (parallel/layers.hpp);
//   stage 2    a unit's gradients as autograd made them + their flat copy + the reduced shard,
//              with the previous unit's flat copy and shard possibly still in flight;
//   stage 3    the same, plus the unit's gathered parameters (one unit resident at a time).
struct UnitBuffers {
  double gathered = 0;  // forward: the largest gathered unit (stage 3)
  double first = 0;     // backward of the stage's first unit (head or last block)
  double next = 0;      // backward of the unit after it, with the first one's buckets in flight
  double last = 0;      // end of the backward (the embedding's), once every stored activation is freed
};

UnitBuffers unit_buffers(const ConfigContext& c, const StageShape& s) {
  const auto& cfg = *c.cfg;
  const auto& mc = *c.mc;
  const bool lora = mc.lora.enabled();
  const double w = c.param_bytes, N = c.shard, t = cfg.tp;
  // Fresh gradients shardrun adds into the flat buffer directly (ZeRO 0/1, see above).
  const FlatGradFusion into = flat_grad_fusion(mc.model, cfg, lora);
  const double vocab_param = static_cast<double>(mc.model.vocab_size * mc.model.hidden) / t;
  const double head_fresh = into.head ? 0.0 : vocab_param;
  const double embedding_fresh = into.embedding ? 0.0 : vocab_param;
  double block_largest = 0;  // largest trainable parameter of a block with a fresh gradient
  for (std::size_t i = 0; i < mc.linears.size(); ++i) {
    const auto& lin = mc.linears[i];
    const double full = linear_into_flat(lin, cfg, into) ? 0.0 : lin.weight_local(t);
    const double lr = lora && mc.lora_mask[i] ? static_cast<double>(std::max(lin.d_in, lin.d_out)) * mc.lora.rank : 0.0;
    block_largest = std::max(block_largest, lora ? lr : full);
  }
  // The stage's units in backward order: head first, then blocks.
  struct Unit {
    double params, trainable, largest;
    double held;  // gathered parameters resident during its backward (stage 3)
  };
  const bool tied_here = mc.model.tied_embeddings && s.embedding && s.head;
  const bool per_tensor = cfg.zero3_fetch == Zero3Fetch::per_tensor_sync;  // one module at a time
  const double block_held = per_tensor ? largest_fetched_module(mc, cfg.tp) : c.block_params + c.block_lora;
  const Unit block{c.block_params + c.block_lora, c.block_trainable, block_largest, block_held};
  const Unit embedding{c.embedding_params, lora ? 0.0 : c.embedding_params, lora ? 0.0 : embedding_fresh,
                       c.embedding_params};
  // A stage without blocks (an embedding-only first or head-only last chunk) has no unit after
  // its head, or none after its embedding.
  const Unit none{0, 0, 0, 0};
  Unit first = block, next = s.layers > 0 ? block : none;
  if (s.head) {
    double params = c.head_params + (tied_here ? c.embedding_params : 0.0);
    first = {params, lora ? 0.0 : params, lora ? 0.0 : head_fresh, params};
    if (s.layers == 0 && s.embedding && !tied_here) next = embedding;
  } else if (s.layers == 0 && s.embedding) {
    first = embedding;
  }
  // The activations the first unit's backward frees.
  const double first_freed = s.head         ? c.head.stored_activation_bytes
                             : s.layers > 0 ? c.block_kept.stored_activation_bytes
                                            : c.embedding.stored_activation_bytes;
  // While this unit's gradients are handled. `freed`: its saved activations, released once its
  // backward has produced the gradients.
  auto grads = [&](const Unit& u, double freed) {
    // Mixed precision: the weight's cast, its gradient in the compute dtype and in fp32.
    if (cfg.zero_stage < 2) return (w < 4 ? 2 * w + 4 : w) * u.largest;
    // Tensor by tensor (per_tensor_sync): a gradient is reduce-scattered as it appears; at most
    // the largest one and its flattened copy exist, beside the module's gathered weights.
    if (per_tensor) return 2 * w * u.largest + w * u.held;
    // ZeRO-2/3 (shardrun's ZeroEngine::launch_grad_sync): the gradients appear while the saved
    // activations live, then are copied into a flat bucket (both alive, the activations freed)
    // and freed before the 1/N reduce-scatter output is allocated. ZeRO-3 holds the gathered
    // weights throughout.
    const double G = w * u.trainable;
    return std::max(G, 2 * G - freed) + (cfg.zero_stage == 3 ? w * u.held : 0.0);
  };
  auto in_flight = [&](const Unit& u) {
    return cfg.zero_stage < 2 ? 0.0 : w * (per_tensor ? u.largest : u.trainable) * (1 + 1 / N);
  };
  UnitBuffers out;
  if (cfg.zero_stage == 3) {
    double largest = s.layers > 0 ? block.held : 0.0;
    if (s.embedding) largest = std::max(largest, c.embedding_params);
    if (s.head) largest = std::max(largest, first.params);
    out.gathered = w * largest;
  }
  if (tied_here && cfg.zero_stage >= 2) {
    // The tied weight's gradient (head + embedding) is bucketed only at the very end of backward,
    // next to the embedding's own dense gradient: measured on GPT-2 ZeRO-3 at about
    // (2 + 1/N) gradients of the unit besides its gathered weights.
    out.first = w * first.trainable * (2 + 1 / N) + (cfg.zero_stage == 3 ? w * first.params : 0.0);
  } else {
    out.first = grads(first, first_freed);
  }
  out.next = grads(next, c.block_kept.stored_activation_bytes) + in_flight(first);
  if (tied_here && cfg.zero_stage < 2 && !lora) {
    // A tied weight's two gradients meet in autograd's input buffer of its AccumulateGrad node,
    // which runs once both have arrived (torch/csrc/autograd/input_buffer.cpp): the head's is
    // held from the head's backward to the embedding's, then summed out of place with the
    // embedding's dense one. Measured on GPT-2 (fp32, ZeRO 0 and 1, one and two ranks): the peak
    // is at the end of the backward, three vocab x hidden gradients beside the model states.
    out.next += w * vocab_param;
    out.last = grads(first, 0.0) + 2 * w * vocab_param;
  }
  return out;
}

// FP8 copies of the block linears' weights (NVIDIA Transformer Engine): with ZeRO < 3 each
// linear caches its FP8 weight and FP8 transpose across a step's micro-batches (+2 bytes per
// weight beside the 16-bit one); with fp8_param_gather the weight itself is FP8 (1 byte instead of
// w) and only the transpose is added. ZeRO-3 quantises each gathered unit as it runs (transient,
// in the unit's workspace); with fp8_param_gather its shards are FP8.
void fp8_weight_memory(const ConfigContext& c, const StageShape& s, StageMemory& out) {
  const auto& cfg = *c.cfg;
  const double W = s.layers * c.block_linear_weights, w = c.param_bytes;
  if (cfg.fp8_param_gather) out.fp8_weights_per_device = W;
  if (cfg.zero_stage >= 3) {
    if (cfg.fp8_param_gather) out.device.parameters -= (w - 1.0) * W / c.shard;
    return;
  }
  out.device.parameters += cfg.fp8_param_gather ? (1.0 - w) * W + W : 2.0 * W;
}

// Gradient bytes held per trainable parameter at ZeRO 0/1: the 16-bit .grad, plus the fp32
// accumulation buffer (DeepSpeed BF16_Optimizer keeps both); Megatron's main_grad replaces .grad
// (the weight-gradient GEMM writes into it).
double grad_buffer_bytes(const ParallelConfig& cfg, double w) {
  if (!cfg.fp32_grad_accum()) return w;
  return cfg.bf16_optimizer_reduce() ? w + 4.0 : 4.0;
}

// The routed experts' model states on one device (`X` expert parameters of the stage's MoE
// blocks): the same ZeRO stages, sharded over the expert data-parallel group; frozen under LoRA;
// NF4 under QLoRA; FP8 copies as the dense linears have them (fp8_weight_memory).
// X: the stage's expert weights on this rank; XL: their LoRA adapters (0 without expert targets).
void expert_memory(const ConfigContext& c, double X, double XL, StageMemory& out) {
  const auto& cfg = *c.cfg;
  const bool lora = c.mc->lora.enabled();
  const double w = c.param_bytes, Ne = c.expert_shard, opt = cfg.fp32_weights() ? 8.0 : 12.0;
  MemoryBreakdown& m = out.device;
  double held = cfg.lora.quantized_base() ? kNf4BytesPerWeight : cfg.fp8_param_gather ? 1.0 : w;
  if (cfg.uses_fp8() && cfg.zero_stage < 3) held += cfg.fp8_param_gather ? 1.0 : 2.0;  // FP8 copy (+ transpose)
  m.parameters += cfg.zero_stage >= 3 ? held * X / Ne : held * X;
  if (!lora) {
    m.gradients += cfg.zero_stage >= 2 ? w * X / Ne : grad_buffer_bytes(cfg, w) * X;
    m.optimizer_states += cfg.zero_stage >= 1 ? opt * X / Ne : opt * X;
  } else if (XL > 0) {  // the experts' adapters: weights, gradients, states, sharded like the experts'
    m.lora += cfg.zero_stage >= 3 ? w * XL / Ne : w * XL;
    m.lora += cfg.zero_stage >= 2 ? w * XL / Ne : w * XL;
    const double adapter_opt = cfg.zero_stage >= 1 ? opt * XL / Ne : opt * XL;
    if (cfg.offload_optimizer) out.host_bytes += adapter_opt;
    else m.lora += adapter_opt;
  }
  out.params_per_device += X + XL;
  out.expert_params_per_device = X;
  out.expert_trainable_per_device = lora ? XL : X;
}

}  // namespace

StageMemory stage_memory(const ConfigContext& c, const StageShape& s) {
  const auto& cfg = *c.cfg;
  const auto& dev = c.mc->cluster.hardware.device;
  const bool lora = c.mc->lora.enabled();
  const double w = c.param_bytes, N = c.shard;
  StageMemory out;
  const double moe_layers = s.layers - s.dense_layers;  // the repeated block's count
  double params = moe_layers * c.block_params + s.dense_layers * c.dense_block_params;
  if (s.embedding) params += c.embedding_params;
  if (s.head) params += c.head_params;
  const double adapters = moe_layers * c.block_lora + s.dense_layers * c.dense_block_lora;
  const double trainable = lora ? adapters : params;
  out.params_per_device = params + adapters;
  out.trainable_per_device = trainable;
  // Tied across ranks: a rank holding both ends (a V's or DualPipe's rank 0) sums them locally.
  if (c.mc->model.tied_embeddings && cfg.pp > 1 && s.embedding != s.head && !lora)
    out.tied_sync_elements = static_cast<double>(c.mc->model.vocab_size * c.mc->model.hidden) / cfg.tp;

  // Base model states; under LoRA the base is frozen: weights only (ZeRO-3 still shards them).
  const double opt_bytes_per_param = cfg.fp32_weights() ? 8.0 : 12.0;  // (fp32 master +) m + v
  MemoryBreakdown& m = out.device;
  m.parameters = cfg.zero_stage >= 3 ? w * params / N : w * params;
  if (cfg.uses_fp8()) fp8_weight_memory(c, s, out);
  if (cfg.lora.quantized_base()) {  // QLoRA: the base linears' weights in NF4 (norms, embeddings, head stay 16-bit)
    const double saved = (w - kNf4BytesPerWeight) * s.layers * c.block_linear_weights;
    m.parameters -= cfg.zero_stage >= 3 ? saved / N : saved;
  }
  double base_grads = lora ? 0.0 : params, base_opt = lora ? 0.0 : params;
  m.gradients = cfg.zero_stage >= 2 ? w * base_grads / N : grad_buffer_bytes(cfg, w) * base_grads;
  m.optimizer_states = cfg.zero_stage >= 1 ? opt_bytes_per_param * base_opt / N : opt_bytes_per_param * base_opt;
  // Adapters: full mixed-precision states, sharded by the same ZeRO stage.
  if (lora) {
    m.lora += cfg.zero_stage >= 3 ? w * adapters / N : w * adapters;
    m.lora += cfg.zero_stage >= 2 ? w * adapters / N : w * adapters;
    const double adapter_opt =
        cfg.zero_stage >= 1 ? opt_bytes_per_param * adapters / N : opt_bytes_per_param * adapters;
    if (cfg.offload_optimizer) out.host_bytes += adapter_opt;
    else m.lora += adapter_opt;
  }
  const double experts = moe_layers * c.expert_params;
  if (experts > 0) expert_memory(c, experts, moe_layers * c.expert_lora, out);
  if (cfg.offload_optimizer) {
    // ZeRO-Offload (Ren et al. 2021, §4): fp32 master weights, Adam moments and the fp32
    // gradient partition the CPU optimizer reads all live in host memory.
    const double grad_partition =
        (lora ? adapters : params) / N + (lora ? moe_layers * c.expert_lora : experts) / c.expert_shard;
    out.host_bytes += m.optimizer_states + 4.0 * grad_partition;
    m.optimizer_states = 0;
  }

  // Activations: the in-flight micro-batches' stored tensors (offloaded ones live on host).
  m.activations = s.peak_stored_bytes;
  if (cfg.offload_activations) {
    const double kept = std::min(s.peak_stored_bytes, 2 * s.max_chunk_stored);  // current + prefetched
    out.host_bytes += s.peak_stored_bytes - kept;
    m.activations = kept;
  }

  // Communication buffers that live across the step: p2p activations and TP gather buffers.
  const double e = c.env.act_bytes, M = c.env.s * c.env.b, h = c.mc->model.hidden;
  if (cfg.pp > 1) m.comm_buffers += 2 * e * M * h / cfg.tp;  // received activations + gradients
  if (cfg.tp > 1) m.comm_buffers += e * M * h;               // all-gathered / reduced (s, b, h)

  // Workspace: the largest transient, in forward or in backward; then the runtime's rows.
  const UnitBuffers u = unit_buffers(c, s);
  double fwd = 2 * e * M * h;  // activation gradients / outputs in flight
  if (s.head) fwd = std::max(fwd, c.head.transient_bytes);
  fwd += u.gathered;
  // Backward of the first unit (the head's gradients arrive while every activation is stored),
  // then of the next one (the head's saved tensors are freed, its buckets may be in flight).
  const double bwd_first = 2 * e * M * h + u.first;
  // A recomputed block rebuilds its full activations during its own backward only, when the
  // head's transients are gone (shardrun's checkpoint function, executor/model/recompute.hpp).
  const double recomputed = cfg.recompute != Recompute::none && s.layers > 0
                                ? c.block.full_activation_bytes - c.block.stored_activation_bytes
                                : 0.0;
  const double bwd_next = 2 * e * M * h + u.next - (s.head ? c.head.stored_activation_bytes : 0.0) + recomputed;
  const double bwd_last = u.last - m.activations;  // the stored activations are gone by then
  const double transient = std::max({fwd, bwd_first, bwd_next, bwd_last});
  m.workspace = transient;
  m.runtime_context = dev.runtime_memory.context_bytes;
  m.communicators = communicators_used(cfg) * dev.runtime_memory.communicator_bytes;
  m.library_workspace = dev.runtime_memory.library_workspace_bytes;
  m.allocator_slack = cfg.framework.allocator_slack_fraction * m.allocated();
  return out;
}

}  // namespace shardplan::simulator
