#pragma once
// The profile's one timing protocol, shared by the kernel and the collective benchmarks: before
// each timed call an untimed hook (a cache sweep, a fresh forward), then the ranks start together,
// then the call, timed up to its completion (`finish`: a device synchronisation). Whether to go on
// is decided after every call, and every rank makes as many calls as the rank that wants the most.
#include <chrono>
#include <functional>
#include <vector>

namespace shardplan::executor {

struct TimedCallHooks {
  std::function<void()> before;          // untimed, before each call
  std::function<void()> start_together;  // untimed, just before each call (a barrier under mpirun)
  std::function<void()> finish;          // timed, after each call (wait for the device)
  std::function<bool(bool)> agree;       // collective: true when any rank wants another call
};

// Seconds of each timed call of `call`, for as long as `want_more(times so far)` holds on some rank.
// `want_more` is asked exactly once before each call and once more, the time it ends the loop.
inline std::vector<double> timed_calls(const std::function<void()>& call, const TimedCallHooks& h,
                                       const std::function<bool(const std::vector<double>&)>& want_more) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> t;
  for (;;) {
    const bool mine = want_more(t);
    if (!(h.agree ? h.agree(mine) : mine)) break;
    if (h.before) h.before();
    if (h.start_together) h.start_together();
    const auto s = Clock::now();
    call();
    if (h.finish) h.finish();
    t.push_back(std::chrono::duration<double>(Clock::now() - s).count());
  }
  return t;
}

}  // namespace shardplan::executor
