// shardrun-launch: run a plan under mpirun with health checks and automatic resume.
//   shardrun-launch --plan plan.json --checkpoint-dir ck/ [--mpirun "mpirun --allow-run-as-root"]
//       [--max-restarts 3] [--backoff-s 10] [--backoff-max-s 300] [--no-health-check]
//       [--events ck/launch-events.jsonl] -- [shardrun arguments...]
// Exit codes: 0 done, 2 bad input, 130 interrupted, else the last failure's.
#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "launcher.hpp"
#include "simulator/errors.hpp"

namespace launch = shardplan::executor::launch;

namespace {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "shardrun-launch: run a plan under mpirun; on a failure check health and resume from the latest checkpoint"};
  launch::LaunchOptions o;
  std::string mpirun = "mpirun";
  bool no_health = false;
  app.add_option("--plan", o.plan, "plan.json (its devices give -np)")->required();
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "Checkpoints; every relaunch resumes from the latest")
      ->required();
  app.add_option("--ranks", o.ranks, "-np (default: the plan's devices)");
  app.add_option("--mpirun", mpirun,
                 "MPI launcher and its options, split on spaces (e.g. \"mpirun --allow-run-as-root\")");
  app.add_option("--shardrun", o.shardrun, "shardrun executable (default: next to shardrun-launch)");
  app.add_option("--max-restarts", o.max_restarts, "Relaunches after failures before giving up");
  app.add_option("--backoff-s", o.backoff_s, "Wait before the first relaunch; doubles each time");
  app.add_option("--backoff-max-s", o.backoff_max_s, "Longest wait before a relaunch");
  app.add_flag("--no-health-check", no_health, "Relaunch without running `shardrun health` first");
  app.add_option("--health-timeout-s", o.health_timeout_s, "Communication timeout of the health check");
  app.add_option("--grace-s", o.grace_s, "After forwarding Ctrl-C/SIGTERM, seconds before SIGKILL");
  app.add_option("--events", o.events, "JSON-lines event log (default: <checkpoint-dir>/launch-events.jsonl)");
  app.add_flag("--quiet", o.quiet, "Only the give-up line");
  app.add_option("shardrun_args", o.shardrun_args, "Arguments for shardrun, after --");
  app.allow_extras(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  o.mpirun = split_words(mpirun);
  o.health_check = !no_health;
  try {
    return launch::run_launcher(o);
  } catch (const std::invalid_argument& e) {
    std::cerr << "shardrun-launch: error: " << e.what() << "\n";
    return 2;
  } catch (const shardplan::simulator::InputError& e) {
    std::cerr << "shardrun-launch: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "shardrun-launch: error: " << e.what() << "\n";
    return 3;
  }
}
