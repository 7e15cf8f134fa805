// Equivalence of layouts: for the same seed and data, tensor-parallel, data-parallel, ZeRO 1/2/3,
// MiCS, pipeline-parallel (gpipe, 1F1B, interleaved, the zero-bubble ZB1P, ZB2P, ZBV, V-Half, V-Min with their
// weight gradients deferred to W; even and uneven partitions, embedding-only
// and head-only stages; tied embeddings) and their mixes: runs of the real shardrun give the same
// per-step losses as a single-rank run (fp32: within 1e-5 relative over 20 steps) and the same
// final weights once gathered.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.hpp"

namespace shardplan::testing {
namespace equivalence_test {  // named, not anonymous: the files share a unity-build unit

constexpr int kSteps = 20;

struct Layout {
  std::string name;
  std::string model;
  int ranks;
  nlohmann::json config;
  bool lora = false;
  int layers = 0;  // > 0: the card's layer count changed (reference and run alike)
};

const nlohmann::json kLora = {
    {"rank", 8}, {"alpha", 16}, {"dropout", 0.0}, {"targets", {"q_proj", "v_proj", "down_proj"}}};

std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.name; }

class Equivalence : public ::testing::TestWithParam<Layout> {
 protected:
  static TempDir* dir_;
  static void SetUpTestSuite() { dir_ = new TempDir("shardrun_equiv"); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // The single-rank run of (model, lora), made once.
  static std::string ref_key(const Layout& l) {
    return l.model + (l.lora ? "-lora" : "") + (l.layers > 0 ? "-L" + std::to_string(l.layers) : "");
  }
  static nlohmann::json card(const Layout& l) {
    return l.layers > 0 ? nlohmann::json{{"num_layers", l.layers}} : nlohmann::json::object();
  }
  static const RunResult& reference(const Layout& l) {
    static std::map<std::string, RunResult> cache;
    const std::string key = ref_key(l);
    const bool lora = l.lora;
    if (!cache.count(key)) {
      nlohmann::json cfg = nlohmann::json::object();
      if (lora) cfg["lora"] = kLora;
      const std::string plan = write_plan(*dir_, "ref-" + key, l.model, cfg, 32, 8, card(l));
      cache[key] = shardrun(1, plan, dir_->file("ref-" + key),
                            "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 " + corpus_data_args(*dir_) +
                                " --save-final " + dir_->file("ref-" + key + ".safetensors") +
                                (lora ? " --save-adapter " + dir_->file("ref-" + key + "-adapter") : ""));
    }
    return cache[key];
  }
};
TempDir* Equivalence::dir_ = nullptr;

TEST_P(Equivalence, SameLossesAndFinalWeightsAsOneRank) {
  const Layout& l = GetParam();
  nlohmann::json cfg = l.config;
  if (l.lora) cfg["lora"] = kLora;
  const RunResult& ref = reference(l);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  const std::string plan = write_plan(*dir_, l.name, l.model, cfg, 32, 8, card(l));
  const std::string weights = dir_->file(l.name + ".safetensors");
  const RunResult run =
      shardrun(l.ranks, plan, dir_->file(l.name),
               "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 " + corpus_data_args(*dir_) +
                   " --save-final " + weights + (l.lora ? " --save-adapter " + dir_->file(l.name + "-adapter") : ""));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  if (cfg.contains("partition")) {  // the run followed the plan's partition
    EXPECT_EQ(run.report["layout"]["partition"], cfg["partition"]);
  }
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  // Training moved the loss (so agreement is not trivial).
  EXPECT_LT(ref.losses.back(), ref.losses.front() - (l.lora ? 0.05 : 0.5));

  const std::string ref_name = "ref-" + ref_key(l);
  expect_same_weights(weights, dir_->file(ref_name + ".safetensors"));
  if (l.lora)
    expect_same_weights(dir_->file(l.name + "-adapter/adapter_model.safetensors"),
                        dir_->file(ref_name + "-adapter/adapter_model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Equivalence,
    ::testing::Values(
        Layout{"llama_tp2", "tiny-llama", 2, {{"tensor_parallel", 2}}},
        Layout{"llama_tp2_sp", "tiny-llama", 2, {{"tensor_parallel", 2}, {"sequence_parallel", true}}},
        Layout{"llama_dp2_zero0", "tiny-llama", 2, {{"data_parallel", 2}, {"zero_stage", 0}}},
        Layout{"llama_dp2_zero1", "tiny-llama", 2, {{"data_parallel", 2}, {"zero_stage", 1}}},
        Layout{"llama_dp2_zero2", "tiny-llama", 2, {{"data_parallel", 2}, {"zero_stage", 2}}},
        Layout{"llama_dp2_zero3", "tiny-llama", 2, {{"data_parallel", 2}, {"zero_stage", 3}}},
        Layout{
            "llama_tp2_dp2_zero1", "tiny-llama", 4, {{"tensor_parallel", 2}, {"data_parallel", 2}, {"zero_stage", 1}}},
        Layout{"llama_dp4_mics2_zero3",
               "tiny-llama",
               4,
               {{"data_parallel", 4}, {"zero_stage", 3}, {"sharding_degree", 2}}},
        Layout{"gpt_tp2_sp", "tiny-gpt", 2, {{"tensor_parallel", 2}, {"sequence_parallel", true}}},
        Layout{"gpt_dp2_zero3", "tiny-gpt", 2, {{"data_parallel", 2}, {"zero_stage", 3}}},
        Layout{"lora_tp2", "tiny-llama", 2, {{"tensor_parallel", 2}}, true},
        Layout{"lora_dp2_zero3", "tiny-llama", 2, {{"data_parallel", 2}, {"zero_stage", 3}}, true},
        Layout{"lora_tp2_dp2_zero2",
               "tiny-llama",
               4,
               {{"tensor_parallel", 2}, {"data_parallel", 2}, {"zero_stage", 2}},
               true},
        // Sequence parallelism re-gathers the shared input of q/k/v (and gate/up) in backward,
        // with ZeRO-3 re-gathering the weights and LoRA adapters on the same linears.
        Layout{"lora_tp2_sp_dp2_zero3",
               "tiny-llama",
               4,
               {{"tensor_parallel", 2}, {"sequence_parallel", true}, {"data_parallel", 2}, {"zero_stage", 3}},
               true},
        // Pipelines (8 micro-batches of 1 per step): every schedule at pp 2 and pp 4.
        Layout{"llama_pp2_gpipe",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2}, {"pipeline_schedule", "gpipe"}, {"micro_batch_size", 1}}},
        Layout{"llama_pp2_1f1b_uneven",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2}, {"pipeline_schedule", "1f1b"}, {"partition", {3, 1}}}},
        Layout{"llama_pp2_interleaved",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2},
                {"pipeline_schedule", "interleaved"},
                {"virtual_stages", 2},
                {"micro_batch_size", 1}}},
        Layout{"llama_pp4_gpipe", "tiny-llama", 4, {{"pipeline_parallel", 4}, {"pipeline_schedule", "gpipe"}}},
        Layout{"llama_pp4_1f1b",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 4}, {"pipeline_schedule", "1f1b"}, {"micro_batch_size", 1}}},
        Layout{"llama8_pp4_interleaved",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 4},
                {"pipeline_schedule", "interleaved"},
                {"virtual_stages", 2},
                {"micro_batch_size", 1}},
               false,
               8},
        Layout{"llama_pp2_zb1p",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2}, {"pipeline_schedule", "zb1p"}, {"micro_batch_size", 1}}},
        Layout{"llama_pp2_zb2p",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2}, {"pipeline_schedule", "zb2p"}, {"micro_batch_size", 1}}},
        Layout{
            "llama_pp2_zbv",
            "tiny-llama",
            2,
            {{"pipeline_parallel", 2}, {"pipeline_schedule", "zbv"}, {"virtual_stages", 2}, {"micro_batch_size", 1}}},
        Layout{"llama_pp4_zb1p",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 4}, {"pipeline_schedule", "zb1p"}, {"micro_batch_size", 1}}},
        Layout{"llama8_pp4_zbv",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 4}, {"pipeline_schedule", "zbv"}, {"virtual_stages", 2}, {"micro_batch_size", 1}},
               false,
               8},
        // The memory-controlled V schedules (zero-bubble repo's V-Half and V-Min).
        Layout{
            "llama8_pp4_vhalf",
            "tiny-llama",
            4,
            {{"pipeline_parallel", 4}, {"pipeline_schedule", "vhalf"}, {"virtual_stages", 2}, {"micro_batch_size", 1}},
            false,
            8},
        Layout{
            "llama8_pp4_vmin",
            "tiny-llama",
            4,
            {{"pipeline_parallel", 4}, {"pipeline_schedule", "vmin"}, {"virtual_stages", 2}, {"micro_batch_size", 1}},
            false,
            8},
        // The deferred W of sequence-parallel column linears re-gathers their input across tp.
        Layout{"llama_pp2_tp2_sp_zb1p",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 2},
                {"tensor_parallel", 2},
                {"sequence_parallel", true},
                {"pipeline_schedule", "zb1p"}}},
        Layout{"llama_pp2_dp2_zero1_zbv",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 2},
                {"data_parallel", 2},
                {"zero_stage", 1},
                {"pipeline_schedule", "zbv"},
                {"virtual_stages", 2}}},
        Layout{"lora_pp2_zbv",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2}, {"pipeline_schedule", "zbv"}, {"virtual_stages", 2}, {"micro_batch_size", 1}},
               true},
        Layout{"llama_pp2_tp2_sp",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 2}, {"tensor_parallel", 2}, {"sequence_parallel", true}}},
        Layout{"llama_pp2_dp2_zero1",
               "tiny-llama",
               4,
               {{"pipeline_parallel", 2}, {"data_parallel", 2}, {"zero_stage", 1}}},
        Layout{"gpt_pp2_tied", "tiny-gpt", 2, {{"pipeline_parallel", 2}, {"pipeline_schedule", "1f1b"}}},
        Layout{"gpt_pp2_dp2_zero3_tied",
               "tiny-gpt",
               4,
               {{"pipeline_parallel", 2}, {"data_parallel", 2}, {"zero_stage", 3}}},
        Layout{"lora_pp2_interleaved",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2},
                {"pipeline_schedule", "interleaved"},
                {"virtual_stages", 2},
                {"micro_batch_size", 1}},
               true},
        // Stages with no block: the first only the embedding, the last only the head (Megatron-Core's
        // layout "E|t*4|L"); interleaved, chunk 0 and stage 1's last chunk; tied embeddings, whose
        // copy then lives alone with the head; LoRA, whose frozen embedding's output is a leaf.
        Layout{"llama_pp3_edge_stages",
               "tiny-llama",
               3,
               {{"pipeline_parallel", 3},
                {"pipeline_schedule", "1f1b"},
                {"micro_batch_size", 1},
                {"partition", {0, 4, 0}}}},
        Layout{"llama_pp2_interleaved_edge_chunks",
               "tiny-llama",
               2,
               {{"pipeline_parallel", 2},
                {"pipeline_schedule", "interleaved"},
                {"virtual_stages", 2},
                {"micro_batch_size", 1},
                {"partition", {0, 2, 2, 0}}}},
        Layout{"gpt_pp3_tied_edge_stages",
               "tiny-gpt",
               3,
               {{"pipeline_parallel", 3}, {"pipeline_schedule", "1f1b"}, {"partition", {0, 4, 0}}}},
        Layout{"lora_pp3_edge_stages",
               "tiny-llama",
               3,
               {{"pipeline_parallel", 3},
                {"pipeline_schedule", "1f1b"},
                {"micro_batch_size", 1},
                {"partition", {0, 4, 0}}},
               true}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

}  // namespace equivalence_test
}  // namespace shardplan::testing
