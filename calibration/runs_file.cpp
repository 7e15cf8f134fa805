// Measured-run files (`shardplan.runs/1`, see runs_file.hpp): parse, convert the published figure
// to step seconds once, validate every configuration at the edge.
#include "runs_file.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "frameworks/apply.hpp"
#include "frameworks/registry.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "simulator/prediction_json.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Re-throws an error of a nested reader (model card, profile, config check) with the run named.
template <class F>
auto in_run(const std::string& where, const char* field, F&& f) {
  try {
    return f();
  } catch (const sim::InputError& e) { throw sim::InputError(where + " field '" + field + "': " + e.what()); }
}

sim::ModelSpec read_model(const json& m, const std::string& where) {
  return in_run(where, "model", [&] {
    if (m.is_string()) return sim::load_model(m.get<std::string>());
    if (!m.is_object()) throw sim::InputError("expected a built-in model name or an inline card / config.json object");
    return sim::model_from_json(m, "inline model");
  });
}

sim::ClusterSpec read_cluster(const json& h, const std::string& where, const sim::JsonContext& ctx,
                              std::string* profile) {
  if (!h.is_object()) ctx.fail("hardware", "an object {\"profile\", \"nodes\", \"devices_per_node\", \"overrides\"}");
  const sim::JsonContext hctx = ctx.child("hardware");
  *profile = sim::get_string(h, "profile", hctx);
  sim::ClusterSpec c;
  const json overrides = h.contains("overrides") ? h["overrides"] : json();
  c.hardware = in_run(where, "hardware.overrides", [&] {
    return sim::load_hardware_with_overrides(*profile, overrides, where + " hardware.overrides");
  });
  c.nodes = static_cast<int>(sim::get_positive_int(h, "nodes", hctx));
  c.devices_per_node = static_cast<int>(sim::get_int_or(h, "devices_per_node", 0, hctx));
  if (c.devices_per_node < 0) hctx.fail("devices_per_node", "a positive count (or absent: the profile's)");
  return c;
}

// The published figure, converted once to seconds per step.
void read_measured(const json& m, RecordedRun& r, const sim::JsonContext& ctx) {
  if (!m.is_object()) ctx.fail("measured", "an object with one of step_seconds, tokens_per_second, ...");
  const sim::JsonContext mctx = ctx.child("measured");
  static const char* kKeys[] = {"step_seconds", "tokens_per_second", "tokens_per_second_per_device",
                                "samples_per_second"};
  int given = 0;
  for (const char* k : kKeys) {
    if (!m.contains(k)) continue;
    ++given;
    r.measured_key = k;
    r.measured_value = sim::get_positive(m, k, mctx);
  }
  if (given != 1)
    mctx.fail("step_seconds",
              "exactly one of step_seconds, tokens_per_second, tokens_per_second_per_device, "
              "samples_per_second");
  const double tokens = r.tokens_per_step();
  const double devices = r.plan.cluster.devices();
  if (r.measured_key == "step_seconds") r.measured_step_s = r.measured_value;
  else if (r.measured_key == "tokens_per_second") r.measured_step_s = tokens / r.measured_value;
  else if (r.measured_key == "tokens_per_second_per_device") r.measured_step_s = tokens / (r.measured_value * devices);
  else r.measured_step_s = r.plan.config.global_batch_size / r.measured_value;
  if (m.contains("peak_memory_GiB")) r.measured_peak_bytes = sim::get_positive(m, "peak_memory_GiB", mctx) * kGiB;
  const sim::MemoryReport reported = r.framework ? r.framework->terms.reports : sim::MemoryReport::device;
  r.measured_peak_kind = sim::get_enum_or(m, "peak_memory_kind", reported, mctx);
}

RecordedRun read_run(const json& j, const std::string& file, std::size_t index) {
  const std::string at = file + ": runs[" + std::to_string(index) + "]";
  if (!j.is_object()) throw sim::InputError(at + ": expected an object (a run)");
  const sim::JsonContext pre{file, "runs[" + std::to_string(index) + "]"};
  RecordedRun r;
  r.name = sim::get_string(j, "name", pre);
  const std::string where = file + ": run '" + r.name + "'";
  const sim::JsonContext ctx{file, "runs[" + std::to_string(index) + "] ('" + r.name + "')"};
  r.source = sim::get_string(j, "source", ctx);
  r.citation = sim::get_string(j, "citation", ctx);
  r.note = sim::get_string_or(j, "note", "", ctx);
  r.plan.model = read_model(sim::require(j, "model", ctx), where);
  r.plan.cluster = read_cluster(sim::require(j, "hardware", ctx), where, ctx, &r.hardware_profile);
  if (auto f = j.find("framework"); f != j.end())
    r.framework = frameworks::framework_from_json(*f, where + " field 'framework'");
  const json& config = sim::require(j, "config", ctx);
  r.plan.config = in_run(where, "config", [&] {
    return r.framework ? frameworks::config_with_framework(*r.framework, config, where)
                       : sim::config_from_json(config, where);
  });
  in_run(where, "config", [&] {
    sim::validate_config(r.plan.model, r.plan.cluster, r.plan.config);
    return 0;
  });
  if (r.plan.config.devices() != r.plan.cluster.devices())
    ctx.fail("config", "tp x pp x dp = " + std::to_string(r.plan.config.devices()) + " equal to the cluster's " +
                           std::to_string(r.plan.cluster.devices()) + " devices");
  read_measured(sim::require(j, "measured", ctx), r, ctx);
  return r;
}

}  // namespace

RunsFile runs_from_json(const json& j, const std::string& source) {
  const sim::JsonContext ctx{source, ""};
  if (!j.is_object()) throw sim::InputError(source + ": expected a JSON object (schema " + kRunsSchema + ")");
  const std::string schema = sim::get_string(j, "schema", ctx);
  if (schema != kRunsSchema) ctx.fail("schema", std::string("\"") + kRunsSchema + "\" (got \"" + schema + "\")");
  RunsFile out;
  out.path = source;
  out.description = sim::get_string_or(j, "description", "", ctx);
  const json& runs = sim::require(j, "runs", ctx);
  if (!runs.is_array() || runs.empty()) ctx.fail("runs", "a non-empty array of runs");
  std::set<std::string> names;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    RecordedRun r = read_run(runs[i], source, i);
    if (!names.insert(r.name).second)
      throw sim::InputError(source + ": run '" + r.name + "' field 'name': expected a unique name (it repeats)");
    out.runs.push_back(std::move(r));
  }
  return out;
}

RunsFile load_runs_file(const std::string& path) {
  if (!fs::is_regular_file(path)) throw sim::InputError("--runs: file '" + path + "' does not exist");
  return runs_from_json(sim::read_json_file(path), path);
}

std::vector<std::string> shipped_suites() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(sim::data_dir() + "/runs", ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string suite_path(const std::string& name) {
  const auto names = shipped_suites();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw sim::InputError("--suite: unknown suite '" + name + "' (expected one of: " + list + ")");
  }
  return sim::data_dir() + "/runs/" + name + ".json";
}

RunsFile add_run_to_file(const std::string& path, const json& run, bool append, const std::string& description) {
  json file;
  if (fs::exists(path)) {
    if (!append) throw sim::InputError(path + ": the runs file exists (pass --append to add this run to it)");
    file = sim::read_json_file(path);
    if (!file.is_object() || !file.contains("runs") || !file["runs"].is_array())
      throw sim::InputError(path + ": expected a runs file (schema " + std::string(kRunsSchema) + ") to append to");
  } else {
    file = json{{"schema", kRunsSchema}, {"description", description}, {"runs", json::array()}};
  }
  file["runs"].push_back(run);
  RunsFile checked = runs_from_json(file, path);
  sim::write_file_atomically(path, file.dump(1) + "\n");
  return checked;
}

std::vector<std::string> sources_of(const std::vector<RecordedRun>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs)
    if (std::find(out.begin(), out.end(), r.source) == out.end()) out.push_back(r.source);
  return out;
}

}  // namespace shardplan::calibration
