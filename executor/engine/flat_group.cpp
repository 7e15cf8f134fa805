#include "flat_group.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

void FlatGroup::init(std::vector<Parameter>& params, int shard_size, int shard_rank, int zero_stage,
                     torch::ScalarType weight_dtype) {
  stage = zero_stage;
  dtype = weight_dtype;
  padded = (numel + shard_size - 1) / shard_size * shard_size;
  shard = padded / shard_size;
  own_begin = static_cast<int64_t>(shard_rank) * shard;
  if (slots.empty()) return;
  device = params[static_cast<size_t>(slots.front().index)].tensor.device();
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  if (trainable && dtype != torch::kFloat) {  // the master starts from the values before rounding
    master = torch::zeros({shard}, f32);
    torch::NoGradGuard no_grad;
    for_each_owned([&](const ParamSlot& s, int64_t b, int64_t n) {
      const torch::Tensor flat = params[static_cast<size_t>(s.index)].tensor.reshape({-1});
      master.narrow(0, b, n).copy_(flat.narrow(0, own_begin + b - s.offset, n));
    });
  }
  full = torch::zeros({padded}, options());
  {
    torch::NoGradGuard no_grad;
    for (const ParamSlot& s : slots)
      full.narrow(0, s.offset, s.numel).copy_(params[static_cast<size_t>(s.index)].tensor.reshape({-1}));
  }
  for (const ParamSlot& s : slots) {
    Parameter& p = params[static_cast<size_t>(s.index)];
    p.tensor.set_data(full.narrow(0, s.offset, s.numel).view(s.shape));
  }
  if (trainable) {
    exp_avg = torch::zeros({shard}, f32);
    exp_avg_sq = torch::zeros({shard}, f32);
    if (stage < 2) {
      grad_full = torch::zeros({padded}, options());
      for (const ParamSlot& s : slots) {
        Parameter& p = params[static_cast<size_t>(s.index)];
        p.tensor.mutable_grad() = grad_full.narrow(0, s.offset, s.numel).view(s.shape);
      }
    } else {
      grad_shard = torch::zeros({shard}, options());
    }
  }
  if (stage == 3) {
    shard_data = full.narrow(0, own_begin, shard).clone();
    drop(params);
  }
}

void FlatGroup::zero_grad(std::vector<Parameter>& params, int zero_stage) {
  if (slots.empty()) return;
  if (zero_stage < 2) {
    grad_full.zero_();  // the params' .grad are views of it
  } else {
    grad_shard.zero_();
    for (const ParamSlot& s : slots) params[static_cast<size_t>(s.index)].tensor.mutable_grad() = torch::Tensor();
  }
}

torch::Tensor FlatGroup::take_grads(std::vector<Parameter>& params) {
  // Every element is written once: a gradient copied in, zeros only where there is none (a
  // parameter autograd left without one, the padding). Slots are laid out in order, from 0.
  torch::Tensor flat = torch::empty({padded}, options());
  for (const ParamSlot& s : slots) {
    torch::Tensor& g = params[static_cast<size_t>(s.index)].tensor.mutable_grad();
    torch::Tensor part = flat.narrow(0, s.offset, s.numel);
    if (g.defined()) {
      part.copy_(g.reshape({-1}));
    } else {
      part.zero_();
    }
    g = torch::Tensor();
  }
  if (padded > numel) flat.narrow(0, numel, padded - numel).zero_();
  return flat;
}

void FlatGroup::gather(std::vector<Parameter>& params, Communicator& shard_group) {
  if (slots.empty()) return;
  full = torch::empty({padded}, options());
  shard_group.all_gather(full, shard_data);
  for (const ParamSlot& s : slots) {
    Parameter& p = params[static_cast<size_t>(s.index)];
    p.tensor.set_data(full.narrow(0, s.offset, s.numel).view(s.shape));
  }
}

void FlatGroup::drop(std::vector<Parameter>& params) {
  for (const ParamSlot& s : slots) params[static_cast<size_t>(s.index)].tensor.set_data(torch::empty({0}, options()));
  full = torch::Tensor();
}

torch::TensorOptions FlatGroup::options() const { return torch::TensorOptions().dtype(dtype).device(device); }

torch::Tensor FlatGroup::optimizer_params() const { return master.defined() ? master : owned_params(); }

void FlatGroup::copy_master_to_params() {
  if (!master.defined()) return;
  torch::NoGradGuard no_grad;
  owned_params().copy_(master);
}

torch::Tensor FlatGroup::owned_params() const { return stage == 3 ? shard_data : full.narrow(0, own_begin, shard); }

torch::Tensor FlatGroup::owned_grads() const { return stage < 2 ? grad_full.narrow(0, own_begin, shard) : grad_shard; }

}  // namespace shardplan::executor
