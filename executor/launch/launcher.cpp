#include "launcher.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "event_log.hpp"
#include "executor/errors.hpp"
#include "executor/io/checkpoint_store.hpp"
#include "formats/plan.hpp"
#include "formats/shell_quote.hpp"
#include "launch_policy.hpp"
#include "supervisor.hpp"

namespace shardplan::executor::launch {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// The newest complete checkpoint (manifest committed), or -1. shardrun verifies its checksums
// when it resumes and falls back further if they fail.
int64_t latest_checkpoint(const std::string& dir) {
  const auto steps = io::CheckpointStore(dir).complete_steps();
  return steps.empty() ? -1 : steps.back();
}

json step_or_null(int64_t step) { return step >= 0 ? json(step) : json(); }

std::string from_where(int64_t step) {
  return step >= 0 ? "from the checkpoint of step " + std::to_string(step) : "from scratch (no checkpoint yet)";
}

std::string default_shardrun() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path sibling = self.parent_path() / "shardrun";
    if (fs::exists(sibling, ec)) return sibling.string();
  }
  return "shardrun";
}

void validate(const LaunchOptions& o) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.plan.empty()) bad("--plan: expected the plan.json to run");
  if (o.checkpoint_dir.empty()) bad("--checkpoint-dir: expected a directory (relaunches resume from it)");
  if (o.mpirun.empty() || o.mpirun.front().empty()) bad("--mpirun: expected the MPI launcher command");
  if (o.max_restarts < 0) bad("--max-restarts: expected an integer >= 0");
  if (!(o.backoff_s >= 0) || !(o.backoff_max_s >= 0)) bad("--backoff-s/--backoff-max-s: expected seconds >= 0");
  if (!(o.health_timeout_s > 0)) bad("--health-timeout-s: expected seconds > 0");
  if (!(o.grace_s >= 0)) bad("--grace-s: expected seconds >= 0");
  if (o.ranks < 0) bad("--ranks: expected an integer >= 0 (0 = the plan's devices)");
}

struct Attempt {
  ExitStatus status;
  double seconds = 0;
  std::string start_error;  // the command could not be started (exit 127)
};

// Runs one command under the supervisor, timing it.
Attempt supervise(const std::vector<std::string>& cmd, double grace_s) {
  const auto t0 = Clock::now();
  Attempt a;
  try {
    a.status = run_supervised(cmd, grace_s);
  } catch (const std::runtime_error& e) {
    a.start_error = e.what();
    a.status.code = 127;
  }
  a.seconds = since(t0);
  return a;
}

}  // namespace

std::vector<std::string> attempt_command(const LaunchOptions& o, int ranks, const std::string& shardrun) {
  std::vector<std::string> c = o.mpirun;
  for (const std::string& w :
       {std::string("-np"), std::to_string(ranks), shardrun, std::string("--plan"), o.plan,
        std::string("--checkpoint-dir"), o.checkpoint_dir, std::string("--resume"), std::string("auto")})
    c.push_back(w);
  c.insert(c.end(), o.shardrun_args.begin(), o.shardrun_args.end());
  return c;
}

std::vector<std::string> health_command(const LaunchOptions& o, int ranks, const std::string& shardrun) {
  std::vector<std::string> c = o.mpirun;
  for (const std::string& w :
       {std::string("-np"), std::to_string(ranks), shardrun, std::string("health"), std::string("--comm-timeout"),
        std::to_string(o.health_timeout_s), std::string("--quiet")})
    c.push_back(w);
  return c;
}

int run_launcher(const LaunchOptions& o) {
  validate(o);
  const int ranks = o.ranks > 0 ? o.ranks : formats::load_plan_cluster(o.plan).devices();
  const std::string shardrun = o.shardrun.empty() ? default_shardrun() : o.shardrun;
  EventLog log(o.events.empty() ? (fs::path(o.checkpoint_dir) / "launch-events.jsonl").string() : o.events, o.quiet);
  install_signal_handlers();
  int restarts = 0;
  for (int attempt = 1;; ++attempt) {
    const auto cmd = attempt_command(o, ranks, shardrun);
    const int64_t resume = latest_checkpoint(o.checkpoint_dir);
    log.emit("launch",
             {{"attempt", attempt},
              {"ranks", ranks},
              {"resume_step", step_or_null(resume)},
              {"command", formats::shell_join(cmd)}},
             "attempt " + std::to_string(attempt) + ": " + std::to_string(ranks) + " rank(s), " + from_where(resume));
    const Attempt a = supervise(cmd, o.grace_s);
    if (!a.start_error.empty()) {  // a missing mpirun is not fixed by relaunching
      log.emit("give_up", {{"reason", "cannot_start"}, {"attempts", attempt}, {"error", a.start_error}},
               "giving up: " + a.start_error);
      return 127;
    }
    const Verdict v = classify(a.status);
    const bool stalled = a.status.signal == 0 && a.status.code == kStalledExitCode;  // shardrun's watchdog
    log.emit("exit",
             {{"attempt", attempt},
              {"code", a.status.code},
              {"signal", a.status.signal},
              {"seconds", a.seconds},
              {"verdict", to_string(v)},
              {"stalled", stalled}},
             "attempt " + std::to_string(attempt) + " ended: " + a.status.describe() +
                 (stalled ? " (stalled: no training step in the watchdog's limit)" : "") + " after " +
                 seconds_text(a.seconds));
    if (v == Verdict::done) {
      log.emit("done", {{"attempts", attempt}, {"restarts", restarts}},
               "done after " + std::to_string(attempt) + " attempt(s), " + std::to_string(restarts) + " restart(s)");
      return 0;
    }
    if (v == Verdict::bad_input) {
      log.emit("give_up", {{"reason", "bad_input"}, {"attempts", attempt}},
               "giving up: shardrun rejected its input (exit 2); a relaunch would fail the same way");
      return 2;
    }
    if (v == Verdict::interrupted) {
      log.emit("interrupted", {{"attempts", attempt}}, "interrupted; not relaunching");
      return 130;
    }
    int failure = a.status.shell_code();
    for (;;) {  // back off, check health, until healthy or out of restarts
      if (restarts >= o.max_restarts) {
        log.emit("give_up", {{"reason", "max_restarts"}, {"attempts", attempt}, {"restarts", restarts}},
                 "giving up after " + std::to_string(restarts) + " restart(s) (--max-restarts " +
                     std::to_string(o.max_restarts) + "); last failure: exit " + std::to_string(failure));
        return failure;
      }
      ++restarts;
      const double wait = backoff_seconds(restarts, o.backoff_s, o.backoff_max_s);
      if (!sleep_unless_interrupted(wait)) {
        log.emit("interrupted", {{"attempts", attempt}}, "interrupted during the back-off; not relaunching");
        return 130;
      }
      if (!o.health_check) break;
      const Attempt h = supervise(health_command(o, ranks, shardrun), o.grace_s);
      const bool ok = h.status.shell_code() == 0;
      log.emit("health", {{"ok", ok}, {"code", h.status.code}, {"signal", h.status.signal}, {"seconds", h.seconds}},
               std::string("health check ") +
                   (ok ? "passed" : "FAILED (" + (h.start_error.empty() ? h.status.describe() : h.start_error) + ")") +
                   " in " + seconds_text(h.seconds));
      if (h.status.interrupted) {
        log.emit("interrupted", {{"attempts", attempt}}, "interrupted during the health check; not relaunching");
        return 130;
      }
      if (ok) break;
      failure = 1;
    }
    const int64_t from = latest_checkpoint(o.checkpoint_dir);
    log.emit("relaunch",
             {{"restart", restarts},
              {"max_restarts", o.max_restarts},
              {"backoff_s", backoff_seconds(restarts, o.backoff_s, o.backoff_max_s)},
              {"resume_step", step_or_null(from)}},
             "relaunching (restart " + std::to_string(restarts) + " of " + std::to_string(o.max_restarts) + ") " +
                 from_where(from));
  }
}

}  // namespace shardplan::executor::launch
