// Validation: the built-in suite, entries <-> JSON, the plan of an entry, reading shardrun's
// report, summary statistics and the results JSON. Running an entry under mpirun is in
// validation_run.cpp, the SVG in validation_plot.cpp.
#include "validation.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "formats/run_report.hpp"
#include "simulator/errors.hpp"
#include "simulator/evaluator.hpp"
#include "simulator/json_fields.hpp"
#include "simulator/paths.hpp"
#include "simulator/prediction_json.hpp"
#include "simulator/rank_layout.hpp"

namespace shardplan::calibration {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

sim::Precision precision_of(const json& j, const sim::JsonContext& ctx) {
  return sim::get_enum_or(j, "precision", sim::Precision::fp32, ctx);
}

sim::MixedPrecision mixed_precision_of(const json& j, const sim::JsonContext& ctx) {
  return sim::get_enum_or(j, "mixed_precision", sim::MixedPrecision::master_weights, ctx);
}

// shardrun on a LibTorch without SDPA (Debian's 1.13) runs the eager attention core: eager unless given.
sim::AttentionKind attention_of(const json& j, const sim::JsonContext& ctx) {
  return sim::get_enum_or(j, "attention", sim::AttentionKind::eager, ctx);
}

sim::Recompute recompute_of(const json& j, const sim::JsonContext& ctx) {
  return sim::get_enum_or(j, "recompute", sim::Recompute::none, ctx);
}

int int_field(const json& j, const char* key, const sim::JsonContext& ctx, int fallback, int min) {
  const long long v = sim::get_int_or(j, key, fallback, ctx);
  if (v < min || v > 1'000'000) ctx.fail(key, "an integer >= " + std::to_string(min));
  return static_cast<int>(v);
}

bool valid_name(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 100) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::string check_model(const json& j, const sim::JsonContext& ctx) {
  const std::string m = sim::get_string(j, "model", ctx);
  if (sim::looks_like_path(m)) {
    if (!fs::exists(m)) ctx.fail("model", "an existing model card file (no file '" + m + "')");
    return m;
  }
  const auto names = sim::builtin_model_names();
  if (std::find(names.begin(), names.end(), m) != names.end()) return m;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  ctx.fail("model", "a built-in model (" + list + ") or a model card path (got '" + m + "')");
}

sim::LoraConfig lora_of(const json& j, const sim::JsonContext& parent) {
  sim::LoraConfig l;
  auto it = j.find("lora");
  if (it == j.end() || it->is_null()) return l;
  const sim::JsonContext ctx = parent.child("lora");
  if (!it->is_object()) parent.fail("lora", "null or an object {rank, alpha, dropout, targets}");
  l.rank = static_cast<int>(sim::get_positive_int(*it, "rank", ctx));
  l.alpha = sim::get_number_or(*it, "alpha", 16.0, ctx);
  l.dropout = sim::get_number_or(*it, "dropout", 0.0, ctx);
  const json& t = sim::require(*it, "targets", ctx);
  if (!t.is_array() || t.empty()) ctx.fail("targets", "a non-empty array of module names");
  for (const auto& x : t) {
    if (!x.is_string()) ctx.fail("targets", "an array of strings");
    l.targets.push_back(x.get<std::string>());
  }
  l.base = sim::get_enum_or(*it, "base", sim::LoraBase::bf16, ctx);
  return l;
}

// The fields of context and expert parallelism (optional: 1, ring, 1).
void read_cp_ep(const json& j, const sim::JsonContext& ctx, ValidationEntry& e) {
  e.cp = int_field(j, "cp", ctx, 1, 1);
  e.cp_kind = sim::get_enum_or(j, "cp_kind", sim::CpKind::ring, ctx);
  e.ep = int_field(j, "ep", ctx, 1, 1);
}

}  // namespace

sim::ParallelConfig ValidationEntry::parallel_config() const {
  sim::ParallelConfig c;
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.zero_stage = zero_stage;
  c.sharding_degree = sharding_degree;
  c.micro_batch_size = micro_batch_size;
  c.global_batch_size = global_batch_size;
  c.seq_len = seq_len;
  c.precision = precision;
  c.mixed_precision = mixed_precision;
  c.attention = attention;
  c.sequence_parallel = sequence_parallel;
  c.recompute = recompute;
  c.schedule = schedule;
  c.virtual_stages = virtual_stages;
  c.lora = lora;
  c.cp = cp;
  c.cp_kind = cp_kind;
  c.ep = ep;
  c.rank_order = "tp-dp-pp";  // cp right after tp (simulator::RankLayout)
  return c;
}

json to_json(const ValidationEntry& e) {
  json j = {{"name", e.name},
            {"model", e.model},
            {"tp", e.tp},
            {"pp", e.pp},
            {"dp", e.dp},
            {"zero_stage", e.zero_stage},
            {"sharding_degree", e.sharding_degree},
            {"micro_batch_size", e.micro_batch_size},
            {"global_batch_size", e.global_batch_size},
            {"seq_len", e.seq_len},
            {"precision", sim::to_string(e.precision)},
            {"mixed_precision", sim::to_string(e.mixed_precision)},
            {"attention", sim::to_string(e.attention)},
            {"sequence_parallel", e.sequence_parallel},
            {"recompute", sim::to_string(e.recompute)},
            {"schedule", sim::to_string(e.schedule)},
            {"virtual_stages", e.virtual_stages},
            {"cp", e.cp},
            {"cp_kind", sim::to_string(e.cp_kind)},
            {"ep", e.ep}};
  if (e.lora.enabled())
    j["lora"] = {{"rank", e.lora.rank},
                 {"alpha", e.lora.alpha},
                 {"dropout", e.lora.dropout},
                 {"targets", e.lora.targets},
                 {"base", sim::to_string(e.lora.base)}};
  else j["lora"] = nullptr;
  return j;
}

ValidationEntry entry_from_json(const json& j, const std::string& where) {
  const sim::JsonContext ctx{where, ""};
  if (!j.is_object()) throw sim::InputError(where + ": expected an object {name, model, tp, pp, dp, ...}");
  static const std::set<std::string> known = {"name",
                                              "model",
                                              "tp",
                                              "pp",
                                              "dp",
                                              "zero_stage",
                                              "sharding_degree",
                                              "micro_batch_size",
                                              "global_batch_size",
                                              "seq_len",
                                              "precision",
                                              "mixed_precision",
                                              "attention",
                                              "sequence_parallel",
                                              "recompute",
                                              "schedule",
                                              "virtual_stages",
                                              "lora",
                                              "cp",
                                              "cp_kind",
                                              "ep"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k))
      ctx.fail(
          k,
          "no such field (known: name, model, tp, pp, dp, zero_stage, sharding_degree, "
          "micro_batch_size, global_batch_size, seq_len, precision, mixed_precision, attention, sequence_parallel, "
          "recompute, schedule, virtual_stages, lora, cp, cp_kind, ep)");
  ValidationEntry e;
  e.name = sim::get_string(j, "name", ctx);
  if (!valid_name(e.name)) ctx.fail("name", "letters, digits, '.', '_' or '-' (it names a directory)");
  e.model = check_model(j, ctx);
  e.tp = static_cast<int>(sim::get_positive_int(j, "tp", ctx));
  e.pp = static_cast<int>(sim::get_positive_int(j, "pp", ctx));
  e.dp = static_cast<int>(sim::get_positive_int(j, "dp", ctx));
  e.micro_batch_size = static_cast<int>(sim::get_positive_int(j, "micro_batch_size", ctx));
  e.global_batch_size = static_cast<int>(sim::get_positive_int(j, "global_batch_size", ctx));
  e.seq_len = static_cast<int>(sim::get_positive_int(j, "seq_len", ctx));
  e.zero_stage = int_field(j, "zero_stage", ctx, 0, 0);
  e.sharding_degree = int_field(j, "sharding_degree", ctx, 0, 0);
  e.virtual_stages = int_field(j, "virtual_stages", ctx, 1, 1);
  e.precision = precision_of(j, ctx);
  e.mixed_precision = mixed_precision_of(j, ctx);
  e.attention = attention_of(j, ctx);
  e.sequence_parallel = sim::get_bool_or(j, "sequence_parallel", false, ctx);
  e.recompute = recompute_of(j, ctx);
  e.schedule = sim::get_enum_or(j, "schedule", sim::PipelineSchedule::one_f_one_b, ctx);
  e.lora = lora_of(j, ctx);
  read_cp_ep(j, ctx, e);
  return e;
}

std::vector<ValidationEntry> load_suite_file(const std::string& path) {
  const json j = sim::read_json_file(path);
  if (!j.is_array() || j.empty())
    throw sim::InputError(path + ": expected a non-empty JSON array of configurations {name, model, tp, ...}");
  std::vector<ValidationEntry> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string where = path + ": entry " + std::to_string(i);
    out.push_back(entry_from_json(j[i], where));
    for (std::size_t k = 0; k + 1 < out.size(); ++k)
      if (out[k].name == out.back().name)
        throw sim::InputError(where + ": field 'name': expected a unique name ('" + out.back().name +
                              "' is also entry " + std::to_string(k) + ")");
  }
  return out;
}

std::vector<ValidationEntry> select_entries(const std::vector<ValidationEntry>& suite,
                                            const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (std::any_of(suite.begin(), suite.end(), [&](const ValidationEntry& e) { return e.name == n; })) continue;
    std::string list;
    for (const auto& e : suite) list += (list.empty() ? "" : ", ") + e.name;
    throw sim::InputError("--only: unknown configuration '" + n + "' (valid: " + list + ")");
  }
  std::vector<ValidationEntry> out;
  for (const auto& e : suite)
    if (std::find(names.begin(), names.end(), e.name) != names.end()) out.push_back(e);
  return out;
}

Plan build_plan(const ValidationEntry& e, const sim::HardwareProfile& hw) {
  Plan p;
  p.shardplan_version = sim::version();
  p.model = sim::load_model(e.model);
  p.cluster = sim::ClusterSpec{hw, 1, e.ranks()};
  p.config = e.parallel_config();
  sim::validate_config(p.model, p.cluster, p.config);
  p.prediction = sim::Evaluator(p.model, p.cluster, p.config.lora).simulate(p.config);
  p.search = {{"validate", e.name}};
  return p;
}

std::vector<double> predicted_peak_per_rank(const Plan& plan) {
  const auto& c = plan.config;
  const sim::RankLayout layout(c.rank_order, c.tp, c.cp, c.dp, c.pp, plan.cluster.per_node());
  std::vector<double> out(static_cast<std::size_t>(c.devices()));
  for (int r = 0; r < c.devices(); ++r) {
    const int stage = (r / layout.stride(sim::Dim::pp)) % c.pp;
    out[r] = plan.prediction.stages.at(static_cast<std::size_t>(stage)).memory.allocated();  // shardrun counts tensors
  }
  return out;
}

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::ran:
      return "ran";
    case RunStatus::skipped:
      return "skipped";
    case RunStatus::failed:
      return "failed";
  }
  return "?";
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void apply_report(ValidationRun& run, const json& report, const std::string& source) {
  const formats::RunReport rep = formats::run_report_from_json(report, source);
  const auto& m = rep.measured;
  run.measured_step_s_runs.push_back(m.step_s);
  run.measured_step_s = median_of(run.measured_step_s_runs);
  run.measured_peak_bytes = static_cast<double>(m.peak_bytes);
  if (m.reference_gemm_start_s && m.reference_gemm_end_s)
    run.reference_gemm_s_runs.push_back(std::min(*m.reference_gemm_start_s, *m.reference_gemm_end_s));
  run.measured_peak_per_rank.clear();
  for (int64_t b : m.peak_bytes_per_rank) run.measured_peak_per_rank.push_back(static_cast<double>(b));
  if (run.measured_peak_per_rank.empty()) run.measured_peak_per_rank = {run.measured_peak_bytes};
  run.has_measurement = true;
  run.step_error = (run.predicted_step_s - run.measured_step_s) / run.measured_step_s;
  run.memory_error = 0;
  run.memory_error_rank = 0;
  for (std::size_t r = 0; r < run.measured_peak_per_rank.size(); ++r) {
    const double pred =
        r < run.predicted_peak_per_rank.size() ? run.predicted_peak_per_rank[r] : run.predicted_peak_bytes;
    const double err = (pred - run.measured_peak_per_rank[r]) / run.measured_peak_per_rank[r];
    if (r == 0 || std::abs(err) > std::abs(run.memory_error)) {
      run.memory_error = err;
      run.memory_error_rank = static_cast<int>(r);
    }
  }
}

double profile_reference_gemm_seconds(const json& profile) {
  const auto p = profile.find("profiled");
  if (p == profile.end() || !p->is_object()) return 0;
  const auto ref = p->find("reference_gemm_seconds");
  if (ref == p->end() || !ref->is_object()) return 0;
  auto seconds = [&](const char* key) {
    const auto v = ref->find(key);
    return v != ref->end() && v->is_number() ? v->get<double>() : 0.0;
  };
  const double a = seconds("start"), b = seconds("end");
  return a > 0 && b > 0 ? std::min(a, b) : 0;
}

double machine_slowdown(const ValidationRun& run, double profile_reference_gemm_s) {
  if (run.reference_gemm_s_runs.empty() || !(profile_reference_gemm_s > 0)) return std::nan("");
  return median_of(run.reference_gemm_s_runs) / profile_reference_gemm_s - 1;
}

ValidationErrorStats abs_error_stats(const std::vector<std::pair<double, std::string>>& v) {
  ValidationErrorStats s;
  s.count = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::vector<double> a;
  for (const auto& [e, name] : v) {
    if (a.empty() || std::abs(e) > s.worst_abs) {
      s.worst_abs = std::abs(e);
      s.worst_run = name;
    }
    a.push_back(std::abs(e));
    s.mean_abs += std::abs(e) / static_cast<double>(v.size());
  }
  s.median_abs = median_of(std::move(a));
  return s;
}

ValidationSummary summarize(const std::vector<ValidationRun>& runs) {
  ValidationSummary s;
  std::vector<std::pair<double, std::string>> time, mem;
  for (const auto& r : runs) {
    if (r.status == RunStatus::ran) ++s.ran;
    if (r.status == RunStatus::skipped) ++s.skipped;
    if (r.status == RunStatus::failed) ++s.failed;
    if (r.status != RunStatus::ran || !r.has_measurement) continue;
    mem.emplace_back(r.memory_error, r.entry.name);
    if (r.time_judged) time.emplace_back(r.step_error, r.entry.name);
  }
  s.step_seconds = abs_error_stats(time);
  s.peak_memory = abs_error_stats(mem);
  return s;
}

// ---- results JSON --------------------------------------------------------------------------

namespace {

std::string relative_to(const std::string& p, const std::string& base_dir) {
  if (p.empty()) return "";
  const fs::path a = fs::weakly_canonical(fs::absolute(p));
  const fs::path b = fs::weakly_canonical(fs::absolute(base_dir.empty() ? "." : base_dir));
  const fs::path rel = a.lexically_relative(b);
  if (!rel.empty() && *rel.begin() != "..") return rel.string();
  return a.string();
}

std::string resolve_from(const std::string& p, const std::string& base_dir) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(base_dir.empty() ? "." : base_dir) / p).lexically_normal().string();
}

// The entry's configuration as the results file records it: the entry's JSON without its name,
// virtual stages and LoRA details, with the sharding degree the planner resolved and the LoRA rank.
json layout_json(const ValidationRun& r) {
  json j = to_json(r.entry);
  for (const char* key : {"name", "virtual_stages", "lora"}) j.erase(key);
  j["sharding_degree"] = r.resolved_sharding_degree;
  j["lora_rank"] = r.entry.lora.rank;
  return j;
}

json run_json(const ValidationRun& r, const std::string& base_dir) {
  json j = {{"name", r.entry.name},
            {"status", to_string(r.status)},
            {"reason", r.reason},
            {"ranks", r.ranks},
            {"time_judged", r.time_judged},
            {"plan_file", relative_to(r.plan_file, base_dir)},
            {"report_file", relative_to(r.report_file, base_dir)},
            {"layout", layout_json(r)}};
  if (!r.time_note.empty()) j["time_note"] = r.time_note;
  if (r.steps > 0) j["steps"] = r.steps;
  if (!r.output_log.empty()) j["output_log"] = relative_to(r.output_log, base_dir);
  if (r.has_prediction)
    j["predicted"] = {{"step_seconds", r.predicted_step_s},
                      {"peak_memory_bytes", r.predicted_peak_bytes},
                      {"peak_memory_bytes_per_rank", r.predicted_peak_per_rank}};
  if (r.has_measurement) {
    j["measured"] = {{"step_seconds", r.measured_step_s},
                     {"step_seconds_runs", r.measured_step_s_runs},
                     {"peak_memory_bytes", r.measured_peak_bytes},
                     {"peak_memory_bytes_per_rank", r.measured_peak_per_rank}};
    if (!r.reference_gemm_s_runs.empty()) j["measured"]["reference_gemm_seconds_runs"] = r.reference_gemm_s_runs;
    j["error"] = {{"step_seconds_relative", r.step_error},
                  {"peak_memory_relative", r.memory_error},
                  {"peak_memory_worst_rank", r.memory_error_rank}};
  }
  return j;
}

json stats_json(const ValidationErrorStats& s) {
  return {{"count", s.count},
          {"mean_abs_relative", s.mean_abs},
          {"median_abs_relative", s.median_abs},
          {"worst_abs_relative", s.worst_abs},
          {"worst_run", s.worst_run}};
}

std::vector<double> numbers(const json& j, const char* key, const sim::JsonContext& ctx) {
  std::vector<double> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (!it->is_array()) ctx.fail(key, "an array of numbers");
  for (const auto& v : *it) {
    if (!v.is_number()) ctx.fail(key, "an array of numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

ValidationEntry entry_of_layout(const json& l, const std::string& name, const sim::JsonContext& ctx) {
  ValidationEntry e;
  e.name = name;
  e.model = sim::get_string(l, "model", ctx);
  e.tp = static_cast<int>(sim::get_positive_int(l, "tp", ctx));
  e.pp = static_cast<int>(sim::get_positive_int(l, "pp", ctx));
  e.dp = static_cast<int>(sim::get_positive_int(l, "dp", ctx));
  e.zero_stage = int_field(l, "zero_stage", ctx, 0, 0);
  e.sharding_degree = int_field(l, "sharding_degree", ctx, 0, 0);
  e.micro_batch_size = static_cast<int>(sim::get_positive_int(l, "micro_batch_size", ctx));
  e.global_batch_size = static_cast<int>(sim::get_positive_int(l, "global_batch_size", ctx));
  e.seq_len = static_cast<int>(sim::get_positive_int(l, "seq_len", ctx));
  e.precision = precision_of(l, ctx);
  e.mixed_precision = mixed_precision_of(l, ctx);
  e.attention = attention_of(l, ctx);
  e.sequence_parallel = sim::get_bool_or(l, "sequence_parallel", false, ctx);
  e.recompute = recompute_of(l, ctx);
  e.lora.rank = int_field(l, "lora_rank", ctx, 0, 0);
  read_cp_ep(l, ctx, e);
  return e;
}

ValidationRun run_from_json(const json& j, const sim::JsonContext& ctx, const std::string& base_dir) {
  ValidationRun r;
  const std::string name = sim::get_string(j, "name", ctx);
  r.entry = entry_of_layout(sim::require(j, "layout", ctx), name, ctx.child("layout"));
  r.resolved_sharding_degree = r.entry.sharding_degree;
  const std::string status = sim::get_string(j, "status", ctx);
  if (status == "ran") r.status = RunStatus::ran;
  else if (status == "failed") r.status = RunStatus::failed;
  else if (status == "skipped") r.status = RunStatus::skipped;
  else ctx.fail("status", "ran, skipped or failed");
  r.reason = sim::get_string_or(j, "reason", "", ctx);
  r.ranks = static_cast<int>(sim::get_positive_int(j, "ranks", ctx));
  r.time_judged = sim::get_bool_or(j, "time_judged", true, ctx);
  r.time_note = sim::get_string_or(j, "time_note", "", ctx);
  r.steps = static_cast<int>(sim::get_int_or(j, "steps", 0, ctx));
  r.plan_file = resolve_from(sim::get_string_or(j, "plan_file", "", ctx), base_dir);
  r.report_file = resolve_from(sim::get_string_or(j, "report_file", "", ctx), base_dir);
  r.output_log = resolve_from(sim::get_string_or(j, "output_log", "", ctx), base_dir);
  if (auto it = j.find("predicted"); it != j.end()) {
    const auto c = ctx.child("predicted");
    r.has_prediction = true;
    r.predicted_step_s = sim::get_number(*it, "step_seconds", c);
    r.predicted_peak_bytes = sim::get_number(*it, "peak_memory_bytes", c);
    r.predicted_peak_per_rank = numbers(*it, "peak_memory_bytes_per_rank", c);
  }
  if (auto it = j.find("measured"); it != j.end()) {
    const auto c = ctx.child("measured");
    r.has_measurement = true;
    r.measured_step_s = sim::get_number(*it, "step_seconds", c);
    r.measured_step_s_runs = numbers(*it, "step_seconds_runs", c);
    if (r.measured_step_s_runs.empty()) r.measured_step_s_runs = {r.measured_step_s};
    r.measured_peak_bytes = sim::get_number(*it, "peak_memory_bytes", c);
    r.measured_peak_per_rank = numbers(*it, "peak_memory_bytes_per_rank", c);
    r.reference_gemm_s_runs = numbers(*it, "reference_gemm_seconds_runs", c);
    const json& e = sim::require(j, "error", ctx);
    r.step_error = sim::get_number(e, "step_seconds_relative", ctx.child("error"));
    r.memory_error = sim::get_number(e, "peak_memory_relative", ctx.child("error"));
    r.memory_error_rank = static_cast<int>(sim::get_int_or(e, "peak_memory_worst_rank", 0, ctx.child("error")));
  }
  return r;
}

}  // namespace

json to_json(const ValidationReport& r, const std::string& base_dir) {
  json runs = json::array();
  for (const auto& run : r.runs) runs.push_back(run_json(run, base_dir));
  const ValidationSummary s = summarize(r.runs);
  return {{"schema", kValidationSchema},
          {"hardware", r.hardware},
          {"hardware_file", r.hardware_file},
          {"steps", r.steps},
          {"threads_per_rank", r.threads_per_rank},
          {"repeats", r.repeats},
          {"cores", r.cores},
          {"profile_reference_gemm_seconds", r.profile_reference_gemm_s},
          {"runs", std::move(runs)},
          {"summary",
           {{"ran", s.ran},
            {"skipped", s.skipped},
            {"failed", s.failed},
            {"step_seconds", stats_json(s.step_seconds)},
            {"peak_memory", stats_json(s.peak_memory)}}}};
}

ValidationReport validation_from_json(const json& j, const std::string& source, const std::string& base_dir) {
  const sim::JsonContext ctx{source, ""};
  if (!j.is_object()) throw sim::InputError(source + ": expected a JSON object (shardplan validate --json output)");
  const std::string schema = sim::get_string(j, "schema", ctx);
  if (schema != kValidationSchema)
    ctx.fail("schema", std::string("\"") + kValidationSchema + "\" (got \"" + schema + "\")");
  ValidationReport r;
  r.hardware = sim::get_string(j, "hardware", ctx);
  r.hardware_file = sim::get_string_or(j, "hardware_file", r.hardware, ctx);
  r.steps = static_cast<int>(sim::get_int_or(j, "steps", 0, ctx));
  r.threads_per_rank = static_cast<int>(sim::get_int_or(j, "threads_per_rank", 1, ctx));
  r.repeats = static_cast<int>(sim::get_int_or(j, "repeats", 1, ctx));
  r.cores = static_cast<int>(sim::get_int_or(j, "cores", 1, ctx));
  if (auto it = j.find("profile_reference_gemm_seconds"); it != j.end() && it->is_number())
    r.profile_reference_gemm_s = it->get<double>();
  const json& runs = sim::require(j, "runs", ctx);
  if (!runs.is_array()) ctx.fail("runs", "an array");
  for (std::size_t i = 0; i < runs.size(); ++i)
    r.runs.push_back(run_from_json(runs[i], ctx.child("runs[" + std::to_string(i) + "]"), base_dir));
  return r;
}

}  // namespace shardplan::calibration
