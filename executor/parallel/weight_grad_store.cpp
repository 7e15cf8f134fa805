#include "weight_grad_store.hpp"

#include "executor/errors.hpp"

namespace shardplan::executor {

WeightGradStore& WeightGradStore::instance() {
  static WeightGradStore store;
  return store;
}

void WeightGradStore::open(int chunk, int micro_batch) {
  std::lock_guard lock(mutex_);
  EXECUTOR_CHECK(!open_, "weight-gradient store opened twice");
  open_ = true;
  key_ = {chunk, micro_batch};
}

void WeightGradStore::close() {
  std::lock_guard lock(mutex_);
  open_ = false;
}

bool WeightGradStore::deferring() const {
  std::lock_guard lock(mutex_);
  return open_;
}

void WeightGradStore::push(std::function<void()> weight_grad) {
  std::lock_guard lock(mutex_);
  EXECUTOR_CHECK(open_, "a weight gradient queued with the store closed");
  queues_[key_].push_back(std::move(weight_grad));
}

int WeightGradStore::run(int chunk, int micro_batch) {
  std::vector<std::function<void()>> queue;
  {
    std::lock_guard lock(mutex_);
    auto it = queues_.find({chunk, micro_batch});
    if (it == queues_.end()) return 0;
    queue = std::move(it->second);
    queues_.erase(it);
  }
  torch::NoGradGuard no_grad;
  for (auto& fn : queue) fn();
  return static_cast<int>(queue.size());
}

std::size_t WeightGradStore::pending() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, q] : queues_) n += q.size();
  return n;
}

void WeightGradStore::clear() {
  std::lock_guard lock(mutex_);
  open_ = false;
  queues_.clear();
}

void accumulate_weight_grad(const torch::Tensor& w, const torch::Tensor& dw) {
  torch::NoGradGuard no_grad;
  torch::Tensor& g = const_cast<torch::Tensor&>(w).mutable_grad();
  if (g.defined()) g.add_(dw);
  else g = dw;
}

}  // namespace shardplan::executor
