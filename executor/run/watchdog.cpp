#include "watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace shardplan::executor {

double stall_limit_s(double stall_factor, double predicted_step_s, double stall_min_s) {
  if (stall_factor <= 0 && stall_min_s <= 0) return 0.0;
  return std::max(std::max(0.0, stall_factor) * std::max(0.0, predicted_step_s), std::max(0.0, stall_min_s));
}

Watchdog::Watchdog(double limit_s, int rank)
    : limit_s_(limit_s),
      rank_(rank),
      last_progress_(Clock::now().time_since_epoch().count()),
      phase_since_(Clock::now().time_since_epoch().count()) {
  if (limit_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::step_done() { last_progress_ = Clock::now().time_since_epoch().count(); }

void Watchdog::phase(const char* what) {
  phase_since_ = Clock::now().time_since_epoch().count();
  phase_ = what;
}

void Watchdog::watch() {
  auto seconds_since = [](Clock::rep t) {
    return std::chrono::duration<double>(Clock::now() - Clock::time_point(Clock::duration(t))).count();
  };
  // Check a few times per limit (at most once a second, at least every 10 s).
  const auto tick = std::chrono::duration<double>(std::clamp(limit_s_ / 4, 0.05, 10.0));
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, tick, [this] { return stop_; })) {
    const double idle = seconds_since(last_progress_.load());
    if (idle < limit_s_) continue;
    // Always said, even under --quiet: it is why the job ends.
    std::fprintf(stderr,
                 "shardrun: rank %d: stalled: no training step completed for %.1f s (watchdog limit %.1f s); "
                 "stuck in '%s' for %.1f s; exiting with %d so the launcher checks health and resumes\n",
                 rank_, idle, limit_s_, phase_.load(), seconds_since(phase_since_.load()), kStalledExitCode);
    std::fflush(stderr);
    std::_Exit(kStalledExitCode);
  }
}

}  // namespace shardplan::executor
