// ZeroEngine's optimizer half: gradient reduction across the replica/tp groups, global norm
// and clipping, AdamW on the owned elements, re-assembly of the parameters, and the state
// this rank checkpoints.
#include <cmath>

#include "adamw_kernel.hpp"
#include "executor/errors.hpp"
#include "flat_group.hpp"
#include "zero_engine.hpp"

namespace shardplan::executor {

void ZeroEngine::sum_tp_partial_grads() {
  if (groups_.tp().size() == 1) return;
  // Replicated parameters whose gradient is partial per tp rank (sequence parallelism): sum
  // them over tp in one message. The flat layout is identical on every rank of a tp group.
  std::vector<torch::Tensor> parts;
  auto& params = model_.parameters();
  for (auto& u : units_) {
    const FlatGroup& g = u->train;
    if (g.slots.empty()) continue;
    const torch::Tensor grads = g.owned_grads();
    g.for_each_owned([&](const ParamSlot& s, int64_t b, int64_t n) {
      if (params[static_cast<size_t>(s.index)].tp_partial_grad) parts.push_back(grads.narrow(0, b, n));
    });
  }
  if (parts.empty()) return;
  torch::Tensor flat = torch::cat(parts);
  groups_.tp().all_reduce(flat, ReduceOp::sum);
  int64_t at = 0;
  for (auto& p : parts) {
    p.copy_(flat.narrow(0, at, p.numel()));
    at += p.numel();
  }
}

void ZeroEngine::sum_tied_embedding_grads() {
  // Megatron's embedding group: the first stage's word embedding and the last stage's copy of it
  // get the sum of both gradients, so their identical updates keep them equal. Both units hold
  // just that tensor, so their flat (and sharded) layouts match element for element.
  const int u = model_.tied_embedding_unit();
  Communicator* group = groups_.embedding();
  if (u < 0 || group == nullptr || group->size() < 2) return;
  FlatGroup& g = units_[static_cast<size_t>(u)]->train;
  if (g.slots.empty()) return;  // frozen (LoRA): nothing to keep in sync
  torch::Tensor grads = stage_ < 2 ? g.grad_full : g.grad_shard;
  group->all_reduce(grads, ReduceOp::sum);
}

torch::Tensor ZeroEngine::owned_sq_norm(const FlatGroup& g, bool differ_over_tp) const {
  const auto& params = model_.parameters();
  const bool tp_lead = groups_.coords().tp == 0 || differ_over_tp;
  const torch::Tensor grads = g.owned_grads();
  // Summed in double on the device (adamw_kernel.hpp): one sync per step, in step().
  torch::Tensor sq = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(g.device));
  g.for_each_owned([&](const ParamSlot& s, int64_t b, int64_t n) {
    // Parameters replicated over tp have identical gradients on every tp rank: count once.
    const Parameter& p = params[static_cast<size_t>(s.index)];
    if ((p.shard.replicated() && !tp_lead) || p.tied_copy) return;  // the tied copy: counted on the first stage
    sq += squared_sum(grads.narrow(0, b, n));
  });
  return sq;
}

void ZeroEngine::adamw(FlatGroup& g, double lr, double clip_coef) {
  // AdamW (Loshchilov & Hutter 2019, Algorithm 2), decoupled weight decay, as torch.optim.AdamW;
  // one fused pass on the CPU (adamw_kernel.hpp).
  const auto& params = model_.parameters();
  torch::Tensor p = g.optimizer_params();  // fp32: the master with 16-bit weights
  std::vector<DecaySpan> spans;
  g.for_each_owned([&](const ParamSlot& s, int64_t b, int64_t n) {
    spans.push_back({b, n, !params[static_cast<size_t>(s.index)].no_decay});
  });
  const AdamWScalars scalars{lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay, adam_step_, clip_coef};
  adamw_update(p, g.owned_grads(), g.exp_avg, g.exp_avg_sq, scalars, spans);
  g.copy_master_to_params();
}

Communicator& ZeroEngine::reduce_group(size_t u) const { return expert_[u] ? groups_.expert_data() : groups_.dp(); }

Communicator& ZeroEngine::shard_group(size_t u) const { return expert_[u] ? groups_.expert_data() : groups_.shard(); }

void ZeroEngine::reassemble(size_t u) {
  // Stages 1 and 2: every rank updated its shard; all-gather the shards into the parameters.
  FlatGroup& g = units_[u]->train;
  Communicator& group = shard_group(u);
  if (g.slots.empty() || stage_ == 0 || stage_ == 3 || group.size() == 1) return;
  torch::Tensor mine = g.owned_params().clone();
  group.all_gather(g.full, mine);
}

torch::Tensor ZeroEngine::expert_sq_norm(double inv_scale) {
  // Expert shards: summed over the expert-data group (ZeRO 1-3), then over the expert group,
  // whose ranks hold different experts. Every rank of both groups has the same units. With
  // whole experts (etp = 1) the expert group spans tp ranks, whose experts differ: every rank
  // counts its own, and the sum is kept on tp rank 0 only (the caller sums over tp).
  const bool whole = groups_.expert_tp() == 1 && groups_.tp().size() > 1;
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(model_.options().device);
  torch::Tensor sq = torch::zeros({1}, f64);
  bool any = false;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!expert_[u]) continue;
    any = true;
    FlatGroup& g = units_[u]->train;
    if (g.slots.empty()) continue;
    if (inv_scale != 1.0) g.owned_grads().mul_(inv_scale);
    sq += owned_sq_norm(g, whole);
  }
  if (!any) return sq;
  if (stage_ > 0 && groups_.expert_data().size() > 1) groups_.expert_data().all_reduce(sq, ReduceOp::sum);
  if (groups_.expert().size() > 1) groups_.expert().all_reduce(sq, ReduceOp::sum);
  if (whole && groups_.coords().tp != 0) sq.zero_();
  return sq;
}

StepOutcome ZeroEngine::step(double lr, double inv_scale) {
  wait_pending(0);
  torch::NoGradGuard no_grad;
  if (stage_ >= 2 && groups_.replica().size() > 1)  // MiCS: sum the shards across replicas (experts: none)
    for (size_t u = 0; u < units_.size(); ++u)
      if (!units_[u]->train.slots.empty() && !expert_[u])
        groups_.replica().all_reduce(units_[u]->train.grad_shard, ReduceOp::sum);
  sum_tp_partial_grads();
  sum_tied_embedding_grads();
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble).device(model_.options().device);
  torch::Tensor total = torch::zeros({1}, f64);
  for (auto& u : units_) {
    if (u->train.slots.empty() || expert_[static_cast<size_t>(&u - units_.data())]) continue;
    if (inv_scale != 1.0) u->train.owned_grads().mul_(inv_scale);
    total += owned_sq_norm(u->train);
  }
  if (stage_ > 0) groups_.shard().all_reduce(total, ReduceOp::sum);
  total += expert_sq_norm(inv_scale);
  groups_.tp().all_reduce(total, ReduceOp::sum);
  groups_.pp().all_reduce(total, ReduceOp::sum);
  StepOutcome out;
  out.grad_norm = std::sqrt(total.item<double>());
  out.finite = std::isfinite(out.grad_norm);
  if (!out.finite) return out;  // skip the update (fp16 overflow); gradients are zeroed next step
  const double clip =
      opt_.clip_norm > 0 && out.grad_norm > opt_.clip_norm ? opt_.clip_norm / (out.grad_norm + 1e-6) : 1.0;
  ++adam_step_;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u]->train.slots.empty()) continue;
    adamw(units_[u]->train, lr, clip);
    reassemble(u);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> ZeroEngine::owned_state() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    FlatGroup& g = units_[u]->train;
    if (g.slots.empty()) continue;
    const std::string prefix = "unit" + std::to_string(u) + ".";
    out.emplace_back(prefix + "param", g.optimizer_params());
    out.emplace_back(prefix + "exp_avg", g.exp_avg);
    out.emplace_back(prefix + "exp_avg_sq", g.exp_avg_sq);
  }
  return out;
}

void ZeroEngine::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, int64_t adam_step) {
  torch::NoGradGuard no_grad;
  auto mine = owned_state();
  EXECUTOR_CHECK(mine.size() == tensors.size(), "checkpoint state does not match the engine's tensors");
  for (size_t i = 0; i < mine.size(); ++i) {
    EXECUTOR_CHECK(mine[i].first == tensors[i].first && mine[i].second.numel() == tensors[i].second.numel(),
                   "checkpoint tensor " + tensors[i].first + " does not match " + mine[i].first);
    mine[i].second.copy_(tensors[i].second.reshape(mine[i].second.sizes()));
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u]->train.copy_master_to_params();
    reassemble(u);
  }
  adam_step_ = adam_step;
}

}  // namespace shardplan::executor
