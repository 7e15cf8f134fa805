#include "plan_request.hpp"

#include <cmath>
#include <functional>
#include <stdexcept>

#include "planner/search_defaults.hpp"
#include "planner/search_result.hpp"
#include "planner/space_parse.hpp"
#include "simulator/errors.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::gui {

namespace sim = shardplan::simulator;
namespace pl = shardplan::planner;

namespace {

double to_double(const std::string& flag, const std::string& s) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {}
  throw sim::InputError(flag + ": expected a number, got '" + s + "'");
}

int to_int(const std::string& flag, const std::string& s) {
  const auto v = pl::parse_int_list(flag, s, false);
  if (v.size() != 1) throw sim::InputError(flag + ": expected one integer, got '" + s + "'");
  return v.front();
}

void check_features(const std::string& flag, const std::string& list) {
  for (const auto& f : pl::split_list(list))
    if (!pl::detail::known_feature(f))
      throw sim::InputError(flag + ": unknown feature '" + f + "' (" + pl::detail::feature_list() + ")");
}

// Runs `check`, recording its InputError (or any exception) under `field`.
template <typename F>
void field(Validation& v, const std::string& name, F&& check) {
  try {
    check();
  } catch (const std::exception& e) { v.errors.emplace(name, e.what()); }
}

nlohmann::json settings_of(const PlanRequest& r, const pl::SearchSpace& space, int max_nodes, double max_usd,
                           int max_tp, double headroom) {
  // Identical to `shardplan plan`'s search_settings (cli/plan_command.cpp); the dimensions the GUI
  // does not expose keep the search's defaults (planner/search_defaults.hpp).
  const pl::SearchDefaults& d = pl::search_defaults();
  return {{"nodes", r.nodes},
          {"global_batch_size", r.global_batch},
          {"seq_len", space.seq_len},
          {"micro_batch_sizes", d.micro_batch_sizes},
          {"zero_stages", d.zero_stages},
          {"schedules", d.schedules},
          {"recompute", d.recomputes},
          {"precision", r.precision},
          {"mixed_precision", r.mixed_precision},
          {"attention", r.attention},
          {"fusion", r.fusion},
          {"grad_accum_dtype", r.grad_accum_dtype},
          {"packed_document_tokens", space.packed_document_tokens},
          {"fp8", r.fp8},
          {"cp", r.cp},
          {"cp_kind", r.cp_kind},
          {"ep", r.ep},
          {"tp_comm_overlap", false},  // not a GUI field: the CLI's default
          {"objective", r.objective},
          {"max_nodes", max_nodes},
          {"max_usd_per_hour", max_usd},
          {"max_tp", max_tp},
          {"require", r.require},
          {"forbid", r.forbid},
          {"headroom", headroom}};
}

void check_numbers(Validation& v, const PlanRequest& r, ResolvedRequest& out) {
  auto& s = out.space;
  auto& c = out.constraints;
  field(v, "nodes", [&] { s.node_counts = pl::parse_int_list("--nodes", r.nodes, true); });
  field(v, "nodes", [&] {
    for (int n : s.node_counts)
      if (n < 1) throw sim::InputError("--nodes: expected node counts >= 1, got '" + r.nodes + "'");
  });
  field(v, "global_batch",
        [&] { s.global_batch_sizes = pl::parse_int_list("--global-batch-size", r.global_batch, false); });
  field(v, "seq_len", [&] {
    s.seq_len = to_int("--seq-len", r.seq_len);
    if (s.seq_len < 1) throw sim::InputError("--seq-len: expected a positive integer, got '" + r.seq_len + "'");
  });
  field(v, "precision", [&] { s.precisions = pl::parse_precisions(r.precision); });
  field(v, "mixed_precision", [&] { s.mixed_precision = pl::parse_mixed_precision(r.mixed_precision); });
  field(v, "attention", [&] { s.attention = pl::parse_attention(r.attention); });
  field(v, "fusion", [&] { s.fusion = pl::parse_fusion(r.fusion); });
  field(v, "grad_accum_dtype", [&] { s.grad_accum_dtype = pl::parse_grad_accum_dtype(r.grad_accum_dtype); });
  field(v, "packed_document_tokens", [&] {
    s.packed_document_tokens = to_int("--packed-document-tokens", r.packed_document_tokens);
    sim::validate_packing(s.packed_document_tokens, s.seq_len, s.attention);  // as `shardplan plan` checks it
  });
  field(v, "lora_rank", [&] { s.lora.rank = to_int("--lora-rank", r.lora_rank); });
  field(v, "lora_base", [&] { s.lora.base = pl::parse_name<sim::LoraBase>("--lora-base", r.lora_base); });
  field(v, "lora_alpha", [&] {
    s.lora.alpha = to_double("--lora-alpha", r.lora_alpha);
    if (s.lora.alpha <= 0)
      throw sim::InputError("--lora-alpha: expected a positive number, got '" + r.lora_alpha + "'");
  });
  field(v, "lora_dropout", [&] {
    s.lora.dropout = to_double("--lora-dropout", r.lora_dropout);
    if (s.lora.dropout < 0 || s.lora.dropout >= 1)
      throw sim::InputError("--lora-dropout: expected a probability in [0, 1), got '" + r.lora_dropout + "'");
  });
  double train = 0, dataset = 0, epochs = 1;
  auto non_negative = [](const std::string& flag, const std::string& text, double& into) {
    into = to_double(flag, text);
    if (into < 0) throw sim::InputError(flag + ": expected a number >= 0, got '" + text + "'");
  };
  field(v, "train_tokens", [&] { non_negative("--train-tokens", r.train_tokens, train); });
  field(v, "dataset_tokens", [&] { non_negative("--dataset-tokens", r.dataset_tokens, dataset); });
  field(v, "epochs", [&] {
    epochs = to_double("--epochs", r.epochs);
    if (epochs <= 0) throw sim::InputError("--epochs: expected a positive number, got '" + r.epochs + "'");
  });
  out.options.train_tokens = train > 0 ? train : dataset * epochs;
  field(v, "objective", [&] { out.options.objective = pl::parse_name<pl::Objective>("--objective", r.objective); });
  field(v, "max_nodes", [&] { c.max_nodes = to_int("--max-nodes", r.max_nodes); });
  field(v, "max_tp", [&] { c.max_tp = to_int("--max-tp", r.max_tp); });
  field(v, "max_usd_per_hour", [&] { non_negative("--max-usd-per-hour", r.max_usd_per_hour, c.max_usd_per_hour); });
  field(v, "headroom", [&] {
    c.memory_headroom = to_double("--headroom", r.headroom);
    if (c.memory_headroom < 0 || c.memory_headroom >= 1)
      throw sim::InputError("--headroom: expected a fraction in [0, 1), got '" + r.headroom + "'");
  });
  field(v, "require", [&] {
    check_features("--require", r.require);
    c.require = pl::split_list(r.require);
  });
  field(v, "forbid", [&] {
    check_features("--forbid", r.forbid);
    c.forbid = pl::split_list(r.forbid);
  });
}

}  // namespace

Validation validate(const PlanRequest& r) {
  Validation v;
  ResolvedRequest out;
  auto& s = out.space;  // the dimensions the GUI does not expose keep SearchSpace's defaults
  field(v, "model", [&] {
    if (r.model.empty()) throw sim::InputError("--model: expected a built-in model name or a config.json path");
    out.model = sim::load_model(r.model);
  });
  field(v, "hardware", [&] {
    if (r.hardware.empty())
      throw sim::InputError("--hardware: expected a built-in profile name or a profile JSON path");
    out.hardware = sim::load_hardware(r.hardware);
  });
  check_numbers(v, r, out);
  if (!v.errors.count("hardware")) field(v, "fp8", [&] { s.fp8_recipes = pl::fp8_search_list(r.fp8, out.hardware); });
  field(v, "cp", [&] {
    s.context_parallel = pl::cp_search_list(r.cp, s.seq_len);
    s.cp_kind = pl::parse_name<sim::CpKind>("--cp-kind", r.cp_kind);
  });
  if (!v.errors.count("model")) field(v, "ep", [&] { s.expert_parallel = pl::ep_search_list(r.ep, out.model); });
  s.lora.targets = pl::split_list(r.lora_targets);
  if (!v.errors.count("lora_rank") && !v.errors.count("model")) {
    field(v, "lora_targets", [&] {
      if (!s.lora.targets.empty() && !s.lora.enabled()) throw sim::InputError("--lora-targets: needs --lora-rank > 0");
      if (s.lora.enabled()) (void)sim::resolve_lora_targets(out.model, s.lora.targets);
    });
  }
  if (!v.ok()) return v;
  out.options.top_k = r.top;
  out.search_settings = settings_of(r, s, out.constraints.max_nodes, out.constraints.max_usd_per_hour,
                                    out.constraints.max_tp, out.constraints.memory_headroom);
  v.resolved = std::move(out);
  return v;
}

std::vector<std::string> cli_arguments(const PlanRequest& r) {
  std::vector<std::string> a{"plan",
                             "--model",
                             r.model,
                             "--hardware",
                             r.hardware,
                             "--nodes",
                             r.nodes,
                             "--global-batch-size",
                             r.global_batch,
                             "--seq-len",
                             r.seq_len,
                             "--precision",
                             r.precision,
                             "--mixed-precision",
                             r.mixed_precision,
                             "--attention",
                             r.attention,
                             "--fusion",
                             r.fusion,
                             "--grad-accum-dtype",
                             r.grad_accum_dtype,
                             "--packed-document-tokens",
                             r.packed_document_tokens,
                             "--fp8",
                             r.fp8,
                             "--cp",
                             r.cp,
                             "--cp-kind",
                             r.cp_kind,
                             "--ep",
                             r.ep,
                             "--lora-rank",
                             r.lora_rank,
                             "--lora-alpha",
                             r.lora_alpha,
                             "--lora-dropout",
                             r.lora_dropout,
                             "--objective",
                             r.objective,
                             "--train-tokens",
                             r.train_tokens,
                             "--dataset-tokens",
                             r.dataset_tokens,
                             "--epochs",
                             r.epochs,
                             "--max-nodes",
                             r.max_nodes,
                             "--max-usd-per-hour",
                             r.max_usd_per_hour,
                             "--max-tp",
                             r.max_tp,
                             "--headroom",
                             r.headroom,
                             "--top",
                             std::to_string(r.top)};
  if (!r.lora_targets.empty()) a.insert(a.end(), {"--lora-targets", r.lora_targets});
  if (r.lora_base != pl::search_defaults().lora_base) a.insert(a.end(), {"--lora-base", r.lora_base});
  if (!r.require.empty()) a.insert(a.end(), {"--require", r.require});
  if (!r.forbid.empty()) a.insert(a.end(), {"--forbid", r.forbid});
  return a;
}

const std::vector<RequestField>& string_fields() {
  static const std::vector<RequestField> f{{"model", &PlanRequest::model},
                                           {"hardware", &PlanRequest::hardware},
                                           {"nodes", &PlanRequest::nodes},
                                           {"global_batch", &PlanRequest::global_batch},
                                           {"seq_len", &PlanRequest::seq_len},
                                           {"precision", &PlanRequest::precision},
                                           {"mixed_precision", &PlanRequest::mixed_precision},
                                           {"attention", &PlanRequest::attention},
                                           {"fusion", &PlanRequest::fusion},
                                           {"grad_accum_dtype", &PlanRequest::grad_accum_dtype},
                                           {"packed_document_tokens", &PlanRequest::packed_document_tokens},
                                           {"fp8", &PlanRequest::fp8},
                                           {"cp", &PlanRequest::cp},
                                           {"cp_kind", &PlanRequest::cp_kind},
                                           {"ep", &PlanRequest::ep},
                                           {"lora_rank", &PlanRequest::lora_rank},
                                           {"lora_alpha", &PlanRequest::lora_alpha},
                                           {"lora_dropout", &PlanRequest::lora_dropout},
                                           {"lora_targets", &PlanRequest::lora_targets},
                                           {"lora_base", &PlanRequest::lora_base},
                                           {"train_tokens", &PlanRequest::train_tokens},
                                           {"dataset_tokens", &PlanRequest::dataset_tokens},
                                           {"epochs", &PlanRequest::epochs},
                                           {"objective", &PlanRequest::objective},
                                           {"max_nodes", &PlanRequest::max_nodes},
                                           {"max_usd_per_hour", &PlanRequest::max_usd_per_hour},
                                           {"max_tp", &PlanRequest::max_tp},
                                           {"headroom", &PlanRequest::headroom},
                                           {"require", &PlanRequest::require},
                                           {"forbid", &PlanRequest::forbid}};
  return f;
}

const std::vector<std::string>& request_fields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [key, member] : string_fields()) n.emplace_back(key);
    return n;
  }();
  return names;
}

std::string PlanRequest::*request_member(const std::string& field) {
  for (const auto& [key, member] : string_fields())
    if (field == key) return member;
  throw std::out_of_range("no request field '" + field + "'");
}

nlohmann::json to_json(const PlanRequest& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, member] : string_fields()) j[key] = r.*member;
  j["top"] = r.top;
  return j;
}

PlanRequest request_from_json(const nlohmann::json& j) {
  PlanRequest r;
  if (!j.is_object()) return r;
  for (const auto& [key, member] : string_fields())
    if (auto it = j.find(key); it != j.end() && it->is_string()) r.*member = it->get<std::string>();
  if (auto it = j.find("top"); it != j.end() && it->is_number_integer() && it->get<int>() > 0) r.top = it->get<int>();
  return r;
}

}  // namespace shardplan::gui
