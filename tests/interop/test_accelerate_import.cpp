// Hugging Face Accelerate (FSDP) import: Accelerate's own shipped configs, FSDP1 and FSDP2 forms,
// and errors naming the field and line.
#include <gtest/gtest.h>

#include <string>

#include "accelerate_support.hpp"
#include "interop/accelerate.hpp"

namespace shardplan::interop {
namespace accelerate_import_test {  // named, not anonymous: the files share a unity-build unit

using namespace accelerate_test;  // NOLINT: devices, import_error, any_mentions, ...

// --- import ----------------------------------------------------------------------------------

// examples/config_yaml_templates/fsdp.yaml at huggingface/accelerate 16cb6eb8 (comments dropped).
const char* kShippedFsdpTemplate = R"(distributed_type: FSDP
mixed_precision: 'bf16'
num_processes: 2
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: true
)";

// examples/torch_native_parallelism/configs/tp_hsdp.yaml at the same commit.
const char* kShippedTpHsdp = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
enable_cpu_affinity: false
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: false
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
parallelism_config:
  parallelism_config_cp_size: 1
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 2
  parallelism_config_tp_size: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

TEST(AccelerateImport, ShippedFsdp1Template) {
  const ImportResult r = import_accelerate(kShippedFsdpTemplate, devices(2, 2), "fsdp.yaml");
  const auto& c = r.config;
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.sharding_degree, 0);
  EXPECT_EQ(c.precision, sim::Precision::bf16);
  EXPECT_EQ(c.recompute, sim::Recompute::none);
  EXPECT_FALSE(c.offload_optimizer);
  EXPECT_EQ(c.micro_batch_size, 4);
  EXPECT_EQ(c.global_batch_size, 8);
  EXPECT_EQ(c.seq_len, 2048);
  // Only the assumed gradient accumulation is worth a warning: every key is known.
  ASSERT_EQ(r.warnings.size(), 1u) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("gradient accumulation"), std::string::npos);
}

TEST(AccelerateImport, ShippedTpHsdpExample) {
  const ImportResult r = import_accelerate(kShippedTpHsdp, devices(8), "tp_hsdp.yaml");
  const auto& c = r.config;
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.dp, 4);
  EXPECT_EQ(c.sharding_degree, 2);
  EXPECT_EQ(c.zero_stage, 3);
  EXPECT_EQ(c.cp, 1);
  EXPECT_FALSE(any_mentions(r.warnings, "ignored")) << r.warnings[0];
  // The same file on another cluster size does not add up.
  const std::string why = import_error(kShippedTpHsdp, devices(16));
  EXPECT_NE(why.find("acc.yaml:18:16: field 'num_processes': expected the cluster's 16 devices"), std::string::npos)
      << why;
}

TEST(AccelerateImport, Fsdp1StrategiesNamesNumbersAndHybrid) {
  const auto zero = [](const std::string& fsdp) {
    return import_accelerate("distributed_type: FSDP\nfsdp_config:\n" + fsdp, devices(16), "a.yaml").config;
  };
  EXPECT_EQ(zero("  fsdp_sharding_strategy: SHARD_GRAD_OP\n").zero_stage, 2);
  EXPECT_EQ(zero("  fsdp_sharding_strategy: 2\n").zero_stage, 2);  // ShardingStrategy(2)
  EXPECT_EQ(zero("  fsdp_sharding_strategy: no_shard\n").zero_stage, 0);
  EXPECT_EQ(zero("  sharding_strategy: 3\n").zero_stage, 0);  // unprefixed key, as launch.py maps it
  const auto hybrid = zero("  fsdp_sharding_strategy: HYBRID_SHARD\n");
  EXPECT_EQ(hybrid.zero_stage, 3);
  EXPECT_EQ(hybrid.sharding_degree, 8);  // within a node of 8
  const auto hybrid2 = zero("  fsdp_sharding_strategy: 5\n");
  EXPECT_EQ(hybrid2.zero_stage, 2);
  EXPECT_EQ(hybrid2.sharding_degree, 8);
  // Without the devices per node, num_machines tells the node size.
  ImportContext ctx = devices(16, 0);
  EXPECT_EQ(import_accelerate("distributed_type: FSDP\nnum_machines: 4\nfsdp_config:\n  fsdp_sharding_strategy: "
                              "HYBRID_SHARD\n",
                              ctx, "a.yaml")
                .config.sharding_degree,
            4);
}

TEST(AccelerateImport, Fsdp1RunsTheShardingStrategyNotReshardAfterForward) {
  // What `accelerate config` writes for FSDP1 ZeRO-2 — but launch passes fsdp_sharding_strategy
  // (default FULL_SHARD), which FSDP1 prefers.
  const ImportResult r = import_accelerate(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n",
      devices(8), "a.yaml");
  EXPECT_EQ(r.config.zero_stage, 3);
  EXPECT_TRUE(any_mentions(r.warnings,
                           "a.yaml:4:31: 'fsdp_config.fsdp_reshard_after_forward' is SHARD_GRAD_OP, "
                           "but accelerate launch runs FSDP1 with fsdp_sharding_strategy (FULL_SHARD, its "
                           "default)"));
}

TEST(AccelerateImport, Fsdp2BoolsAndStrings) {
  const auto cfg = [](const std::string& raf) {
    return import_accelerate(
               "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: " + raf + "\n",
               devices(8), "a.yaml")
        .config;
  };
  EXPECT_EQ(cfg("true").zero_stage, 3);
  EXPECT_EQ(cfg("false").zero_stage, 2);
  EXPECT_EQ(cfg("'False'").zero_stage, 2);  // the launch flag's string form (str_to_bool)
  EXPECT_EQ(cfg("no").zero_stage, 2);
  const std::string why = import_error(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  fsdp_reshard_after_forward: FULL_SHARD\n");
  EXPECT_NE(why.find("acc.yaml:4:31: field 'fsdp_config.fsdp_reshard_after_forward': expected true or false with "
                     "fsdp_version 2"),
            std::string::npos)
      << why;
}

TEST(AccelerateImport, DdpAndOtherTypes) {
  const ImportResult ddp = import_accelerate("distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: fp16\n",
                                             devices(8), "ddp.yaml");
  EXPECT_EQ(ddp.config.zero_stage, 0);
  EXPECT_EQ(ddp.config.dp, 8);
  EXPECT_EQ(ddp.config.precision, sim::Precision::fp16);
  EXPECT_EQ(import_accelerate("distributed_type: MULTI_HPU\n", devices(8), "hpu.yaml").config.zero_stage, 0);
  EXPECT_EQ(import_accelerate("distributed_type: 'NO'\n", devices(1), "one.yaml").config.dp, 1);
  const std::string ds = import_error("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n");
  EXPECT_NE(ds.find("acc.yaml:1:19: field 'distributed_type': expected FSDP, got DEEPSPEED"), std::string::npos) << ds;
  EXPECT_NE(ds.find("import its DeepSpeed config"), std::string::npos) << ds;
  EXPECT_NE(import_error("distributed_type: XLA\n").find("field 'distributed_type'"), std::string::npos);
  EXPECT_NE(import_error("distributed_type: 'NO'\n").find("got NO (one process)"), std::string::npos);
}

TEST(AccelerateImport, PrecisionOffloadCheckpointingAndFp8) {
  const std::string base =
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n  offload_params: true\n"
      "  activation_checkpointing: 'true'\n";
  const ImportResult r = import_accelerate(base + "mixed_precision: no\n", devices(8), "a.yaml");
  EXPECT_EQ(r.config.precision, sim::Precision::fp32);  // unquoted `no`: YAML 1.1 false, Accelerate's "no"
  EXPECT_TRUE(r.config.offload_optimizer);
  EXPECT_TRUE(any_mentions(r.warnings, "offloads the parameters and gradients too"));
  EXPECT_EQ(r.config.recompute, sim::Recompute::full);
  // No mixed_precision: the context's precision, else fp32 (launch's "no").
  ImportContext ctx = devices(8);
  EXPECT_EQ(import_accelerate(base, ctx, "a.yaml").config.precision, sim::Precision::fp32);
  ctx.precision = sim::Precision::bf16;
  EXPECT_EQ(import_accelerate(base, ctx, "a.yaml").config.precision, sim::Precision::bf16);
  const auto fp8 = [&](const std::string& section) {
    return import_accelerate(base + "mixed_precision: fp8\n" + section, devices(8), "a.yaml");
  };
  EXPECT_EQ(fp8("fp8_config:\n  backend: TE\n").config.fp8, sim::Fp8Recipe::delayed);
  const ImportResult ao = fp8("fp8_config:\n  fp8_backend: AO\n");
  EXPECT_EQ(ao.config.fp8, sim::Fp8Recipe::tensorwise);
  EXPECT_TRUE(ao.config.fp8_param_gather);  // AORecipeKwargs' default under FSDP2
  EXPECT_EQ(ao.config.precision, sim::Precision::bf16);
  const ImportResult mx = fp8("fp8_config:\n  backend: TE\n  use_mxfp8_block_scaling: true\n");
  EXPECT_EQ(mx.config.fp8, sim::Fp8Recipe::blockwise);
  EXPECT_TRUE(any_mentions(mx.warnings, "MXFP8"));
  EXPECT_TRUE(any_mentions(fp8("").warnings, "without fp8_config.backend"));
}

TEST(AccelerateImport, ContextParallelAndUnknownKeys) {
  const ImportResult r = import_accelerate(R"(distributed_type: FSDP
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_turbo: true
parallelism_config:
  parallelism_config_dp_shard_size: 2
  parallelism_config_cp_size: 4
  tp_size: 2
num_processes: 8
wandb_project: x
)",
                                           devices(8), "cp.yaml");
  EXPECT_EQ(r.config.cp, 4);
  EXPECT_EQ(r.config.dp, 2);
  EXPECT_EQ(r.config.tp, 1);  // tp_size without the prefix is not read by accelerate launch
  EXPECT_EQ(r.config.cp_kind, sim::CpKind::ring);
  EXPECT_TRUE(any_mentions(r.warnings, "is allgather"));
  EXPECT_TRUE(any_mentions(r.warnings, "cp.yaml:5:15: 'fsdp_config.fsdp_turbo' is not an fsdp_config setting"));
  EXPECT_TRUE(any_mentions(r.warnings, "'parallelism_config.tp_size' is not a parallelism_config key"));
  EXPECT_TRUE(any_mentions(r.warnings, "cp.yaml:11:16: 'wandb_project' is not an Accelerate config key"));
  // A key holding a newline still makes a one-line warning.
  const ImportResult odd = import_accelerate("distributed_type: FSDP\n\"evil\\nkey\": 1\n", devices(8), "o.yaml");
  EXPECT_TRUE(any_mentions(odd.warnings, "o.yaml:2:14: 'evil key' is not an Accelerate config key"));
  for (const auto& w : odd.warnings) EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  // Missing micro-batch size: 1, said.
  ImportContext ctx = devices(8);
  ctx.micro_batch_size = 0;
  const ImportResult one = import_accelerate(kShippedTpHsdp, ctx, "t.yaml");
  EXPECT_EQ(one.config.micro_batch_size, 1);
  EXPECT_TRUE(any_mentions(one.warnings, "no micro-batch size"));
}

TEST(AccelerateImport, MalformedFilesNameTheFieldAndLine) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::string fsdp2 = "distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n";
  const std::vector<Case> cases = {
      {"distributed_type: [FSDP\n", "acc.yaml:2:1: not valid YAML"},
      {"- FSDP\n", "acc.yaml: expected a YAML mapping"},
      {"mixed_precision: bf16\n",
       "acc.yaml:1:1: field 'distributed_type': expected FSDP (or MULTI_GPU, NO), it is missing"},
      {"distributed_type: FSDP\nnum_processes: 4\n", "acc.yaml:2:16: field 'num_processes': expected the cluster's 8"},
      {"distributed_type: FSDP\nnum_processes: eight\n",
       "field 'num_processes': expected an integer >= -1, got 'eight'"},
      {"distributed_type: FSDP\nnum_machines: 3\n", "field 'num_machines': expected a divisor of the 8 processes"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 3\n",
       "acc.yaml:3:17: field 'fsdp_config.fsdp_version': expected 1 or 2, got '3'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: true\n",
       "field 'fsdp_config.fsdp_reshard_after_forward': expected with fsdp_version 1 a sharding strategy"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SOME_SHARD\n",
       "field 'fsdp_config.fsdp_sharding_strategy'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: maybe\n",
       "field 'fsdp_config.fsdp_offload_params': expected true or false, got 'maybe'"},
      {"distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: EVERYTHING\n", "fsdp_auto_wrap_policy"},
      {"distributed_type: FSDP\nfsdp_config: 3\n", "field 'fsdp_config': expected a mapping, got '3'"},
      {"distributed_type: FSDP\nparallelism_config:\n  parallelism_config_tp_size: 2\n",
       "field 'parallelism_config': expected no parallelism_config with fsdp_version 1"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_tp_size: 2\n",
       "acc.yaml:5:3: field 'parallelism_config': expected dp_replicate_size x dp_shard_size x tp_size x cp_size = "
       "the cluster's 8 devices (parallelism_config.py:372-377), got 1 x 1 x 2 x 1 = 2"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_dp_replicate_size: 8\n",
       "field 'parallelism_config.parallelism_config_dp_shard_size': expected a size > 1"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_sp_size: 8\n",
       "parallelism_config.parallelism_config_sp_size"},
      {fsdp2 + "parallelism_config:\n  parallelism_config_cp_size: 8\n  parallelism_config_cp_comm_strategy: ring\n",
       "field 'parallelism_config.parallelism_config_cp_comm_strategy': expected allgather or alltoall, got 'ring'"},
      {"distributed_type: FSDP\nmixed_precision: fp64\n",
       "acc.yaml:2:18: field 'mixed_precision': expected no, fp16, bf16 or fp8, got 'fp64'"},
      {"distributed_type: FSDP\nmixed_precision: fp8\nfp8_config:\n  backend: NV\n",
       "field 'fp8_config.backend': expected TE, AO or MSAMP, got 'NV'"},
      {"compute_environment: AMAZON_SAGEMAKER\ndistributed_type: FSDP\n", "field 'compute_environment'"},
      {"distributed_type: FSDP\ndistributed_type: FSDP\n",
       "field 'distributed_type': expected one value, got it twice"},
      {"distributed_type: MULTI_GPU\nparallelism_config:\n  parallelism_config_tp_size: 2\n",
       "field 'parallelism_config': expected no parallelism_config with distributed_type MULTI_GPU"},
      {"distributed_type: FSDP\nnum_processes: \"8\\n9\"\n", "got '8 9'"},  // one line, even for a multi-line value
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.yaml);
    const std::string why = import_error(k.yaml);
    EXPECT_NE(why.find(k.expected), std::string::npos) << why;
    EXPECT_EQ(why.rfind("acc.yaml", 0), 0u) << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  }
  // The import settings themselves.
  ImportContext ctx = devices(8);
  ctx.tp = 2;
  EXPECT_NE(import_error("distributed_type: FSDP\n", ctx).find("tensor-parallel degree given to the import (2)"),
            std::string::npos);
  ctx = devices(8);
  ctx.pp = 2;
  EXPECT_NE(import_error("distributed_type: FSDP\n", ctx).find("no pipeline parallelism"), std::string::npos);
  EXPECT_NE(import_error("distributed_type: FSDP\n", devices(0)).find("device count"), std::string::npos);
}

}  // namespace accelerate_import_test
}  // namespace shardplan::interop
