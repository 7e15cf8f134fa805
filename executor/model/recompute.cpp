#include "recompute.hpp"

#include "autocast.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct CheckpointState : torch::CustomClassHolder {
  RecomputeFn fn;
  std::vector<torch::Tensor> kept;     // the inputs, detached (on the host when offloaded)
  std::vector<torch::Device> devices;  // where each input lived
  std::vector<bool> needs_grad;
  bool has_rng = false;
  DropoutRng rng;                             // generator state at the start of forward
  AutocastState cpu_autocast, cuda_autocast;  // at the start of forward
};

DropoutRng clone_rng(const DropoutRng& r) {
  DropoutRng c = r;
  c.replicated = r.replicated.clone();
  c.sharded = r.sharded.clone();
  return c;
}

torch::Tensor keep(const torch::Tensor& x, bool offload) {
  torch::Tensor d = x.detach();
  if (!offload || d.device().is_cpu()) return d;  // host memory already: nothing to move
  torch::Tensor host = torch::empty(d.sizes(), d.options().device(torch::kCPU).pinned_memory(true));
  host.copy_(d, /*non_blocking=*/true);
  return host;
}

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<CheckpointState> st, bool offload,
                               DropoutRng* live, at::TensorList inputs) {
    // Runs with grad mode off (custom functions' forward): no graph, only the outputs.
    std::vector<torch::Tensor> in(inputs.begin(), inputs.end());
    for (const auto& x : in) {
      st->kept.push_back(keep(x, offload));
      st->devices.push_back(x.device());
      st->needs_grad.push_back(x.requires_grad());
    }
    if (live) {
      st->has_rng = true;
      st->rng = clone_rng(*live);
    }
    st->cpu_autocast = AutocastState::of(c10::DeviceType::CPU);
    st->cuda_autocast = AutocastState::of(c10::DeviceType::CUDA);
    variable_list out = st->fn(in, live);
    ctx->saved_data["state"] = c10::IValue::make_capsule(st);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto st = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    std::vector<torch::Tensor> in;
    for (size_t i = 0; i < st->kept.size(); ++i) {
      torch::Tensor x = st->kept[i].to(st->devices[i], /*non_blocking=*/true).detach();
      in.push_back(x.requires_grad_(st->needs_grad[i]));
    }
    variable_list outs;
    {
      torch::AutoGradMode grad_on(true);
      const AutocastState was_cpu = AutocastState::of(c10::DeviceType::CPU);
      const AutocastState was_cuda = AutocastState::of(c10::DeviceType::CUDA);
      st->cpu_autocast.apply();
      st->cuda_autocast.apply();
      DropoutRng rng = st->has_rng ? clone_rng(st->rng) : DropoutRng{};
      outs = st->fn(in, st->has_rng ? &rng : nullptr);
      was_cpu.apply();
      was_cuda.apply();
      at::autocast::clear_cache();
    }
    variable_list roots, root_grads;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outs[i]);
        root_grads.push_back(grads[i]);
      }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);
    variable_list result{torch::Tensor(), torch::Tensor(), torch::Tensor()};  // st, offload, live
    for (auto& x : in) result.push_back(x.requires_grad() ? x.grad() : torch::Tensor());
    st->kept.clear();
    return result;
  }
};

}  // namespace

std::vector<torch::Tensor> checkpoint(const RecomputeFn& fn, const std::vector<torch::Tensor>& inputs, DropoutRng* rng,
                                      bool offload) {
  auto st = c10::make_intrusive<CheckpointState>();
  st->fn = fn;
  return Checkpoint::apply(st, offload, rng, at::TensorList(inputs));
}

}  // namespace shardplan::executor
