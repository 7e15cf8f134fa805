// The calibration report and the calibrated profile (schema shardplan.calibration/1 and the
// hardware schema with a "calibration" object and a source line per changed figure).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "calibration.hpp"
#include "number_text.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json stats_json(const ErrorStats& s) {
  if (s.runs == 0) return nullptr;
  return {{"runs", s.runs}, {"mean", s.mean}, {"median", s.median}, {"worst", s.worst}};
}

json parameters_json(const CalibrationResult& r) {
  json o = json::object();
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    json e{{"value", p.value},
           {"prior", p.prior},
           {"fitted", p.fitted},
           {"identified", p.identified},
           {"meaning", calibration_parameters()[i].meaning}};
    if (p.std_error >= 0) e["std_error"] = p.std_error;
    o[p.name] = e;
  }
  return o;
}

json run_names(const CalibrationResult& r, bool holdout) {
  json a = json::array();
  for (const auto& run : r.runs)
    if (run.holdout == holdout) a.push_back(run.name);
  return a;
}

// Summary shared by the report and the profile's "calibration" object.
json summary_json(const CalibrationResult& r) {
  return {{"method", kMethod},
          {"base_profile", r.base.name},
          {"base_profile_file", r.base.source_file},
          {"runs_file", r.runs_files},
          {"fit_runs", run_names(r, false)},
          {"holdout_runs", run_names(r, true)},
          {"iterations", r.iterations},
          {"converged", r.converged},
          {"parameters", parameters_json(r)},
          {"step_seconds_error_before", {{"fit", stats_json(r.fit_before)}, {"holdout", stats_json(r.holdout_before)}}},
          {"step_seconds_error_after", {{"fit", stats_json(r.fit_after)}, {"holdout", stats_json(r.holdout_after)}}},
          {"notes", r.notes}};
}

// The quantity a key names ("memory_MiB" and "memory_bytes": "memory"); the key itself when it
// carries no unit.
std::string quantity_of(const std::string& key) {
  const std::string base = sim::quantity_base(key);
  return base.empty() ? key : base;
}

// "device.memory_MiB" -> "device.memory_bytes": the written profile's key for the same figure.
std::string rekey(const std::string& dotted, const json& written) {
  const json* node = &written;
  std::string out;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    const std::size_t dot = std::min(dotted.find('.', start), dotted.size());
    std::string key = dotted.substr(start, dot - start);
    if (node != nullptr && node->is_object() && !node->contains(key))
      for (auto it = node->begin(); it != node->end(); ++it)
        if (quantity_of(it.key()) == quantity_of(key)) key = it.key();
    out += (out.empty() ? "" : ".") + key;
    node = node != nullptr && node->is_object() && node->contains(key) ? &(*node)[key] : nullptr;
    start = dot + 1;
  }
  return out;
}

// The base profile's sources (re-keyed to the written units), then one entry per changed figure.
json sources_json(const CalibrationResult& r, const json& written) {
  json sources = json::object();
  if (!r.base.source_file.empty() && fs::is_regular_file(r.base.source_file)) {
    const json base = sim::read_json_file(r.base.source_file);
    if (auto it = base.find("sources"); it != base.end() && it->is_object())
      for (auto s = it->begin(); s != it->end(); ++s) sources[rekey(s.key(), written)] = *s;
  }
  int fit_runs = 0;
  bool multi_node = false;
  for (const auto& run : r.runs) {
    fit_runs += run.holdout ? 0 : 1;
    multi_node = multi_node || (!run.holdout && run.nodes > 1);
  }
  std::string files;
  for (const auto& f : r.runs_files) files += (files.empty() ? "" : ", ") + f;
  const auto& table = calibration_parameters();
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& p = r.parameters[i];
    if (!p.identified || p.value == p.prior) continue;
    const std::string what = table[i].kind == ParamKind::scale
                                 ? p.name + " = " + num("%.4f", p.value) + " x the base profile's figure"
                                 : p.name + " = " + num("%.3f", p.value) + " (base " + num("%.3f", p.prior) + ")";
    for (const std::string field : table[i].fields) {
      std::string pointer = "/" + field;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      const json v = written.value(json::json_pointer(pointer), json());
      if (v.is_null() || v == 0) continue;  // absent or unsupported
      std::string text = "calibrated by shardplan calibrate from " + std::to_string(fit_runs) + " measured runs (" +
                         files + "): " + what + ", " + kMethod + ".";
      if (field.starts_with("network.") && !multi_node)
        text += " No fitting run spanned nodes: the factor measured on intra-node links is applied here too.";
      if (auto old = sources.find(field); old != sources.end() && old->is_string())
        text += " Base figure: " + old->get<std::string>();
      sources[field] = text;
    }
  }
  return sources;
}

}  // namespace

json to_json(const CalibrationResult& r) {
  json j = summary_json(r);
  j["schema"] = kCalibrationSchema;
  j["calibrated_profile"] = r.calibrated.name;
  j["runs"] = json::array();
  for (const auto& run : r.runs)
    j["runs"].push_back({{"name", run.name},
                         {"set", run.holdout ? "holdout" : "fit"},
                         {"measured_step_seconds", run.measured_s},
                         {"predicted_step_seconds_before", run.before_s},
                         {"predicted_step_seconds_after", run.after_s},
                         {"error_before_relative", run.error_before()},
                         {"error_after_relative", run.error_after()}});
  return j;
}

json calibrated_profile_json(const CalibrationResult& r) {
  json j = sim::to_json(r.calibrated);
  // The hardware schema's calibration status (hardware_profiles/SCHEMA.md) with the fit's summary.
  j["calibration"] = summary_json(r);
  j["calibration"]["status"] = "calibrated";
  j["calibration"]["rule"] = "fitted by `shardplan calibrate` (" + std::string(kMethod) + ") to " +
                             std::to_string(run_names(r, false).size()) + " runs of " +
                             j["calibration"]["runs_file"].dump() + " on top of " + r.base.name;
  j["sources"] = sources_json(r, j);
  return j;
}

}  // namespace shardplan::calibration
