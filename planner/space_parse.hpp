#pragma once
// The search space as text: the list-valued flags and configuration specs that `shardplan plan`
// and the GUI read ("1-8", "bf16,fp16", "auto", "tp=8,pp=1,zero=1"), parsed once, here, into the
// planner's types. Errors are simulator::InputError naming the flag.
#include <string>
#include <utility>
#include <vector>

#include "search.hpp"
#include "simulator/errors.hpp"

namespace shardplan::planner {

std::vector<std::string> split_list(const std::string& s);
// One name of an enum's table (simulator/enum_names.hpp); InputError "FLAG: expected a, b or c,
// got 'x'" otherwise.
template <typename E>
E parse_name(const std::string& flag, const std::string& s) {
  if (const auto v = simulator::enum_from_name<E>(s)) return *v;
  throw simulator::InputError(simulator::bad_name_message<E>(flag, s));
}
// "16", "8,16,64" or (allow_range) "8-64" = powers of two from 8 to 64. Throws InputError.
std::vector<int> parse_int_list(const std::string& flag, const std::string& s, bool allow_range);
std::vector<simulator::PipelineSchedule> parse_schedules(const std::string& s);
std::vector<simulator::Recompute> parse_recomputes(const std::string& s);
std::vector<simulator::Precision> parse_precisions(const std::string& s);
// --mixed-precision: master_weights | autocast.
simulator::MixedPrecision parse_mixed_precision(const std::string& s);
// --attention: flash | flash1 | eager.
simulator::AttentionKind parse_attention(const std::string& s);
simulator::Fusion parse_fusion(const std::string& s);
simulator::GradAccumDtype parse_grad_accum_dtype(const std::string& s);
// Comma-separated FP8 recipes (none, delayed, tensorwise, blockwise), deduplicated.
std::vector<simulator::Fp8Recipe> parse_fp8_recipes(const std::string& s);
// The FP8 recipes a plan searches: "auto" = none and delayed where the device has FP8 tensor
// cores, else none; a list naming a recipe other than none on a device without them is refused.
std::vector<simulator::Fp8Recipe> fp8_search_list(const std::string& s, const simulator::HardwareProfile& hw);
// --cp: "auto" = 1, 2, 4 and 8 for sequences of 8K tokens and more (1 below: context parallelism
// pays off on long sequences), or a list of degrees.
std::vector<int> cp_search_list(const std::string& s, int seq_len);
// --ep: "auto" = 1 and every power of two dividing an MoE model's expert count (1 for dense
// models), or a list; a degree above 1 on a dense model is refused.
std::vector<int> ep_search_list(const std::string& s, const simulator::ModelSpec& m);

// "nodes=1,tp=8,pp=1,zero=1,mbs=2,gbs=64,schedule=1f1b,v=2,recompute=full,sp,offload-optimizer,
// offload-activations,shard=4,precision=bf16,attention=eager": unspecified fields come from the
// search space (SearchSpace::base_config).
std::pair<simulator::ClusterSpec, simulator::ParallelConfig> parse_config_spec(const std::string& spec,
                                                                               const simulator::ModelSpec& model,
                                                                               const simulator::HardwareProfile& hw,
                                                                               const SearchSpace& space,
                                                                               const Constraints& constraints);

}  // namespace shardplan::planner
