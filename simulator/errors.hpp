#pragma once
// Error types of the simulator component.
//   InputError      — a user mistake (bad file, bad field, impossible config). Its message is
//                     one line naming the file/field and what was expected; CLIs print it and
//                     exit 2.
//   SimulatorError  — a broken internal invariant; carries file:line of the check.
#include <stdexcept>
#include <string>

namespace shardplan::simulator {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class SimulatorError : public std::logic_error {
 public:
  SimulatorError(const std::string& what, const char* file, int line)
      : std::logic_error(std::string(file) + ":" + std::to_string(line) + ": " + what) {}
};

}  // namespace shardplan::simulator

#define SHARDPLAN_CHECK(cond, msg)                                                        \
  do {                                                                                    \
    if (!(cond)) throw ::shardplan::simulator::SimulatorError((msg), __FILE__, __LINE__); \
  } while (0)
