#include "launch_policy.hpp"

#include <algorithm>
#include <cmath>

namespace shardplan::executor::launch {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::done:
      return "done";
    case Verdict::bad_input:
      return "bad_input";
    case Verdict::interrupted:
      return "interrupted";
    case Verdict::retry:
      return "retry";
  }
  return "?";
}

Verdict classify(const ExitStatus& s) {
  if (s.interrupted || (s.signal == 0 && s.code == 130)) return Verdict::interrupted;
  if (s.signal == 0 && s.code == 0) return Verdict::done;
  if (s.signal == 0 && s.code == 2) return Verdict::bad_input;
  return Verdict::retry;
}

double backoff_seconds(int restart, double base_s, double max_s) {
  const double b = std::max(0.0, base_s) * std::pow(2.0, std::clamp(restart - 1, 0, 60));
  return std::clamp(b, 0.0, std::max(0.0, max_s));
}

}  // namespace shardplan::executor::launch
