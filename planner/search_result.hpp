#pragma once
// Internal to the search: per-thread accumulators (bounded top list, Pareto front, rejected
// regions) and the deterministic merge that turns them into a SearchResult.
#include <limits>
#include <map>
#include <vector>

#include "search_point.hpp"

namespace shardplan::planner::detail {

bool known_feature(const std::string& f);
std::string feature_list();
bool meets(const PointKey& k, const Constraints& c);

// What one block (outer loop point) contributed to the region statistics.
struct BlockTally {
  long long evaluated = 0, fits = 0, allowed = 0;
  double min_excess = std::numeric_limits<double>::infinity();
  PointKey closest;
  int node_index = 0;
  bool have_closest = false;
  void add(const Point& p, bool allowed_by_constraints, double usable);
  void pruned(long long n, double excess, const PointKey& k, int node_index);
  // n points skipped by the step-time bound: better ones exist, so the region is not rejected.
  void outranked(long long n);
  long long skipped_by_bound = 0;
};

struct RegionAcc {
  long long evaluated = 0, fits = 0, allowed = 0;
  bool price_rejected = false;
  long long outranked = 0;  // points skipped by the step-time bound (better ones exist)
  double min_excess = std::numeric_limits<double>::infinity();
  PointKey closest;
  int node_index = 0;
  bool have_closest = false;
  void merge(const RegionAcc& o);
};

class ThreadState {
 public:
  explicit ThreadState(int capacity) : capacity_(capacity) {}
  void offer(const Point& p);  // offer_front, then offer_ranked
  void offer_front(const Point& p);
  void offer_ranked(const Point& p);
  // Whether offer_ranked(p) would keep it: the list has room or holds a worse point.
  [[nodiscard]] bool would_rank(const Point& p) const;
  // Whether offer_front(p) would keep it: no point of the front dominates it (or is it).
  [[nodiscard]] bool would_front(const Point& p) const;
  void record_block(int nodes, int tp, int pp, int zero, const BlockTally& t, bool price_ok);
  // Whether a block whose every point has at least these (objective score, time per token, USD
  // per token, memory) can add nothing: the list is full of better points and a point on the
  // front dominates the bounds (so it dominates every point of the block).
  [[nodiscard]] bool outranked(double score, double time_per_token, double usd_per_token, double memory) const;
  std::vector<Point> best;                           // max-heap by `better` (worst on top), size <= capacity
  std::vector<Point> front;                          // non-dominated in (time/token, usd/token, memory)
  std::map<std::pair<int, int>, RegionAcc> regions;  // (dimension, value)

 private:
  int capacity_;
};

// Lower bound on the worst stage's device memory over every micro-batch size, schedule and
// recompute choice of `cfg`'s block: model states, buffers and reserve with no activations.
double model_state_lower_bound(const simulator::Evaluator& ev, const simulator::ParallelConfig& cfg);

// The worker threads a search runs on: SearchOptions::threads, or every core when 0.
int thread_count(const SearchOptions& o);

// Build the ParallelConfig of a point (space supplies LoRA, sequence length, rank order...).
simulator::ParallelConfig config_of(const Point& p, const simulator::ModelSpec& m, const SearchSpace& space,
                                    const Constraints& c);

SearchResult finish(const simulator::ModelSpec& model, const std::vector<simulator::Evaluator>& evaluators,
                    const SearchSpace& space, const Constraints& constraints, const SearchOptions& options,
                    std::vector<ThreadState>& states);

}  // namespace shardplan::planner::detail
