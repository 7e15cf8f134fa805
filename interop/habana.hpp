#pragma once
// Optimum-Habana on Gaudi: a plan as the `gaudi_spawn.py ... --use_deepspeed run_lora_clm.py ...`
// (or run_clm.py) command of the Llama-2-70B LoRA example plus its DeepSpeed JSON, and such a
// command read back. Names checked against the files and version cited in habana_flags.hpp.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "formats/plan.hpp"

namespace shardplan::interop {

// The command (bash, shell-quoted for the outer shell and for the second one gaudi_spawn.py
// starts) that runs the plan; `ds_config_path` is where the DeepSpeed JSON is written. InputError
// when the plan is not for Gaudi or Optimum-Habana cannot run it: tensor, pipeline or expert
// parallelism, ring context parallelism (its context parallelism is DeepSpeed-Ulysses), fp16,
// QLoRA, or a string a multi-node run cannot pass through DeepSpeed's pdsh runner.
std::string habana_command_line(const formats::Plan& plan, const std::string& ds_config_path);
// The DeepSpeed JSON the command passes with --deepspeed: llama2_ds_zero3_config.json's keys with
// the plan's ZeRO stage, bf16, offload and MiCS shard size; the batch sizes stay "auto" (filled by
// the Trainer from the command).
nlohmann::json habana_deepspeed_config(const formats::Plan& plan);
std::vector<std::string> habana_notes(const formats::Plan& plan);

// An Optimum-Habana command (script text) into a configuration; its --deepspeed JSON, when the
// command names one, is read from `ds_config` (null: not given; InputError when the command names
// one). "auto" values are filled from the command; numbers must agree with it.
ImportResult import_habana(std::string_view script, const nlohmann::json& ds_config, const ImportContext& ctx,
                           const std::string& source);

}  // namespace shardplan::interop
