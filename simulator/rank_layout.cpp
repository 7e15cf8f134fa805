#include "rank_layout.hpp"

#include "errors.hpp"

namespace shardplan::simulator {

RankLayout::RankLayout(const std::string& order, int tp, int dp, int pp, int devices_per_node)
    : size_{tp, dp, pp}, per_node_(devices_per_node) {
  std::array<bool, 3> seen{};
  int stride = 1;
  std::size_t pos = 0;
  int count = 0;
  while (pos <= order.size()) {
    std::size_t end = order.find('-', pos);
    if (end == std::string::npos) end = order.size();
    std::string tok = order.substr(pos, end - pos);
    int d = tok == "tp" ? 0 : tok == "dp" ? 1 : tok == "pp" ? 2 : -1;
    if (d < 0 || seen[d])
      throw InputError("--rank-order: '" + order + "': expected a permutation of tp, dp, pp joined by '-' (e.g. tp-dp-pp)");
    seen[d] = true;
    stride_[d] = stride;
    stride *= size_[d];
    ++count;
    pos = end + 1;
  }
  if (count != 3)
    throw InputError("--rank-order: '" + order + "': expected a permutation of tp, dp, pp joined by '-' (e.g. tp-dp-pp)");
}

GroupPlacement RankLayout::group(Dim d, int members, int every) const {
  const int k = members > 0 ? members : size(d);
  const int st = stride(d) * every;
  GroupPlacement g;
  g.size = k;
  g.nodes = 0;
  int last_node = -1;
  for (int i = 0; i < k; ++i) {
    int node = (i * st) / per_node_;
    if (node != last_node) {
      ++g.nodes;
      last_node = node;
    }
  }
  g.ranks_per_node = k / g.nodes;
  return g;
}

bool RankLayout::pp_hop_crosses_nodes(int stage) const {
  const int a = stage * stride(Dim::pp);
  const int b = (stage + 1) * stride(Dim::pp);
  return a / per_node_ != b / per_node_;
}

}  // namespace shardplan::simulator
