// Context parallelism: the load-balanced sequence split, and runs of the real shardrun under
// mpirun — ring attention and Ulysses all-to-alls, alone and with TP/SP, ZeRO-3, pipelines and
// recomputation — give the same per-step losses as a single-rank run (fp32: within 1e-5
// relative over 20 steps) and the same final weights once gathered.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "executor/parallel/context_parallel.hpp"
#include "harness.hpp"

namespace shardplan::testing {
namespace context_parallel_test {  // named, not anonymous: the files share a unity-build unit

namespace ex = shardplan::executor;

constexpr int kSteps = 20;

std::vector<int64_t> positions(int64_t S, int chunks, int cp, int rank) {
  // A group-less context of `cp` ranks: cp_positions_of only reads chunks and the size.
  struct Fake final : ex::Communicator {
    int n;
    explicit Fake(int size) : n(size) {}
    int rank() const override { return 0; }
    int size() const override { return n; }
    const char* backend() const override { return "none"; }
    const std::string& name() const override {
      static const std::string s = "cp";
      return s;
    }
    void all_reduce(torch::Tensor&, ex::ReduceOp) override {}
    void all_gather(torch::Tensor&, const torch::Tensor&) override {}
    void reduce_scatter(torch::Tensor&, const torch::Tensor&) override {}
    void broadcast(torch::Tensor&, int) override {}
    void send(const torch::Tensor&, int) override {}
    void recv(torch::Tensor&, int) override {}
    void barrier() override {}
    std::unique_ptr<ex::Work> all_reduce_async(torch::Tensor) override { return nullptr; }
    std::unique_ptr<ex::Work> reduce_scatter_async(torch::Tensor, torch::Tensor) override { return nullptr; }
    std::unique_ptr<ex::Work> all_gather_async(torch::Tensor, torch::Tensor) override { return nullptr; }
    std::unique_ptr<ex::Work> send_async(torch::Tensor, int, int) override { return nullptr; }
    std::unique_ptr<ex::Work> recv_async(torch::Tensor, int, int) override { return nullptr; }
  } group(cp);
  const ex::CpContext ctx{&group, simulator::CpKind::ring, chunks};
  const torch::Tensor p = ex::cp_positions_of(S, ctx, rank, torch::kCPU);
  return {p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel()};
}

// Causal load balancing: rank i holds chunks i and 2P-1-i; the ranks' positions partition the
// sequence and every rank has the same share of the causal triangle (sum of positions + 1).
TEST(CpSplit, LoadBalancedChunksPartitionTheSequenceWithEqualCausalWork) {
  const int P = 4, S = 64;
  std::set<int64_t> all;
  std::vector<int64_t> work;
  for (int r = 0; r < P; ++r) {
    const auto pos = positions(S, 2 * P, P, r);
    ASSERT_EQ(pos.size(), static_cast<size_t>(S / P));
    EXPECT_EQ(pos.front(), r * S / (2 * P));
    EXPECT_EQ(pos.back(), (2 * P - r) * S / (2 * P) - 1);
    int64_t w = 0;
    for (int64_t p : pos) all.insert(p), w += p + 1;
    work.push_back(w);
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(S));
  for (int64_t w : work) EXPECT_EQ(w, work.front());
  // Ulysses: contiguous chunks, rank i chunk i.
  const auto u = positions(S, P, P, 2);
  EXPECT_EQ(u.front(), 2 * S / P);
  EXPECT_EQ(u.back(), 3 * S / P - 1);
}

nlohmann::json with(nlohmann::json base, const nlohmann::json& more) {
  for (auto& [k, v] : more.items()) base[k] = v;
  return base;
}

// Whatever the planner chose for the MoE card: one expert-parallel rank unless a layout says so.
const nlohmann::json kNoExperts = {{"expert_parallel", 1}, {"expert_tensor_parallel", 0}};

struct Layout {
  std::string name;
  std::string model;
  int ranks;
  nlohmann::json config;
};

std::ostream& operator<<(std::ostream& os, const Layout& l) { return os << l.name; }

class CpEquivalence : public ::testing::TestWithParam<Layout> {
 protected:
  static TempDir* dir_;
  static void SetUpTestSuite() { dir_ = new TempDir("shardrun_cp"); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string args(const std::string& name) {
    return "--steps " + std::to_string(kSteps) + " --dropout 0 --lr 1e-3 " + corpus_data_args(*dir_) +
           " --save-final " + dir_->file(name + ".safetensors");
  }
  static const RunResult& reference(const std::string& model) {
    static std::map<std::string, RunResult> cache;
    if (!cache.count(model))
      cache[model] = shardrun(1, write_plan(*dir_, "ref-" + model, model, kNoExperts), dir_->file("ref-" + model),
                              args("ref-" + model));
    return cache[model];
  }
};
TempDir* CpEquivalence::dir_ = nullptr;

TEST_P(CpEquivalence, SameLossesAndFinalWeightsAsOneRank) {
  const Layout& l = GetParam();
  const RunResult& ref = reference(l.model);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps));
  const RunResult run = shardrun(l.ranks, write_plan(*dir_, l.name, l.model, with(kNoExperts, l.config)),
                                 dir_->file(l.name), args(l.name));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(run.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  EXPECT_LT(ref.losses.back(), ref.losses.front() - 0.5);  // training moved: agreement is not trivial
  expect_same_weights(dir_->file(l.name + ".safetensors"), dir_->file("ref-" + l.model + ".safetensors"));
  // The report carries the context-parallel exchanges, measured and predicted.
  ASSERT_TRUE(run.report.is_object());
  EXPECT_GT(run.report["measured"].value("cp_comm_seconds", 0.0), 0.0);
  EXPECT_GT(run.report["predicted"].value("cp_comm_seconds", 0.0), 0.0);
  EXPECT_EQ(run.report["layout"]["cp"]["size"], l.config["context_parallel"]);
}

const nlohmann::json kRing = {{"context_parallel", 2}, {"context_parallel_kind", "ring"}};
const nlohmann::json kA2a = {{"context_parallel", 2}, {"context_parallel_kind", "all_to_all"}};

INSTANTIATE_TEST_SUITE_P(
    Layouts, CpEquivalence,
    ::testing::Values(
        Layout{"llama_cp2_ring", "tiny-llama", 2, kRing}, Layout{"llama_cp2_a2a", "tiny-llama", 2, kA2a},
        // Four ring steps: blocks from earlier and later ranks at every distance.
        Layout{"llama_cp4_ring", "tiny-llama", 4, with(kRing, {{"context_parallel", 4}})},
        // Learned positions (GPT-2's wpe) at this rank's positions, tied embeddings.
        Layout{"gpt_cp2_ring", "tiny-gpt", 2, kRing},
        // The ring runs again inside recomputed attention (selective) and blocks (full).
        Layout{"llama_cp2_ring_selective", "tiny-llama", 2, with(kRing, {{"recompute", "selective"}})},
        Layout{"llama_cp2_a2a_full", "tiny-llama", 2, with(kA2a, {{"recompute", "full"}})},
        // MoE blocks route this rank's tokens; the experts fold over the cp ranks (ep2 from cp2).
        Layout{"moe_cp2_ep2_ring", "tiny-moe", 2, with(kRing, {{"expert_parallel", 2}})},
        Layout{"llama_cp2_dp2_zero3_ring", "tiny-llama", 4, with(kRing, {{"data_parallel", 2}, {"zero_stage", 3}})},
        Layout{"llama_cp2_dp2_zero1_a2a", "tiny-llama", 4, with(kA2a, {{"data_parallel", 2}, {"zero_stage", 1}})},
        Layout{"llama_cp2_pp2_ring", "tiny-llama", 4,
               with(kRing, {{"pipeline_parallel", 2}, {"pipeline_schedule", "1f1b"}, {"micro_batch_size", 1}})},
        Layout{"llama_cp2_tp2_sp_ring", "tiny-llama", 4,
               with(kRing, {{"tensor_parallel", 2}, {"sequence_parallel", true}})},
        // Ulysses over tp x cp = 4 heads groups of tiny-llama's 8 query / 4 key-value heads.
        Layout{"llama_cp2_tp2_a2a", "tiny-llama", 4, with(kA2a, {{"tensor_parallel", 2}})}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

TEST(CpRuns, LayoutsThatCannotSplitAreRefusedInOneLine) {
  TempDir dir("shardrun_cp_bad");
  // 34 tokens do not cut into ring's 2cp = 4 chunks.
  const std::string bad_seq = write_plan(dir, "seq", "tiny-llama", with(kRing, {{"seq_len", 34}}));
  RunResult r = shardrun(2, bad_seq, dir.file("seq"), "--steps 1 --dropout 0 --data synthetic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--cp: expected --seq-len (34) divisible by 4"), std::string::npos) << r.output;
  // Ulysses over tp x cp = 8 ranks: tiny-llama has 4 key/value heads.
  const std::string bad_heads =
      write_plan(dir, "heads", "tiny-llama", with(kA2a, {{"context_parallel", 4}, {"tensor_parallel", 2}}));
  r = shardrun(8, bad_heads, dir.file("heads"), "--steps 1 --dropout 0 --data synthetic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--cp-kind: all_to_all needs tp x cp (8)"), std::string::npos) << r.output;
  // Ring attention keeps no probabilities: attention dropout is refused.
  r = shardrun(2, write_plan(dir, "drop", "tiny-llama", kRing), dir.file("drop"),
               "--steps 1 --dropout 0.1 --data synthetic");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("attention_dropout"), std::string::npos) << r.output;
}

}  // namespace context_parallel_test
}  // namespace shardplan::testing
