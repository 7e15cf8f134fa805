#include "sp_column_linear.hpp"

#include <algorithm>

#include "executor/errors.hpp"
#include "executor/model/autocast.hpp"
#include "executor/model/cpu_gemm.hpp"
#include "mappings.hpp"
#include "weight_grad_store.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SpColumnLinears : torch::autograd::Function<SpColumnLinears> {
  // x: (B, S/t, in), ws: n x (out_i/t, in) -> n x (B, S, out_i/t)
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, at::TensorList ws, Communicator* tp) {
    const auto dt = compute_dtype(x);
    const torch::Tensor xc = x.to(dt);                     // (B, S/t, in)
    const torch::Tensor xin = all_gather_dim(xc, *tp, 1);  // (B, S, in), not saved
    // The local input serves only the weights' gradients: none is kept when all are frozen (LoRA).
    const bool wgrad = std::any_of(ws.begin(), ws.end(), [](const torch::Tensor& w) { return w.requires_grad(); });
    variable_list saved{wgrad ? xc : torch::Tensor()};
    ctx->saved_data["compute_dtype"] = static_cast<int64_t>(dt);
    variable_list ys;
    for (const torch::Tensor& w : ws) {
      saved.push_back(w);                        // the parameter itself
      ys.push_back(cpu::linear(xin, w.to(dt)));  // (B, S, out_i/t)
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(tp);
    return ys;
  }

  static variable_list backward(AutogradContext* ctx, variable_list gys) {
    auto saved = ctx->get_saved_variables();
    Communicator& tp = *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    const torch::Tensor& xc = saved[0];
    const auto dt = static_cast<torch::ScalarType>(ctx->saved_data["compute_dtype"].toInt());
    const size_t n = saved.size() - 1;
    variable_list grads(n + 2);                                   // x, each weight, the communicator (none)
    torch::Tensor dx_full;                                        // (B, S, in) partial sums
    std::vector<std::pair<torch::Tensor, torch::Tensor>> wgrads;  // (weight, gy) of each trainable weight
    for (size_t i = 0; i < n; ++i) {
      if (!gys[i].defined()) continue;
      const torch::Tensor& w = saved[i + 1];
      const torch::Tensor gy = gys[i].to(dt);  // (B, S, out_i/t)
      if (ctx->needs_input_grad(0)) {
        torch::Tensor part = cpu::matmul(gy, w.to(dt));
        dx_full = dx_full.defined() ? dx_full + part : part;
      }
      if (ctx->needs_input_grad(i + 1))  // frozen (LoRA base) weights skip their gradient GEMM
        wgrads.emplace_back(w, gy.reshape({-1, gy.size(-1)}));
    }
    // The weights' gradients: x re-gathered, then dW_i = gy_i^T x (out_i/t, in) for each.
    const auto weight_grads = [xc, wgrads, &tp](bool defer) {
      variable_list dws;
      if (wgrads.empty()) return dws;
      const torch::Tensor xin = all_gather_dim(xc, tp, 1);  // (B, S, in)
      const torch::Tensor x2 = xin.reshape({-1, xin.size(-1)});
      for (const auto& [w, g2] : wgrads) {
        torch::Tensor dw = cpu::mm(g2.t(), x2).to(w.scalar_type());
        if (defer) accumulate_weight_grad(w, dw);
        else dws.push_back(dw);
      }
      return dws;
    };
    if (WeightGradStore& store = WeightGradStore::instance(); store.deferring() && !wgrads.empty()) {
      // A split backward's B: the gather and the weight GEMMs run at the schedule's W; every tp
      // rank runs the same W ops in the same order, so the gather matches across the group.
      store.push([weight_grads] { weight_grads(true); });
    } else {
      const variable_list dws = weight_grads(false);
      size_t k = 0;
      for (size_t i = 0; i < n; ++i)
        if (gys[i].defined() && ctx->needs_input_grad(i + 1)) grads[i + 1] = dws[k++];
    }
    if (dx_full.defined())  // (B, S, in) -> (B, S/t, in), summed over the tp ranks
      grads[0] =
          reduce_scatter_dim(dx_full, tp, 1).to(static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt()));
    return grads;
  }
};

}  // namespace

std::vector<torch::Tensor> sp_column_linears(const torch::Tensor& x, const std::vector<torch::Tensor>& ws,
                                             Communicator& tp) {
  EXECUTOR_CHECK(!ws.empty(), "sp_column_linears needs at least one weight");
  return SpColumnLinears::apply(x, at::TensorList(ws), &tp);
}

}  // namespace shardplan::executor
