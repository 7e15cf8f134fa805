#pragma once
// The layout flags `shardplan simulate` and `shardplan runs import` share: the model, the
// cluster and every configuration setting (--tp ... --lora-base), or a DeepSpeed / SageMaker
// file to import them from (--import).
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "frameworks/framework_model.hpp"
#include "simulator/hardware_profile.hpp"
#include "simulator/model_spec.hpp"
#include "simulator/parallel_config.hpp"

namespace shardplan::cli {

struct LayoutOptions {
  std::string model, hardware;
  int nodes = 1, devices_per_node = 0;
  int tp = 1, pp = 1, dp = 0, zero = 0, sharding_degree = 0;
  int cp = 1, ep = 1, etp = 0;
  std::string cp_kind = "ring";
  double moe_capacity_factor = 0;
  std::optional<int> micro_batch_size;  // absent: 1 (or the imported file's)
  int global_batch_size = 0;
  std::optional<int> seq_len;
  std::string schedule = "1f1b", recompute = "none", precision = "bf16", mixed_precision = "master_weights",
              rank_order = "tp-dp-pp";
  std::string attention = "flash", zero3_fetch = "prefetch", fp8 = "none", fusion = "eager", grad_accum = "param";
  bool fp8_param_gather = false, tp_comm_overlap = false;
  int virtual_stages = 1, recompute_num_layers = 0, recompute_every = 0, packed_document_tokens = 0;
  bool sequence_parallel = false, offload_activations = false, offload_optimizer = false;
  int lora_rank = 0;
  double lora_alpha = 16, lora_dropout = 0, headroom = 0.05;
  std::string lora_targets, partition, lora_base = "bf16";
  std::string import_file;
  std::string framework;        // --framework NAME[@VERSION]; "" = the --import file's, else none
  std::set<std::string> given;  // config keys the user set on the command line (framework defaults skip them)
};

// Registers --model, --hardware, --import, --nodes, --devices-per-node and the configuration
// flags on `cmd`.
void add_layout_options(CLI::App* cmd, LayoutOptions& o);

struct Layout {
  simulator::ModelSpec model;
  simulator::ClusterSpec cluster;
  simulator::ParallelConfig config;  // not validated: simulate() and the runs reader do that
  std::optional<frameworks::FrameworkModel> framework;
};

// Loads the model and hardware (`adjust` may change the profile before the configuration is
// derived from it), then the configuration from the flags or the --import file; --framework (or
// the imported file's framework) fills what neither states with its defaults and binds its
// terms; --partition auto|auto-memory runs the auto-partitioner. InputError on a missing --model / --hardware
// (`missing_hint` is appended, e.g. " (or --plan plan.json)").
Layout resolve_layout(const LayoutOptions& o, const std::function<void(simulator::HardwareProfile&)>& adjust = {},
                      const std::string& missing_hint = "");

}  // namespace shardplan::cli
