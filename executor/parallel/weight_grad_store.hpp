#pragma once
// The deferred weight gradients of a split backward (zero-bubble schedules ZB1P, ZB2P, ZBV).
// A pipeline's B op runs the chunk's backward with the store open for its (chunk, micro-batch):
// each linear then computes only its input gradient dx = gy W and queues its weight-gradient
// GEMM dW = gy^T x (keeping gy and x alive); the schedule's W op for that (chunk, micro-batch)
// runs the queue, adding each dW into the weight's .grad as AccumulateGrad would.
// Sources: the zero-bubble repo's WeightGradStore.put(total_input, grad_output, weight, func)
// (sail-sg/zero-bubble-pipeline-parallelism @c5d50741, branch zb-h1-quick-start,
// megatron/core/weight_grad_store.py 28-33, tensor_parallel/layers.py 439-455) and DeepSeek's
// (deepseek-ai/DualPipe @3da1bbea dualpipe/utils.py 15-21): a FIFO of pending W's keeping each
// linear's input and output gradient (docs/split_backward_schedules.md, "What a pending W keeps").
// One store per process: on CUDA the autograd engine runs backward on its device threads, so the
// queue is process-wide (under a mutex), keyed by what the pipeline opened.
#include <torch/torch.h>

#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace shardplan::executor {

class WeightGradStore {
 public:
  static WeightGradStore& instance();

  // Queue weight gradients under (chunk, micro-batch) until close().
  void open(int chunk, int micro_batch);
  void close();
  // Whether a linear's backward should queue its weight gradient instead of computing it.
  [[nodiscard]] bool deferring() const;
  void push(std::function<void()> weight_grad);
  // Runs (and drops) the queued weight gradients of (chunk, micro-batch), in queue order;
  // returns how many ran.
  int run(int chunk, int micro_batch);
  [[nodiscard]] std::size_t pending() const;  // queued, all keys
  void clear();                               // a failed step's leftovers

 private:
  mutable std::mutex mutex_;
  bool open_ = false;
  std::pair<int, int> key_{0, 0};
  std::map<std::pair<int, int>, std::vector<std::function<void()>>> queues_;
};

// Adds a weight gradient into w.grad (sets it when undefined): what AccumulateGrad does.
void accumulate_weight_grad(const torch::Tensor& w, const torch::Tensor& dw);

}  // namespace shardplan::executor
