#include "rank_layout.hpp"

#include <algorithm>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

[[noreturn]] void bad_order(const std::string& order) {
  throw InputError("--rank-order: '" + order +
                   "': expected a permutation of tp, dp, pp (and optionally cp) joined by '-' (e.g. tp-dp-pp, tp-cp-dp-pp)");
}

// The order's dimensions fastest first, cp inserted after tp when the order omits it.
std::vector<int> parse_order(const std::string& order) {
  std::vector<int> dims;
  std::size_t pos = 0;
  while (pos <= order.size()) {
    std::size_t end = order.find('-', pos);
    if (end == std::string::npos) end = order.size();
    const std::string tok = order.substr(pos, end - pos);
    const int d = tok == "tp" ? 0 : tok == "dp" ? 1 : tok == "pp" ? 2 : tok == "cp" ? 3 : -1;
    if (d < 0 || std::find(dims.begin(), dims.end(), d) != dims.end()) bad_order(order);
    dims.push_back(d);
    pos = end + 1;
  }
  const bool has_cp = std::find(dims.begin(), dims.end(), 3) != dims.end();
  if (dims.size() != (has_cp ? 4u : 3u)) bad_order(order);
  if (!has_cp) dims.insert(std::find(dims.begin(), dims.end(), 0) + 1, 3);
  return dims;
}

}  // namespace

RankLayout::RankLayout(const std::string& order, int tp, int cp, int dp, int pp, int devices_per_node)
    : size_{tp, dp, pp, cp}, per_node_(devices_per_node) {
  int stride = 1;
  for (const int d : parse_order(order)) {
    stride_[d] = stride;
    stride *= size_[d];
  }
}

GroupPlacement RankLayout::placement(const std::vector<int>& ranks) const {
  std::vector<int> nodes;
  for (const int r : ranks) nodes.push_back(r / per_node_);
  std::sort(nodes.begin(), nodes.end());
  GroupPlacement g;
  g.size = static_cast<int>(ranks.size());
  g.nodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  g.ranks_per_node = g.size / std::max(1, g.nodes);
  return g;
}

GroupPlacement RankLayout::group(Dim d, int members, int every) const {
  // Members at increasing ranks: count the node changes (allocation-free, the search's hot path).
  const int k = members > 0 ? members : size(d);
  const int st = stride(d) * every;
  GroupPlacement g;
  g.size = k;
  g.nodes = 0;
  int last_node = -1;
  for (int i = 0; i < k; ++i) {
    const int node = (i * st) / per_node_;
    if (node != last_node) {
      ++g.nodes;
      last_node = node;
    }
  }
  g.ranks_per_node = k / g.nodes;
  return g;
}

GroupPlacement RankLayout::dp_cp_group(int dp_members, int dp_every) const {
  if (size(Dim::cp) == 1) return group(Dim::dp, dp_members, dp_every);
  const int k = dp_members > 0 ? dp_members : size(Dim::dp);
  std::vector<int> ranks;
  for (int c = 0; c < size(Dim::cp); ++c)
    for (int i = 0; i < k; ++i) ranks.push_back(c * stride(Dim::cp) + i * dp_every * stride(Dim::dp));
  return placement(ranks);
}

GroupPlacement RankLayout::expert_group(ExpertDim d, int etp, int ep) const {
  // Stage 0's ranks in rank order: every rank whose pp coordinate is 0.
  std::vector<int> stage;
  const int world = size_[0] * size_[1] * size_[2] * size_[3];
  for (int r = 0; r < world; ++r)
    if ((r / stride(Dim::pp)) % size(Dim::pp) == 0) stage.push_back(r);
  const int n = static_cast<int>(stage.size());
  const int first = d == ExpertDim::etp ? 1 : d == ExpertDim::ep ? etp : etp * ep;
  const int count = d == ExpertDim::etp ? etp : d == ExpertDim::ep ? ep : n / (etp * ep);
  std::vector<int> ranks;
  for (int i = 0; i < count; ++i) ranks.push_back(stage[static_cast<std::size_t>(i * first)]);
  return placement(ranks);
}

bool RankLayout::pp_hop_crosses_nodes(int stage) const {
  const int a = stage * stride(Dim::pp);
  const int b = (stage + 1) * stride(Dim::pp);
  return a / per_node_ != b / per_node_;
}

bool RankLayout::pp_ends_cross_nodes() const {
  return 0 / per_node_ != (size(Dim::pp) - 1) * stride(Dim::pp) / per_node_;
}

}  // namespace shardplan::simulator
