// Context parallelism in the cost model: a block's stored activations divide by cp, the ring's
// and the all-to-all's communication volumes against their formulas, model FLOPs independent of
// cp, ZeRO sharding over dp x cp, composition with TP/SP/PP/ZeRO, and one-line refusals.
#include <gtest/gtest.h>

#include "support/input_error.hpp"

#include <string>

#include "simulator/context_parallel.hpp"
#include "simulator/errors.hpp"
#include "simulator/prediction_json.hpp"
#include "support/sim_config.hpp"

namespace shardplan::simulator {
namespace context_parallel_test {  // named, not anonymous: the files share a unity-build unit

using testing::refusal;

using testing::cluster;
using testing::config;
using testing::run;

// dp x cp = the cluster's devices at tp 1.
ParallelConfig cp_config(const ClusterSpec& c, int cp, CpKind kind, int seq = 32768) {
  ParallelConfig cfg = config(c, 1, 1, 1, 1, 0, seq);
  cfg.cp = cp;
  cfg.cp_kind = kind;
  cfg.dp = c.devices() / cp;
  cfg.global_batch_size = cfg.dp;
  return cfg;
}

ConfigContext context(const Evaluator& ev, ParallelConfig& cfg) {
  validate_config(ev.model(), ev.cluster(), cfg);
  return ConfigContext(ev.context(), cfg);
}

TEST(ContextParallel, BlockActivationsDivideByCp) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Evaluator ev(m, c);
  for (CpKind kind : {CpKind::ring, CpKind::all_to_all}) {
    ParallelConfig one = cp_config(c, 1, kind), two = cp_config(c, 2, kind), eight = cp_config(c, 8, kind);
    const double a1 = context(ev, one).block.stored_activation_bytes;
    EXPECT_NEAR(context(ev, two).block.stored_activation_bytes, a1 / 2, 1e-9 * a1);
    EXPECT_NEAR(context(ev, eight).block.stored_activation_bytes, a1 / 8, 1e-9 * a1);
  }
}

TEST(ContextParallel, RingAndAllToAllVolumesFollowTheirFormulas) {
  const ModelSpec m = load_model("llama3.1-8b");  // GQA: 32 query heads, 8 key/value heads of 128
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Evaluator ev(m, c);
  const double e = 2, s = 32768, cp = 4, M = s / cp, q = m.q_dim(), kv = m.kv_dim();
  ParallelConfig ring = cp_config(c, 4, CpKind::ring), a2a = cp_config(c, 4, CpKind::all_to_all);
  const ConfigContext r = context(ev, ring), a = context(ev, a2a);
  const CpComm rc = cp_attention_comm(r.env, flash_attention_time(r.env));
  const CpComm ac = cp_attention_comm(a.env, flash_attention_time(a.env));
  // Ring: cp-1 steps of this rank's K and V chunk; backward also passes dK, dV.
  EXPECT_DOUBLE_EQ(rc.forward_bytes, (cp - 1) * e * M * 2 * kv);
  EXPECT_DOUBLE_EQ(rc.backward_bytes, 2 * rc.forward_bytes);
  // Ulysses: q, k, v and the output, (cp-1)/cp of each leaving the rank, both passes.
  EXPECT_DOUBLE_EQ(ac.forward_bytes, e * M * (q + 2 * kv + q) * (cp - 1) / cp);
  EXPECT_DOUBLE_EQ(ac.backward_bytes, ac.forward_bytes);
  // With 4:1 GQA the ring moves less than the head exchange at cp 4.
  EXPECT_LT(rc.forward_bytes, ac.forward_bytes);
  // The ring's transfers hide behind the attention of a 32K sequence on NVLink; the all-to-alls
  // cannot hide.
  EXPECT_GE(rc.forward_s, 0.0);
  EXPECT_LT(rc.forward_s, ac.forward_s);
  EXPECT_GT(ac.forward_s, 0.0);
}

// A ring step's K, V transfer runs behind one block's attention only as far as the device hides
// communication behind compute: all of it on a CPU rank under MPI (compute_overlap 0).
TEST(ContextParallel, RingTransfersHideOnlyAsFarAsTheDeviceOverlaps) {
  const ModelSpec m = load_model("llama3.1-8b");
  auto ring_comm = [&](double overlap) {
    ClusterSpec c = cluster("p5.48xlarge", 1);
    c.hardware.node.intra.compute_overlap = overlap;
    const Evaluator ev(m, c);
    ParallelConfig ring = cp_config(c, 4, CpKind::ring);
    const ConfigContext r = context(ev, ring);
    return cp_attention_comm(r.env, flash_attention_time(r.env));
  };
  const CpComm hidden = ring_comm(1.0), half = ring_comm(0.5), exposed = ring_comm(0.0);
  // At 32K tokens each step's transfer is shorter than its block's attention: it hides entirely.
  EXPECT_DOUBLE_EQ(hidden.forward_s, 0.0);
  EXPECT_DOUBLE_EQ(hidden.backward_s, 0.0);
  EXPECT_GT(exposed.forward_s, 0.0);
  EXPECT_GT(exposed.backward_s, exposed.forward_s);  // K, V and their gradients
  EXPECT_NEAR(half.forward_s, 0.5 * exposed.forward_s, 1e-12 * exposed.forward_s);
  EXPECT_DOUBLE_EQ(exposed.forward_bytes, hidden.forward_bytes);
}

TEST(ContextParallel, ModelFlopsAndTokensDoNotDependOnCp) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig one = cp_config(c, 1, CpKind::ring), two = cp_config(c, 2, CpKind::ring);
  one.global_batch_size = two.global_batch_size = 8;
  const Prediction p1 = run(m, c, one), p2 = run(m, c, two);
  EXPECT_NEAR(p2.model_flops_per_step, p1.model_flops_per_step, 1e-9 * p1.model_flops_per_step);
  EXPECT_DOUBLE_EQ(p2.tokens_per_step, p1.tokens_per_step);
  EXPECT_GT(p2.time.cp_comm_s + p2.time.forward_compute_s, 0.0);
  // Per device each micro-batch holds half the sequence: compute per micro-batch halves, and
  // the step runs twice as many micro-batches per replica.
  EXPECT_EQ(p2.micro_batches, 2 * p1.micro_batches);
}

TEST(ContextParallel, ZeroShardsOverDataAndContextRanks) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  const Prediction dp8 = run(m, c, cp_config(c, 1, CpKind::ring));
  const Prediction cp2 = run(m, c, cp_config(c, 2, CpKind::ring));
  // ZeRO-1 over 8 ranks either way: the same optimizer shard.
  EXPECT_NEAR(cp2.worst.optimizer_states, dp8.worst.optimizer_states, 1e-6 * dp8.worst.optimizer_states);
  EXPECT_LT(cp2.worst.activations, dp8.worst.activations);
}

TEST(ContextParallel, ComposesWithTensorPipelineAndZero3) {
  const ModelSpec m = load_model("llama3.1-70b");
  const ClusterSpec c = cluster("p5.48xlarge", 4);  // 32 GPUs: tp 4 x cp 2 x pp 2 x dp 2
  ParallelConfig cfg = config(c, 4, 2, 3, 1, 8, 65536);
  cfg.cp = 2;
  cfg.dp = 2;
  cfg.sequence_parallel = true;
  for (CpKind kind : {CpKind::ring, CpKind::all_to_all}) {
    cfg.cp_kind = kind;
    const Prediction p = run(m, c, cfg);
    EXPECT_GT(p.tokens_per_s, 0);
    // The ring's KV steps hide behind 64K-token attention; Ulysses' all-to-alls cannot.
    if (kind == CpKind::all_to_all) EXPECT_GT(p.time.cp_comm_s, 0);
    else EXPECT_GE(p.time.cp_comm_s, 0);
    const double parts = p.time.forward_compute_s + p.time.backward_compute_s + p.time.recompute_s + p.time.tp_comm_s +
                         p.time.cp_comm_s + p.time.ep_comm_s + p.time.dp_exposed_comm_s + p.time.offload_exposed_s +
                         p.time.pipeline_bubble_s + p.time.optimizer_s + p.time.sync_wait_s;
    EXPECT_NEAR(parts, p.time.step_s, 1e-9 * p.time.step_s);
  }
}

TEST(ContextParallel, BadInputIsOneLineNamingTheField) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = cp_config(c, 4, CpKind::ring, 4100);  // 4100 % 8 != 0
  const std::string seq = refusal(m, c, cfg);
  EXPECT_NE(seq.find("--cp: expected --seq-len (4100) divisible by 8"), std::string::npos) << seq;
  EXPECT_EQ(seq.find('\n'), std::string::npos);
  cfg = cp_config(c, 4, CpKind::ring);
  cfg.attention = AttentionKind::eager;
  EXPECT_NE(refusal(m, c, cfg).find("--attention flash"), std::string::npos);
  cfg = cp_config(c, 8, CpKind::all_to_all);
  cfg.cp = 8;
  EXPECT_EQ(refusal(m, c, cfg), "");  // 8 kv heads / 8
  const ClusterSpec two = cluster("p5.48xlarge", 2);
  cfg = config(two, 2, 1, 1, 1, 0, 32768);
  cfg.cp = 8;
  cfg.dp = 1;
  cfg.cp_kind = CpKind::all_to_all;
  EXPECT_NE(refusal(m, two, cfg).find("--cp-kind: all_to_all needs tp x cp (16)"), std::string::npos);
  cfg.cp_kind = CpKind::ring;
  EXPECT_EQ(refusal(m, two, cfg), "");
  cfg = config(c, 2, 1, 1, 1, 0, 32768);
  cfg.dp = 1;
  cfg.cp = 3;
  EXPECT_NE(refusal(m, c, cfg).find("--tp/--cp/--pp/--dp"), std::string::npos);
}

TEST(ContextParallel, ConfigRoundTripsAndOldPlansReadAsCpOne) {
  const ModelSpec m = load_model("llama3.1-8b");
  const ClusterSpec c = cluster("p5.48xlarge", 1);
  ParallelConfig cfg = cp_config(c, 2, CpKind::all_to_all);
  validate_config(m, c, cfg);
  nlohmann::json j = to_json(cfg);
  ParallelConfig back = config_from_json(j, "plan.json");
  EXPECT_EQ(back.cp, 2);
  EXPECT_EQ(back.cp_kind, CpKind::all_to_all);
  j.erase("context_parallel");
  j.erase("context_parallel_kind");
  j["data_parallel"] = 8;
  back = config_from_json(j, "plan.json");
  EXPECT_EQ(back.cp, 1);
  EXPECT_EQ(back.cp_kind, CpKind::ring);
}

TEST(ContextParallel, RankLayoutPlacesCpAfterTpUnlessTheOrderSaysOtherwise) {
  const RankLayout a("tp-dp-pp", 2, 4, 2, 1, 8);  // tp 2, cp 4, dp 2: tp-cp-dp-pp
  EXPECT_EQ(a.stride(Dim::cp), 2);
  EXPECT_EQ(a.stride(Dim::dp), 8);
  EXPECT_TRUE(a.group(Dim::cp).intra_node());
  EXPECT_FALSE(a.group(Dim::dp).intra_node());
  const GroupPlacement dpcp = a.dp_cp_group();
  EXPECT_EQ(dpcp.size, 8);
  EXPECT_EQ(dpcp.nodes, 2);
  const RankLayout b("tp-dp-cp-pp", 2, 4, 2, 1, 8);
  EXPECT_EQ(b.stride(Dim::cp), 4);
  EXPECT_FALSE(b.group(Dim::cp).intra_node());
  // Expert groups fold over the stage's ranks in rank order: etp fastest, then ep.
  EXPECT_EQ(a.expert_group(ExpertDim::ep, 1, 8).nodes, 1);
  EXPECT_EQ(a.expert_group(ExpertDim::ep, 2, 8).nodes, 2);
  EXPECT_EQ(a.expert_group(ExpertDim::edp, 2, 4).size, 2);
  EXPECT_THROW(RankLayout("tp-cp-dp", 1, 1, 1, 1, 8), InputError);
}

}  // namespace context_parallel_test
}  // namespace shardplan::simulator
