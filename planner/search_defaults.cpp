#include "search_defaults.hpp"

#include <cstdio>
#include <vector>

#include "search.hpp"

namespace shardplan::planner {

namespace sim = shardplan::simulator;

namespace {

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

template <typename E>
std::string join_names(const std::vector<E>& v) {
  std::string out;
  for (E x : v) out += (out.empty() ? "" : ",") + std::string(sim::name_of(x));
  return out;
}

SearchDefaults make_defaults() {
  const SearchSpace s;
  const Constraints c;
  const SearchOptions o;
  SearchDefaults d;
  d.nodes = join_ints(s.node_counts);
  d.global_batch_sizes = join_ints(s.global_batch_sizes);
  d.micro_batch_sizes = join_ints(s.micro_batch_sizes);
  d.zero_stages = join_ints(s.zero_stages);
  d.schedules = join_names(s.schedules);
  d.virtual_stages = join_ints(s.virtual_stages);
  d.recomputes = join_names(s.recomputes);
  d.precisions = join_names(s.precisions);
  d.mixed_precision = sim::name_of(s.mixed_precision);
  d.attention = sim::name_of(s.attention);
  d.fusion = sim::name_of(s.fusion);
  d.grad_accum_dtype = sim::name_of(s.grad_accum_dtype);
  d.cp_kind = sim::name_of(s.cp_kind);
  d.rank_order = s.rank_order;
  d.seq_len = s.seq_len;
  d.packed_document_tokens = s.packed_document_tokens;
  d.lora_rank = s.lora.rank;
  d.lora_alpha = s.lora.alpha;
  d.lora_dropout = s.lora.dropout;
  d.lora_base = sim::name_of(s.lora.base);
  d.memory_headroom = c.memory_headroom;
  d.max_nodes = c.max_nodes;
  d.max_tp = c.max_tp;
  d.max_usd_per_hour = c.max_usd_per_hour;
  d.objective = sim::name_of(o.objective);
  d.top_k = o.top_k;
  return d;
}

}  // namespace

const SearchDefaults& search_defaults() {
  static const SearchDefaults d = make_defaults();
  return d;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace shardplan::planner
