#pragma once
// Helpers shared by the DeepSpeed and SageMaker importers (config_import.hpp). Internal.
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config_import.hpp"
#include "simulator/json_fields.hpp"

namespace shardplan::interop::import_detail {

// The context itself: devices > 0, seq_len > 0, non-negative overrides.
void check_context(const ImportContext& ctx, const std::string& source);

// An optional integer field (absent or null = nullopt) that must be >= `min` when present.
std::optional<long long> optional_int(const nlohmann::json& obj, std::string_view key, long long min,
                                      const simulator::JsonContext& jc);

// A parallel degree: the file's (`from_file`, field `key`) or the context's (`from_ctx`, 0 =
// unset); they must agree when both are given. Defaults to 1.
int resolve_degree(std::optional<long long> from_file, int from_ctx, std::string_view key, const char* what,
                   const simulator::JsonContext& jc);

// devices / (tp x pp), InputError naming the fields when it does not divide.
int data_parallel(const ImportContext& ctx, int tp, int pp, std::string_view tp_key, std::string_view pp_key,
                  const simulator::JsonContext& jc);

// A warning per key of `obj` in neither `read` (what the importer uses) nor `silent` (settings
// the cost model does not depend on).
void warn_unknown_keys(const nlohmann::json& obj, const simulator::JsonContext& jc,
                       std::initializer_list<std::string_view> read, std::initializer_list<std::string_view> silent,
                       std::vector<std::string>& warnings);

// Warnings about the chosen layout (tp spanning nodes).
void warn_layout(const ImportContext& ctx, const simulator::ParallelConfig& cfg, std::vector<std::string>& warnings);

}  // namespace shardplan::interop::import_detail
