#pragma once
// The launcher (`shardrun-launch`): runs a plan under mpirun, watches it, and when it fails —
// a non-zero exit, a rank killed or dead (mpirun then ends the job; survivors of a hung peer
// leave through shardrun's --comm-timeout) — runs a health check (`mpirun shardrun health`: each
// rank's device and a short all-reduce), backs off exponentially and relaunches with
// `--resume auto` from the latest complete checkpoint, up to max_restarts times. Bad input
// (exit 2) is not retried; SIGINT/SIGTERM are forwarded and end the launcher without a
// relaunch. Every event goes to a JSON-lines log and a human line on stderr (event_log.hpp).
#include <string>
#include <vector>

namespace shardplan::executor::launch {

struct LaunchOptions {
  std::string plan;  // plan.json; its device count is -np unless `ranks` > 0
  int ranks = 0;
  std::string checkpoint_dir;                 // required: where --resume auto finds checkpoints
  std::vector<std::string> mpirun{"mpirun"};  // launcher words before -np (e.g. --allow-run-as-root)
  std::string shardrun;                       // executable; empty = next to shardrun-launch, else PATH
  std::vector<std::string> shardrun_args;     // passed to every attempt after the launcher's own
  int max_restarts = 3;
  double backoff_s = 10;  // before restart k: backoff_s * 2^(k-1), at most backoff_max_s
  double backoff_max_s = 300;
  bool health_check = true;
  double health_timeout_s = 30;  // shardrun health --comm-timeout
  double grace_s = 30;           // after forwarding an interrupt, before SIGKILL
  std::string events;            // JSON lines; empty = <checkpoint_dir>/launch-events.jsonl
  bool quiet = false;
};

// The exit code: 0 done, 2 bad input (not retried), 130 interrupted, else the last failure's
// (shell convention: 128 + signal), or 1 when the health check kept failing. Throws
// std::invalid_argument for bad options.
int run_launcher(const LaunchOptions& options);

// Words of one attempt / one health check.
std::vector<std::string> attempt_command(const LaunchOptions& o, int ranks, const std::string& shardrun);
std::vector<std::string> health_command(const LaunchOptions& o, int ranks, const std::string& shardrun);

}  // namespace shardplan::executor::launch
