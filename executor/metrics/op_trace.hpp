#pragma once
// Operator-level trace of a stretch of training (LibTorch's profiler, CPU timings with input
// shapes): every ATen op's calls and self time, grouped by (op, input shapes), written as a
// table sorted by self time; on a CUDA device also each op's device time (CUDA events on its
// stream at the op's start and end: the kernels' time when the host runs ahead, plus the gaps
// where the device waited for the host when it does not). It answers "where does a step's time go" op by op, the
// figures the simulator's per-op costs (simulator/layer_cost.cpp) must reproduce.
#include <memory>
#include <string>

namespace shardplan::executor {

class OpTrace {
 public:
  // Starts recording on the calling thread; `steps` is what the table's per-step figures divide by.
  OpTrace(std::string path, bool cuda);
  ~OpTrace();  // stops recording if still on (nothing written)
  OpTrace(const OpTrace&) = delete;
  OpTrace& operator=(const OpTrace&) = delete;
  // Stops recording and writes the table to the path (temp file, then rename).
  void finish(int steps);

 private:
  std::string path_;
  bool cuda_ = false;
  bool on_ = false;
};

}  // namespace shardplan::executor
