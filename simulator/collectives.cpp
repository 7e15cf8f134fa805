// Legend: S buffer bytes, n group size, r ranks of the group per node, N nodes spanned,
// B_intra per-device intra-node bandwidth, B_nic per-node network bandwidth, lat latencies.
#include "collectives.hpp"

#include <algorithm>

namespace shardplan::simulator {
namespace {

// Time of a ring phase that moves `fraction` * S per rank: (n-1)/n for reduce-scatter or
// all-gather, 2(n-1)/n for all-reduce; `steps` latency hops.
// With a measured bus-bandwidth curve for the kind, the intra-node phase takes its wire bytes
// at the curve's bandwidth for this buffer size (latency included in the measurement).
double hierarchical(double bytes, double phases, CollectiveKind kind, const GroupPlacement& g,
                    const HardwareProfile& hw, int per_node) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const int r = g.ranks_per_node;
  const int n_nodes = g.nodes;
  double t = 0.0;
  if (r > 1) {
    const double wire = phases * (r - 1.0) / r * bytes;
    if (const EfficiencyCurve* busbw = hw.node.intra.busbw(kind)) {
      t += wire / (busbw->at(bytes) * topology_share(hw, r, per_node));
    } else {
      t += wire / intra_node_bandwidth(hw, r, per_node) + phases * (r - 1) * hw.node.intra.latency_s;
    }
  }
  if (n_nodes > 1) {
    // All devices of the node communicate at once (one group per r of them), so each rank's
    // ring gets B_nic / per_node of the network; it carries S / r.
    const double nic = hw.network.bandwidth_Bps * hw.network.efficiency;
    const double per_rank_bw = nic / std::max(1, per_node);
    t += phases * (n_nodes - 1.0) / n_nodes * (bytes / r) / per_rank_bw + phases * (n_nodes - 1) * hw.network.latency_s;
    // NCCL's ring runs through every rank: n-1 steps per phase, N-1 of them across the network
    // and n-N over intra-node links (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel:
    // latency = (nsteps - nInterSteps) * intraLat + nInterSteps * interLat). The r-1 intra steps
    // of one node are counted above; the other nodes' intra steps are paid here too.
    t += phases * (g.size - n_nodes - (r - 1.0)) * hw.node.intra.latency_s;
  }
  return t;
}

}  // namespace

double topology_share(const HardwareProfile& hw, int k, int devices_per_node) {
  // all_to_all: dedicated links to each peer, so a collective over k devices drives k-1 of them.
  if (hw.node.topology == IntraTopology::all_to_all && devices_per_node > 1)
    return std::max(1.0, k - 1.0) / (devices_per_node - 1);
  return 1.0;
}

double intra_node_bandwidth(const HardwareProfile& hw, int k, int devices_per_node) {
  const auto& link = hw.node.intra;
  return link.bandwidth_Bps * link.efficiency * topology_share(hw, k, devices_per_node);
}

double all_reduce_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int per_node) {
  return hierarchical(bytes, 2.0, CollectiveKind::all_reduce, g, hw, per_node);
}

double reduce_scatter_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int per_node) {
  return hierarchical(bytes, 1.0, CollectiveKind::reduce_scatter, g, hw, per_node);
}

double all_gather_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int per_node) {
  return hierarchical(bytes, 1.0, CollectiveKind::all_gather, g, hw, per_node);
}

double all_to_all_s(double bytes, const GroupPlacement& g, const HardwareProfile& hw, int per_node) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const double n = g.size, r = g.ranks_per_node;
  double intra = 0, inter = 0;
  if (r > 1)
    intra = (r - 1) / n * bytes / intra_node_bandwidth(hw, g.ranks_per_node, per_node) + hw.node.intra.latency_s;
  if (g.nodes > 1) {
    const double nic = hw.network.bandwidth_Bps * hw.network.efficiency;
    inter = (n - r) / n * bytes / (nic / std::max(1, per_node)) + hw.network.latency_s;
  }
  return std::max(intra, inter);
}

double p2p_s(double bytes, bool cross_node, int concurrent, const HardwareProfile& hw, int per_node) {
  if (bytes <= 0) return 0.0;
  if (!cross_node) {
    if (const EfficiencyCurve* busbw = hw.node.intra.busbw(CollectiveKind::send_recv))
      return bytes / (busbw->at(bytes) * topology_share(hw, 2, per_node));
    const double bw = intra_node_bandwidth(hw, 2, per_node);
    return bytes / bw + hw.node.intra.latency_s;
  }
  const double nic = hw.network.bandwidth_Bps * hw.network.efficiency;
  return bytes / (nic / std::max(1, std::min(concurrent, per_node))) + hw.network.latency_s;
}

}  // namespace shardplan::simulator
