#pragma once
// Runs the real `shardrun` under mpirun for the executor tests: plans written from a base plan
// made by the real `shardplan plan`, step losses read back from metrics.jsonl, tensors from
// safetensors files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/io/safetensors.hpp"
#include "formats/shell_quote.hpp"
#include "support/run_command.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::testing {

struct RunResult {
  int exit_code = -1;
  std::string output;          // stdout + stderr of all ranks
  std::vector<double> losses;  // per step of this run's attempt, from metrics.jsonl
  nlohmann::json report;       // report.json (null if none)
};

inline std::string quote(const std::string& s) { return formats::shell_quote(s); }

inline std::string corpus_dir() {
  std::string dir = SHARDPLAN_SOURCE_DIR;  // appended, not concatenated: GCC 12's false -Warray-bounds
  dir += "/executor/data/corpus";
  return dir;
}

// A plan for `model` with the given layout, derived from a plan the real planner wrote.
// `model_overrides` change the embedded model card (e.g. more layers); the plan's prediction is
// re-simulated from it when shardrun loads the plan.
inline std::string write_plan(const TempDir& dir, const std::string& name, const std::string& model,
                              const nlohmann::json& config_overrides, int seq_len = 32, int global_batch = 8,
                              const nlohmann::json& model_overrides = nlohmann::json::object()) {
  const std::string base = dir.file(model + "-base.json");
  if (!std::filesystem::exists(base)) {
    const auto [rc, out] =
        run_command(std::string(SHARDPLAN_BINARY) + " plan --model " + model +
                    " --hardware local-cpu-2core --nodes 1 --precision fp32 --quiet"
                    " --forbid pp,recompute,offload --global-batch-size " +
                    std::to_string(global_batch) + " --seq-len " + std::to_string(seq_len) + " --out " + quote(base));
    if (rc != 0) throw std::runtime_error("shardplan plan failed: " + out);
  }
  nlohmann::json plan = nlohmann::json::parse(std::ifstream(base));
  nlohmann::json& cfg = plan["config"];
  cfg["tensor_parallel"] = 1;
  cfg["data_parallel"] = 1;
  cfg["zero_stage"] = 0;
  cfg["sharding_degree"] = 0;
  cfg["sequence_parallel"] = false;
  cfg["micro_batch_size"] = 2;
  cfg["lora"] = nullptr;
  cfg["pipeline_parallel"] = 1;
  cfg["virtual_stages"] = 1;
  cfg["partition"] = nlohmann::json::array();
  cfg["context_parallel"] = 1;
  for (auto& [k, v] : config_overrides.items()) cfg[k] = v;
  for (auto& [k, v] : model_overrides.items()) plan["model"][k] = v;
  plan["cluster"]["devices_per_node"] = cfg["tensor_parallel"].get<int>() * cfg["data_parallel"].get<int>() *
                                        cfg["pipeline_parallel"].get<int>() * cfg.value("context_parallel", 1);
  return dir.write_json(name + ".json", plan);
}

// A BPE tokenizer trained on the shipped corpus (once per directory); returns tokenizer.model.
inline std::string corpus_tokenizer(const TempDir& dir) {
  const std::string prefix = dir.file("tok");
  if (!std::filesystem::exists(prefix + ".model")) {
    const auto tool = std::filesystem::path(SHARDRUN_BINARY).parent_path() / "shardplan-tokenize";
    const auto [rc, out] = run_command(tool.string() + " train --text " + quote(corpus_dir()) +
                                       " --vocab-size 4096 --out-prefix " + quote(prefix));
    if (rc != 0) throw std::runtime_error("shardplan-tokenize train failed: " + out);
  }
  return prefix + ".model";
}

// Training arguments on the shipped text corpus.
inline std::string corpus_data_args(const TempDir& dir) {
  return "--data " + quote(corpus_dir()) + " --tokenizer " + quote(corpus_tokenizer(dir));
}

inline RunResult shardrun(int ranks, const std::string& plan, const std::string& out_dir, const std::string& args) {
  const std::string cmd = "timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np " +
                          std::to_string(ranks) + " " + SHARDRUN_BINARY + " --plan " + quote(plan) + " --out-dir " +
                          quote(out_dir) + " --threads 1 --quiet " +
                          // The CPU unless a test asks for a device: bit-identity across layouts holds there.
                          (args.find("--device") == std::string::npos ? "--device cpu " : "") + args;
  RunResult r;
  const CommandResult c = run_command(cmd);
  r.exit_code = c.status;
  r.output = c.out;
  // This run's steps: a resumed run appends to the history as a new attempt (run_history.hpp).
  std::ifstream metrics(std::filesystem::path(out_dir) / "metrics.jsonl");
  int attempt = 0;
  for (std::string line; std::getline(metrics, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("attempt", 1) != attempt) r.losses.clear(), attempt = j.value("attempt", 1);
    r.losses.push_back(j["loss"].get<double>());
  }
  std::ifstream report(std::filesystem::path(out_dir) / "report.json");
  if (report) r.report = nlohmann::json::parse(report);
  return r;
}

// All tensors of a safetensors file as float vectors.
inline std::map<std::string, std::vector<float>> read_floats(const std::string& path) {
  executor::io::SafetensorsReader reader(path);
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : reader.tensors()) {
    if (t.dtype != executor::io::DType::F32) continue;
    std::vector<float> v(static_cast<size_t>(t.numel()));
    reader.read(t.name, v.data(), v.size() * sizeof(float));
    out[t.name] = std::move(v);
  }
  return out;
}

// Every tensor of `path` equals the one of `ref_path` (gathered full weights): 1e-5 relative, with
// a floor of 2e-6 per element (tensors that start at zero: biases, LoRA B; the embedding rows of
// rare tokens): Adam's m/sqrt(v) of near-zero gradients amplifies last-bit rounding differences.
// The floor was 1e-6 until a Zen 5 machine (AMD EPYC family 26, OpenBLAS's AVX-512 kernels) put
// the 4-rank ring's tiny-llama embedding at 1.42e-3 against that bound's 1.23e-3 (the losses
// still within 1e-5); the floor stays 500x below the 1e-3 an Adam step moves an element by.
inline void expect_same_weights(const std::string& path, const std::string& ref_path) {
  const auto a = read_floats(path);
  const auto b = read_floats(ref_path);
  ASSERT_FALSE(b.empty()) << ref_path;
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, ref_w] : b) {
    ASSERT_TRUE(a.count(name)) << name;
    const auto& w = a.at(name);
    ASSERT_EQ(w.size(), ref_w.size()) << name;
    double diff = 0, norm = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      diff += (w[i] - ref_w[i]) * double(w[i] - ref_w[i]);
      norm += ref_w[i] * double(ref_w[i]);
    }
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 2e-6 * std::sqrt(double(w.size()))) << name;
  }
}

inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace shardplan::testing
