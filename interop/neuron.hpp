#pragma once
// AWS NeuronX Distributed (trn1/trn2): a plan as the Llama pretraining example's launch script
// arguments, and such a launch line read back. Names checked against the files and version
// cited in neuron_flags.hpp. Degrees are counted in NeuronCores, as the Neuron SDK counts them.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "formats/plan.hpp"

namespace shardplan::interop {

// The torchrun line of the NxD Llama example that runs the plan, with the environment its
// launcher exports and checks for the variables the user must set (DATA_PATH; NODE_RANK and
// MASTER_ADDR on several nodes), notes first as '# ' comments: tp_zero1_llama_hf_pretrain.py for
// pp 1, run_llama_nxd.py (tp_pp) otherwise. InputError when the plan is not for Trainium counted
// in NeuronCores (a trn1.32xlarge plan counts chips and is refused, not converted), or NxD cannot
// run it: experts or a non-Llama model, ZeRO-2/3, LoRA, FP8, a precision other than bf16, offload,
// all-to-all context parallelism (NxD's is ring attention).
std::string neuron_command_line(const formats::Plan& plan);
// What the line cannot express (one line each).
std::vector<std::string> neuron_notes(const formats::Plan& plan);

// An NxD launch line or script into a configuration: a bare torchrun line, the script
// neuron_command_line writes, or the shipped launchers with their shell variables (TP_DEGREE,
// `: ${GBS:=1024}`, BS=$(($GBS / $DP)), EXTRA_ARGS+=...; DP is the cluster's). Warnings for the
// scripts' defaults used, model-shape overrides, KV replication and unknown flags.
ImportResult import_neuron(std::string_view script, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
