#pragma once
// Supervisor: runs one command (mpirun and its ranks) as a child in its own process group and
// waits for it, forwarding SIGINT/SIGTERM the launcher receives to the whole group, then
// SIGKILL after a grace period. POSIX only; no LibTorch, no MPI.
#include <string>
#include <vector>

namespace shardplan::executor::launch {

struct ExitStatus {
  int code = 0;      // exit status when the child exited
  int signal = 0;    // the signal that ended it, else 0
  bool interrupted = false;  // the launcher was asked to stop while it ran
  // The shell's convention: the code, or 128 + signal.
  [[nodiscard]] int shell_code() const { return signal ? 128 + signal : code; }
  [[nodiscard]] std::string describe() const;  // "exit 0", "exit 137", "signal 9 (Killed)"
};

// SIGINT/SIGTERM set a flag (read by interrupted_by()) instead of ending the launcher.
void install_signal_handlers();
// The signal received since install_signal_handlers() (or the last reset), or 0.
int interrupted_by();
// Forget a received interrupt (tests; a launcher that handled one).
void reset_interrupt();

// Starts argv[0] (PATH lookup) with argv in a new process group and waits for it. An interrupt
// is forwarded to the group once; after `grace_s` more the group is killed (SIGKILL).
// Throws std::runtime_error when the command cannot be started (exit 127 of the child: not
// found / not executable).
ExitStatus run_supervised(const std::vector<std::string>& argv, double grace_s);

// Sleeps `seconds` unless interrupted; false when an interrupt arrived.
bool sleep_unless_interrupted(double seconds);

}  // namespace shardplan::executor::launch
