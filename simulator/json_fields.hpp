#pragma once
// Reading typed, unit-carrying fields from JSON with one-line errors that name the file and
// the field. Units live in the key (`memory_bytes`, `memory_GiB`, `bandwidth_GBps`,
// `latency_us`, `peak_TFLOPs`); a quantity is converted to SI exactly once, here.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "enum_names.hpp"

namespace shardplan::simulator {

enum class Quantity { bytes, bytes_per_second, seconds, flops_per_second, bits_per_second_as_bytes };

// Context for error messages: "<file>: field '<path>'".
struct JsonContext {
  std::string file;    // file name shown to the user
  std::string prefix;  // dotted path of the object being read, e.g. "device"
  [[nodiscard]] std::string path(std::string_view key) const;
  [[nodiscard]] JsonContext child(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, std::string_view expected) const;
};

// A required JSON object member.
const nlohmann::json& require(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);

double get_number(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);
double get_positive(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);
double get_non_negative(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);
long long get_positive_int(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);
long long get_int_or(const nlohmann::json& obj, std::string_view key, long long fallback, const JsonContext& ctx);
double get_number_or(const nlohmann::json& obj, std::string_view key, double fallback, const JsonContext& ctx);
bool get_bool_or(const nlohmann::json& obj, std::string_view key, bool fallback, const JsonContext& ctx);
std::string get_string(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx);
std::string get_string_or(const nlohmann::json& obj, std::string_view key, std::string fallback,
                          const JsonContext& ctx);

// An enum field read by its name table (enum_names.hpp): `fallback` when absent or empty, else
// one of the table's names; anything else fails naming the field and the names.
template <typename E>
E get_enum_or(const nlohmann::json& obj, std::string_view key, E fallback, const JsonContext& ctx) {
  const std::string v = get_string_or(obj, key, "", ctx);
  if (v.empty()) return fallback;
  if (const auto e = enum_from_name<E>(v)) return *e;
  ctx.fail(key, enum_names_list<E>(" or ", " or ") + " (got '" + v + "')");
}
// The same, required.
template <typename E>
E get_enum(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  const std::string v = get_string(obj, key, ctx);
  if (const auto e = enum_from_name<E>(v)) return *e;
  ctx.fail(key, enum_names_list<E>(" or ", " or ") + " (got '" + v + "')");
}

// "memory_GiB" -> "memory": the quantity a unit-suffixed key names; "" if the key carries no
// known unit suffix (the suffixes get_quantity accepts).
std::string quantity_base(const std::string& key);

// A physical quantity stored under `<base>_<unit>`; exactly one unit variant must be present
// (when required) and the value must be > 0 (or >= 0 when allow_zero). Returns SI units.
//   bytes:             _bytes, _KiB, _MiB, _GiB, _GB, _TB
//   bytes_per_second:  _GBps, _GiBps, _MBps, _Gbps (bits), _bytes_per_s
//   seconds:           _s, _ms, _us, _ns
//   flops_per_second:  _TFLOPs, _GFLOPs, _FLOPs
std::optional<double> get_quantity(const nlohmann::json& obj, std::string_view base, Quantity q, const JsonContext& ctx,
                                   bool required = true, bool allow_zero = false);

// Parse a whole JSON file; errors name the file and the line.
nlohmann::json read_json_file(const std::string& path);
// The same for text already in memory (`name` starts the error): comments allowed; bad syntax and
// numbers beyond double (1e309) are one InputError "<name>: invalid JSON: ...".
nlohmann::json parse_json_text(std::string_view text, const std::string& name);
// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const nlohmann::json::exception& e);

// Write text atomically: temp file in the same directory, fsync, rename.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace shardplan::simulator
