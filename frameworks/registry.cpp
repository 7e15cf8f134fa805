// The registry of registry.hpp: every framework model, by name, with its versions.
#include "registry.hpp"

#include <algorithm>

#include "fitted_efficiency.hpp"
#include "models.hpp"
#include "simulator/errors.hpp"

namespace shardplan::frameworks {

using nlohmann::json;

const std::vector<FrameworkEntry>& registry() {
  static const std::vector<FrameworkEntry> entries = {
      {"megatron", "Megatron-LM / Megatron-Core (NVIDIA)", {"2021", "2022", "core"}, megatron_model},
      {"nemo", "NeMo: Megatron-Core + Transformer Engine (NVIDIA)", {"23.09", "24.07"}, nemo_model},
      {"deepspeed", "DeepSpeed ZeRO on Hugging Face models", {"0.4.0", "0.19.6"}, deepspeed_model},
      {"megatron-deepspeed",
       "Megatron-DeepSpeed: Megatron's model code on DeepSpeed's engine",
       {"bigscience"},
       megatron_deepspeed_model},
      {"torchtitan", "torchtitan: FSDP2, DTensor TP/SP, pipelining, CP (PyTorch)", {"v0.2.2"}, torchtitan_model},
      {"accelerate-fsdp", "Hugging Face Trainer / Accelerate with PyTorch FSDP1", {"2026-07"}, accelerate_fsdp_model},
      {"llm-foundry", "MosaicML llm-foundry on Composer (PyTorch FSDP1)", {"2023", "2025"}, llm_foundry_model},
      {"fms-fsdp", "IBM fms-fsdp (PyTorch FSDP1)", {"2024"}, fms_fsdp_model},
      {"hf-peft", "Hugging Face Trainer + PEFT on one device", {"4.35", "4.36"}, hf_peft_model},
      {"neuronx-distributed", "AWS NeuronX Distributed on Trainium", {"2026-04"}, neuronx_distributed_model},
      {"optimum-habana", "Hugging Face Optimum Habana (+ DeepSpeed) on Gaudi", {"1.20"}, optimum_habana_model},
      {"smp-v2", "SageMaker model parallel v2 (FSDP + Transformer Engine TP)", {"2"}, smp_v2_model},
      {"shardrun", "shardplan's own executor (LibTorch, MPI / NCCL)", {"current"}, shardrun_model},
  };
  return entries;
}

std::vector<std::string> framework_names() {
  std::vector<std::string> out;
  for (const auto& e : registry()) out.push_back(e.name);
  return out;
}

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

FrameworkModel find_framework(const std::string& name, const std::string& version, const std::string& field) {
  const auto& r = registry();
  const auto it = std::find_if(r.begin(), r.end(), [&](const FrameworkEntry& e) { return e.name == name; });
  if (it == r.end())
    throw sim::InputError(field + ": unknown framework '" + name + "' (expected one of: " + joined(framework_names()) +
                          ")");
  if (!version.empty() && std::find(it->versions.begin(), it->versions.end(), version) == it->versions.end())
    throw sim::InputError(field + ": unknown " + name + " version '" + version +
                          "' (expected one of: " + joined(it->versions) + ")");
  FrameworkModel fw = it->build(version.empty() ? it->versions.back() : version);
  apply_fitted_efficiency(fw);
  return fw;
}

FrameworkModel parse_framework_spec(const std::string& spec, const std::string& field) {
  const auto at = spec.find('@');
  if (at == std::string::npos) return find_framework(spec, "", field);
  return find_framework(spec.substr(0, at), spec.substr(at + 1), field);
}

FrameworkModel framework_from_json(const json& j, const std::string& field) {
  if (j.is_string()) return parse_framework_spec(j.get<std::string>(), field);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
    throw sim::InputError(field + ": expected {\"name\": a framework (" + joined(framework_names()) +
                          "), \"version\": optional}");
  std::string version;
  if (auto v = j.find("version"); v != j.end() && !v->is_null()) {
    if (!v->is_string()) throw sim::InputError(field + ".version: expected a string such as \"2022\"");
    version = v->get<std::string>();
  }
  return find_framework(j["name"].get<std::string>(), version, field);
}

json framework_ref_json(const FrameworkModel& fw) { return {{"name", fw.name}, {"version", fw.version}}; }

}  // namespace shardplan::frameworks
