#include "rank_layout.hpp"

#include <algorithm>

#include "errors.hpp"

namespace shardplan::simulator {
namespace {

[[noreturn]] void bad_order(const std::string& order) {
  throw InputError(
      "--rank-order: '" + order +
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

// A group whose `count` members rank_of(0), rank_of(1), ... rise with i: its nodes are the node
// changes along the way (allocation-free, the search's hot path).
template <class RankOf>
GroupPlacement rising_placement(int count, int per_node, RankOf rank_of) {
  GroupPlacement g;
  g.size = count;
  g.nodes = 0;
  int last_node = -1;
  for (int i = 0; i < count; ++i) {
    const int node = rank_of(i) / per_node;
    if (node != last_node) {
      ++g.nodes;
      last_node = node;
    }
  }
  g.ranks_per_node = count / std::max(1, g.nodes);
  return g;
}

}  // namespace

RankLayout::RankLayout(const std::string& order, int tp, int cp, int dp, int pp, int devices_per_node)
    : size_{tp, dp, pp, cp}, per_node_(devices_per_node) {
  // The search builds a layout per configuration from one order string: parse it once per thread.
  thread_local std::string parsed_order;
  thread_local std::vector<int> parsed_dims;
  if (parsed_dims.empty() || order != parsed_order) {
    parsed_dims = parse_order(order);
    parsed_order = order;
  }
  int stride = 1;
  for (const int d : parsed_dims) {
    stride_[d] = stride;
    stride *= size_[d];
  }
}

GroupPlacement RankLayout::placement(const std::vector<int>& ranks) const {
  thread_local std::vector<unsigned char> seen;  // reused: the search calls this per configuration
  GroupPlacement g;
  g.size = static_cast<int>(ranks.size());
  g.nodes = 0;
  for (const int r : ranks) {
    const auto node = static_cast<std::size_t>(r / per_node_);
    if (node >= seen.size()) seen.resize(node + 1, 0);
    if (!seen[node]) ++g.nodes, seen[node] = 1;
  }
  for (const int r : ranks) seen[static_cast<std::size_t>(r / per_node_)] = 0;
  g.ranks_per_node = g.size / std::max(1, g.nodes);
  return g;
}

GroupPlacement RankLayout::group(Dim d, int members, int every) const {
  const int k = members > 0 ? members : size(d);
  const int st = stride(d) * every;
  return rising_placement(k, per_node_, [&](int i) { return i * st; });
}

GroupPlacement RankLayout::dp_cp_group(int dp_members, int dp_every) const {
  if (size(Dim::cp) == 1) return group(Dim::dp, dp_members, dp_every);
  const int k = dp_members > 0 ? dp_members : size(Dim::dp);
  thread_local std::vector<int> ranks;
  ranks.clear();
  for (int c = 0; c < size(Dim::cp); ++c)
    for (int i = 0; i < k; ++i) ranks.push_back(c * stride(Dim::cp) + i * dp_every * stride(Dim::dp));
  return placement(ranks);
}

GroupPlacement RankLayout::expert_group(ExpertDim d, int etp, int ep) const {
  // Stage 0's ranks in rank order are those with pp coordinate 0: the j-th is
  // j % sp + (j / sp) * sp * P (sp the pp stride, P the pp size). The group takes every
  // `first`-th of them, so its members rise with i and the node changes count its nodes.
  const int sp = stride(Dim::pp), P = size(Dim::pp);
  const int n = size_[0] * size_[1] * size_[2] * size_[3] / P;
  const int first = d == ExpertDim::etp ? 1 : d == ExpertDim::ep ? etp : etp * ep;
  const int count = d == ExpertDim::etp ? etp : d == ExpertDim::ep ? ep : n / (etp * ep);
  return rising_placement(count, per_node_, [&](int i) {
    const int j = i * first;
    return j % sp + (j / sp) * sp * P;
  });
}

bool RankLayout::stages_on_different_nodes(int a, int b) const {
  return a * stride(Dim::pp) / per_node_ != b * stride(Dim::pp) / per_node_;
}

bool RankLayout::pp_hop_crosses_nodes(int stage) const { return stages_on_different_nodes(stage, stage + 1); }

bool RankLayout::pp_ends_cross_nodes() const { return stages_on_different_nodes(0, size(Dim::pp) - 1); }

}  // namespace shardplan::simulator
