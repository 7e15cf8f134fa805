#include "moe_support.hpp"

#include "executor/errors.hpp"
#include "executor/model/moe_block.hpp"
#include "executor/parallel/expert_dispatch.hpp"
#include "trainer_state.hpp"

namespace shardplan::executor {

void check_moe_supported(const formats::Plan& plan, const std::string& src) {
  const auto& c = plan.config;
  const auto& m = plan.model;
  if (c.ep > 1 && !m.is_moe())
    throw InputError(src + ": field 'config.expert_parallel': ep " + std::to_string(c.ep) + " but model '" + m.name +
                     "' has no experts");
  if (!m.is_moe()) return;
  if (c.zero_stage > 0 && c.shard_group() != c.dp)
    throw InputError(src + ": field 'config.sharding_degree': MiCS sub-group sharding (" +
                     std::to_string(c.shard_group()) + " of dp " + std::to_string(c.dp) +
                     ") of a mixture-of-experts model is not run by this shardrun; plan with sharding_degree = dp");
}

double moe_a2a_seconds() { return expert_all_to_all_seconds(); }

void record_moe(const TrainerState& s, double a2a_before, StepRecord& r) {
  if (!s.plan.model.is_moe()) return;
  r.moe = true;
  r.a2a_s = expert_all_to_all_seconds() - a2a_before;
  const MoeRoutingStats& st = s.model->moe_stats();
  r.router_imbalance = st.samples > 0 ? st.imbalance_sum / static_cast<double>(st.samples) : 0.0;
  r.router_imbalance_max = st.imbalance_max;
  if (s.opt.moe_aux_loss_coeff > 0) {  // every rank's shares (moe_aux_loss.hpp), per micro-batch
    torch::Tensor aux = torch::tensor({st.aux_sum}, torch::kDouble).to(s.device);
    s.groups->world().all_reduce(aux, ReduceOp::sum);
    const auto& c = s.plan.config;
    r.moe_aux_loss = aux.item<double>() / static_cast<double>(c.global_batch_size / c.micro_batch_size);
  }
  if (s.plan.config.moe_capacity_factor <= 0) return;
  // Dropped copies of the global batch: every rank routes its own tokens, the tp ranks alike
  // (etp = tp) or each its own share (etp = 1).
  const auto& c = s.groups->coords();
  const bool counts = c.tp == 0 || s.model->options().whole_experts;
  torch::Tensor dropped = torch::tensor({counts ? st.dropped : int64_t{0}}, torch::kLong).to(s.device);
  s.groups->world().all_reduce(dropped, ReduceOp::sum);
  r.tokens_dropped = dropped.item<int64_t>();
}

}  // namespace shardplan::executor
