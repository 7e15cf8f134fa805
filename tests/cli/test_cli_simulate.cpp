// End-to-end tests of `shardplan simulate`, `plan` and the rest of the CLI: the real binary as a
// subprocess, its JSON and tables checked.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli/cli_support.hpp"

namespace cli_simulate_test {  // named, not anonymous: the files share a unity-build unit

using namespace shardplan::testing::cli;  // NOLINT: the CLI test helpers

// ---------------------------------------------------------------------------------------------
// simulate --json
// ---------------------------------------------------------------------------------------------

const json& at_path(const json& j, const std::string& dotted) {
  static const json missing;
  const json* cur = &j;
  std::istringstream in(dotted);
  std::string key;
  while (std::getline(in, key, '.')) {
    if (!cur->is_object() || !cur->contains(key)) {
      ADD_FAILURE() << "missing key '" << dotted << "' (at '" << key << "')";
      return missing;
    }
    cur = &(*cur)[key];
  }
  return *cur;
}

double number_at(const json& j, const std::string& dotted) {
  const json& v = at_path(j, dotted);
  if (!v.is_number()) {
    ADD_FAILURE() << "'" << dotted << "' is not a number: " << v.dump();
    return std::nan("");
  }
  return v.get<double>();
}

// The rows that must fit (total); allocator_slack is in the reserved figure only.
const std::vector<std::string> kMemoryParts = {
    "parameters",   "gradients", "optimizer_states", "activations",   "lora",
    "comm_buffers", "workspace", "runtime_context",  "communicators", "library_workspace"};

void expect_sane_prediction(const json& j) {
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(at_path(j, "feasible").is_boolean()) << at_path(j, "feasible").dump();
  ASSERT_TRUE(at_path(j, "total_parameters").is_number_integer());
  ASSERT_TRUE(at_path(j, "trainable_parameters").is_number_integer());
  EXPECT_GT(at_path(j, "total_parameters").get<long long>(), 0);
  EXPECT_GT(at_path(j, "trainable_parameters").get<long long>(), 0);
  EXPECT_LE(at_path(j, "trainable_parameters").get<long long>(), at_path(j, "total_parameters").get<long long>());

  double sum = 0;
  for (const auto& part : kMemoryParts) {
    const double v = number_at(j, "memory.per_device_bytes." + part);
    EXPECT_TRUE(std::isfinite(v) && v >= 0) << part << " = " << v;
    sum += v;
  }
  const double total = number_at(j, "memory.per_device_bytes.total");
  EXPECT_GT(total, 0);
  EXPECT_NEAR(total, sum, 1e-9 * sum + 1.0) << "total must be the sum of the parts";
  for (const char* required : {"parameters", "activations", "workspace"})
    EXPECT_GT(number_at(j, std::string("memory.per_device_bytes.") + required), 0) << required;
  EXPECT_GT(number_at(j, "memory.device_capacity_bytes"), 1e9);
  const double step = number_at(j, "time.step_seconds");
  EXPECT_TRUE(std::isfinite(step) && step > 0) << step;
  const double tps = number_at(j, "throughput.tokens_per_second");
  EXPECT_TRUE(std::isfinite(tps) && tps > 0) << tps;
  const double mfu = number_at(j, "mfu");
  EXPECT_GT(mfu, 0);
  EXPECT_LT(mfu, 1);
}

TEST(CliSimulateJson, FullTrainingHasAllKeysWithSaneValues) {
  const std::vector<std::string> args = {
      "simulate", "--model",   "llama2-7b", "--hardware",  "p4d.24xlarge", "--zero", "1", "--global-batch-size",
      "64",       "--seq-len", "4096",      "--recompute", "full",         "--json"};
  const json j = run_json(args);
  SCOPED_TRACE(j.dump(2));
  expect_sane_prediction(j);
  // Full training: every parameter is trainable and has gradients and optimizer states.
  EXPECT_EQ(j["trainable_parameters"], j["total_parameters"]);
  EXPECT_GT(number_at(j, "memory.per_device_bytes.gradients"), 0);
  EXPECT_GT(number_at(j, "memory.per_device_bytes.optimizer_states"), 0);
  EXPECT_EQ(number_at(j, "memory.per_device_bytes.lora"), 0);
  // 40 GiB A100.
  EXPECT_EQ(number_at(j, "memory.device_capacity_bytes"), 40.0 * 1024 * 1024 * 1024);
  // tokens/s is global-batch x seq-len / step.
  EXPECT_NEAR(number_at(j, "throughput.tokens_per_second"), 64.0 * 4096 / number_at(j, "time.step_seconds"),
              1e-6 * number_at(j, "throughput.tokens_per_second"));
  EXPECT_EQ(j["feasible"],
            j["memory"]["per_device_bytes"]["total"].get<double>() <= j["memory"]["usable_bytes"].get<double>());
}

// --partition 0,16,16,0: stage 0 only the embedding, stage 3 only the head; a 0 elsewhere refused.
TEST(CliSimulateJson, EmbeddingOnlyAndHeadOnlyStagesFromThePartitionFlag) {
  const json j = run_json({"simulate", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--tp", "2", "--pp", "4",
                           "--partition", "0,16,16,0", "--global-batch-size", "16", "--seq-len", "4096", "--json"});
  SCOPED_TRACE(j.dump(2));
  expect_sane_prediction(j);
  EXPECT_EQ(j["config"]["partition"], json::array({0, 16, 16, 0}));
  const json& stages = at_path(j, "memory.stages");
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0]["layers"], 0);
  EXPECT_EQ(stages[0]["has_embedding"], true);
  EXPECT_EQ(stages[3]["layers"], 0);
  EXPECT_EQ(stages[3]["has_head"], true);
  EXPECT_EQ(stages[1]["layers"], 16);
  // llama2-7b's untied embedding and head: 32000 x 4096 each, over tp 2 (the head's final norm beside).
  EXPECT_EQ(stages[0]["parameters_per_device"], 32000 * 4096 / 2);
  EXPECT_EQ(stages[3]["parameters_per_device"], 32000 * 4096 / 2 + 4096);
  EXPECT_LT(stages[0]["forward_seconds_per_micro_batch"].get<double>(),
            0.1 * stages[1]["forward_seconds_per_micro_batch"].get<double>());
  expect_one_line_error({"simulate", "--model", "llama2-7b", "--hardware", "p4de.24xlarge", "--tp", "2", "--pp", "4",
                         "--partition", "8,0,16,8", "--global-batch-size", "16"},
                        {"--partition", "only first (embedding only) or last (head only)"});
}

TEST(CliSimulateJson, LoraHasFewerTrainableParameters) {
  const json j = run_json({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--zero", "1",
                           "--global-batch-size", "64", "--seq-len", "4096", "--recompute", "full", "--lora-rank", "8",
                           "--lora-targets", "q_proj,v_proj", "--json"});
  SCOPED_TRACE(j.dump(2));
  expect_sane_prediction(j);
  EXPECT_LT(j["trainable_parameters"].get<long long>(), j["total_parameters"].get<long long>());
  EXPECT_GT(number_at(j, "memory.per_device_bytes.lora"), 0);
}

// Input and output width of a LoRA target in a llama-family model card.
std::pair<long long, long long> llama_linear_shape(const json& card, const std::string& target) {
  const long long h = card["hidden_size"].get<long long>();
  const long long heads = card["num_attention_heads"].get<long long>();
  const long long kv = card["num_key_value_heads"].get<long long>();
  const long long hd = card.contains("head_dim") ? card["head_dim"].get<long long>() : h / heads;
  const long long ffn = card["ffn_hidden_size"].get<long long>();
  if (target == "q_proj") return {h, heads * hd};
  if (target == "k_proj" || target == "v_proj") return {h, kv * hd};
  if (target == "o_proj") return {heads * hd, h};
  if (target == "gate_proj" || target == "up_proj") return {h, ffn};
  if (target == "down_proj") return {ffn, h};
  ADD_FAILURE() << "unknown llama linear " << target;
  return {0, 0};
}

long long expected_lora_parameters(const std::string& model, int rank, const std::vector<std::string>& targets) {
  const json card = builtin_model(model);
  long long per_layer = 0;
  for (const auto& t : targets) {
    const auto [d_in, d_out] = llama_linear_shape(card, t);
    per_layer += static_cast<long long>(rank) * (d_in + d_out);
  }
  return card["num_layers"].get<long long>() * per_layer;
}

TEST(CliSimulateJson, LoraTrainableParametersLlama2_7b) {
  // From the model card: 32 layers, q_proj and v_proj both 4096 -> 4096.
  const long long expected = expected_lora_parameters("llama2-7b", 8, {"q_proj", "v_proj"});
  EXPECT_EQ(expected, 32LL * 8 * ((4096 + 4096) + (4096 + 4096)));  // sanity of the test's own arithmetic
  const json j = run_json({"simulate", "--model", "llama2-7b", "--hardware", "p4d.24xlarge", "--lora-rank", "8",
                           "--lora-targets", "q_proj,v_proj", "--json"});
  ASSERT_TRUE(j.contains("trainable_parameters")) << j.dump(2);
  EXPECT_EQ(j["trainable_parameters"].get<long long>(), expected);
}

TEST(CliSimulateJson, LoraTrainableParametersGroupedQueryAttention) {
  // llama2-70b: v_proj is 8192 -> 1024 (8 key/value heads), unlike q_proj 8192 -> 8192.
  const long long expected = expected_lora_parameters("llama2-70b", 16, {"q_proj", "v_proj"});
  const json j = run_json({"simulate", "--model", "llama2-70b", "--hardware", "p4de.24xlarge", "--nodes", "2", "--tp",
                           "8", "--zero", "3", "--lora-rank", "16", "--lora-targets", "q_proj,v_proj", "--json"});
  ASSERT_TRUE(j.contains("trainable_parameters")) << j.dump(2);
  EXPECT_EQ(j["trainable_parameters"].get<long long>(), expected);
}

TEST(CliSimulateJson, LoraTrainableParametersAllLinears) {
  const std::vector<std::string> all = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  const long long expected = expected_lora_parameters("tiny-llama", 4, all);
  const json j = run_json({"simulate", "--model", "tiny-llama", "--hardware", "g5.48xlarge", "--lora-rank", "4",
                           "--lora-targets", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", "--json"});
  ASSERT_TRUE(j.contains("trainable_parameters")) << j.dump(2);
  EXPECT_EQ(j["trainable_parameters"].get<long long>(), expected);
}

TEST(CliSimulateJson, HuggingFaceConfigAsModel) {
  const std::string config = test_data("hf/llama2-7b.config.json");
  ASSERT_TRUE(fs::exists(config)) << config;
  const json j = run_json(
      {"simulate", "--model", config, "--hardware", "p4d.24xlarge", "--zero", "1", "--recompute", "full", "--json"});
  SCOPED_TRACE(j.dump(2));
  expect_sane_prediction(j);
  // Same architecture as the built-in card, so the same parameter count.
  const json card = builtin_model("llama2-7b");
  EXPECT_EQ(j["total_parameters"].get<long long>(), card["hf_parameters"].get<long long>());

  const RunResult human = run_shardplan({"simulate", "--model", config, "--hardware", "p4d.24xlarge"});
  EXPECT_EQ(human.exit_code, 0) << human;
  EXPECT_EQ(human.err, "") << human;
}

TEST(CliSimulateJson, InfeasibleConfigurationIsReportedNotAnError) {
  const json j = run_json(
      {"simulate", "--model", "llama2-70b", "--hardware", "g5.48xlarge", "--nodes", "1", "--zero", "0", "--json"});
  ASSERT_TRUE(j.contains("feasible")) << j.dump(2);
  EXPECT_EQ(j["feasible"], false) << j.dump(2);
  ASSERT_TRUE(j.contains("infeasible_reason") && j["infeasible_reason"].is_string()) << j.dump(2);
  EXPECT_FALSE(j["infeasible_reason"].get<std::string>().empty());
  EXPECT_GT(number_at(j, "memory.per_device_bytes.total"), number_at(j, "memory.device_capacity_bytes"));
}

TEST(CliSimulateJson, FeasibleConfigurationHasNoReason) {
  const json j = run_json({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge", "--json"});
  ASSERT_TRUE(j.contains("feasible")) << j.dump(2);
  EXPECT_EQ(j["feasible"], true) << j.dump(2);
  EXPECT_EQ(j.value("infeasible_reason", std::string("<missing>")), "");
}

TEST(CliSimulateJson, TraceIncludesPipelineEvents) {
  // 8 devices = pp 2 x dp 4; global batch 16 -> 4 micro-batches of 1 per data-parallel rank.
  const json j = run_json({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge", "--pp", "2",
                           "--global-batch-size", "16", "--trace", "--json"});
  SCOPED_TRACE(j.dump(2));
  ASSERT_TRUE(j.contains("pipeline") && j["pipeline"].is_object());
  ASSERT_TRUE(j["pipeline"].contains("events"));
  const json& events = j["pipeline"]["events"];
  ASSERT_TRUE(events.is_array());
  ASSERT_FALSE(events.empty());
  const int micro_batches = j["config"]["micro_batches"].get<int>();
  EXPECT_EQ(micro_batches, 4);
  // One forward and one backward per (stage, micro-batch).
  EXPECT_EQ(events.size(), static_cast<std::size_t>(2 * 2 * micro_batches));
  std::set<long long> stages;
  for (const auto& e : events) {
    ASSERT_TRUE(e.is_array() || e.is_object()) << e.dump();
    if (e.is_array()) {
      ASSERT_FALSE(e.empty());
      stages.insert(e[0].get<long long>());
    } else {
      stages.insert(e.at("stage").get<long long>());
    }
  }
  EXPECT_EQ(stages, (std::set<long long>{0, 1}));

  const json no_trace = run_json({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge", "--pp", "2",
                                  "--global-batch-size", "16", "--json"});
  ASSERT_TRUE(no_trace.is_object());
  EXPECT_FALSE(no_trace.contains("pipeline") && no_trace["pipeline"].contains("events"))
      << "events should only be included with --trace";
}

TEST(CliSimulateJson, AttentionKindIsEchoedAndFlashIsTheDefault) {
  const std::vector<std::string> base = {"simulate", "--model",   "llama2-7b", "--hardware", "p4de.24xlarge",
                                         "--tp",     "2",         "--zero",    "1",          "--global-batch-size",
                                         "8",        "--seq-len", "4096",      "--json"};
  const json flash = run_json(base);
  std::vector<std::string> eager_args = base;
  eager_args.insert(eager_args.end(), {"--attention", "eager"});
  const json eager = run_json(eager_args);
  EXPECT_EQ(flash["config"]["attention"], "flash");
  EXPECT_EQ(eager["config"]["attention"], "eager");
  // No s x s scores stored under flash; the same model FLOPs (MFU's numerator).
  EXPECT_LT(number_at(flash, "memory.per_device_bytes.activations"),
            number_at(eager, "memory.per_device_bytes.activations"));
  EXPECT_EQ(number_at(flash, "memory.per_device_bytes.parameters"),
            number_at(eager, "memory.per_device_bytes.parameters"));
}

// ---------------------------------------------------------------------------------------------
// Human-readable output
// ---------------------------------------------------------------------------------------------

TEST(CliSimulateHuman, AttentionKindIsShown) {
  const RunResult r =
      run_shardplan({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge", "--attention", "eager"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(contains(r.out, "attention=eager")) << r;
  const RunResult d = run_shardplan({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge"});
  ASSERT_EQ(d.exit_code, 0) << d;
  EXPECT_TRUE(contains(d.out, "attention=flash")) << d;
}

TEST(CliSimulateHuman, FittingConfiguration) {
  const RunResult r = run_shardplan({"simulate", "--model", "tiny-llama", "--hardware", "p4d.24xlarge"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "") << r;
  EXPECT_TRUE(contains(r.out, "FITS")) << r;
  EXPECT_FALSE(contains(r.out, "DOES NOT FIT")) << r;
  EXPECT_TRUE(contains(r.out, "step")) << r;
  EXPECT_TRUE(contains(r.out, "tiny-llama")) << r;
  EXPECT_FALSE(contains(r.out, "{")) << "human output should not be JSON\n" << r;
}

TEST(CliSimulateHuman, NonFittingConfiguration) {
  const RunResult r = run_shardplan({"simulate", "--model", "llama2-70b", "--hardware", "g5.48xlarge", "--zero", "0"});
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_EQ(r.err, "") << r;
  EXPECT_TRUE(contains(r.out, "DOES NOT FIT")) << r;
  EXPECT_TRUE(contains(r.out, "step")) << r;
}

}  // namespace cli_simulate_test
