#pragma once
// Operator-level trace of a stretch of training (LibTorch's profiler, CPU timings with input
// shapes): every ATen op's calls and self time, grouped by (op, input shapes), written as a
// table sorted by self time. It answers "where does a step's time go" op by op, the figures the
// simulator's per-op costs (simulator/layer_cost.cpp) must reproduce.
#include <memory>
#include <string>

namespace shardplan::executor {

class OpTrace {
 public:
  // Starts recording on the calling thread; `steps` is what the table's per-step figures divide by.
  explicit OpTrace(std::string path);
  ~OpTrace();  // stops recording if still on (nothing written)
  OpTrace(const OpTrace&) = delete;
  OpTrace& operator=(const OpTrace&) = delete;
  // Stops recording and writes the table to the path (temp file, then rename).
  void finish(int steps);

 private:
  std::string path_;
  bool on_ = false;
};

}  // namespace shardplan::executor
