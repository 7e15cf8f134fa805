// The MoE load-balancing auxiliary loss (formula and sources in moe_aux_loss.hpp).
#include "moe_aux_loss.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

double g_aux_scale = 1.0;  // only the main thread runs the model

// Megatron's MoEAuxLossAutoScaler: forward passes the output through and keeps the aux loss;
// backward returns the output's gradient and `scale` as the aux loss's.
struct AuxLossAutoScaler : torch::autograd::Function<AuxLossAutoScaler> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor out, torch::Tensor aux) {
    ctx->saved_data["scale"] = g_aux_scale;
    ctx->saved_data["aux_options"] = static_cast<int64_t>(aux.scalar_type());
    return out.view_as(out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto dt = static_cast<torch::ScalarType>(ctx->saved_data["aux_options"].toInt());
    return {g[0], torch::full({}, scale, g[0].options().dtype(dt))};
  }
};

}  // namespace

void set_moe_aux_loss_scale(double scale) { g_aux_scale = scale; }

torch::Tensor attach_aux_loss(const torch::Tensor& out, const torch::Tensor& probs, const torch::Tensor& top_e,
                              const MoeAuxLoss& a, double* value) {
  const int64_t N = probs.size(0), E = probs.size(1), k = top_e.size(1);
  // c_e over every rank routing a part of this micro-batch; T the tokens they route together.
  torch::Tensor counts = torch::bincount(top_e.reshape({-1}), {}, E).to(torch::kFloat);  // (E)
  double T = static_cast<double>(N);
  for (Communicator* g : a.route_groups) {
    if (g == nullptr || g->size() == 1) continue;
    g->all_reduce(counts, ReduceOp::sum);
    T *= g->size();
  }
  const double factor = a.coeff * static_cast<double>(E) / (static_cast<double>(k) * T * T) / a.replicas;
  const torch::Tensor aux = (probs.sum(0) * counts).sum() * factor;  // scalar, this rank's share
  if (value != nullptr) *value += aux.item<double>();
  return AuxLossAutoScaler::apply(out, aux);
}

}  // namespace shardplan::executor
