#pragma once
// AWS NeuronX Distributed (trn1/trn2): a plan as the Llama pretraining example's launch script
// arguments, and such a launch line read back. Names checked against the files and version
// cited in neuron_flags.hpp. Degrees are counted in NeuronCores, as the Neuron SDK counts them.
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "planner/plan.hpp"

namespace shardplan::interop {

// The torchrun line of the NxD Llama example that runs the plan. InputError when the plan is not
// for Trainium or NxD cannot run it (named).
std::string neuron_command_line(const planner::Plan& plan);
std::vector<std::string> neuron_notes(const planner::Plan& plan);

// An NxD launch line or script into a configuration.
ImportResult import_neuron(std::string_view script, const ImportContext& ctx, const std::string& source);

}  // namespace shardplan::interop
