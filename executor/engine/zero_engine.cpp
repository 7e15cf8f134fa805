#include "zero_engine.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "executor/errors.hpp"
#include "executor/model/nf4_base.hpp"
#include "executor/parallel/nf4_linear.hpp"
#include "flat_group.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// AccumulateGrad post-hook: a parameter's gradient for this backward is complete.
class GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(ZeroEngine* engine, int unit) : engine_(engine), unit_(unit) {}
  variable_list operator()(const variable_list& outputs, const variable_list& /*inputs*/) override {
    engine_->on_grad_ready(unit_);
    return outputs;
  }

 private:
  ZeroEngine* engine_;
  int unit_;
};

// Identity in forward; in backward calls `OnBackward` of the engine for the unit first. Wraps a
// unit's output with materialize (gather the parameters before the unit's backward) and its
// input with on_input_grad (the unit's input gradient is done, so its weights are free).
template <void (ZeroEngine::*OnBackward)(int)>
struct BackwardHook : torch::autograd::Function<BackwardHook<OnBackward>> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, ZeroEngine* engine, int64_t unit) {
    ctx->saved_data["engine"] = reinterpret_cast<int64_t>(engine);
    ctx->saved_data["unit"] = unit;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto* engine = reinterpret_cast<ZeroEngine*>(ctx->saved_data["engine"].toInt());
    (engine->*OnBackward)(static_cast<int>(ctx->saved_data["unit"].toInt()));
    return {g[0], torch::Tensor(), torch::Tensor()};
  }
};
using GatherBeforeBackward = BackwardHook<&ZeroEngine::materialize>;
using SignalInputGrad = BackwardHook<&ZeroEngine::on_input_grad>;

}  // namespace

struct ZeroEngine::Pending {
  int unit = 0;
  std::unique_ptr<Work> work;
  torch::Tensor in, out;
  bool accumulate = false;  // add `out` into the unit's gradient shard once done
};

ZeroEngine::ZeroEngine(Transformer& model, const ProcessGroups& groups, int zero_stage, OptimizerOptions opt,
                       torch::ScalarType weight_dtype)
    : model_(model), groups_(groups), stage_(zero_stage), opt_(opt), weight_dtype_(weight_dtype) {
  EXECUTOR_CHECK(stage_ >= 0 && stage_ <= 3, "ZeRO stage must be 0..3");
  if (stage_ > 0) {
    shard_size_ = groups.shard().size();
    shard_rank_ = groups.shard().rank();
  }
  for (int u = 0; u < model.num_units(); ++u) expert_.push_back(model.is_expert_unit(u) ? 1 : 0);
  for (int u = 0; u < model.num_units(); ++u) setup_unit(u);
}

ZeroEngine::~ZeroEngine() = default;

void ZeroEngine::setup_unit(int u) {
  auto unit = std::make_unique<EngineUnit>();
  auto& params = model_.parameters();
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    Parameter& p = params[static_cast<size_t>(i)];
    if (p.unit != u) continue;
    FlatGroup& g = p.trainable ? unit->train : unit->frozen;
    g.slots.push_back({i, g.numel, p.tensor.numel(), p.tensor.sizes().vec()});
    g.numel += p.tensor.numel();
    if (p.trainable) {
      auto acc = torch::autograd::impl::grad_accumulator(p.tensor);
      acc->add_post_hook(std::make_unique<GradReadyHook>(this, u));
      accumulators_.push_back(std::move(acc));
      ++unit->expected;
    }
  }
  for (FlatGroup* g : {&unit->train, &unit->frozen}) {
    g->trainable = g == &unit->train;
    const bool sharded = stage_ > 0;
    g->init(params, sharded ? shard_group(static_cast<size_t>(u)).size() : 1,
            sharded ? shard_group(static_cast<size_t>(u)).rank() : 0, stage_, weight_dtype_);
  }
  if (stage_ == 3) {  // FSDP-QLoRA: the unit's NF4 bases sharded like its frozen weights
    std::vector<Nf4Tensor*> nf4;
    for (Block& b : model_.blocks())
      if (b.unit == u)
        for (ParallelLinear* l : block_linears(b))
          if (l->nf4)  // made mutable by quantize_base_nf4; the engine moves its storage, never its values
            nf4.push_back(&std::const_pointer_cast<Nf4Weight>(l->nf4)->q);
    Communicator& group = shard_group(static_cast<size_t>(u));
    unit->nf4.init(nf4, group.size(), group.rank());
  }
  unit->resident = stage_ < 3;  // stage 3: init() left only the shards
  units_.push_back(std::move(unit));
}

void ZeroEngine::begin_step() {
  for (auto& u : units_) u->train.zero_grad(model_.parameters(), stage_);
}

void ZeroEngine::begin_backward(int first_unit, int end_unit, bool last_micro_batch) {
  last_micro_batch_ = last_micro_batch;
  for (int u = first_unit; u < end_unit; ++u) {
    EngineUnit& unit = *units_[static_cast<size_t>(u)];
    unit.arrived = 0;
    unit.input_done = false;
    unit.ready = false;
  }
}

void ZeroEngine::end_backward(int first_unit, int end_unit) {
  for (int u = end_unit - 1; u >= first_unit; --u)
    if (!units_[static_cast<size_t>(u)]->ready) unit_ready(u);
  wait_pending(0);
}

void ZeroEngine::on_grad_ready(int u) {
  EngineUnit& unit = *units_[static_cast<size_t>(u)];
  ++unit.arrived;
  if (!unit.ready && unit.arrived >= unit.expected && (!unit.has_input || unit.input_done)) unit_ready(u);
}

void ZeroEngine::on_input_grad(int u) {
  EngineUnit& unit = *units_[static_cast<size_t>(u)];
  unit.input_done = true;
  if (!unit.ready && unit.arrived >= unit.expected) unit_ready(u);
}

void ZeroEngine::unit_ready(int u) {
  EngineUnit& unit = *units_[static_cast<size_t>(u)];
  unit.ready = true;
  if (!unit.train.slots.empty()) launch_grad_sync(u);
  release(u);
}

void ZeroEngine::launch_grad_sync(int u) {
  FlatGroup& g = units_[static_cast<size_t>(u)]->train;
  auto pending = std::make_unique<Pending>();
  pending->unit = u;
  if (stage_ < 2) {
    if (!last_micro_batch_) return;  // gradients accumulate locally until the last micro-batch
    pending->work = reduce_group(static_cast<size_t>(u)).all_reduce_async(g.grad_full);
  } else {
    // Reduce-scatter this micro-batch's unit gradients; keep only this rank's shard.
    pending->in = g.take_grads(model_.parameters());
    pending->out = torch::empty({g.shard}, pending->in.options());
    pending->accumulate = true;
    pending->work = shard_group(static_cast<size_t>(u)).reduce_scatter_async(pending->out, pending->in);
  }
  pending_.push_back(std::move(pending));
  wait_pending(1);  // at most two buckets in flight bounds the extra memory
}

void ZeroEngine::wait_pending(size_t keep) {
  while (pending_.size() > keep) {
    Pending& p = *pending_.front();
    p.work->wait();
    if (p.accumulate) units_[static_cast<size_t>(p.unit)]->train.grad_shard.add_(p.out);
    pending_.erase(pending_.begin());
  }
}

void ZeroEngine::before_forward(int u) { materialize(u); }
void ZeroEngine::after_forward(int u) { release(u); }

torch::Tensor ZeroEngine::wrap_output(int u, const torch::Tensor& y) {
  if (stage_ < 3 || !y.requires_grad()) return y;
  return GatherBeforeBackward::apply(y, this, static_cast<int64_t>(u));
}

torch::Tensor ZeroEngine::wrap_input(int u, const torch::Tensor& x) {
  if (stage_ < 3 || !x.requires_grad()) return x;
  units_[static_cast<size_t>(u)]->has_input = true;
  return SignalInputGrad::apply(x, this, static_cast<int64_t>(u));
}

void ZeroEngine::materialize(int u) {
  EngineUnit& unit = *units_[static_cast<size_t>(u)];
  if (stage_ < 3 || unit.resident) return;
  for (FlatGroup* g : {&unit.train, &unit.frozen}) g->gather(model_.parameters(), shard_group(static_cast<size_t>(u)));
  unit.nf4.gather(shard_group(static_cast<size_t>(u)));
  unit.resident = true;
}

void ZeroEngine::release(int u) {
  EngineUnit& unit = *units_[static_cast<size_t>(u)];
  if (stage_ < 3 || !unit.resident) return;
  for (FlatGroup* g : {&unit.train, &unit.frozen}) g->drop(model_.parameters());
  unit.nf4.drop();
  unit.resident = false;
}

// Expert parallelism: ranks of different ep indices hold different experts, so the first rank of
// each expert-data group writes too (its dense state is a replica's: the same values), and the
// key carries the ep index. Every rank then finds a file with its own (tp, pp, shard, ep).
bool ZeroEngine::writes_checkpoint() const {
  const auto& c = groups_.coords();
  const bool expert_owner = groups_.expert().size() > 1 && c.edp == 0;
  return stage_ == 0 ? (c.dp == 0 && c.cp == 0) || expert_owner : c.replica == 0;
}

std::string ZeroEngine::shard_key() const {
  const auto& c = groups_.coords();
  return "tp" + std::to_string(c.tp) + "-pp" + std::to_string(c.pp) + "-shard" + std::to_string(shard_rank_) +
         (groups_.expert().size() > 1 ? "-ep" + std::to_string(c.ep) : "");
}

}  // namespace shardplan::executor
