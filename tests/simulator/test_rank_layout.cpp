// The rank layout's expert groups computed in closed form (RankLayout::expert_group) against
// the definition: enumerate the world, keep stage 0's ranks (pp coordinate 0) in rank order, take
// the group's members by folding etp fastest, then ep, then the expert data-parallel rest, and
// count the nodes they span.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "simulator/rank_layout.hpp"

namespace shardplan::simulator {
namespace rank_layout_test {  // named, not anonymous: the files share a unity-build unit

GroupPlacement by_definition(const RankLayout& l, ExpertDim d, int etp, int ep, int per_node) {
  const int world = l.size(Dim::tp) * l.size(Dim::dp) * l.size(Dim::pp) * l.size(Dim::cp);
  std::vector<int> stage;
  for (int r = 0; r < world; ++r)
    if ((r / l.stride(Dim::pp)) % l.size(Dim::pp) == 0) stage.push_back(r);
  const int n = static_cast<int>(stage.size());
  const int first = d == ExpertDim::etp ? 1 : d == ExpertDim::ep ? etp : etp * ep;
  const int count = d == ExpertDim::etp ? etp : d == ExpertDim::ep ? ep : n / (etp * ep);
  std::set<int> nodes;
  for (int i = 0; i < count; ++i) nodes.insert(stage[static_cast<std::size_t>(i * first)] / per_node);
  GroupPlacement g;
  g.size = count;
  g.nodes = static_cast<int>(nodes.size());
  g.ranks_per_node = count / g.nodes;
  return g;
}

TEST(RankLayout, ExpertGroupsMatchTheirDefinitionOverOrdersAndShapes) {
  int checked = 0;
  for (const std::string order : {"tp-dp-pp", "tp-pp-dp", "pp-tp-dp", "tp-cp-dp-pp", "dp-tp-pp", "tp-dp-cp-pp"})
    for (int tp : {1, 2, 4})
      for (int cp : {1, 2})
        for (int dp : {1, 2, 4, 8})
          for (int pp : {1, 2, 4})
            for (int per_node : {1, 4, 8}) {
              const RankLayout l(order, tp, cp, dp, pp, per_node);
              const int n = tp * cp * dp;  // ranks of a stage
              for (int etp : {1, 2, 4})
                for (int ep : {1, 2, 4, 8}) {
                  if (n % (etp * ep) != 0) continue;
                  for (ExpertDim d : {ExpertDim::etp, ExpertDim::ep, ExpertDim::edp}) {
                    SCOPED_TRACE(order + " tp" + std::to_string(tp) + " cp" + std::to_string(cp) + " dp" +
                                 std::to_string(dp) + " pp" + std::to_string(pp) + " node" + std::to_string(per_node) +
                                 " etp" + std::to_string(etp) + " ep" + std::to_string(ep) + " dim" +
                                 std::to_string(static_cast<int>(d)));
                    const GroupPlacement want = by_definition(l, d, etp, ep, per_node);
                    const GroupPlacement got = l.expert_group(d, etp, ep);
                    ASSERT_EQ(got.size, want.size);
                    ASSERT_EQ(got.nodes, want.nodes);
                    ASSERT_EQ(got.ranks_per_node, want.ranks_per_node);
                    ++checked;
                  }
                }
            }
  EXPECT_GT(checked, 1000);
}

}  // namespace rank_layout_test
}  // namespace shardplan::simulator
