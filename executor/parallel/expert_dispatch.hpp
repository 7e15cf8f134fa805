#pragma once
// Expert-parallel token dispatch and combine (GShard, Lepikhin et al. 2021, §2.2; Megatron-Core
// token_dispatcher.py MoEAlltoAllTokenDispatcher): the routed token copies of an ep rank, sorted
// by expert, travel to the ranks holding their experts with one variable-size all-to-all, are
// regrouped expert by expert there, and come back the same way after the experts ran.
//
// Legend: ep = expert-parallel ranks, E experts, El = E/ep local experts (rank j holds experts
// [j*El, (j+1)*El)), R = routed copies on this rank (tokens x top-k), H hidden.
//   all_to_all_rows   fwd: all_to_all_v of rows (send -> recv counts)
//                     bwd: all_to_all_v of the gradient rows with the counts swapped
//   ExpertDispatch    dispatch: x (R, H) sorted by global expert -> (Rl, H) this rank's
//                     experts' rows, expert-major (expert le's rows at rows_before(le))
//                     combine:  y (Rl, H) expert-major -> (R, H) in x's order
// With ep = 1 both are the identity and no collective runs.
#include <torch/torch.h>

#include <vector>

#include "executor/comm/communicator.hpp"

namespace shardplan::executor {

// x: (sum(send), ...) -> (sum(recv), ...) over `comm` (autograd: the reverse exchange backward).
torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& send,
                              const std::vector<int64_t>& recv, Communicator& comm);

// Seconds this process spent inside the expert all-to-alls (counts, dispatch and combine,
// forward and backward) so far: report.json's a2a_seconds are differences of it.
double expert_all_to_all_seconds();

class ExpertDispatch {
 public:
  // `counts`: (E) int64 on any device, rows of x per global expert (x sorted by expert). One
  // all-to-all of the counts (ep > 1) tells every rank what it receives.
  ExpertDispatch(const torch::Tensor& counts, int64_t num_experts, Communicator* ep);

  torch::Tensor dispatch(const torch::Tensor& x) const;
  torch::Tensor combine(const torch::Tensor& y) const;
  // Rows this rank's local expert `le` got (all sources), and where they start after dispatch.
  [[nodiscard]] int64_t rows_of(int64_t le) const { return local_rows_[static_cast<size_t>(le)]; }
  [[nodiscard]] int64_t rows_before(int64_t le) const;
  [[nodiscard]] int64_t local_experts() const { return static_cast<int64_t>(local_rows_.size()); }
  // Rows per global expert routed from this rank (E), as counted before the exchange.
  [[nodiscard]] const std::vector<int64_t>& counts() const { return counts_; }

 private:
  Communicator* ep_ = nullptr;  // null or one rank: no exchange
  std::vector<int64_t> counts_;
  std::vector<int64_t> send_, recv_;  // rows to / from each ep rank
  std::vector<int64_t> local_rows_;   // per local expert, all sources together
  torch::Tensor to_expert_major_;     // (Rl) received row of each expert-major row
  torch::Tensor to_source_major_;     // (Rl) its inverse
};

}  // namespace shardplan::executor
