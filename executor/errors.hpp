#pragma once
// Error types of the executor component.
//   simulator::InputError — a user mistake (bad plan, missing tokenizer, truncated file); one
//                           line naming the file/field and what was expected. shardrun prints
//                           it on rank 0 and every rank exits 2.
//   ExecutorError         — a broken internal invariant; carries file:line of the check.
//   CommError             — a collective failed or timed out (a peer died or hung); shardrun
//                           aborts the whole job (MPI_Abort) so no rank is left waiting.
#include <stdexcept>
#include <string>

#include "simulator/errors.hpp"

namespace shardplan::executor {

using simulator::InputError;

// shardrun's exit when its progress watchdog finds no step completed in time (run/watchdog.hpp):
// EX_TEMPFAIL (sysexits.h), "try again". shardrun-launch and the exported sbatch relaunch it.
inline constexpr int kStalledExitCode = 75;

class ExecutorError : public std::logic_error {
 public:
  ExecutorError(const std::string& what, const char* file, int line)
      : std::logic_error(std::string(file) + ":" + std::to_string(line) + ": " + what) {}
};

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace shardplan::executor

#define EXECUTOR_CHECK(cond, msg)                                                       \
  do {                                                                                  \
    if (!(cond)) throw ::shardplan::executor::ExecutorError((msg), __FILE__, __LINE__); \
  } while (0)
