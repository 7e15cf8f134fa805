#pragma once
// Hugging Face Accelerate with FSDP: a plan as the YAML `accelerate config` writes plus the
// `accelerate launch` line, and such a YAML read back. Names checked against the file and
// version cited in accelerate_flags.hpp.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "formats/plan.hpp"

namespace shardplan::interop {

// The Accelerate config (YAML, keys sorted as `accelerate config` writes them), its notes as
// leading `#` comments. distributed_type FSDP, fsdp_version 2 (FSDP1 only for ZeRO 0 without
// tp/cp: NO_SHARD); fsdp_reshard_after_forward true for ZeRO-3, false for ZeRO-1/2;
// parallelism_config (dp_replicate/dp_shard/tp/cp sizes) for tp, cp or a sharding group smaller
// than dp (HSDP); fsdp_activation_checkpointing for full recompute; fsdp_offload_params for
// optimizer offload; mixed_precision bf16/fp16/no, or fp8 with an fp8_config (TE for delayed
// scaling, torchao for tensorwise). InputError (naming the setting) when Accelerate + FSDP cannot
// run the plan: pipeline or expert parallelism, Ulysses context parallelism, context parallelism
// without SDPA, ZeRO 0 with tp/cp over several replicas, a sharding group of 1, Neuron devices.
std::string accelerate_yaml(const formats::Plan& plan);
// What the YAML cannot carry (one line each): LoRA / QLoRA (PEFT in the script), batch sizes,
// attention kind, approximations (ZeRO-1 as ZeRO-2, FSDP's offload of parameters and gradients,
// selective recompute, ...). Same InputError as accelerate_yaml.
std::vector<std::string> accelerate_notes(const formats::Plan& plan);
// `accelerate launch --config_file <config_path> --num_processes P <script>` on one node;
// `accelerate launch --config_file <config_path> --num_machines N --num_processes P --machine_rank
// "$MACHINE_RANK" --main_process_ip "$MAIN_PROCESS_IP" --main_process_port 29500 <script>` on N > 1
// (P is the total over the nodes; the two variables are expanded on each node, on purpose).
// config_path and script are shell-quoted; one line, no trailing newline. `script` is the user's
// training script (e.g. "train.py"). InputError for an empty path or a plan accelerate_yaml refuses.
std::string accelerate_command_line(const formats::Plan& plan, const std::string& config_path,
                                    const std::string& script = "train.py");

// An Accelerate config (YAML text) into a configuration; errors are InputError naming `source`,
// the line:column and the key. distributed_type FSDP (fsdp_version 1: fsdp_sharding_strategy,
// names or 1..5, else FULL_SHARD as accelerate launch runs it; HYBRID_SHARD* shard within a node;
// fsdp_version 2: fsdp_reshard_after_forward bool and parallelism_config sizes), MULTI_GPU and the
// other MULTI_* types (plain DDP: ZeRO 0), NO (one process); DEEPSPEED is refused with a pointer
// to the ds_config import. num_processes must equal ctx.devices; the micro-batch size comes from
// ctx (1 with a warning when 0) and gradient accumulation is taken as 1 (warning). Unknown keys
// and approximations are warnings.
ImportResult import_accelerate(std::string_view yaml, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
