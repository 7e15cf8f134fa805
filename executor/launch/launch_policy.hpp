#pragma once
// What the launcher does after an attempt ends (pure functions, unit-tested).
//   exit 0                      -> done
//   exit 2 (shardrun bad input) -> give up at once: a relaunch would fail the same way
//   exit 130 / launcher stopped -> stop (the user interrupted; shardrun checkpointed)
//   anything else (a killed or dead rank, a communication timeout, a crash) -> health check,
//                                  back off, relaunch with --resume auto
#include "supervisor.hpp"

namespace shardplan::executor::launch {

enum class Verdict { done, bad_input, interrupted, retry };
const char* to_string(Verdict v);

Verdict classify(const ExitStatus& status);

// Seconds to wait before restart k (1-based): base · 2^(k−1), at most max_s (and >= 0).
double backoff_seconds(int restart, double base_s, double max_s);

}  // namespace shardplan::executor::launch
