#include "v_schedules.hpp"

// V-Half / V-Min: a port of sail-sg/zero-bubble-pipeline-parallelism
// megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py @ 39f2c186 (function by
// function, line numbers at each). Op types there: 0 F chunk 0, 1 F chunk 1, 2 B chunk 1, 3 B
// chunk 0, 4 W chunk 1 (W of either chunk before the split), 5 W chunk 0 (create_schedule
// 260-277). A schedule is, per rank, per type, per micro-batch: a slot (unit time step).

#include <algorithm>
#include <climits>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <tuple>
#include <utility>

#include "errors.hpp"

namespace shardplan::simulator {
namespace v_greedy_detail {  // named, not anonymous: the simulator's sources share unity units

using Lists = std::vector<std::vector<int>>;  // [type][mb] -> slot, one rank
using Ranks = std::vector<Lists>;
using Head = std::tuple<int, int, int, int>;  // (slot, rank, type, mb): the references' min() order
using Queue = std::priority_queue<Head, std::vector<Head>, std::greater<>>;

int last_slot(const Lists& s) {
  int bound = INT_MIN;
  for (const auto& t : s) bound = std::max(bound, t.back());
  return bound;
}

int max_slot(const Lists& s) {
  int most = INT_MIN;
  for (const auto& t : s)
    for (int x : t) most = std::max(most, x);
  return most;
}

// The earliest op not consumed yet over types [0, n): (slot, type), slot `inf` when none is left.
std::pair<int, int> next_op(const Lists& s, const std::vector<std::size_t>& at, std::size_t n, int inf) {
  std::pair<int, int> best{INT_MAX, INT_MAX};
  for (std::size_t t = 0; t < n; ++t)
    best = std::min(best, {at[t] < s[t].size() ? s[t][at[t]] : inf, static_cast<int>(t)});
  return best;
}

// put_w (44-72): walking the slots, each empty one takes a pending W (chunk 1's first when split).
void put_w(Lists& s, bool split) {
  SHARDPLAN_CHECK(s.size() == 4, "put_w: expected F, f, B, b lists");
  const int bound = last_slot(s), inf = bound + 1;
  s.resize(split ? 6 : 5);
  int pending[2] = {0, 0};
  std::vector<std::size_t> at(s.size(), 0);
  for (int i = 0; i <= bound; ++i) {
    const auto [time, type] = next_op(s, at, 4, inf);
    SHARDPLAN_CHECK(time != inf, "put_w: ran out of ops");
    if (time == i) {
      ++at[static_cast<std::size_t>(type)];
      if (type >= 2) ++pending[split ? type - 2 : 0];
      continue;
    }
    for (int w = 0; w < 2; ++w)
      if (pending[w]) {
        s[static_cast<std::size_t>(4 + w)].push_back(i);
        --pending[w];
        break;
      }
  }
  int i = bound;
  for (int w = 0; w < 2; ++w)
    for (; pending[w] > 0; --pending[w]) s[static_cast<std::size_t>(4 + w)].push_back(++i);
}

// mem_of_stage (74-97): the rank's peak count, +1 at F, -1 at W; without W lists a W is assumed
// in each empty slot.
int mem_of_stage(const Lists& s) {
  static constexpr int kMemory[] = {1, 1, 0, 0, -1};
  const bool has_w = s.size() > 4;
  const int bound = last_slot(s), inf = bound + 1;
  int pending = 0, cur = 0, peak = 0;
  std::vector<std::size_t> at(s.size(), 0);
  for (int i = 0; i <= bound; ++i) {
    const auto [time, type] = next_op(s, at, s.size(), inf);
    SHARDPLAN_CHECK(time != inf, "mem_of_stage: ran out of ops");
    if (time == i) {
      ++at[static_cast<std::size_t>(type)];
      cur += kMemory[type];
      if (type == 2 || type == 3) ++pending;
    } else if (!has_w && pending) {
      cur += kMemory[4];
      --pending;
    }
    peak = std::max(peak, cur);
  }
  return peak;
}

// Every (rank, type)'s first op, for the references' repeated min() over heads.
Queue heads(const Ranks& r) {
  Queue q;
  for (std::size_t d = 0; d < r.size(); ++d)
    for (std::size_t t = 0; t < r[d].size(); ++t)
      if (!r[d][t].empty()) q.emplace(r[d][t][0], static_cast<int>(d), static_cast<int>(t), 0);
  return q;
}

void advance(Queue& q, const Ranks& r, const Head& h) {
  const auto [slot, d, t, mb] = h;
  const auto& list = r[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)];
  if (static_cast<std::size_t>(mb + 1) < list.size()) q.emplace(list[static_cast<std::size_t>(mb + 1)], d, t, mb + 1);
}

struct Eager {
  Ranks start;                                          // [rank][type][mb]: start time at unit costs
  std::vector<std::vector<std::pair<int, int>>> order;  // per rank: (type, mb) in run order
};

// eager_execution_time (100-145, "squeeze") at unit costs and no communication, the only costs
// the orders are built with (the final call's costs change times, not the order).
Eager eager(const Ranks& r) {
  const std::size_t ranks = r.size(), types = r[0].size();
  std::vector<std::map<std::pair<int, int>, int>> end(ranks);  // (type, mb) -> end
  Eager out{r, std::vector<std::vector<std::pair<int, int>>>(ranks)};
  auto done = [&](int d, int t, int mb) {
    const auto it = end[static_cast<std::size_t>(d)].find({t, mb});
    SHARDPLAN_CHECK(it != end[static_cast<std::size_t>(d)].end(), "v schedule: an op runs before its dependency");
    return it->second;
  };
  for (Queue q = heads(r); !q.empty();) {
    const Head h = q.top();
    q.pop();
    advance(q, r, h);
    const auto [slot, d, t, mb] = h;
    int deps = 0;
    if ((t == 0 || t == 2) && d > 0) deps = std::max(deps, done(d - 1, t, mb));
    if ((t == 1 || t == 3) && d + 1 < static_cast<int>(ranks)) deps = std::max(deps, done(d + 1, t, mb));
    if (t > 0 && t < 4) deps = std::max(deps, done(d, t - 1, mb));
    if (mb > 0) deps = std::max(deps, done(d, t, mb - 1));
    auto& order = out.order[static_cast<std::size_t>(d)];
    if (!order.empty()) deps = std::max(deps, done(d, order.back().first, order.back().second));
    end[static_cast<std::size_t>(d)][{t, mb}] = deps + 1;
    out.start[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)][static_cast<std::size_t>(mb)] = deps;
    order.emplace_back(t, mb);
  }
  SHARDPLAN_CHECK(types == out.start[0].size(), "v schedule: types changed");
  return out;
}

// reorder's earliest slot an op may move to (172-188): after its dependencies' slots.
int earliest_slot(const Ranks& r, int d, int t, int mb) {
  const auto& own = r[static_cast<std::size_t>(d)];
  auto at = [](const std::vector<int>& list, int j) { return list[static_cast<std::size_t>(j)]; };
  int deps = -1;
  if ((t == 0 || t == 2) && d > 0) deps = std::max(deps, at(r[static_cast<std::size_t>(d - 1)][t], mb));
  if ((t == 1 || t == 3) && d + 1 < static_cast<int>(r.size()))
    deps = std::max(deps, at(r[static_cast<std::size_t>(d + 1)][t], mb));
  if (t > 0 && t < 4) deps = std::max(deps, at(own[static_cast<std::size_t>(t - 1)], mb));
  if (t == 4) {  // the mb-th B of either chunk on the rank
    std::vector<int> b = own[2];
    b.insert(b.end(), own[3].begin(), own[3].end());
    std::nth_element(b.begin(), b.begin() + mb, b.end());
    deps = std::max(deps, b[static_cast<std::size_t>(mb)]);
  }
  if (mb > 0) deps = std::max(deps, at(own[static_cast<std::size_t>(t)], mb - 1));
  return deps + 1;
}

// reorder (147-215): outside the steady phase, move each op to the earliest free slot after its
// dependencies that keeps the rank's peak count within the schedule's; then squeeze.
Ranks reorder(Ranks r, bool consider_w) {
  if (consider_w)
    for (auto& s : r) put_w(s, false);
  int current_mem = 0;
  for (const auto& s : r) current_mem = std::max(current_mem, mem_of_stage(s));
  std::vector<std::vector<char>> occupied;
  for (const auto& s : r) occupied.emplace_back(static_cast<std::size_t>(max_slot(s) + 1), 0);
  const int last_mb = static_cast<int>(r[0][0].size()) - 1;
  int phase = 0;
  for (Queue q = heads(r); !q.empty();) {
    const Head h = q.top();
    q.pop();
    advance(q, r, h);
    const auto [time, d, t, mb] = h;
    auto& slot = r[static_cast<std::size_t>(d)][static_cast<std::size_t>(t)][static_cast<std::size_t>(mb)];
    auto& busy = occupied[static_cast<std::size_t>(d)];
    if (t == 3 && d == 0 && phase == 0) phase = 1;
    const bool keep = phase == 1 || (phase == 0 && !consider_w);
    if (phase == 1 && t == 0 && mb == last_mb) phase = 2;
    if (keep) {
      busy[static_cast<std::size_t>(slot)] = 1;
      continue;
    }
    const int deps = earliest_slot(r, d, t, mb);
    SHARDPLAN_CHECK(deps <= time, "v schedule: an op sits before its dependency");
    bool ok = false;
    for (int s = deps; s < time && !ok; ++s) {
      if (busy[static_cast<std::size_t>(s)]) continue;
      slot = s;
      ok = mem_of_stage(r[static_cast<std::size_t>(d)]) <= current_mem;
    }
    if (!ok) slot = time;
    busy[static_cast<std::size_t>(slot)] = 1;
  }
  if (!consider_w)
    for (auto& s : r) put_w(s, false);
  return eager(r).start;
}

// The building blocks (22-42): per rank, the first slot of types 0-3; micro-batch j sits 6 j later.
Ranks pattern(PipelineSchedule s, int p, int m) {
  Ranks r(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) {
    std::vector<int> first;
    if (s == PipelineSchedule::vmin) {
      const int gap = p % 3 == 0 ? 2 : 0;
      first = {i, 2 * p - i - 1, 2 * p + gap + i, 4 * p + gap - i - 1};
    } else {
      const int gap = p % 2 == 0 ? 3 : 0;
      first = {2 * i, 3 * p - i - 2, 3 * p + gap + 2 * i - 1, 6 * p + gap - i - 2};
    }
    for (int x : first) {
      auto& list = r[static_cast<std::size_t>(i)].emplace_back();
      for (int j = 0; j < m; ++j) list.push_back(x + 6 * j);
    }
  }
  return r;
}

// schedule_from_pattern (217-233): reorder with W's, reorder again without, split the W's by chunk.
std::vector<std::vector<PipelineOp>> greedy_orders(PipelineSchedule s, int p, int m) {
  auto drop_w = [](Ranks r) {
    for (auto& x : r) x.resize(4);
    return r;
  };
  Ranks r2 = drop_w(reorder(drop_w(reorder(pattern(s, p, m), true)), false));
  for (auto& x : r2) put_w(x, true);
  static constexpr PipelineOp kOp[] = {{0, 0, false, false}, {1, 0, false, false}, {1, 0, true, false},
                                       {0, 0, true, false},  {1, 0, true, true},   {0, 0, true, true}};
  std::vector<std::vector<PipelineOp>> out;
  for (const auto& rank : eager(r2).order) {
    auto& ops = out.emplace_back();
    for (const auto& [t, mb] : rank) {
      PipelineOp op = kOp[t];
      op.mb = mb;
      ops.push_back(op);
    }
  }
  return out;
}

}  // namespace v_greedy_detail

std::vector<std::vector<PipelineOp>> v_greedy_orders(PipelineSchedule s, int p, int m) {
  SHARDPLAN_CHECK(s == PipelineSchedule::vhalf || s == PipelineSchedule::vmin, "v_greedy_orders: vhalf or vmin");
  // The greedy is quadratic in m: keep the last few (schedule, p, m) a process asked for.
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, std::vector<std::vector<PipelineOp>>> cache;
  const std::tuple<int, int, int> key{static_cast<int>(s), p, m};
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  auto orders = v_greedy_detail::greedy_orders(s, p, m);
  const std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 32) cache.clear();
  cache.emplace(key, orders);
  return orders;
}

// DualPipeV's eight steps: deepseek-ai/DualPipe dualpipev.py:330-396 @ 3da1bbe (PyTorch's
// ScheduleDualPipeV issues the same lists). B's push their W on a FIFO the W steps pop
// (WeightGradStore, utils.py:8-33); a backward not split off runs whole (full).
std::vector<PipelineOp> dualpipev_order(int p, int m, int r) {
  int f[2] = {0, 0}, b[2] = {0, 0};
  std::deque<std::pair<int, int>> pending;  // (chunk, mb) of B's whose W is still to run
  std::vector<PipelineOp> ops;
  auto fwd = [&](int c) { ops.push_back({c, f[c]++, false, false}); };
  auto bwd = [&](int c, bool split) {
    ops.push_back({c, b[c], true, false, !split});
    if (split) pending.emplace_back(c, b[c]);
    ++b[c];
  };
  auto weight = [&] {
    ops.push_back({pending.front().first, pending.front().second, true, true});
    pending.pop_front();
  };
  auto pair = [&](int fc, int bc) { ops.push_back({fc, f[fc]++, false, false, false, bc, b[bc]++}); };
  for (int i = 0; i < 2 * (p - r - 1); ++i) fwd(0);  // 1: nF0
  for (int i = 0; i < r + 1; ++i) fwd(0), fwd(1);    // 2: nF0F1
  for (int i = 0; i < p - r - 1; ++i) {              // 3: nB1W1F1
    bwd(1, true);
    weight();
    fwd(1);
  }
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {  // 4: nF0B1F1B0; the last rank's first pair not overlapped
    if (i == 0 && r == p - 1) fwd(0), bwd(1, false);
    else pair(0, 1);
    pair(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) bwd(1, false), pair(1, 0);  // 5: nB1F1B0
  bool zb = false;                                                // 6: nB1B0, the second half split
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) zb = true;
    bwd(1, zb);
    if (i == (r + 1) / 2 && r % 2 == 0) zb = true;
    bwd(0, zb);
  }
  for (int i = 0; i < p - r - 1; ++i) weight(), bwd(0, true);  // 7: nWB0
  while (!pending.empty()) weight();                           // 8: nW (r + 1 of them)
  return ops;
}

// DualPipe's eight steps (deepseek-ai/DualPipe dualpipe.py:355-425 @ 3da1bbe) are DualPipeV's
// (dualpipev.py:330-396) on half_rank = min(r, p - 1 - r) of p / 2 with m / 2 micro-batches
// (dualpipe.py:334-336): the same loops, the same zero-bubble switches, the middle ranks' first
// pair not overlapped as DualPipeV's last rank's (dualpipe.py:385 and dualpipev.py:355). A rank of
// the second half reads its phases the other way round (dualpipe.py:91, phase ^= is_in_second_half):
// its phase 0 is the reverse direction.
std::vector<PipelineOp> dualpipe_order(int p, int m, int r) {
  const int half = p / 2;
  const bool second_half = r >= half;
  std::vector<PipelineOp> ops = dualpipev_order(half, m / 2, second_half ? p - 1 - r : r);
  if (second_half)
    for (PipelineOp& op : ops) {
      op.chunk ^= 1;
      if (op.overlap_chunk >= 0) op.overlap_chunk ^= 1;
    }
  return ops;
}

}  // namespace shardplan::simulator
