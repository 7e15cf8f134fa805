#pragma once
// FrameworkModel: one training framework at one version, in the simulator's terms.
//   runs      the knob table: every setting it can run (the planner searches exactly this; its
//             export must accept all of it)
//   defaults  what a run gets for a knob it does not write (config keys of prediction_json.cpp):
//             a user writes what the publication says, not shardplan's internals
//   terms     what the simulator takes from it (simulator/framework_terms.hpp): the memory its
//             log reports, its caching allocator's slack
//   facts     each knob's meaning and default, cited as repo path:line @ commit
// One file per framework (megatron.cpp, nemo.cpp, ...); registry.hpp finds them by name and version.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "simulator/framework_terms.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::frameworks {

namespace sim = shardplan::simulator;

// What a framework can run. An empty list = the knob is not available (only its neutral value:
// 1 for degrees, none / off for features).
struct KnobTable {
  std::vector<sim::DeviceRuntime> runtimes;  // the device stacks it runs on
  bool tensor_parallel = false;
  bool sequence_parallel = false;           // Megatron SP over the tp group
  bool sequence_parallel_required = false;  // SP is always on with tp > 1 (torchtitan, NxD)
  bool tp_comm_overlap = false;
  bool tp_overlap_needs_compile = false;  // async TP runs only inside torch.compile (fusion compile)
  // tp, cp, ep and FP8 run only through the framework's fused (Transformer Engine) layers: fusion
  // megatron with any of them (SMP v2's use_smp_implementation).
  bool model_parallel_needs_fused_layers = false;
  bool gradient_accumulation = true;             // more than one micro-batch a step
  std::vector<sim::PipelineSchedule> schedules;  // empty: no pipeline parallelism
  bool uneven_partition = false;                 // an explicit layer count per chunk
  bool embedding_only_chunks = false;            // a first chunk of 0 blocks, a last of 0 blocks
  std::vector<sim::CpKind> cp_kinds;             // empty: no context parallelism
  bool expert_parallel = false;
  std::vector<int> zero_stages{0};
  int pipeline_zero_max = 3;        // the highest ZeRO stage it runs together with pp > 1
  int split_backward_zero_max = 3;  // highest ZeRO stage run with a deferred W (zb1p, zbv, ...)
  bool zero0_only_alone = false;    // ZeRO-0 (DDP) only without tp, pp and cp (else it shards)
  bool sharding_degree = false;     // a sharding group smaller than dp (HSDP, MiCS, ZeRO++ hpZ)
  bool offload_optimizer = false;
  bool offload_activations = false;
  std::vector<sim::Recompute> recompute{sim::Recompute::none};
  bool recompute_num_layers = false;  // full recompute of the first k blocks of a chunk
  bool recompute_every = false;       // full recompute of every N-th block of a rank
  std::vector<sim::AttentionKind> attention;
  std::vector<sim::Fusion> fusion;
  std::vector<sim::Precision> precisions;
  std::vector<sim::MixedPrecision> mixed_precision;
  std::vector<sim::Fp8Recipe> fp8{sim::Fp8Recipe::none};
  bool fp8_param_gather = false;
  std::vector<sim::Zero3Fetch> zero3_fetch{sim::Zero3Fetch::prefetch};
  std::vector<sim::GradAccumDtype> grad_accum{sim::GradAccumDtype::param};
  bool lora = false;
  bool qlora = false;
  bool packed_sequences = false;  // documents packed with per-document attention (cu_seqlens)
  bool multi_node = true;
};

struct Fact {
  std::string what;    // "attention: eager (fused scale-mask-softmax), no flash attention"
  std::string source;  // "NVIDIA/Megatron-LM megatron/model/transformer.py:160-230 @ 0f2e6d6"
};

struct FrameworkModel {
  std::string name;      // registry name, e.g. "megatron"
  std::string version;   // one of the registry's versions, e.g. "2022"
  std::string display;   // "Megatron-LM v3.0 (2022)"
  std::string released;  // the version's date, YYYY-MM
  std::string repository;
  std::string commit;  // the commit its facts were read at
  KnobTable runs;
  nlohmann::json defaults = nlohmann::json::object();  // config keys -> the framework's value
  // Defaults that hold for one precision only, {"bf16": {"grad_accum_dtype": "fp32"}}: applied
  // over `defaults` for a run of that precision.
  nlohmann::json defaults_by_precision = nlohmann::json::object();
  sim::FrameworkTerms terms;
  std::vector<Fact> facts;
};

}  // namespace shardplan::frameworks
