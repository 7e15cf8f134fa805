#include "op_trace.hpp"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "executor/io/fs_util.hpp"

namespace shardplan::executor {
namespace {

namespace prof = torch::autograd::profiler;

struct OpTotals {
  int64_t calls = 0;
  double total_us = 0, self_us = 0;
  double cuda_total_us = 0, cuda_self_us = 0;  // between CUDA events on the op's stream
};

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s;
  for (const auto& sh : shapes) {
    if (!s.empty()) s += ", ";
    s += "[";
    for (std::size_t i = 0; i < sh.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(sh[i]);
    }
    s += "]";
  }
  return s;
}

// Pairs each push with its pop (ranges nest per thread) and charges each op its own time
// less that of the ops it called; on CUDA the same for the device time between the events the
// profiler records on the stream at push and pop (views and empties record none: zero).
void add_thread(const std::vector<prof::LegacyEvent>& events,
                std::map<std::pair<std::string, std::string>, OpTotals>& out) {
  struct Open {
    const prof::LegacyEvent* push;
    double child_us, child_cuda_us;
  };
  std::vector<Open> stack;
  for (const auto& e : events) {
    if (e.kind() == prof::EventKind::PushRange) {
      stack.push_back({&e, 0.0, 0.0});
    } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
      const Open o = stack.back();
      stack.pop_back();
      const double us = o.push->cpuElapsedUs(e);
      const double cuda_us = o.push->hasCuda() && e.hasCuda() ? o.push->cudaElapsedUs(e) : 0.0;
      OpTotals& t = out[{o.push->name(), shapes_text(o.push->shapes())}];
      t.calls += 1;
      t.total_us += us;
      t.self_us += us - o.child_us;
      t.cuda_total_us += cuda_us;
      t.cuda_self_us += cuda_us - o.child_cuda_us;
      if (!stack.empty()) {
        stack.back().child_us += us;
        stack.back().child_cuda_us += cuda_us;
      }
    }
  }
}

}  // namespace

OpTrace::OpTrace(std::string path, bool cuda) : path_(std::move(path)), cuda_(cuda) {
  using torch::profiler::impl::ProfilerState;
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(cuda ? ProfilerState::CUDA : ProfilerState::CPU,
                                                                   /*report_input_shapes=*/true));
  on_ = true;
}

OpTrace::~OpTrace() {
  if (on_) (void)prof::disableProfilerLegacy();
}

void OpTrace::finish(int steps) {
  if (!on_) return;
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  on_ = false;
  std::map<std::pair<std::string, std::string>, OpTotals> ops;
  for (const auto& l : lists) add_thread(l, ops);
  std::vector<std::pair<std::pair<std::string, std::string>, OpTotals>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  const double n = std::max(steps, 1);
  nlohmann::json table = nlohmann::json::array();
  double self_total = 0, cuda_self_total = 0;
  for (const auto& [key, t] : rows) {
    self_total += t.self_us;
    cuda_self_total += t.cuda_self_us;
    nlohmann::json row = {{"op", key.first},
                          {"input_shapes", key.second},
                          {"calls_per_step", t.calls / n},
                          {"self_seconds_per_step", t.self_us / n * 1e-6},
                          {"total_seconds_per_step", t.total_us / n * 1e-6}};
    if (cuda_) {
      row["cuda_self_seconds_per_step"] = t.cuda_self_us / n * 1e-6;
      row["cuda_total_seconds_per_step"] = t.cuda_total_us / n * 1e-6;
    }
    table.push_back(std::move(row));
  }
  nlohmann::json doc = {{"schema", "shardplan.op_trace/1"},
                        {"steps", steps},
                        {"self_seconds_per_step", self_total / n * 1e-6},
                        {"ops", table}};
  if (cuda_) doc["cuda_self_seconds_per_step"] = cuda_self_total / n * 1e-6;
  (void)io::atomic_write_file(path_, doc.dump(1) + "\n");
}

}  // namespace shardplan::executor
