// Shared import helpers and format detection: which importer reads a file (deepspeed_import.cpp,
// smp_import.cpp, smp_v2_import.cpp, megatron_import.cpp, torchtitan_import.cpp,
// accelerate_import.cpp, neuron_import.cpp, habana_import.cpp).
#include "config_import.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelerate.hpp"
#include "command_args.hpp"
#include "config_import_detail.hpp"
#include "habana.hpp"
#include "neuron.hpp"
#include "simulator/errors.hpp"
#include "simulator/json_fields.hpp"
#include "smp_v2.hpp"
#include "torchtitan.hpp"

namespace shardplan::interop {

namespace sim = shardplan::simulator;
namespace fs = std::filesystem;
using nlohmann::json;

namespace import_detail {

void check_context(const ImportContext& ctx, const std::string& source) {
  if (ctx.devices < 1)
    throw sim::InputError(source + ": importing needs the cluster's device count (> 0), got " +
                          std::to_string(ctx.devices));
  if (ctx.seq_len < 1) throw sim::InputError(source + ": --seq-len: expected an integer >= 1");
  if (ctx.tp < 0 || ctx.pp < 0 || ctx.micro_batch_size < 0 || ctx.devices_per_node < 0)
    throw sim::InputError(source + ": import settings (tp, pp, micro-batch size, devices per node) must be >= 0");
}

std::optional<long long> optional_int(const json& obj, std::string_view key, long long min,
                                      const sim::JsonContext& jc) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (it->is_string() && it->get<std::string>() == "auto")
    jc.fail(key, "an integer >= " + std::to_string(min) + ", got \"auto\": write the number");
  if (!it->is_number_integer() || it->get<long long>() < min)
    jc.fail(key, "an integer >= " + std::to_string(min) + ", got " + it->dump());
  return it->get<long long>();
}

int resolve_degree(std::optional<long long> from_file, int from_ctx, std::string_view key, const char* what,
                   const sim::JsonContext& jc) {
  if (from_file && from_ctx > 0 && *from_file != from_ctx)
    jc.fail(key, "the same " + std::string(what) + " as given to the import (" + std::to_string(from_ctx) + "), got " +
                     std::to_string(*from_file));
  if (from_file) return static_cast<int>(*from_file);
  return from_ctx > 0 ? from_ctx : 1;
}

int data_parallel(const ImportContext& ctx, int tp, int pp, std::string_view tp_key, std::string_view pp_key,
                  const sim::JsonContext& jc) {
  const long long model_parallel = static_cast<long long>(tp) * pp;
  if (ctx.devices % model_parallel != 0)
    throw sim::InputError(jc.file + ": fields '" + jc.path(tp_key) + "' x '" + jc.path(pp_key) +
                          "': expected tp x pp (" + std::to_string(tp) + " x " + std::to_string(pp) +
                          ") to divide the cluster's " + std::to_string(ctx.devices) + " devices");
  return static_cast<int>(ctx.devices / model_parallel);
}

void warn_unknown_keys(const json& obj, const sim::JsonContext& jc, std::initializer_list<std::string_view> read,
                       std::initializer_list<std::string_view> silent, std::vector<std::string>& warnings) {
  if (!obj.is_object()) return;
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture those
    const auto known = [&](std::initializer_list<std::string_view> list) {
      return std::find(list.begin(), list.end(), key) != list.end();
    };
    if (!known(read) && !known(silent))
      warnings.push_back(jc.file + ": '" + jc.path(key) + "' is not a setting shardplan models; ignored");
  }
}

void warn_layout(const ImportContext& ctx, const sim::ParallelConfig& cfg, std::vector<std::string>& warnings) {
  if (ctx.devices_per_node > 0 && cfg.tp > ctx.devices_per_node)
    warnings.push_back("tensor parallelism of " + std::to_string(cfg.tp) + " spans nodes (" +
                       std::to_string(ctx.devices_per_node) + " devices per node)");
}

}  // namespace import_detail

namespace {

bool has_any(const json& j, std::initializer_list<const char*> keys) {
  return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return j.contains(k); });
}

}  // namespace

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::InputError(path + ": cannot open the file to import");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The result with the framework its format belongs to (frameworks/registry.hpp names).
ImportResult named(ImportResult r, const char* framework) {
  r.framework = framework;
  return r;
}

bool mentions(const std::string& text, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](const char* n) { return text.find(n) != std::string::npos; });
}

ImportResult import_json(const std::string& path, const ImportContext& ctx) {
  const json j = sim::read_json_file(path);
  if (!j.is_object()) throw sim::InputError(path + ": expected a JSON object (a DeepSpeed config or SMP parameters)");
  if (has_any(j, {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                  "zero_optimization"}))
    return named(import_deepspeed(j, ctx, path), "deepspeed");
  if (is_smp_v2(j)) return named(import_smp_v2(j, ctx, path), "smp-v2");
  if (has_any(j, {"partitions", "pipeline_parallel_degree", "microbatches", "tensor_parallel_degree",
                  "sharded_data_parallel_degree", "modelparallel", "smdistributed"}))
    return import_smp(j, ctx, path);
  throw sim::InputError(path +
                        ": neither a DeepSpeed config (train_micro_batch_size_per_gpu, zero_optimization, ...) "
                        "nor SageMaker model parallel parameters (v2: hybrid_shard_degree, ...; v1: partitions, ...)");
}

// An Optimum-Habana command with the DeepSpeed JSON its --deepspeed names (relative paths are
// relative to the script's folder, then to the working directory).
ImportResult import_habana_file(const std::string& path, const std::string& text, const ImportContext& ctx) {
  const CommandArgs args(shell_words(text, path), path);
  json ds;
  if (const auto ds_path = args.value("--deepspeed")) {
    fs::path p(*ds_path);
    if (p.is_relative() && fs::exists(fs::path(path).parent_path() / p)) p = fs::path(path).parent_path() / p;
    if (!fs::exists(p))
      throw sim::InputError(path + ": --deepspeed " + *ds_path + ": the DeepSpeed config it names does not exist");
    ds = sim::read_json_file(p.string());
  }
  return import_habana(text, ds, ctx, path);
}

}  // namespace

ImportResult import_config_file(const std::string& path, const ImportContext& ctx) {
  if (!fs::is_regular_file(path)) throw sim::InputError("--import: file '" + path + "' does not exist");
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".json") return import_json(path, ctx);
  const std::string text = read_text(path);
  if (ext == ".toml") return named(import_torchtitan(text, ctx, path), "torchtitan");
  if (ext == ".yaml" || ext == ".yml") return named(import_accelerate(text, ctx, path), "accelerate-fsdp");
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return import_json(path, ctx);
  if (mentions(text, {"gaudi_spawn.py", "run_lora_clm.py", "run_clm.py"}))
    return named(import_habana_file(path, text, ctx), "optimum-habana");
  if (mentions(text, {"--tensor_parallel_size", "tp_zero1_llama", "run_llama_nxd.py", "neuron_parallel_compile"}))
    return named(import_neuron(text, ctx, path), "neuronx-distributed");
  if (mentions(text, {"--tensor-model-parallel-size", "pretrain_gpt.py", "--micro-batch-size"}))
    return named(import_megatron(text, ctx, path), "megatron");
  throw sim::InputError(path +
                        ": not a format shardplan imports (expected a DeepSpeed or SageMaker JSON, a "
                        "torchtitan .toml, an Accelerate .yaml, or a Megatron-LM, NeuronX Distributed or "
                        "Optimum-Habana launch script)");
}

}  // namespace shardplan::interop
