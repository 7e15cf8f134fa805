#pragma once
// torchtitan job-config (TOML) names: the one table both the export (torchtitan_export.cpp) and the
// import (torchtitan_import.cpp) use.
//
// Checked at pytorch/torchtitan tag v0.2.2 = 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce
// (2026-02-20), the last release with TOML job configs. The keys are the dataclass fields of
// torchtitan/config/job_config.py (JC below; line numbers at that tag); a section is a dataclass
// (`[parallelism]` = class Parallelism), and ConfigManager._dict_to_dataclass
// (torchtitan/config/manager.py:160-167) raises ValueError on any key that is not a field.
// Commit 9810191bbb0385d8ac91cd31abbc7f4156a0d462 (2026-02-23, "[BC Breaking] Config System
// Refactor: TOML to Python Dataclass Registry") deleted job_config.py and every train_configs/*.toml:
// torchtitan HEAD (b5bcd76c, 2026-08) runs `--module llama3 --config llama3_8b` plus
// `--section.key value` overrides (torchtitan/config/configs.py), which its README calls frozen.
#include <array>
#include <string_view>

namespace shardplan::interop::torchtitan_flags {

// The release the TOML is written for, and what replaced TOML after it.
inline constexpr std::string_view version = "v0.2.2";
inline constexpr std::string_view version_commit = "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce";
inline constexpr std::string_view toml_removed_commit = "9810191b";

// Sections: the fields of class JobConfig (JC:1005-1024).
inline constexpr std::string_view job = "job";
inline constexpr std::string_view model = "model";
inline constexpr std::string_view training = "training";
inline constexpr std::string_view parallelism = "parallelism";
inline constexpr std::string_view activation_checkpoint = "activation_checkpoint";
inline constexpr std::string_view compile = "compile";
inline constexpr std::string_view quantize = "quantize";  // [quantize.linear.float8] (JC:813, 831)
inline constexpr std::string_view quantize_linear = "linear";
inline constexpr std::string_view float8 = "float8";
inline constexpr std::string_view mx = "mx";
inline constexpr std::string_view fault_tolerance = "fault_tolerance";
// The sections with nothing the cost model depends on (accepted silently, JC:1005-1024).
inline constexpr std::array<std::string_view, 11> silent_sections = {
    "job",  "profiling",         "metrics",      "optimizer",  "lr_scheduler", "checkpoint",
    "comm", "memory_estimation", "experimental", "validation", "debug"};

// [job] (class Job, JC:18-38).
inline constexpr std::string_view config_file = "config_file";  // JC:19, the CLI's --job.config_file
inline constexpr std::string_view dump_folder = "dump_folder";  // JC:22
inline constexpr std::string_view description = "description";  // JC:25

// [model] (class Model, JC:100-130).
inline constexpr std::string_view model_name = "name";                // JC:101, a TrainSpec name
inline constexpr std::string_view model_flavor = "flavor";            // JC:104, a key of its model_args
inline constexpr std::string_view hf_assets_path = "hf_assets_path";  // JC:107
inline constexpr std::string_view converters = "converters";          // JC:118, list[str]

// [training] (class Training, JC:243-308).
inline constexpr std::string_view dataset = "dataset";                                // JC:244
inline constexpr std::string_view local_batch_size = "local_batch_size";              // JC:253, default 8
inline constexpr std::string_view global_batch_size = "global_batch_size";            // JC:256, -1 = local x dp
inline constexpr std::string_view seq_len = "seq_len";                                // JC:261, default 2048
inline constexpr std::string_view steps = "steps";                                    // JC:267, default 10000
inline constexpr std::string_view enable_cpu_offload = "enable_cpu_offload";          // JC:270, FSDP2 CPUOffloadPolicy
inline constexpr std::string_view dtype = "dtype";                                    // JC:275, "float32" | "bfloat16"
inline constexpr std::string_view mixed_precision_param = "mixed_precision_param";    // JC:282, "bfloat16" | "float32"
inline constexpr std::string_view mixed_precision_reduce = "mixed_precision_reduce";  // JC:290, "float32" only
inline constexpr std::string_view bfloat16 = "bfloat16";
inline constexpr std::string_view float32 = "float32";
inline constexpr long long default_steps = 10000;
inline constexpr long long default_local_batch_size = 8;
inline constexpr long long default_seq_len = 2048;

// [parallelism] (class Parallelism, JC:312-483). World size = replicate x shard x cp x tp x pp
// (torchtitan/distributed/parallel_dims.py:47-55); shard -1 takes the rest.
inline constexpr std::string_view dp_replicate = "data_parallel_replicate_degree";  // JC:313, default 1
inline constexpr std::string_view dp_shard = "data_parallel_shard_degree";          // JC:324, default -1
inline constexpr std::string_view fsdp_reshard = "fsdp_reshard_after_forward";      // JC:336
inline constexpr std::string_view tp = "tensor_parallel_degree";                    // JC:351
inline constexpr std::string_view disable_loss_parallel = "disable_loss_parallel";  // JC:354
inline constexpr std::string_view async_tp = "enable_async_tensor_parallel";        // JC:357, needs compile
inline constexpr std::string_view pp = "pipeline_parallel_degree";                  // JC:360
inline constexpr std::string_view pp_fqns = "module_fqns_per_model_part";           // JC:367, list[list[str]]
inline constexpr std::string_view pp_first_less = "pipeline_parallel_first_stage_less_layers";  // JC:377, default 1
inline constexpr std::string_view pp_last_less = "pipeline_parallel_last_stage_less_layers";    // JC:383, default 1
inline constexpr std::string_view pp_layers_per_stage = "pipeline_parallel_layers_per_stage";   // JC:389
inline constexpr std::string_view pp_schedule = "pipeline_parallel_schedule";                // JC:396, default "1F1B"
inline constexpr std::string_view pp_schedule_csv = "pipeline_parallel_schedule_csv";        // JC:405
inline constexpr std::string_view pp_microbatch_size = "pipeline_parallel_microbatch_size";  // JC:412, default 1
inline constexpr std::string_view pp_ep_overlap = "pipeline_parallel_expert_parallel_overlap";  // JC:420
inline constexpr std::string_view cp = "context_parallel_degree";                               // JC:428
inline constexpr std::string_view cp_load_balancer = "context_parallel_load_balancer";          // JC:431
inline constexpr std::string_view cp_rotate_method = "context_parallel_rotate_method";          // JC:446
inline constexpr std::string_view ep = "expert_parallel_degree";                                // JC:454
inline constexpr std::string_view etp = "expert_tensor_parallel_degree";                        // JC:464, 1 or tp
inline constexpr std::string_view ep_comm_backend = "expert_parallel_comm_backend";             // JC:474

// fsdp_reshard_after_forward values (torchtitan/models/llama3/infra/parallelize.py:319-331):
// "default" reshards unless pipeline parallel.
inline constexpr std::string_view reshard_default = "default";
inline constexpr std::string_view reshard_always = "always";  // ZeRO-3
inline constexpr std::string_view reshard_never = "never";    // ZeRO-2 (FSDP1's SHARD_GRAD_OP)

// pipeline_parallel_schedule values: torch.distributed.pipelining.schedules.get_schedule_class
// (case-insensitive; pytorch/pytorch torch/distributed/pipelining/schedules.py). "loop" stage
// placement: global stage chunk * pp + rank (torchtitan/distributed/pipeline_parallel.py:447-462).
inline constexpr std::string_view schedule_1f1b = "1F1B";
inline constexpr std::string_view schedule_interleaved = "Interleaved1F1B";
inline constexpr std::string_view schedule_gpipe = "GPipe";
// distributed/pipeline_parallel.py:25 (ScheduleZBVZeroBubble; pipelining's get_schedule_class name)
inline constexpr std::string_view schedule_zbv = "ZBVZeroBubble";
// distributed/pipeline_parallel.py:24,447-448 (ScheduleDualPipeV, placed in a V)
inline constexpr std::string_view schedule_dualpipev = "DualPipeV";
// The modules generate_llm_fqn_per_model_part splits (pipeline_parallel.py:236-344).
inline constexpr std::string_view fqn_embeddings = "tok_embeddings";
inline constexpr std::string_view fqn_layers = "layers.";
inline constexpr std::string_view fqn_norm = "norm";
inline constexpr std::string_view fqn_output = "output";

// [activation_checkpoint] (class ActivationCheckpoint, JC:651-717;
// torchtitan/distributed/activation_checkpoint.py:159-192).
inline constexpr std::string_view ac_mode = "mode";                             // JC:652, default "selective"
inline constexpr std::string_view ac_selective_option = "selective_ac_option";  // JC:655, default "2"
inline constexpr std::string_view ac_none = "none";
inline constexpr std::string_view ac_selective = "selective";
inline constexpr std::string_view ac_full = "full";
inline constexpr std::string_view ac_memory_budget = "memory_budget";  // needs compile (activation_checkpoint.py:227)
inline constexpr std::string_view ac_option_op = "op";  // per-op SAC; digits N = every N-th block in full
inline constexpr std::string_view ac_default_option = "2";

// [compile] (class Compile, JC:721-727).
inline constexpr std::string_view compile_enable = "enable";
inline constexpr std::string_view compile_components = "components";  // default ["model", "loss"]
inline constexpr std::string_view compile_model = "model";
inline constexpr std::string_view compile_loss = "loss";

// [quantize.linear.float8] (class Float8Linear, JC:731-752) and its converter name
// (torchtitan/components/quantization/float8.py:238; docs/float8.md:16). torchtitan v0.1.0
// (f7084fc7) named the converter "float8" with a top-level [float8] section.
inline constexpr std::string_view converter_float8 = "quantize.linear.float8";
inline constexpr std::string_view converter_float8_v01 = "float8";
inline constexpr std::string_view converter_mx = "quantize.linear.mx";            // mx.py:171, MXFP8 (SM100)
inline constexpr std::string_view converter_grouped_mm = "quantize.grouped_mm.";  // float8.py:239, mx.py:172 (MoE)
inline constexpr std::string_view fsdp_float8_all_gather = "enable_fsdp_float8_all_gather";              // JC:732
inline constexpr std::string_view precompute_float8_scale = "precompute_float8_dynamic_scale_for_fsdp";  // JC:735
inline constexpr std::string_view recipe_name = "recipe_name";  // JC:738: None = tensorwise
inline constexpr std::string_view filter_fqns = "filter_fqns";  // JC:741
inline constexpr std::string_view emulate = "emulate";          // JC:747
inline constexpr std::string_view recipe_tensorwise = "tensorwise";
inline constexpr std::string_view recipe_rowwise = "rowwise";
inline constexpr std::string_view recipe_rowwise_gw_hp = "rowwise_with_gw_hp";

// [fault_tolerance] (class FaultTolerance, JC:885).
inline constexpr std::string_view ft_enable = "enable";

// Keys of the sections the import reads that do not matter to the cost model (accepted silently).
inline constexpr std::array<std::string_view, 3> silent_model_keys = {"hf_assets_path", "tokenizer_path",
                                                                      "print_after_conversion"};  // JC:107-126
inline constexpr std::array<std::string_view, 7> silent_training_keys = {
    "dataset", "dataset_path", "max_norm", "steps", "gc_freq", "gc_debug", "dataloader"};  // JC:244-307
inline constexpr std::array<std::string_view, 5> silent_parallelism_keys = {
    "disable_loss_parallel", "pipeline_parallel_expert_parallel_overlap", "context_parallel_load_balancer",
    "context_parallel_rotate_method", "expert_parallel_comm_backend"};  // JC:354-474
inline constexpr std::array<std::string_view, 7> silent_ac_keys = {"per_op_sac_force_recompute_mm_shapes_by_fqns",
                                                                   "early_stop",
                                                                   "memory_budget",
                                                                   "visualize_memory_budget_pareto",
                                                                   "preserve_rng_state",
                                                                   "determinism_check",
                                                                   "debug"};                       // JC:661-716
inline constexpr std::array<std::string_view, 1> silent_compile_keys = {"backend"};                // JC:727
inline constexpr std::array<std::string_view, 2> silent_float8_keys = {"filter_fqns", "emulate"};  // JC:741-752

// The launch (run_train.sh and multinode_trainer.slurm at v0.2.2): torchrun ... -m
// torchtitan.train --job.config_file <toml>.
inline constexpr std::string_view train_module = "torchtitan.train";
inline constexpr std::string_view config_file_flag = "--job.config_file";
inline constexpr std::string_view alloc_conf_env = "PYTORCH_ALLOC_CONF=expandable_segments:True";

// Model flavors at v0.2.2 (the model_args dicts of torchtitan/models/<name>/__init__.py):
// dim and n_layers as there, experts 0 for a dense model.
struct Flavor {
  std::string_view name;
  std::string_view flavor;
  int n_layers;
  int dim;
  int experts;
};
inline constexpr std::array<Flavor, 19> flavors = {{
    {"llama3", "debugmodel", 6, 256, 0},    {"llama3", "8B", 32, 4096, 0},
    {"llama3", "70B", 80, 8192, 0},         {"llama3", "405B", 126, 16384, 0},
    {"qwen3", "0.6B", 28, 1024, 0},         {"qwen3", "1.7B", 28, 2048, 0},
    {"qwen3", "4B", 36, 2560, 0},           {"qwen3", "8B", 36, 4096, 0},
    {"qwen3", "14B", 40, 5120, 0},          {"qwen3", "32B", 64, 5120, 0},
    {"qwen3", "30B-A3B", 48, 2048, 128},    {"qwen3", "235B-A22B", 94, 4096, 128},
    {"deepseek_v3", "16B", 27, 2048, 64},   {"deepseek_v3", "236B", 60, 5120, 160},
    {"deepseek_v3", "671B", 61, 7168, 256}, {"llama4", "17bx16e", 48, 5120, 16},
    {"llama4", "17bx128e", 48, 5120, 128},  {"gpt_oss", "20b", 24, 2880, 32},
    {"gpt_oss", "120b", 36, 2880, 128},
}};

// shardplan model cards (models/*.json) that are a torchtitan flavor, with the assets folder
// torchtitan's scripts/download_hf_assets.py writes (as the shipped train_configs name it, e.g.
// llama3/train_configs/llama3_70b.toml: "./assets/hf/Llama-3.1-70B").
struct CardFlavor {
  std::string_view card;
  std::string_view name;
  std::string_view flavor;
  std::string_view hf_assets_path;
};
inline constexpr std::array<CardFlavor, 7> card_flavors = {{
    {"llama3.1-8b", "llama3", "8B", "./assets/hf/Llama-3.1-8B"},
    {"llama3.1-70b", "llama3", "70B", "./assets/hf/Llama-3.1-70B"},
    {"llama3.1-405b", "llama3", "405B", "./assets/hf/Llama-3.1-405B"},
    {"qwen3-8b", "qwen3", "8B", "./assets/hf/Qwen3-8B"},
    {"qwen3-30b-a3b", "qwen3", "30B-A3B", "./assets/hf/Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", "qwen3", "235B-A22B", "./assets/hf/Qwen3-235B-A22B"},
    {"deepseek-v3", "deepseek_v3", "671B", "./assets/hf/DeepSeek-V3.1-Base"},
}};

// The flavor named `name` / `flavor`, or nullptr.
inline const Flavor* find_flavor(std::string_view name, std::string_view flavor) {
  for (const auto& f : flavors)
    if (f.name == name && f.flavor == flavor) return &f;
  return nullptr;
}

}  // namespace shardplan::interop::torchtitan_flags
