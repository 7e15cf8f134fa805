#pragma once
// Context parallelism: the sequence split over the cp ranks of the `cp` group, and the two ways
// of attending across it, as forward/backward pairs.
//
// Legend: B batch, S the whole sequence, Sl = S/cp this rank's tokens, n local query heads
// (nh/tp), g local key/value heads, hd head dim, P = cp.
//
//   split       cp_positions: which of the S positions this rank holds. Ring attention on a
//               causal model cuts the sequence into 2P chunks and gives rank i chunks i and
//               2P-1-i (causal load balancing: every rank has the same share of the causal
//               triangle; Megatron-Core get_batch_on_this_cp_rank, torchtitan
//               context_parallel(load_balancer)); Ulysses gives rank i chunk i of P
//               (simulator::cp_sequence_chunks, the same rule).
//   ring        ring_attention: Q stays; the K,V blocks travel round the ring in P-1 steps, each
//               step's exchange (send to rank+1, receive from rank-1) in flight while the
//               current block's attention runs; the partial outputs merge by their log-sum-exp
//               (online softmax, Milakov & Gimelshein 2018; Liu et al. 2023 "Ring Attention"
//               §3). Backward recomputes each block's probabilities from the saved log-sum-exp
//               (FlashAttention-2, Dao 2023, Algorithm 2) and passes the dK,dV accumulators
//               round the ring with the blocks, so each returns home complete after P steps
//               (Transformer Engine AttnFuncWithCPAndKVP2P does the same).
//   all_to_all  seq_to_heads / heads_to_seq (DeepSpeed-Ulysses, Jacobs et al. 2023 §3.1): an
//               all-to-all turns the sequence split of q, k, v into a head split (each rank:
//               n/P heads over the whole sequence), the ordinary attention runs, and a fourth
//               all-to-all turns the output back. Each is the other's backward.
#include <torch/torch.h>

#include "executor/comm/communicator.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::executor {

struct CpContext {
  Communicator* group = nullptr;  // null or size 1: no context parallelism
  simulator::CpKind kind = simulator::CpKind::ring;
  int chunks = 1;  // the sequence is cut into `chunks` (2P for ring on a causal model)
  [[nodiscard]] int size() const { return group ? group->size() : 1; }
  [[nodiscard]] int rank() const { return group ? group->rank() : 0; }
  [[nodiscard]] bool active() const { return size() > 1; }
};

// The S/P positions (of 0..S-1, ascending) this cp rank holds; (Sl) int64 on `device`.
torch::Tensor cp_positions(int64_t S, const CpContext& cp, torch::Device device);
// The positions of rank `rank` (any rank of the group).
torch::Tensor cp_positions_of(int64_t S, const CpContext& cp, int rank, torch::Device device);

// Causal ring attention. q: (B, n, Sl, hd), k, v: (B, g, Sl, hd) of this rank's positions
// (rotary already applied) -> (B, n, Sl, hd). Exact: equals causal attention over the whole
// sequence restricted to this rank's queries. The `cp` group must be MPI or NCCL (P >= 2).
torch::Tensor ring_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const CpContext& cp, double scale);

// Ulysses all-to-alls. seq_to_heads: x (B, h, Sl, hd), h heads of this rank's contiguous chunk ->
// (B, h/P, S, hd): heads [r h/P, (r+1) h/P) over the whole sequence, in order.
// heads_to_seq: the inverse. Each is the other's backward.
torch::Tensor seq_to_heads(const torch::Tensor& x, const CpContext& cp);
torch::Tensor heads_to_seq(const torch::Tensor& x, const CpContext& cp);

}  // namespace shardplan::executor
