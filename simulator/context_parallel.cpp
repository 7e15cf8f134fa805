#include "context_parallel.hpp"

#include <algorithm>

namespace shardplan::simulator {

CpComm cp_attention_comm(const CostEnv& env, const AttentionTime& attention) {
  CpComm c;
  if (env.cp <= 1) return c;
  const ModelSpec& m = *env.model;
  const HardwareProfile& hw = *env.hw;
  const double e = env.act_bytes, t = env.tp, M = env.s * env.b, steps = env.cp - 1;
  if (env.cp_kind == CpKind::ring) {
    const double kv_block = e * M * (m.kv_dim() + m.v_dim()) / t;  // K and V of s/cp tokens
    // Neighbours on another node: one hop per node and ring, one ring per cp group on the node.
    const bool cross = env.cp_group.nodes > 1;
    const int concurrent = std::max(1, env.devices_per_node / std::max(1, env.cp_group.ranks_per_node));
    const double fwd_step = p2p_s(kv_block, cross, concurrent, hw, env.devices_per_node);
    const double bwd_step = p2p_s(2 * kv_block, cross, concurrent, hw, env.devices_per_node);
    // Each step's transfer runs behind one block's attention (1/cp of the kernel's time), as far
    // as the device hides communication behind compute (node.intra_node.compute_overlap: 0 for
    // CPU ranks under MPI, where a non-blocking send progresses only inside MPI calls).
    const double ov = hw.node.intra.compute_overlap;
    c.forward_s = steps * exposed_beside(fwd_step, attention.forward_s / env.cp, ov);
    c.backward_s = steps * exposed_beside(bwd_step, attention.backward_s / env.cp, ov);
    c.forward_bytes = steps * kv_block;
    c.backward_bytes = steps * 2 * kv_block;
    return c;
  }
  // Ulysses: nothing to hide behind (the kernel needs the exchanged heads first).
  const double qkv = e * M * (m.q_dim() + m.kv_dim() + m.v_dim()) / t, out = e * M * m.attn_out_dim() / t;
  const double time = all_to_all_s(qkv, env.cp_group, hw, env.devices_per_node) +
                      all_to_all_s(out, env.cp_group, hw, env.devices_per_node);
  c.forward_s = c.backward_s = time;
  c.forward_bytes = c.backward_bytes = (qkv + out) * (env.cp - 1) / env.cp;  // what leaves the rank
  return c;
}

}  // namespace shardplan::simulator
