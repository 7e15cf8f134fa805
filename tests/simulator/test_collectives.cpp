// Collective cost models and the rank layout that places groups on links.
#include <gtest/gtest.h>

#include "simulator/collectives.hpp"
#include "simulator/errors.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace collectives_test {  // named, not anonymous: the files share a unity-build unit

TEST(RankLayout, OrderStringPlacesGroups) {
  // tp fastest: tp=8 fills a node, dp spans 2 nodes with one rank on each.
  const RankLayout a("tp-dp-pp", 8, 2, 1, 8);
  EXPECT_TRUE(a.group(Dim::tp).intra_node());
  EXPECT_EQ(a.group(Dim::dp).nodes, 2);
  EXPECT_EQ(a.group(Dim::dp).ranks_per_node, 1);
  // dp fastest: the dp pair shares a node; tp strides across nodes.
  const RankLayout b("dp-tp-pp", 8, 2, 1, 8);
  EXPECT_TRUE(b.group(Dim::dp).intra_node());
  EXPECT_EQ(b.group(Dim::tp).nodes, 2);
  EXPECT_EQ(b.group(Dim::tp).ranks_per_node, 4);
  // MiCS sub-group of dp, and its replication group.
  const RankLayout c("tp-dp-pp", 2, 16, 1, 8);
  EXPECT_TRUE(c.group(Dim::dp, 4).intra_node());
  EXPECT_EQ(c.group(Dim::dp, 4, 4).nodes, 4);
  EXPECT_THROW(RankLayout("tp-tp-pp", 1, 1, 1, 8), InputError);
  EXPECT_THROW(RankLayout("tp-dp", 1, 1, 1, 8), InputError);
}

TEST(Collectives, RingAllReduceInsideASwitchedNode) {
  const HardwareProfile hw = load_hardware("p4d.24xlarge");
  const double S = 1e9, bw = hw.node.intra.bandwidth_Bps * hw.node.intra.efficiency;
  for (int n : {2, 4, 8}) {
    const GroupPlacement g{n, 1, n};
    // Ring all-reduce: 2(n-1)/n of the buffer per rank, plus 2(n-1) latency hops.
    EXPECT_NEAR(all_reduce_s(S, g, hw, 8), 2.0 * (n - 1) / n * S / bw + 2 * (n - 1) * hw.node.intra.latency_s, 1e-12);
    EXPECT_NEAR(reduce_scatter_s(S, g, hw, 8) + all_gather_s(S, g, hw, 8), all_reduce_s(S, g, hw, 8), 1e-12);
  }
  EXPECT_EQ(all_reduce_s(S, GroupPlacement{1, 1, 1}, hw, 8), 0);
}

TEST(Collectives, CrossingNodesCostsMore) {
  const HardwareProfile hw = load_hardware("p4d.24xlarge");
  const double S = 1e9;
  const double intra = all_reduce_s(S, GroupPlacement{8, 1, 8}, hw, 8);
  const double two_nodes = all_reduce_s(S, GroupPlacement{16, 2, 8}, hw, 8);
  const double spread = all_reduce_s(S, GroupPlacement{16, 16, 1}, hw, 8);  // one rank per node
  EXPECT_GT(two_nodes, intra);
  EXPECT_GT(spread, two_nodes);  // eight groups share each node's NICs
}

TEST(Collectives, AllToAllTopologyUsesMoreLinksForBiggerGroups) {
  const HardwareProfile hw = load_hardware("gaudi2-hls2");
  const int n = hw.node.devices_per_node;
  EXPECT_NEAR(intra_node_bandwidth(hw, n, n), hw.node.intra.bandwidth_Bps * hw.node.intra.efficiency, 1);
  EXPECT_NEAR(intra_node_bandwidth(hw, 2, n) * (n - 1), intra_node_bandwidth(hw, n, n), 1);
  // A switched node gives every group the full per-device bandwidth.
  const HardwareProfile p4d = load_hardware("p4d.24xlarge");
  EXPECT_EQ(intra_node_bandwidth(p4d, 2, 8), intra_node_bandwidth(p4d, 8, 8));
}

TEST(Collectives, PointToPoint) {
  const HardwareProfile hw = load_hardware("p4d.24xlarge");
  EXPECT_GT(p2p_s(1e8, true, 8, hw, 8), p2p_s(1e8, false, 8, hw, 8));
  EXPECT_GT(p2p_s(1e8, true, 8, hw, 8), p2p_s(1e8, true, 1, hw, 8));  // shared NICs
  EXPECT_EQ(p2p_s(0, true, 8, hw, 8), 0);
}

// A measured profile's per-collective bus bandwidth replaces the alpha-beta link inside a node:
// each kind follows its own curve (interpolated in log size), so a CPU reduce-scatter (which
// sums as it goes) can cost several times an all-gather of the same buffer.
TEST(Collectives, MeasuredBusBandwidthCurvesReplaceTheLinkModelPerKind) {
  nlohmann::json j = to_json(load_hardware("local-cpu-2core"));
  j["node"]["intra_node"]["collective_busbw_bytes_per_s_by_bytes"] = {{"all_gather", {{1e4, 4e9}, {1e8, 8e9}}},
                                                                      {"reduce_scatter", {{1e4, 2e9}, {1e8, 1e9}}},
                                                                      {"send_recv", {{1e4, 3e9}, {1e8, 3e9}}}};
  const HardwareProfile measured = hardware_from_json(j, "measured.json");
  const HardwareProfile datasheet = load_hardware("local-cpu-2core");
  const GroupPlacement pair{2, 1, 2};
  const double S = 1e6;  // halfway (in log size) between the points: 6 GB/s and 1.5 GB/s
  EXPECT_NEAR(all_gather_s(S, pair, measured, 2), 0.5 * S / 6e9, 1e-12);
  EXPECT_NEAR(reduce_scatter_s(S, pair, measured, 2), 0.5 * S / 1.5e9, 1e-12);
  EXPECT_NEAR(p2p_s(S, false, 1, measured, 2), S / 3e9, 1e-12);
  // No all-reduce curve: that kind keeps the alpha-beta model of the link.
  EXPECT_DOUBLE_EQ(all_reduce_s(S, pair, measured, 2), all_reduce_s(S, pair, datasheet, 2));
  // The curves survive a round trip through JSON, and a wrong collective name is refused.
  const HardwareProfile again = hardware_from_json(to_json(measured), "again.json");
  EXPECT_DOUBLE_EQ(reduce_scatter_s(S, pair, again, 2), reduce_scatter_s(S, pair, measured, 2));
  j["node"]["intra_node"]["collective_busbw_bytes_per_s_by_bytes"] = {{"all_to_all", {{1e4, 1e9}}}};
  try {
    hardware_from_json(j, "bad.json");
    FAIL() << "an unknown collective was accepted";
  } catch (const InputError& e) { EXPECT_NE(std::string(e.what()).find("all_to_all"), std::string::npos) << e.what(); }
}

// One rule for every transfer that runs beside independent compute (ring CP, SP re-gathers,
// ZeRO-3 prefetch): the overlapped share of whichever is shorter hides, nothing more.
TEST(Collectives, ExposedBesideHidesOnlyTheOverlappedShareOfTheShorter) {
  EXPECT_DOUBLE_EQ(exposed_beside(3.0, 10.0, 0.0), 3.0);  // CPU ranks: nothing hides
  EXPECT_DOUBLE_EQ(exposed_beside(3.0, 10.0, 1.0), 0.0);  // all of it behind longer compute
  EXPECT_DOUBLE_EQ(exposed_beside(3.0, 1.0, 1.0), 2.0);   // only as long as the compute runs
  EXPECT_DOUBLE_EQ(exposed_beside(3.0, 10.0, 0.5), 1.5);
  for (double ov : {0.0, 0.3, 0.83, 1.0})
    for (double compute : {0.0, 0.5, 2.0, 9.0}) {
      const double e = exposed_beside(2.0, compute, ov);
      EXPECT_GE(e, 0.0);
      EXPECT_LE(e, 2.0);
      EXPECT_GE(e, 2.0 - compute);  // never more hidden than the compute beside it
    }
}

}  // namespace collectives_test
}  // namespace shardplan::simulator
