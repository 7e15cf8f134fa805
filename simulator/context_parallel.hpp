#pragma once
// Context parallelism's communication in the attention core, per block and micro-batch on one
// rank (legend of layer_cost.cpp; s_loc = s/cp tokens on this rank, k = g*d keys, v = value width):
//   ring        cp-1 steps per pass, each sending this rank's current K,V block (b*s_loc*(k+v)/t
//               elements) to the next rank while the previous block's attention runs; backward
//               also passes the dK,dV accumulators: twice the bytes (Liu et al. 2023, Ring
//               Attention §3; Megatron-Core / Transformer Engine context_parallel "p2p").
//   all_to_all  q, k, v from the sequence split to a head split before the kernel and the output
//               back after it: all-to-alls of b*s_loc*(q+k+v)/t and b*s_loc*o/t elements per rank;
//               backward the same volumes in reverse (Jacobs et al. 2023, DeepSpeed-Ulysses §3.1).
#include "layer_cost.hpp"

namespace shardplan::simulator {

struct CpComm {
  double forward_s = 0, backward_s = 0;          // exposed
  double forward_bytes = 0, backward_bytes = 0;  // sent by this rank
};

// `attention`: the attention kernel's own forward/backward time on this rank (what a ring step
// hides its transfer behind: 1/cp of it per step).
CpComm cp_attention_comm(const CostEnv& env, const AttentionTime& attention);

}  // namespace shardplan::simulator
