#include "expert_dispatch.hpp"

#include <chrono>
#include <numeric>

#include "executor/errors.hpp"

namespace shardplan::executor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> to_vector(const c10::IValue& v) { return v.toIntVector(); }

double g_a2a_seconds = 0;  // only the main thread calls MPI (MpiRuntime: MPI_THREAD_FUNNELED)

// comm.all_to_all_v, timed into g_a2a_seconds.
void timed_all_to_all(torch::Tensor& out, const torch::Tensor& in, const std::vector<int64_t>& send,
                      const std::vector<int64_t>& recv, Communicator& comm) {
  const auto t0 = std::chrono::steady_clock::now();
  comm.all_to_all_v(out, in, send, recv);
  g_a2a_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

torch::Tensor exchange(const torch::Tensor& x, const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                       Communicator& comm) {
  const torch::Tensor in = x.contiguous();
  std::vector<int64_t> shape = in.sizes().vec();
  shape[0] = std::accumulate(recv.begin(), recv.end(), int64_t{0});
  torch::Tensor out = torch::empty(shape, in.options());
  timed_all_to_all(out, in, send, recv, comm);
  return out;
}

// Forward: rows to the ranks that own them; backward: their gradients back (counts swapped).
struct AllToAllRows : torch::autograd::Function<AllToAllRows> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, std::vector<int64_t> send,
                               std::vector<int64_t> recv, Communicator* comm) {
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    return exchange(x, send, recv, *comm);  // (sum(recv), ...)
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto* comm = reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    // g: (sum(recv), ...) -> (sum(send), ...)
    torch::Tensor dx = exchange(g[0], to_vector(ctx->saved_data["recv"]), to_vector(ctx->saved_data["send"]), *comm);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& send,
                              const std::vector<int64_t>& recv, Communicator& comm) {
  return AllToAllRows::apply(x, send, recv, &comm);
}

double expert_all_to_all_seconds() { return g_a2a_seconds; }

ExpertDispatch::ExpertDispatch(const torch::Tensor& counts, int64_t num_experts, Communicator* ep)
    : ep_(ep != nullptr && ep->size() > 1 ? ep : nullptr) {
  const torch::Tensor c = counts.to(torch::kCPU, torch::kLong).contiguous();
  counts_.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  EXECUTOR_CHECK(static_cast<int64_t>(counts_.size()) == num_experts, "ExpertDispatch: one count per expert");
  if (ep_ == nullptr) {
    local_rows_ = counts_;
    return;
  }
  const int P = ep_->size();
  EXECUTOR_CHECK(num_experts % P == 0, "ExpertDispatch: the expert-parallel size must divide the experts");
  const int64_t El = num_experts / P;
  // Every rank learns how many rows of each of its experts every source sends: (P, El).
  const std::vector<int64_t> ones(static_cast<size_t>(P), 1);
  torch::Tensor sent = torch::tensor(counts_, torch::kLong).view({P, El}).to(ep_->device());
  torch::Tensor got = torch::empty({P, El}, sent.options());
  timed_all_to_all(got, sent, ones, ones, *ep_);
  got = got.cpu();
  const auto* g = got.data_ptr<int64_t>();  // g[src * El + le]
  send_.assign(static_cast<size_t>(P), 0);
  recv_.assign(static_cast<size_t>(P), 0);
  local_rows_.assign(static_cast<size_t>(El), 0);
  for (int p = 0; p < P; ++p)
    for (int64_t le = 0; le < El; ++le) {
      send_[static_cast<size_t>(p)] += counts_[static_cast<size_t>(p * El + le)];
      recv_[static_cast<size_t>(p)] += g[p * El + le];
      local_rows_[static_cast<size_t>(le)] += g[p * El + le];
    }
  // Received rows come source-major (each source's rows sorted by its experts); the experts
  // want them expert-major: row order (le, src, i).
  std::vector<int64_t> source_start(static_cast<size_t>(P), 0);
  for (int p = 1; p < P; ++p)
    source_start[static_cast<size_t>(p)] = source_start[static_cast<size_t>(p - 1)] + recv_[static_cast<size_t>(p - 1)];
  std::vector<int64_t> perm;
  for (int64_t le = 0; le < El; ++le)
    for (int p = 0; p < P; ++p) {
      int64_t at = source_start[static_cast<size_t>(p)];
      for (int64_t k = 0; k < le; ++k) at += g[p * El + k];
      for (int64_t i = 0; i < g[p * El + le]; ++i) perm.push_back(at + i);
    }
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  to_expert_major_ = torch::tensor(perm, torch::kLong).to(ep_->device());
  to_source_major_ = torch::tensor(inverse, torch::kLong).to(ep_->device());
}

int64_t ExpertDispatch::rows_before(int64_t le) const {
  return std::accumulate(local_rows_.begin(), local_rows_.begin() + le, int64_t{0});
}

torch::Tensor ExpertDispatch::dispatch(const torch::Tensor& x) const {
  if (ep_ == nullptr) return x;
  const torch::Tensor got = all_to_all_rows(x, send_, recv_, *ep_);  // (Rl, H) source-major
  return got.index_select(0, to_expert_major_.to(got.device()));
}

torch::Tensor ExpertDispatch::combine(const torch::Tensor& y) const {
  if (ep_ == nullptr) return y;
  const torch::Tensor back = y.index_select(0, to_source_major_.to(y.device()));  // source-major
  return all_to_all_rows(back, recv_, send_, *ep_);                               // (R, H)
}

}  // namespace shardplan::executor
