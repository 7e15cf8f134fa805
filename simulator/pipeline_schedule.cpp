#include "pipeline_schedule.hpp"

// Legend: p = stages, m = micro-batches, v = model chunks per stage (virtual_stages),
// vs = chunk * p + stage (virtual stage), F / B = forward / backward of one micro-batch through
// one chunk ("op"). Each stage runs its own op list strictly in order; an op starts at
// max(stage free, dependency end [+ p2p_s if the dependency ran on another stage]).
// Op orders follow Megatron-LM schedules.py (forward_backward_pipelining_without_interleaving /
// _with_interleaving) and Narayanan et al. 2021 §2.2.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "errors.hpp"
#include "v_schedules.hpp"

namespace shardplan::simulator {
namespace {

using Op = PipelineOp;

void require_times(const std::vector<double>& t, std::size_t n, const char* field, bool allow_empty) {
  if (allow_empty && t.empty()) return;
  if (t.size() != n) {
    throw InputError("pipeline." + std::string(field) + ": expected " + std::to_string(n) +
                     " entries (stages * virtual_stages), got " + std::to_string(t.size()));
  }
  for (double x : t) {
    if (!std::isfinite(x) || x < 0) {
      throw InputError("pipeline." + std::string(field) + ": expected finite non-negative values, got " +
                       std::to_string(x));
    }
  }
}

void validate(const PipelineInput& in) {
  if (in.stages < 1) { throw InputError("pipeline.stages: expected >= 1, got " + std::to_string(in.stages)); }
  if (in.micro_batches < 1) {
    throw InputError("pipeline.micro_batches: expected >= 1, got " + std::to_string(in.micro_batches));
  }
  if (in.schedule == PipelineSchedule::interleaved) {
    if (in.virtual_stages < 2) {
      throw InputError("pipeline.virtual_stages: interleaved schedule needs >= 2, got " +
                       std::to_string(in.virtual_stages));
    }
    if (in.micro_batches % in.stages != 0) {
      throw InputError("pipeline.micro_batches: interleaved schedule needs a multiple of stages (" +
                       std::to_string(in.stages) + "), got " + std::to_string(in.micro_batches));
    }
  } else if (two_chunks(in.schedule)) {
    if (in.virtual_stages != 2) {
      throw InputError(std::string("pipeline.virtual_stages: schedule ") + to_string(in.schedule) +
                       " places two chunks per rank, got " + std::to_string(in.virtual_stages));
    }
    // dualpipe.py:332-333 @ 3da1bbe: num_ranks % 2 == 0, num_chunks % 2 == 0.
    if (bidirectional(in.schedule) && in.stages % 2 != 0)
      throw InputError("pipeline.stages: dualpipe pairs rank r with rank p - 1 - r, expected an even count, got " +
                       std::to_string(in.stages));
    if (bidirectional(in.schedule) && in.micro_batches % 2 != 0)
      throw InputError("pipeline.micro_batches: dualpipe sends half each way, expected an even count, got " +
                       std::to_string(in.micro_batches));
    if (in.micro_batches < min_micro_batches(in.schedule, in.stages))
      throw InputError(std::string("pipeline.micro_batches: schedule ") + to_string(in.schedule) + " needs at least " +
                       std::to_string(min_micro_batches(in.schedule, in.stages)) + " (2 x stages), got " +
                       std::to_string(in.micro_batches));
  } else if (in.virtual_stages != 1) {
    throw InputError(std::string("pipeline.virtual_stages: schedule ") + to_string(in.schedule) + " needs 1, got " +
                     std::to_string(in.virtual_stages));
  }
  // Op indices are ints: keep 2 * p * v * m well inside int range.
  const double pairs = static_cast<double>(in.stages) * in.virtual_stages * in.micro_batches;
  if (pairs > std::numeric_limits<int>::max() / 4) {
    throw InputError("pipeline: stages * virtual_stages * micro_batches too large (" + std::to_string(pairs) + ")");
  }
  const auto n = static_cast<std::size_t>(in.stages) * static_cast<std::size_t>(in.virtual_stages);
  require_times(in.forward_s, n, "forward_s", false);
  require_times(in.backward_s, n, "backward_s", false);
  require_times(in.stored_activation_bytes, n, "stored_activation_bytes", true);
  require_times(in.weight_grad_s, n, "weight_grad_s", true);
  for (std::size_t i = 0; i < in.weight_grad_s.size(); ++i)
    if (in.weight_grad_s[i] > in.backward_s[i])
      throw InputError("pipeline.weight_grad_s: expected at most the chunk's backward_s (" +
                       std::to_string(in.backward_s[i]) + "), got " + std::to_string(in.weight_grad_s[i]));
  if (!std::isfinite(in.p2p_s) || in.p2p_s < 0) {
    throw InputError("pipeline.p2p_s: expected a finite non-negative time, got " + std::to_string(in.p2p_s));
  }
}

// The k-th op of stage s (0 <= k < 2vm). Warmup forwards, steady F/B pairs, cooldown backwards:
// GPipe warms up with every forward; 1F1B (PipeDream-Flush) with p - s - 1; interleaved with
// Megatron-LM's (p - s - 1) * 2 + (v - 1) * p.
int warmup_forwards(PipelineSchedule schedule, int p, int m, int v, int s) {
  switch (schedule) {
    case PipelineSchedule::gpipe:
      return m;
    case PipelineSchedule::one_f_one_b:
      return std::min(p - s - 1, m);
    case PipelineSchedule::interleaved:
      return std::min((p - s - 1) * 2 + (v - 1) * p, m * v);
    case PipelineSchedule::zb1p:
    case PipelineSchedule::zb2p:
    case PipelineSchedule::zbv:
    case PipelineSchedule::vhalf:
    case PipelineSchedule::vmin:
    case PipelineSchedule::dualpipev:
    case PipelineSchedule::dualpipe:
      break;  // split_order
  }
  return m;
}

// Megatron-LM get_model_chunk_id / get_microbatch_id_in_model_chunk for the n-th forward or backward.
Op chunk_op(PipelineSchedule schedule, int n, int p, int v, bool backward) {
  if (schedule != PipelineSchedule::interleaved) return {0, n, backward};
  const int group = n % (p * v);
  const int chunk = group / p;
  const int mb = (n / (p * v)) * p + n % p;
  return {backward ? v - 1 - chunk : chunk, mb, backward};
}

Op op_at(PipelineSchedule schedule, int p, int m, int v, int s, int k) {
  const int total = m * v, w = warmup_forwards(schedule, p, m, v, s);
  if (k < w) return chunk_op(schedule, k, p, v, false);
  const int steady = 2 * (total - w);  // F/B pairs after the warmup
  if (k < w + steady) {
    const int j = k - w;
    return j % 2 == 0 ? chunk_op(schedule, w + j / 2, p, v, false) : chunk_op(schedule, j / 2, p, v, true);
  }
  return chunk_op(schedule, k - total, p, v, true);  // cooldown: backward k - total
}

// Zero-bubble handcrafted schedules (Qi et al., ICLR 2024, §3.1; ../shared/README.md §6 has their
// closed forms; docs/split_backward_schedules.md the references' orders). Stage s warms up with
// p - 1 - s forwards (ZB-H1, as 1F1B) or 2 (p - 1 - s) (ZB-H2), then runs F/B pairs with each W
// deferred by s (ZB-H1) or 2s (ZB-H2) micro-batches; the deferred W's close the step. ZB-H1 is
// PyTorch's ScheduleInterleavedZeroBubble with one stage per rank (_get_1f1b_rank_ops with
// num_1f1b_microbatches = rank, torch/distributed/pipelining/schedules.py @ 00722e64). ZB-H2 has no
// closed-form reference (sail-sg's zb.py heuristic reaches 2p in flight): this order meets the
// paper's bubble (p-1)(T_F+T_B-2T_W) on the first stage's span and its peak of 2p - 1 micro-batches
// (F started, W not done) on every stage. tests/simulator/test_zero_bubble.cpp checks both.
std::vector<Op> zero_bubble_order(PipelineSchedule schedule, int p, int m, int s) {
  const bool h2 = schedule == PipelineSchedule::zb2p;
  const int w = std::min(h2 ? 2 * (p - 1 - s) : p - 1 - s, m);
  const int delay = h2 ? 2 * s : s;
  std::vector<Op> ops;
  ops.reserve(3 * static_cast<std::size_t>(m));
  int next_w = 0;
  auto backward = [&](int j) {
    ops.push_back({0, j, true, false});
    if (j >= delay) ops.push_back({0, next_w++, true, true});
  };
  for (int f = 0; f < w; ++f) ops.push_back({0, f, false, false});
  for (int j = 0; j < m - w; ++j) {
    ops.push_back({0, w + j, false, false});
    backward(j);
  }
  for (int j = m - w; j < m; ++j) backward(j);
  while (next_w < m) ops.push_back({0, next_w++, true, true});
  return ops;
}

// ZBV, handcrafted: PyTorch ScheduleZBVZeroBubble._calculate_single_rank_operations (a copy of
// sail-sg zero-bubble-v0.1 handcrafted_zb_v.py:43-108 @ 93af65c6; pytorch @ 00722e64), ops of
// micro-batches past m dropped. Chunk 0 is the down leg (model stage r), chunk 1 the up leg.
std::vector<Op> zbv_order(int p, int m, int r) {
  const int n = std::max(2 * p - 1, m);
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  std::vector<Op> ops;
  auto put = [&](int chunk, int mb, bool backward, bool weight) {
    if (mb < m) ops.push_back({chunk, mb, backward, weight});
  };
  auto b_then_w = [&](int chunk, int& b) {
    put(chunk, b, true, false);
    put(chunk, b, true, true);
    ++b;
  };
  for (int i = 0; i < 2 * (p - r) - 1; ++i) put(0, f0++, false, false);
  for (int i = 0; i < r; ++i) put(1, f1++, false, false), put(0, f0++, false, false);
  for (int i = 0; i < p - r; ++i) put(1, f1++, false, false), b_then_w(1, b1);
  while (f1 < f0 || f0 < n) {
    if (f0 < n) put(0, f0++, false, false);
    b_then_w(0, b0);
    put(1, f1++, false, false);
    b_then_w(1, b1);
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < r; ++i) put(0, b0++, true, false), put(1, b1++, true, false);
  for (int i = 0; i < p - r; ++i) put(0, b0++, true, false), put(0, w0++, true, true);
  while (w1 < b1) put(1, w1++, true, true);
  while (w0 < b0) put(0, w0++, true, true);
  return ops;
}

// The op list of stage s under a schedule that splits the backward.
std::vector<Op> split_order(PipelineSchedule schedule, int p, int m, int s) {
  switch (schedule) {
    case PipelineSchedule::zbv:
      return zbv_order(p, m, s);
    case PipelineSchedule::vhalf:
    case PipelineSchedule::vmin:
      return v_greedy_orders(schedule, p, m)[static_cast<std::size_t>(s)];
    case PipelineSchedule::dualpipev:
      return dualpipev_order(p, m, s);
    case PipelineSchedule::dualpipe:
      return dualpipe_order(p, m, s);
    default:
      return zero_bubble_order(schedule, p, m, s);
  }
}

// The event simulation proper: per-stage cursors advanced from a worklist of stages.
class Simulation {
 public:
  Simulation(const PipelineInput& in, bool record_events)
      : in_(in),
        p_(in.stages),
        v_(in.virtual_stages),
        m_(in.micro_batches),
        split_(splits_backward(in.schedule)),
        v_shape_(v_shaped(in.schedule)),
        bidir_(bidirectional(in.schedule)),
        record_(record_events),
        next_(static_cast<std::size_t>(p_), 0),
        stage_free_(next_.size(), 0.0),
        busy_(next_.size(), 0.0),
        held_(next_.size(), 0),
        held_bytes_(next_.size(), 0.0),
        most_held_(next_.size(), 0),
        peak_bytes_(next_.size(), 0.0),
        f_end_(static_cast<std::size_t>(p_) * v_ * m_, kNotDone),
        b_end_(f_end_.size(), kNotDone),
        cursor_(record_events ? next_.size() : 0) {
    if (in.schedule == PipelineSchedule::vhalf || in.schedule == PipelineSchedule::vmin)
      split_orders_ = v_greedy_orders(in.schedule, p_, m_);
    else if (split_)
      for (int s = 0; s < p_; ++s) split_orders_.push_back(split_order(in.schedule, p_, m_, s));
    // One flat list, stage-major, sized once (the search's finish simulates thousands of pipelines):
    // stage s writes from its offset. A full backward is 2 events and an overlapped pair 3 (F, and
    // the full backward's B and W), so DualPipeV's slots are a bound, compacted after the run.
    const bool pairs = in.schedule == PipelineSchedule::dualpipev || bidir_;
    const std::size_t per_op = pairs ? 3 : 1;
    std::size_t total = 0;
    for (std::size_t s = 0; s < cursor_.size(); ++s) {
      cursor_[s] = total;
      total += per_op * ops_of(static_cast<int>(s));
    }
    events_.resize(total);
    first_ = cursor_;
  }

  // Any sweep order gives the same times: an op's start depends only on its stage's previous op
  // and its dependencies, all already final when it is scheduled. Each scheduled op wakes at
  // most two other stages, so this is O(total ops).
  std::vector<PipelineEvent> run() {
    std::vector<int> work;
    std::vector<char> queued(next_.size(), 1);
    for (int s = p_ - 1; s >= 0; --s) work.push_back(s);
    auto wake = [&](int consumer) {
      if (consumer >= 0 && !queued[idx(consumer)]) {
        queued[idx(consumer)] = 1;
        work.push_back(consumer);
      }
    };
    while (!work.empty()) {
      const int s = work.back();
      work.pop_back();
      queued[idx(s)] = 0;
      while (next_[idx(s)] < ops_of(s)) {
        const Op op = split_ ? split_orders_[idx(s)][next_[idx(s)]]
                             : op_at(in_.schedule, p_, m_, v_, s, static_cast<int>(next_[idx(s)]));
        if (!try_schedule(s, op)) break;
        wake(consumer_stage(s, op));
        if (op.overlap_chunk >= 0) wake(consumer_stage(s, {op.overlap_chunk, op.overlap_mb, true}));
      }
    }
    std::size_t kept = 0;  // compacts the unused slots of DualPipe(V)'s stages
    for (int s = 0; s < p_; ++s) {
      SHARDPLAN_CHECK(next_[idx(s)] == ops_of(s), "pipeline schedule deadlocked: stage " + std::to_string(s) +
                                                      " blocked at op " + std::to_string(next_[idx(s)]));
      if (!record_) continue;
      for (std::size_t i = first_[idx(s)]; i < cursor_[idx(s)]; ++i) events_[kept++] = events_[i];
    }
    events_.resize(kept);
    return std::move(events_);
  }

  // After run(): when the last op of any stage ends.
  [[nodiscard]] double makespan() const { return *std::max_element(stage_free_.begin(), stage_free_.end()); }

  // After run(): per-stage busy time, end, in-flight and activation peaks, and the makespan.
  void summarize(PipelineResult& r) const {
    r.stage_busy_s = busy_;
    r.stage_end_s = stage_free_;
    r.max_in_flight = most_held_;
    r.peak_stored_activation_bytes = peak_bytes_;
    r.makespan_s = makespan();
  }

 private:
  static constexpr double kNotDone = -1.0;

  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
  std::size_t vs(int chunk, int stage) const { return idx(chunk * p_ + stage); }
  std::size_t slot(int chunk, int stage, int mb) const { return vs(chunk, stage) * idx(m_) + idx(mb); }
  std::size_t ops_of(int s) const {
    return split_ ? split_orders_[idx(s)].size() : 2 * static_cast<std::size_t>(v_) * static_cast<std::size_t>(m_);
  }

  struct Dep {
    int stage = -1;    // stage the dependency ran on; -1 when the op has none
    double end = 0.0;  // its end time, kNotDone while pending
  };

  // The op's single dependency (see the legend; last virtual stage's B waits on its own F; a W
  // on its own B).
  Dep dependency(int s, const Op& op) const {
    if (op.weight) return {s, b_end_[slot(op.chunk, s, op.mb)]};
    if (v_shape_) return v_dependency(s, op);
    if (bidir_) return bidirectional_dependency(s, op);
    if (!op.backward) {
      if (s > 0) return {s - 1, f_end_[slot(op.chunk, s - 1, op.mb)]};
      if (op.chunk > 0) return {p_ - 1, f_end_[slot(op.chunk - 1, p_ - 1, op.mb)]};
      return {};
    }
    if (s < p_ - 1) return {s + 1, b_end_[slot(op.chunk, s + 1, op.mb)]};
    if (op.chunk < v_ - 1) return {0, b_end_[slot(op.chunk + 1, 0, op.mb)]};
    return {s, f_end_[slot(op.chunk, s, op.mb)]};
  }

  // V placement: the forward runs chunk 0 down the ranks, turns on rank p - 1 into chunk 1 and
  // runs it back up; the backward the reverse way, the last model stage (chunk 1 on rank 0)
  // starting from its own forward.
  Dep v_dependency(int s, const Op& op) const {
    if (!op.backward) {
      if (op.chunk == 0) return s > 0 ? Dep{s - 1, f_end_[slot(0, s - 1, op.mb)]} : Dep{};
      return s < p_ - 1 ? Dep{s + 1, f_end_[slot(1, s + 1, op.mb)]} : Dep{s, f_end_[slot(0, s, op.mb)]};
    }
    if (op.chunk == 1) return s > 0 ? Dep{s - 1, b_end_[slot(1, s - 1, op.mb)]} : Dep{s, f_end_[slot(1, s, op.mb)]};
    return s < p_ - 1 ? Dep{s + 1, b_end_[slot(0, s + 1, op.mb)]} : Dep{s, b_end_[slot(1, s, op.mb)]};
  }

  // DualPipe: chunk 0 runs forward down the ranks (0 -> p - 1), chunk 1 up (p - 1 -> 0); each
  // direction's last stage starts the backward from its own forward, which runs back the other way.
  Dep bidirectional_dependency(int s, const Op& op) const {
    const int from = op.chunk == 0 ? s - 1 : s + 1;  // the forward's upstream rank
    const bool first = from < 0 || from >= p_;
    if (!op.backward) return first ? Dep{} : Dep{from, f_end_[slot(op.chunk, from, op.mb)]};
    const int to = op.chunk == 0 ? s + 1 : s - 1;  // the backward's upstream rank
    if (to < 0 || to >= p_) return {s, f_end_[slot(op.chunk, s, op.mb)]};
    return {to, b_end_[slot(op.chunk, to, op.mb)]};
  }

  // Stage that runs the op waiting on this one (-1 if none).
  int consumer_stage(int s, const Op& op) const {
    if (op.weight) return -1;
    if (bidir_) {
      const int along = op.chunk == 0 ? s + 1 : s - 1;  // the direction's next rank
      const int next = op.backward ? 2 * s - along : along;
      if (next >= 0 && next < p_) return next;
      return op.backward ? -1 : s;  // a last stage's forward feeds its own backward
    }
    if (v_shape_) {  // the turns at rank p - 1 (forward) and back (backward) stay on the rank
      const bool down = op.chunk == 0;
      if (!op.backward) return down ? (s < p_ - 1 ? s + 1 : s) : (s > 0 ? s - 1 : s);
      return down ? (s > 0 ? s - 1 : -1) : (s < p_ - 1 ? s + 1 : s);
    }
    if (!op.backward) return s < p_ - 1 ? s + 1 : (op.chunk < v_ - 1 ? 0 : s);
    if (s > 0) return s - 1;
    return op.chunk > 0 ? p_ - 1 : -1;
  }

  double ready(int s, const Dep& dep) const { return dep.end + (dep.stage >= 0 && dep.stage != s ? in_.p2p_s : 0.0); }

  bool try_schedule(int s, const Op& op) {
    if (op.overlap_chunk >= 0) return try_pair(s, op);
    const Dep dep = dependency(s, op);
    if (dep.end < 0) return false;  // kNotDone
    execute(s, op, std::max(stage_free_[idx(s)], ready(s, dep)), false);
    ++next_[idx(s)];
    return true;
  }

  // DualPipe's overlapped forward and full backward, one op. Rule (ours; DualPipe's README has
  // F&B only as a measured time): the two computes run back to back, F + B long, as PyTorch's
  // OVERLAP_F_B does without a custom callback; each half's input transfer hides behind the other
  // half: the half whose input arrives first runs first. Both results leave when the pair ends
  // (dualpipev.py:207-216 sends after the combined compute).
  bool try_pair(int s, const Op& op) {
    const Op f{op.chunk, op.mb, false, false};
    const Op b{op.overlap_chunk, op.overlap_mb, true, false, true};
    const Dep df = dependency(s, f), db = dependency(s, b);
    if (df.end < 0 || db.end < 0) return false;
    const double rf = ready(s, df), rb = ready(s, db);
    const bool f_first = rf <= rb;
    const double t0 = std::max(stage_free_[idx(s)], std::min(rf, rb));
    const double t1 = std::max(execute(s, f_first ? f : b, t0, true), std::max(rf, rb));
    const double end = execute(s, f_first ? b : f, t1, true);
    f_end_[slot(f.chunk, s, f.mb)] = end;
    b_end_[slot(b.chunk, s, b.mb)] = end;
    ++next_[idx(s)];
    return true;
  }

  // Runs `op` on stage s from `start`: its end, the stage's cursor time, the events.
  double execute(int s, const Op& op, double start, bool overlapped) {
    const std::size_t v_idx = vs(op.chunk, s);
    const double w = in_.weight_grad_s.empty() ? 0.0 : in_.weight_grad_s[v_idx];
    const double b = in_.backward_s[v_idx] - (split_ ? w : 0.0);  // B alone where split off
    const double dur = op.weight ? w : !op.backward ? in_.forward_s[v_idx] : op.full ? b + w : b;
    const double end = start + dur;
    stage_free_[idx(s)] = end;
    if (!op.weight) (op.backward ? b_end_ : f_end_)[slot(op.chunk, s, op.mb)] = end;
    account(s, op, v_idx, dur);
    if (!record_) return end;
    std::size_t& at = cursor_[idx(s)];
    SHARDPLAN_CHECK(at + (op.full ? 2 : 1) <= (idx(s) + 1 < first_.size() ? first_[idx(s) + 1] : events_.size()),
                    "pipeline events overflow their stage's slots");
    if (op.full) {  // its B and W parts back to back
      events_[at++] = {s, op.chunk, op.mb, true, start, start + b, false, overlapped};
      events_[at++] = {s, op.chunk, op.mb, true, start + b, end, true, overlapped};
    } else {
      events_[at++] = {s, op.chunk, op.mb, op.backward, start, end, op.weight, overlapped};
    }
    return end;
  }

  // The stage's busy time and what it holds: a micro-batch's activations count from its forward's
  // start until its backward ends, or its W where the backward is split (a deferred W keeps the
  // inputs of its GEMMs); a full backward releases at its end.
  void account(int s, const Op& op, std::size_t v_idx, double dur) {
    const auto i = idx(s);
    busy_[i] += dur;
    const double bytes = in_.stored_activation_bytes.empty() ? 0.0 : in_.stored_activation_bytes[v_idx];
    if (!op.backward) {
      most_held_[i] = std::max(most_held_[i], ++held_[i]);
      held_bytes_[i] += bytes;
      peak_bytes_[i] = std::max(peak_bytes_[i], held_bytes_[i]);
    } else if (op.weight || op.full || !split_) {
      --held_[i];
      held_bytes_[i] -= bytes;
    }
  }

  const PipelineInput& in_;
  int p_, v_, m_;
  bool split_;    // B and W run as ops of their own
  bool v_shape_;  // chunk 1 of rank r is model stage 2p - 1 - r
  bool bidir_;    // chunk 1 of rank r is model stage p - 1 - r, run in the opposite direction
  bool record_;
  std::vector<std::size_t> next_;
  std::vector<double> stage_free_;
  std::vector<double> busy_;                   // per stage: summed op durations
  std::vector<int> held_;                      // per stage: chunk micro-batches held now
  std::vector<double> held_bytes_;             // per stage: their stored activations
  std::vector<int> most_held_;                 // per stage: the most held at once
  std::vector<double> peak_bytes_;             // per stage: the most stored at once
  std::vector<double> f_end_, b_end_;          // indexed [vs * m + mb]
  std::vector<PipelineEvent> events_;          // stage-major, each stage in execution order
  std::vector<std::size_t> cursor_;            // per stage: its next event's slot in events_
  std::vector<std::size_t> first_;             // per stage: its first slot
  std::vector<std::vector<Op>> split_orders_;  // per stage, for schedules that split the backward
};

}  // namespace

std::vector<PipelineOp> pipeline_stage_order(PipelineSchedule schedule, int stages, int micro_batches,
                                             int virtual_stages, int stage) {
  PipelineInput in;
  in.stages = stages;
  in.micro_batches = micro_batches;
  in.virtual_stages = virtual_stages;
  in.schedule = schedule;
  const auto n = static_cast<std::size_t>(stages > 0 ? stages : 1) *
                 static_cast<std::size_t>(virtual_stages > 0 ? virtual_stages : 1);
  in.forward_s.assign(n, 0.0);
  in.backward_s.assign(n, 0.0);
  validate(in);
  if (stage < 0 || stage >= stages) {
    throw InputError("pipeline: stage " + std::to_string(stage) + " outside 0.." + std::to_string(stages - 1));
  }
  if (splits_backward(schedule)) return split_order(schedule, stages, micro_batches, stage);
  std::vector<Op> ops(2 * static_cast<std::size_t>(micro_batches) * static_cast<std::size_t>(virtual_stages));
  for (std::size_t k = 0; k < ops.size(); ++k)
    ops[k] = op_at(schedule, stages, micro_batches, virtual_stages, stage, static_cast<int>(k));
  return ops;
}

const char* to_string(PipelineSchedule s) { return name_of(s); }

double PipelineResult::bubble_s() const {
  double busiest = 0;
  for (double b : stage_busy_s) busiest = std::max(busiest, b);
  return makespan_s - busiest;
}

PipelineResult simulate_pipeline(const PipelineInput& in) {
  validate(in);
  PipelineResult r;
  Simulation sim(in, in.record_events);
  r.events = sim.run();
  sim.summarize(r);
  return r;
}

double pipeline_makespan(const PipelineInput& in) {
  validate(in);
  Simulation sim(in, false);
  sim.run();
  return sim.makespan();
}

// Narayanan et al. 2021 §2.2.1-2.2.2: bubble (p-1)/m, interleaved (p-1)/(v*m).
double bubble_fraction(PipelineSchedule s, int stages, int micro_batches, int virtual_stages) {
  if (stages < 1 || micro_batches < 1 || virtual_stages < 1) {
    throw InputError("bubble_fraction: expected stages, micro_batches, virtual_stages >= 1");
  }
  const double v = s == PipelineSchedule::interleaved ? virtual_stages : 1.0;
  return (stages - 1) / (v * micro_batches);
}

// deepseek-ai/DualPipe README.md:31 @ 3da1bbe: (PP/2 - 1)(F&B + B - 3W), B the full backward. When
// B > F the last rank's first step, not overlapped (dualpipev.py:355-362), saves up to F: measured on
// this simulation (tests/simulator/test_v_schedules.cpp), not published.
double dualpipev_bubble(int p, double f, double b, double w) {
  return std::max(0.0, (p - 1) * (f + 2 * b - w) - std::min(f, (p - 1) * std::max(0.0, b - f)));
}

double dualpipe_bubble(int p, double f, double b, double w) { return dualpipev_bubble(p / 2, f, b, w); }

// Warmup depth + 1 of Megatron-LM's schedules (1f1b warmup p-s-1; interleaved (p-s-1)*2+(v-1)*p).
int in_flight_micro_batches(PipelineSchedule s, int stages, int stage, int micro_batches, int virtual_stages) {
  if (stages < 1 || micro_batches < 1 || virtual_stages < 1 || stage < 0 || stage >= stages) {
    throw InputError(
        "in_flight_micro_batches: expected stages, micro_batches, virtual_stages >= 1"
        " and 0 <= stage < stages");
  }
  const std::int64_t total = static_cast<std::int64_t>(micro_batches) * virtual_stages;
  std::int64_t held = 0;
  switch (s) {
    case PipelineSchedule::gpipe:
      held = total;
      break;
    case PipelineSchedule::one_f_one_b:
      held = std::min(stages - stage, micro_batches);
      break;
    case PipelineSchedule::interleaved:
      held = std::min<std::int64_t>((stages - stage - 1) * 2LL + (virtual_stages - 1LL) * stages + 1, total);
      break;
    case PipelineSchedule::zb1p:  // warmup p - 1 - s, W deferred by s: p on every stage
      held = std::min(stages, micro_batches);
      break;
    case PipelineSchedule::zb2p:  // warmup 2 (p - 1 - s), W deferred by 2s: 2p - 1
      held = std::min(2 * stages - 1, micro_batches);
      break;
    case PipelineSchedule::zbv:  // chunk micro-batches (half a 1F1B stage each): 1F1B's p stages' worth
      held = std::min<std::int64_t>(2LL * stages, total);
      break;
    // arXiv 2405.15362 (../shared/README.md §6): floor((p+2)/2) and floor((p+4)/3) 1F1B micro-batches
    case PipelineSchedule::vhalf:
      held = std::min<std::int64_t>(2LL * ((stages + 2) / 2), total);
      break;
    case PipelineSchedule::vmin:
      held = std::min<std::int64_t>(2LL * ((stages + 4) / 3), total);
      break;
    case PipelineSchedule::dualpipev:  // DualPipe README table: PP + 1 chunk micro-batches, PP = 2p stages
      held = std::min<std::int64_t>(2LL * stages + 1, total);
      break;
    case PipelineSchedule::dualpipe:  // PP + 1 at PP = p; its two chunks run m / 2 each
      held = std::min<std::int64_t>(stages + 1LL, micro_batches);
      break;
  }
  return static_cast<int>(held);
}

}  // namespace shardplan::simulator
