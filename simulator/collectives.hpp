#pragma once
// Cost of collectives on the links a group's placement puts them on.
// Ring algorithms over n ranks (Patarasuk & Yuan 2009; NCCL's bus-bandwidth convention):
// all-reduce moves 2(n-1)/n of the buffer per rank, reduce-scatter and all-gather (n-1)/n.
// A group spanning nodes runs hierarchically: intra-node reduce-scatter, inter-node ring on
// 1/r of the buffer per rank (r ranks per node share the node's NICs with the node's other
// concurrently communicating groups), intra-node all-gather. Latency per phase follows NCCL's
// ring model: n-N steps over intra-node links and N-1 over the network (nccl tuning.cc).
#include "hardware_profile.hpp"
#include "rank_layout.hpp"

namespace shardplan::simulator {

// Effective one-way bandwidth (bytes/s) one device gets inside a node for a collective over
// k devices of that node, given the topology.
double intra_node_bandwidth(const HardwareProfile& hw, int k, int devices_per_node);
// The share of a device's intra-node bandwidth a collective over k devices of the node gets
// (all_to_all: (k-1)/(devices_per_node-1) of its dedicated links; else 1).
double topology_share(const HardwareProfile& hw, int k, int devices_per_node);

// `bytes`: the full buffer (all-reduce input, reduce-scatter input, all-gather output).
double all_reduce_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int devices_per_node);
double reduce_scatter_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int devices_per_node);
double all_gather_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int devices_per_node);
// All-to-all where each rank sends `bytes` in total, 1/n to each member (itself included), as
// NCCL runs it: grouped ncclSend/ncclRecv to every peer at once (nccl-tests alltoall; its bus
// bandwidth counts (n-1)/n of the buffer). Intra-node peers take (r-1)/n of it over the node's
// links, remote peers (n-r)/n over the rank's share of the NICs (every device of the node
// exchanges at once); both proceed together, so the slower sets the time.
double all_to_all_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int devices_per_node);
// Point-to-point send of `bytes`; `concurrent` devices of the node send at the same time
// (they share the NICs when the hop crosses nodes).
double p2p_s(double bytes, bool cross_node, int concurrent, const HardwareProfile& hw, int devices_per_node);

// What stays exposed of a `transfer_s` that runs beside `compute_s` of independent work on a
// device that hides `overlap` (node.intra_node.compute_overlap) of communication behind compute:
// transfer - overlap * min(transfer, compute). CPU ranks under MPI: overlap 0, all exposed.
inline double exposed_beside(double transfer_s, double compute_s, double overlap) {
  return transfer_s - overlap * (transfer_s < compute_s ? transfer_s : compute_s);
}

}  // namespace shardplan::simulator
