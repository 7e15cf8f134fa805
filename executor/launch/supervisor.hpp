#pragma once
// The launcher's use of the one supervisor (proc/supervisor.hpp): mpirun with this terminal's
// stdin and output, a SIGINT/SIGTERM the launcher receives forwarded to its whole group, SIGKILL
// `grace_s` later.
#include <string>
#include <vector>

#include "proc/supervisor.hpp"

namespace shardplan::executor::launch {

using proc::ExitStatus;
using proc::install_signal_handlers;
using proc::interrupted_by;
using proc::reset_interrupt;
using proc::sleep_unless_interrupted;

// Throws proc::StartError (a std::runtime_error) when the command cannot be started.
inline ExitStatus run_supervised(const std::vector<std::string>& argv, double grace_s) {
  proc::ChildOptions o;
  o.grace_s = grace_s;
  return proc::run(argv, o);
}

}  // namespace shardplan::executor::launch
