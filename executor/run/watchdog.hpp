#pragma once
// Progress watchdog: a rank that completes no training step for
//   limit = max(stall_factor x the plan's predicted step time, stall_min_s)
// seconds names the phase it is stuck in and ends its process with kStalledExitCode, which
// shardrun-launch and the exported sbatch treat as restartable (health check, resume from the last
// checkpoint). It catches what the collectives' timeout (--comm-timeout) cannot: a rank stuck
// outside any collective (a hung data read, a deadlock, a wedged kernel), and a job whose every
// rank is stuck in one collective for longer than its steps ever take.
//
// It is the one place shardrun ends its own process: the stuck thread cannot be unwound, so the
// watchdog thread calls std::_Exit (as NCCL's watchdog aborts the process on a timed-out
// collective).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "executor/errors.hpp"  // kStalledExitCode

namespace shardplan::executor {

// The watchdog's limit; 0 (disabled) when both knobs are <= 0.
double stall_limit_s(double stall_factor, double predicted_step_s, double stall_min_s);

class Watchdog {
 public:
  // Starts watching at once (the first step's clock starts now). limit_s <= 0: does nothing.
  Watchdog(double limit_s, int rank);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void step_done();              // a step completed: the clock restarts
  void phase(const char* what);  // what the rank is doing now (a string literal)

 private:
  void watch();
  using Clock = std::chrono::steady_clock;
  double limit_s_;
  int rank_;
  std::atomic<Clock::rep> last_progress_;
  std::atomic<Clock::rep> phase_since_;
  std::atomic<const char*> phase_{"starting"};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace shardplan::executor
