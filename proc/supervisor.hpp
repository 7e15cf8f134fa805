#pragma once
// The one subprocess supervisor: runs a command (mpirun and its ranks, or any child) in its own
// process group and waits for it, stopping the group when asked to — a SIGINT/SIGTERM this
// process receives (forwarded), a cancel flag or a deadline — then SIGKILL after a grace period.
// Whatever the group leaves behind is killed once the child has ended. POSIX only.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardplan::proc {

// The command could not be started (not found, not executable, no output file).
class StartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ExitStatus {
  int code = 0;              // exit status when the child exited
  int signal = 0;            // the signal that ended it, else 0
  bool interrupted = false;  // this process was interrupted while it ran (the signal forwarded)
  bool cancelled = false;    // ChildOptions::cancel was set while it ran
  bool timed_out = false;    // it ran past ChildOptions::timeout_s
  // The shell's convention: the code, or 128 + signal.
  [[nodiscard]] int shell_code() const { return signal ? 128 + signal : code; }
  [[nodiscard]] std::string describe() const;  // "exit 0", "exit 137", "signal 9 (Killed)"
};

struct ChildOptions {
  std::string output_path;                    // empty: inherit stdout and stderr; else both into this file (truncated)
  bool stdin_null = false;                    // read /dev/null instead of inheriting stdin
  double timeout_s = 0;                       // stop it after this long; 0 = no deadline
  const std::atomic<bool>* cancel = nullptr;  // stop it once this is set
  double grace_s = 10;                        // from the stop to SIGKILL of the group
  // A cancel or timeout sends SIGTERM to the child alone (mpirun forwards it to its ranks) or to
  // the whole group; a received interrupt always goes to the whole group.
  bool terminate_group = true;
};

// Starts argv[0] (PATH lookup) with argv in a new process group and waits for it. Throws
// StartError when it cannot be started.
ExitStatus run(const std::vector<std::string>& argv, const ChildOptions& options);

// SIGINT/SIGTERM set a flag (read by interrupted_by(), forwarded by run) instead of ending this
// process.
void install_signal_handlers();
// The signal received since install_signal_handlers() (or the last reset), or 0.
int interrupted_by();
// Forget a received interrupt (tests; a launcher that handled one).
void reset_interrupt();
// Sleeps `seconds` unless interrupted; false when an interrupt arrived.
bool sleep_unless_interrupted(double seconds);

}  // namespace shardplan::proc
