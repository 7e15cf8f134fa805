// The MoE MLP: routing, dropless grouped experts, combine (moe_block.hpp), and the Transformer's
// MoE members (building an MoE block's parameters, its forward). Legend as in moe_block.hpp.
#include "moe_block.hpp"

#include <algorithm>

#include "executor/errors.hpp"
#include "executor/parallel/expert_dispatch.hpp"
#include "executor/parallel/mappings.hpp"
#include "executor/parallel/zero_linear.hpp"
#include "ops.hpp"
#include "transformer.hpp"

namespace shardplan::executor {

namespace {

void record_imbalance(const std::vector<int64_t>& counts, MoeRoutingStats& s) {
  int64_t total = 0, most = 0;
  for (int64_t c : counts) {
    total += c;
    most = std::max(most, c);
  }
  if (total == 0) return;
  const double ratio = static_cast<double>(most) * static_cast<double>(counts.size()) / static_cast<double>(total);
  s.imbalance_sum += ratio;
  s.imbalance_max = std::max(s.imbalance_max, ratio);
  ++s.samples;
}

}  // namespace

torch::Tensor moe_routed_experts(const MoeMlp& m, const torch::Tensor& x, Communicator* ep, MoeRoutingStats* stats) {
  const int64_t N = x.size(0), H = x.size(1), E = m.num_experts, k = m.top_k;
  // Router: softmax in fp32, top-k, optional renormalisation (Qwen2MoeSparseMoeBlock.forward).
  const torch::Tensor probs = zero_linear(x, m.router).to(torch::kFloat).softmax(-1);  // (N, E)
  auto [top_p, top_e] = probs.topk(k, -1);                                             // (N, k)
  if (m.renormalize) top_p = top_p / top_p.sum(-1, /*keepdim=*/true);
  // Dropless dispatch: the N*k copies sorted by expert; a stable sort keeps token order inside
  // an expert, so the combine adds a token's picks in the same order whatever the layout.
  const torch::Tensor flat_e = top_e.reshape({-1});                                    // (N k)
  const torch::Tensor order = std::get<1>(flat_e.sort(/*stable=*/true, 0, /*descending=*/false));
  const torch::Tensor token = order.div(k, "floor");                                   // (N k)
  const torch::Tensor weight = top_p.reshape({-1}).index_select(0, order);             // (N k)
  const ExpertDispatch plan(torch::bincount(flat_e, {}, E), E, ep);
  if (stats != nullptr) record_imbalance(plan.counts(), *stats);
  // Grouped experts: each local expert's SwiGLU MLP on its contiguous rows (Shazeer 2020, §2).
  const torch::Tensor rows = plan.dispatch(x.index_select(0, token));                  // (Rl, H)
  std::vector<torch::Tensor> outs;
  outs.reserve(m.experts.size());
  for (int64_t le = 0; le < static_cast<int64_t>(m.experts.size()); ++le) {
    const ExpertWeights& w = m.experts[static_cast<size_t>(le)];
    const torch::Tensor xe = rows.narrow(0, plan.rows_before(le), plan.rows_of(le));  // (n_e, H)
    outs.push_back(zero_linear(swiglu(zero_linear(xe, w.gate), zero_linear(xe, w.up)), w.down));  // partial
  }
  const torch::Tensor y = plan.combine(torch::cat(outs));                               // (N k, H) partial over tp
  // Weighted combine, cast to the activations' dtype first as Hugging Face does.
  const torch::Tensor weighted = y * weight.to(y.scalar_type()).unsqueeze(1);
  return torch::zeros({N, H}, y.options()).index_add(0, token, weighted);              // (N, H)
}

void Transformer::check_moe_options(const simulator::ModelSpec& m, const ModelOptions& opt) {
  const std::string src = "model '" + m.name + "'";
  if (m.moe.router_bias)
    throw InputError(src + ": field 'moe.router_bias': DeepSeek-V3's score-correction routing is not run by shardrun");
  if (m.moe.expert_ffn_hidden % opt.tp != 0 || m.moe.shared_ffn_hidden % opt.tp != 0)
    throw InputError(src + ": tensor_parallel " + std::to_string(opt.tp) +
                     " must divide the expert and shared-expert FFN widths (expert tensor parallelism = tp)");
  if (opt.ep < 1 || m.moe.num_experts % opt.ep != 0)
    throw InputError(src + ": expert_parallel " + std::to_string(opt.ep) + " must divide the " +
                     std::to_string(m.moe.num_experts) + " experts");
  EXECUTOR_CHECK(opt.ep == 1 || (opt.ep_group != nullptr && opt.ep_group->size() == opt.ep),
                 "expert parallelism needs the expert group");
  if (opt.lora.enabled())
    for (const simulator::LinearDesc& d : m.expert_linears())
      for (const std::string& t : opt.lora.targets)
        if (simulator::lora_target_matches(d.module, t))
          throw InputError(src + ": field 'config.lora.targets': '" + t + "' selects the routed experts (" +
                           d.module + "); shardrun puts no LoRA adapters on routed experts yet: target the "
                           "attention or shared-expert linears by their full names (e.g. self_attn.q_proj, "
                           "mlp.shared_expert.gate_proj)");
}

// An MoE block's routed part: the router (replicated; its gradient is partial over tp, see the
// header), the shared expert's gate, and this ep rank's experts, in the block's expert unit.
void Transformer::build_moe(Block& b, const std::string& prefix) {
  const auto& m = spec_;
  const int64_t E = m.moe.num_experts, H = m.hidden;
  const bool mixtral = m.family == "mixtral";
  const std::string block = mixtral ? "block_sparse_moe." : "mlp.";
  auto moe = std::make_shared<MoeMlp>();
  moe->num_experts = E;
  moe->top_k = m.moe.top_k;
  // MixtralSparseMoeBlock always renormalises; Qwen2MoeConfig's norm_topk_prob defaults to False.
  moe->renormalize = mixtral;
  const int64_t local = E / opt_.ep;
  moe->first_expert = opt_.ep_rank * local;
  moe->experts.resize(static_cast<size_t>(local));
  b.expert_unit = num_units_++;
  add_param(prefix + block + "gate.weight", &moe->router, {E, H}, ShardSpec{}, b.unit, false);
  params_.back().tp_partial_grad = opt_.tp > 1;
  if (m.moe.shared_expert_gate)
    add_param(prefix + "mlp.shared_expert_gate.weight", &moe->shared_gate, {1, H}, ShardSpec{}, b.unit, false);
  for (int64_t le = 0; le < local; ++le) {
    ExpertWeights& w = moe->experts[static_cast<size_t>(le)];
    const std::string e = std::to_string(moe->first_expert + le);
    for (const simulator::LinearDesc& d : m.expert_linears()) {
      std::string name = d.module;
      name.replace(name.find('*'), 1, e);
      torch::Tensor* slot = name.ends_with("gate_proj") || name.ends_with(".w1") ? &w.gate
                            : name.ends_with("up_proj") || name.ends_with(".w3") ? &w.up
                                                                                 : &w.down;
      const ShardSpec shard{d.split == simulator::TpSplit::column ? 0 : 1, {}, 0};
      add_param(prefix + name + ".weight", slot, {d.d_out, d.d_in}, shard, b.expert_unit, false);
    }
  }
  b.moe = std::move(moe);
}

torch::Tensor Transformer::moe_mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel && opt_.tp > 1;
  // x: (B, Sx, H) -> every token of the micro-batch on every tp rank: (B, S, H)
  const torch::Tensor xin = sp ? gather_from_seq(x, tp) : copy_to_tp(x, tp);
  const int64_t B = xin.size(0), S = xin.size(1), H = xin.size(2);
  torch::Tensor routed = moe_routed_experts(*blk.moe, xin.reshape({B * S, H}), opt_.ep_group,
                                            ctx.training ? &moe_stats_ : nullptr)
                             .view({B, S, H});                                   // partial over tp
  torch::Tensor out = sp ? reduce_scatter_seq(routed, tp) : reduce_from_tp(routed, tp);  // (B, Sx, H)
  if (blk.gate.weight.defined()) {  // the shared expert (Qwen2MoeSparseMoeBlock.shared_expert)
    torch::Tensor shared = mlp(blk, x, ctx);
    if (blk.moe->shared_gate.defined()) shared = torch::sigmoid(zero_linear(x, blk.moe->shared_gate)) * shared;
    out = out + shared;
  }
  return out;
}

bool Transformer::is_expert_unit(int unit) const {
  return std::any_of(blocks_.begin(), blocks_.end(), [&](const Block& b) { return b.expert_unit == unit; });
}

}  // namespace shardplan::executor
