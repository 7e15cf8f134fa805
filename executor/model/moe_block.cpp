// The MoE MLP: routing (dropless or capped by capacity), grouped experts with optional LoRA, combine
// (moe_block.hpp), and the Transformer's MoE members (building an MoE block's parameters, its forward).
#include "moe_block.hpp"

#include <algorithm>
#include <cmath>

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

// x: (n, in) -> (n, out): x W^T + (alpha/r) B(A x), all local (down: a partial sum over tp).
torch::Tensor expert_linear(const torch::Tensor& x, const torch::Tensor& w, const std::optional<LoraAdapter>& lora) {
  const torch::Tensor y = zero_linear(x, w);
  if (!lora) return y;
  return y + lora->scale * zero_linear(zero_linear(x, lora->A), lora->B);  // (n, r) -> (n, out)
}

}  // namespace

int64_t expert_capacity(int64_t tokens, int64_t top_k, int64_t num_experts, double factor) {
  // get_capacity(num_tokens = N*k, E, factor) = math.ceil((num_tokens / E) * factor)
  const double per_expert = static_cast<double>(tokens * top_k) / static_cast<double>(num_experts);
  return static_cast<int64_t>(std::ceil(per_expert * factor));
}

torch::Tensor capacity_keep_mask(const torch::Tensor& top_p, const torch::Tensor& top_e, int64_t num_experts,
                                 int64_t capacity) {
  torch::NoGradGuard no_grad;
  const int64_t N = top_p.size(0);
  const auto opt = top_p.options().dtype(torch::kFloat);
  if (capacity >= N) return torch::ones(top_e.sizes(), opt.dtype(torch::kBool));  // no expert can overflow
  // apply_router_token_dropping, drop_policy "probs": the (N, E) routing probabilities (0 where
  // not picked), the `capacity` largest of each expert's column kept.
  const torch::Tensor probs = torch::zeros({N, num_experts}, opt).scatter(1, top_e, top_p.to(torch::kFloat));
  const torch::Tensor best = std::get<1>(probs.topk(capacity, 0, /*largest=*/true, /*sorted=*/false));  // (C, E)
  const torch::Tensor kept = torch::zeros({N, num_experts}, opt).scatter(0, best, 1.0);                 // (N, E)
  return kept.gather(1, top_e).gt(0.5);                                                                 // (N, k)
}

torch::Tensor moe_routed_experts(const MoeMlp& m, const torch::Tensor& x, Communicator* ep, MoeRoutingStats* stats,
                                 const MoeAuxLoss* aux) {
  const int64_t N = x.size(0), H = x.size(1), E = m.num_experts, k = m.top_k;
  // Router: softmax in fp32, top-k, optional renormalisation (Qwen2MoeSparseMoeBlock.forward).
  const torch::Tensor probs = zero_linear(x, m.router).to(torch::kFloat).softmax(-1);  // (N, E)
  auto [top_p, top_e] = probs.topk(k, -1);                                             // (N, k)
  if (m.renormalize) top_p = top_p / top_p.sum(-1, /*keepdim=*/true);
  // The routed copies (token n's j-th pick is copy n*k + j): all of them (dropless), or those
  // within the experts' capacity (R of them, in copy order).
  torch::Tensor flat_e = top_e.reshape({-1});  // (N k)
  torch::Tensor flat_p = top_p.reshape({-1});  // (N k)
  torch::Tensor copies;                        // (R) or undefined: all
  if (m.capacity_factor > 0) {
    const int64_t capacity = expert_capacity(N, k, E, m.capacity_factor);
    copies = capacity_keep_mask(top_p, top_e, E, capacity).reshape({-1}).nonzero().squeeze(1);
    flat_e = flat_e.index_select(0, copies);  // (R)
    flat_p = flat_p.index_select(0, copies);  // (R)
  }
  // Dispatch: the copies sorted by expert; a stable sort keeps token order inside an expert, so
  // the combine adds a token's picks in the same order whatever the layout.
  const torch::Tensor order = std::get<1>(flat_e.sort(/*stable=*/true, 0, /*descending=*/false));
  const torch::Tensor token = (copies.defined() ? copies.index_select(0, order) : order).div(k, "floor");  // (R)
  const torch::Tensor weight = flat_p.index_select(0, order);                                              // (R)
  const ExpertDispatch plan(torch::bincount(flat_e, {}, E), E, ep);
  if (stats != nullptr) {
    record_imbalance(plan.counts(), *stats);
    stats->routed += N * k;
    stats->dropped += N * k - flat_e.numel();
  }
  // Grouped experts: each local expert's SwiGLU MLP on its contiguous rows (Shazeer 2020, §2).
  const torch::Tensor rows = plan.dispatch(x.index_select(0, token));  // (Rl, H)
  std::vector<torch::Tensor> outs;
  outs.reserve(m.experts.size());
  for (int64_t le = 0; le < static_cast<int64_t>(m.experts.size()); ++le) {
    const ExpertWeights& w = m.experts[static_cast<size_t>(le)];
    const torch::Tensor xe = rows.narrow(0, plan.rows_before(le), plan.rows_of(le));  // (n_e, H)
    const torch::Tensor h = swiglu(expert_linear(xe, w.gate, w.gate_lora), expert_linear(xe, w.up, w.up_lora));
    outs.push_back(expert_linear(h, w.down, w.down_lora));  // (n_e, H) partial
  }
  const torch::Tensor y = plan.combine(torch::cat(outs));  // (R, H) partial over tp
  // Weighted combine, cast to the activations' dtype first as Hugging Face does.
  const torch::Tensor weighted = y * weight.to(y.scalar_type()).unsqueeze(1);
  const torch::Tensor out = torch::zeros({N, H}, y.options()).index_add(0, token, weighted);  // (N, H)
  if (aux == nullptr || !aux->enabled()) return out;
  return attach_aux_loss(out, probs, top_e, *aux, stats != nullptr ? &stats->aux_sum : nullptr);
}

void Transformer::check_moe_options(const simulator::ModelSpec& m, const ModelOptions& opt) {
  const std::string src = "model '" + m.name + "'";
  if (m.moe.router_bias)
    throw InputError(src + ": field 'moe.router_bias': DeepSeek-V3's score-correction routing is not run by shardrun");
  if ((!opt.whole_experts && m.moe.expert_ffn_hidden % opt.tp != 0) || m.moe.shared_ffn_hidden % opt.tp != 0)
    throw InputError(src + ": tensor_parallel " + std::to_string(opt.tp) +
                     " must divide the shared-expert FFN width, and the experts' unless expert_tensor_parallel is 1");
  if (opt.ep < 1 || m.moe.num_experts % opt.ep != 0)
    throw InputError(src + ": expert_parallel " + std::to_string(opt.ep) + " must divide the " +
                     std::to_string(m.moe.num_experts) + " experts");
  EXECUTOR_CHECK(opt.ep == 1 || (opt.ep_group != nullptr && opt.ep_group->size() == opt.ep),
                 "expert parallelism needs the expert group");
  if (opt.lora.enabled() && opt.lora.dropout > 0)
    for (const simulator::LinearDesc& d : m.expert_linears())
      for (const std::string& t : opt.lora.targets)
        if (simulator::lora_target_matches(d.module, t))
          throw InputError(src + ": field 'config.lora.dropout': '" + t + "' selects the routed experts (" + d.module +
                           "), whose adapters shardrun runs without LoRA dropout: plan with dropout 0");
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
  moe->capacity_factor = opt_.moe_capacity_factor;
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
      const ShardSpec shard =
          opt_.whole_experts ? ShardSpec{} : ShardSpec{d.split == simulator::TpSplit::column ? 0 : 1, {}, 0};
      add_param(prefix + name + ".weight", slot, {d.d_out, d.d_in}, shard, b.expert_unit, false);
      params_.back().tp_partial_grad = false;  // whole experts differ over tp; split ones are shards
      auto& lora = slot == &w.gate ? w.gate_lora : slot == &w.up ? w.up_lora : w.down_lora;
      if (opt_.lora.enabled() && std::any_of(opt_.lora.targets.begin(), opt_.lora.targets.end(), [&](const auto& t) {
            return simulator::lora_target_matches(d.module, t);
          }))
        build_expert_lora(lora, d, prefix + name, b.expert_unit);
    }
  }
  b.moe = std::move(moe);
}

// PEFT adapters on expert linear `name` (block prefix included), in the experts' unit, laid out
// as ParallelLinear's; their tp-replicated halves (column A, row B) get partial gradients over tp
// (the experts' input and output stay unreduced inside moe_routed_experts).
void Transformer::build_expert_lora(std::optional<LoraAdapter>& lora, const simulator::LinearDesc& d,
                                    const std::string& name, int unit) {
  const auto& cfg = opt_.lora;
  const bool column = d.split == simulator::TpSplit::column;
  lora.emplace();
  if (opt_.whole_experts) {  // etp = 1: the adapters whole, like their expert
    lora->scale = cfg.alpha / cfg.rank;
    const std::string whole = "base_model.model." + name;
    add_param(whole + ".lora_A.weight", &lora->A, {cfg.rank, d.d_in}, ShardSpec{}, unit, false);
    params_.back().tp_partial_grad = false;
    add_param(whole + ".lora_B.weight", &lora->B, {d.d_out, cfg.rank}, ShardSpec{}, unit, false);
    params_.back().tp_partial_grad = false;
    return;
  }
  lora->scale = cfg.alpha / cfg.rank;
  const std::string peft = "base_model.model." + name;
  add_param(peft + ".lora_A.weight", &lora->A, {cfg.rank, d.d_in}, column ? ShardSpec{} : ShardSpec{1, {}, 0}, unit,
            false);
  if (column) params_.back().tp_partial_grad = opt_.tp > 1;
  add_param(peft + ".lora_B.weight", &lora->B, {d.d_out, cfg.rank}, column ? ShardSpec{0, {}, 0} : ShardSpec{}, unit,
            false);
  if (!column) params_.back().tp_partial_grad = opt_.tp > 1;
}

torch::Tensor Transformer::moe_mlp(const Block& blk, const torch::Tensor& x, const TpContext& ctx) const {
  Communicator& tp = *ctx.tp;
  const bool sp = ctx.sequence_parallel && opt_.tp > 1;
  // Routing figures of training forwards, once each: a checkpointed block's first forward runs
  // without autograd (recompute.hpp), its recomputation with it.
  const bool record = ctx.training && torch::GradMode::is_enabled();
  MoeRoutingStats* stats = record ? &moe_stats_ : nullptr;
  // The ranks routing other parts of this micro-batch: cp, and tp when each routes its shard.
  const MoeAuxLoss aux{opt_.moe_aux_loss_coeff,
                       {opt_.cp.group, opt_.whole_experts ? ctx.tp : nullptr},
                       opt_.whole_experts ? 1.0 : static_cast<double>(opt_.tp)};
  torch::Tensor out;
  if (opt_.whole_experts) {
    // etp = 1: this tp rank's sequence shard through whole experts, complete (Megatron-Core's MoE
    // layer; the plan has SP whenever tp > 1 on an MoE card: simulator validation).
    EXECUTOR_CHECK(sp, "whole experts (etp 1) under tp > 1 need sequence parallelism");
    const int64_t B = x.size(0), S = x.size(1), H = x.size(2);
    out =
        moe_routed_experts(*blk.moe, x.reshape({B * S, H}), opt_.ep_group, stats, &aux).view({B, S, H});  // (B, S/t, H)
  } else {
    // x: (B, Sx, H) -> every token of the micro-batch on every tp rank: (B, S, H)
    const torch::Tensor xin = sp ? gather_from_seq(x, tp) : copy_to_tp(x, tp);
    const int64_t B = xin.size(0), S = xin.size(1), H = xin.size(2);
    const torch::Tensor routed = moe_routed_experts(*blk.moe, xin.reshape({B * S, H}), opt_.ep_group, stats, &aux)
                                     .view({B, S, H});                       // partial over tp
    out = sp ? reduce_scatter_seq(routed, tp) : reduce_from_tp(routed, tp);  // (B, Sx, H)
  }
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
