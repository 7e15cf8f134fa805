#include "mappings.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor all_reduced(const torch::Tensor& x, Communicator& comm) {
  torch::Tensor y = x.contiguous().clone();
  comm.all_reduce(y, ReduceOp::sum);
  return y;
}

torch::Tensor own_slice(const torch::Tensor& x, Communicator& comm, int64_t dim) {
  const int64_t n = x.size(dim);
  EXECUTOR_CHECK(n % comm.size() == 0, "dimension does not divide by the tensor-parallel size");
  return x.narrow(dim, comm.rank() * (n / comm.size()), n / comm.size()).contiguous();
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* comm) {
    keep_comm(ctx, *comm);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_reduced(g[0], comm_of(ctx)), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext*, torch::Tensor x, Communicator* comm) { return all_reduced(x, *comm); }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], torch::Tensor()}; }
};

struct GatherLastDim : torch::autograd::Function<GatherLastDim> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* comm) {
    keep_comm(ctx, *comm);
    return all_gather_dim(x, *comm, x.dim() - 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {own_slice(g[0], comm_of(ctx), g[0].dim() - 1), torch::Tensor()};
  }
};

struct ScatterToSeq : torch::autograd::Function<ScatterToSeq> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* comm) {
    keep_comm(ctx, *comm);
    return own_slice(x, *comm, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_gather_dim(g[0], comm_of(ctx), 1), torch::Tensor()};
  }
};

struct GatherFromSeq : torch::autograd::Function<GatherFromSeq> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* comm) {
    keep_comm(ctx, *comm);
    return all_gather_dim(x, *comm, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {reduce_scatter_dim(g[0], comm_of(ctx), 1), torch::Tensor()};
  }
};

struct ReduceScatterSeq : torch::autograd::Function<ReduceScatterSeq> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Communicator* comm) {
    keep_comm(ctx, *comm);
    return reduce_scatter_dim(x, *comm, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {all_gather_dim(g[0], comm_of(ctx), 1), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_gather_dim(const torch::Tensor& x, Communicator& comm, int64_t dim) {
  const int64_t t = comm.size();
  if (t == 1) return x;
  // Gather rank-major blocks, then move the rank axis next to `dim`: (t, ..., n, ...) -> (..., t*n, ...).
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty({t * in.numel()}, in.options());
  comm.all_gather(out, in.view({-1}));
  std::vector<int64_t> shape{t};
  for (int64_t s : in.sizes()) shape.push_back(s);
  torch::Tensor blocks = out.view(shape).movedim(0, dim);  // (..., t, n, ...)
  std::vector<int64_t> merged(in.sizes().begin(), in.sizes().end());
  merged[dim] *= t;
  return blocks.reshape(merged);
}

torch::Tensor reduce_scatter_dim(const torch::Tensor& x, Communicator& comm, int64_t dim) {
  const int64_t t = comm.size();
  if (t == 1) return x;
  const int64_t n = x.size(dim);
  EXECUTOR_CHECK(n % t == 0, "reduce-scatter dimension does not divide by the group size");
  std::vector<int64_t> split(x.sizes().begin(), x.sizes().end());
  split[dim] = n / t;
  split.insert(split.begin() + dim, t);                              // (..., t, n/t, ...)
  torch::Tensor in = x.reshape(split).movedim(dim, 0).contiguous();  // (t, ..., n/t, ...)
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape[dim] = n / t;
  torch::Tensor out = torch::empty(out_shape, x.options());
  comm.reduce_scatter(out, in.view({-1}));
  return out;
}

torch::Tensor copy_to_tp(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : CopyToTp::apply(x, &tp);
}
torch::Tensor reduce_from_tp(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : ReduceFromTp::apply(x, &tp);
}
torch::Tensor gather_last_dim(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : GatherLastDim::apply(x, &tp);
}
torch::Tensor scatter_to_seq(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : ScatterToSeq::apply(x, &tp);
}
torch::Tensor gather_from_seq(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : GatherFromSeq::apply(x, &tp);
}
torch::Tensor reduce_scatter_seq(const torch::Tensor& x, Communicator& tp) {
  return tp.size() == 1 ? x : ReduceScatterSeq::apply(x, &tp);
}

}  // namespace shardplan::executor
