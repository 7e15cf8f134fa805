#pragma once
// Maps independent work items over a few threads, results in input order: the search's finish
// (full simulations of its candidates) runs on the search's threads, and its output cannot depend
// on how many there are. The first exception a worker throws is rethrown to the caller.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace shardplan::planner::detail {

template <class Result, class Fn>
std::vector<Result> parallel_map(std::size_t n, int threads, Fn&& fn) {
  std::vector<Result> out(n);
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        out[i] = fn(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;  // stop handing out items
      }
    }
  };
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n);
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace shardplan::planner::detail
