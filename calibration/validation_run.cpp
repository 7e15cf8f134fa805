// Validation, running one entry: its plan written, `mpirun ... shardrun` run under the
// supervisor (proc/supervisor.hpp: no shell, own process group, output to a log, a cancel or
// the timeout), and its report read back.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "proc/supervisor.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "validation.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- running one entry ---------------------------------------------------------------------

namespace {

// mpirun without a shell, stdout + stderr into `log`, stdin /dev/null; on `o.cancel` or the
// timeout SIGTERM to mpirun (it forwards to its ranks), SIGKILL to its group 10 s later.
proc::ExitStatus run_job(const std::vector<std::string>& args, const std::string& log, const RunnerOptions& o) {
  proc::ChildOptions c;
  c.output_path = log;
  c.stdin_null = true;
  c.timeout_s = o.timeout_s;
  c.cancel = o.cancel;
  c.grace_s = 10;
  c.terminate_group = false;
  try {
    return proc::run(args, c);
  } catch (const proc::StartError& e) { throw sim::InputError(std::string("--mpirun: ") + e.what()); }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// shardrun's own one-line refusal: the last line starting "shardrun: error:", prefix removed.
std::string refusal_message(const std::string& log) {
  static const std::string prefix = "shardrun: error:";
  std::string found;
  for (const auto& l : lines_of(log)) {
    if (l.rfind(prefix, 0) != 0) continue;
    const auto at = l.find_first_not_of(' ', prefix.size());
    found = at == std::string::npos ? "" : l.substr(at);
  }
  return found;
}

std::string tail_of(const std::string& log, std::size_t max_lines = 15) {
  const auto lines = lines_of(log);
  std::string out;
  for (std::size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += lines[i] + "\n";
  if (out.size() > 3000) out = "..." + out.substr(out.size() - 3000);
  return out.empty() ? "(no output)" : out;
}

std::vector<std::string> job_command(const RunnerOptions& o, const std::string& plan, const fs::path& dir, int ranks,
                                     int steps) {
  std::vector<std::string> a = {o.mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) a.push_back("--allow-run-as-root");
  for (const std::string& s : {o.shardrun, std::string("--plan"), plan, std::string("--steps"), std::to_string(steps),
                               std::string("--data"), std::string("synthetic"), std::string("--out-dir"), dir.string(),
                               std::string("--threads"), std::to_string(o.threads), std::string("--quiet")})
    a.push_back(s);
  return a;
}

ValidationRun new_run(const ValidationEntry& e, const RunnerOptions& o) {
  ValidationRun r;
  r.entry = e;
  r.ranks = e.ranks();
  r.resolved_sharding_degree = e.sharding_degree > 0 ? e.sharding_degree : e.dp;
  r.time_judged = static_cast<long long>(r.ranks) * o.threads <= o.cores;
  if (!r.time_judged)
    r.time_note = "oversubscribed: " + std::to_string(r.ranks) + (r.ranks == 1 ? " rank x " : " ranks x ") +
                  std::to_string(o.threads) + (o.threads == 1 ? " thread on " : " threads on ") +
                  std::to_string(o.cores) + (o.cores == 1 ? " core" : " cores");
  return r;
}

ValidationRun finish_run(ValidationRun r, const proc::ExitStatus& job, const fs::path& dir, const RunnerOptions& o) {
  const std::string log = read_text(r.output_log);
  if (job.signal == 0 && job.code == 0) {
    const std::string report = (dir / "report.json").string();
    try {
      apply_report(r, sim::read_json_file(report), report);
      r.report_file = report;
      r.status = RunStatus::ran;
    } catch (const sim::InputError& x) {
      r.status = RunStatus::failed;
      r.reason = x.what();
    }
    return r;
  }
  if (job.signal == 0 && job.code == 2 && !job.timed_out) {
    if (std::string msg = refusal_message(log); !msg.empty()) {
      r.status = RunStatus::skipped;
      r.reason = msg;
      return r;
    }
  }
  r.status = RunStatus::failed;
  char head[160];
  if (job.timed_out) std::snprintf(head, sizeof head, "timed out after %.0f s", o.timeout_s);
  else if (job.signal != 0) std::snprintf(head, sizeof head, "mpirun ended by signal %d", job.signal);
  else std::snprintf(head, sizeof head, "mpirun exited with code %d", job.code);
  r.reason = std::string(head) + "; last output:\n" + tail_of(log);
  return r;
}

}  // namespace

ValidationRun prepare_entry(const ValidationEntry& e, const sim::HardwareProfile& hw, const RunnerOptions& o) {
  ValidationRun r = new_run(e, o);
  const fs::path dir = fs::absolute(fs::path(o.out_dir) / e.name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw sim::InputError("--out-dir: cannot create '" + dir.string() + "': " + ec.message());
  for (const char* f : {"report.json", "metrics.jsonl", "plan.json", "output.log"}) fs::remove(dir / f, ec);
  Plan plan;
  try {
    plan = build_plan(e, hw);
  } catch (const sim::InputError& x) {
    r.reason = x.what();
    return r;
  }
  r.resolved_sharding_degree = plan.config.shard_group();
  r.has_prediction = true;
  r.predicted_step_s = plan.prediction.time.step_s;
  r.predicted_peak_bytes = plan.prediction.worst.allocated();  // shardrun's report counts allocated bytes
  r.predicted_peak_per_rank = predicted_peak_per_rank(plan);
  r.plan_file = (dir / "plan.json").string();
  formats::save_plan(plan, r.plan_file);
  if (!plan.prediction.feasible) {
    r.reason = "predicted memory does not fit the device: " + plan.prediction.infeasible_reason;
    return r;
  }
  r.output_log = (dir / "output.log").string();
  return r;
}

bool runnable(const ValidationRun& r) {
  // Planned and predicted to fit (prepare_entry: output_log set, status skipped, no reason yet),
  // and no run of it has failed (failed) or been refused (skipped with shardrun's reason).
  return !r.output_log.empty() && (r.status == RunStatus::ran || (r.status == RunStatus::skipped && r.reason.empty()));
}

int steps_for(const ValidationRun& r, const RunnerOptions& o) {
  if (!r.has_prediction || r.predicted_step_s <= 0 || o.min_measured_s <= 0) return o.steps;
  const double wanted = 1 + std::ceil(o.min_measured_s / r.predicted_step_s);
  return static_cast<int>(std::max<double>(o.steps, std::min<double>(wanted, std::max(o.steps, o.max_steps))));
}

bool run_repeat(ValidationRun& r, const RunnerOptions& o) {
  const fs::path dir = fs::path(r.plan_file).parent_path();
  r.steps = steps_for(r, o);
  const proc::ExitStatus job = run_job(job_command(o, r.plan_file, dir, r.ranks, r.steps), r.output_log, o);
  if (job.cancelled) return false;
  r = finish_run(std::move(r), job, dir, o);
  return true;
}

std::optional<ValidationRun> run_entry(const ValidationEntry& e, const sim::HardwareProfile& hw,
                                       const RunnerOptions& o) {
  ValidationRun r = prepare_entry(e, hw, o);
  // Repeats back to back; `shardplan validate` spreads them over the suite instead (rounds).
  for (int k = 0; k < std::max(1, o.repeats) && runnable(r); ++k)
    if (!run_repeat(r, o)) return std::nullopt;
  return r;
}

}  // namespace shardplan::calibration
