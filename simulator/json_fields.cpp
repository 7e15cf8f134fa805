#include "json_fields.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "errors.hpp"

namespace shardplan::simulator {

namespace {
constexpr const char* kUnitSuffixes[] = {"bytes", "KiB",   "MiB",    "GiB",    "KB",     "MB",          "GB", "TB",
                                         "GBps",  "GiBps", "MBps",   "TBps",   "Gbps",   "bytes_per_s", "s",  "ms",
                                         "us",    "ns",    "TFLOPs", "GFLOPs", "PFLOPs", "FLOPs"};
}  // namespace

std::string quantity_base(const std::string& key) {
  for (const char* u : kUnitSuffixes) {
    std::string suffix = std::string("_") + u;
    if (key.size() > suffix.size() && key.ends_with(suffix)) return key.substr(0, key.size() - suffix.size());
  }
  return {};
}

namespace {

struct UnitScale {
  const char* suffix;
  double to_si;
};

constexpr UnitScale kBytes[] = {{"bytes", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                {"KB", 1e3},    {"MB", 1e6},     {"GB", 1e9},        {"TB", 1e12}};
constexpr UnitScale kBandwidth[] = {{"GBps", 1e9},  {"GiBps", 1073741824.0}, {"MBps", 1e6},
                                    {"TBps", 1e12}, {"Gbps", 1e9 / 8.0},     {"bytes_per_s", 1.0}};
constexpr UnitScale kSeconds[] = {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
constexpr UnitScale kFlops[] = {{"TFLOPs", 1e12}, {"GFLOPs", 1e9}, {"PFLOPs", 1e15}, {"FLOPs", 1.0}};

template <std::size_t N>
std::optional<double> find_scaled(const nlohmann::json& obj, std::string_view base, const UnitScale (&units)[N],
                                  const JsonContext& ctx, std::string* found_key) {
  std::optional<double> out;
  for (const auto& u : units) {
    std::string key = std::string(base) + "_" + u.suffix;
    auto it = obj.find(key);
    if (it == obj.end()) continue;
    if (out) ctx.fail(key, "only one unit variant of '" + std::string(base) + "_*'");
    if (!it->is_number()) ctx.fail(key, "a number");
    out = it->get<double>() * u.to_si;
    *found_key = key;
  }
  return out;
}

template <std::size_t N>
std::string unit_list(std::string_view base, const UnitScale (&units)[N]) {
  std::string s;
  for (const auto& u : units) {
    if (!s.empty()) s += " or ";
    s += std::string(base) + "_" + u.suffix;
  }
  return s;
}

}  // namespace

std::string JsonContext::path(std::string_view key) const {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

JsonContext JsonContext::child(std::string_view key) const { return {file, path(key)}; }

void JsonContext::fail(std::string_view key, std::string_view expected) const {
  throw InputError(file + ": field '" + path(key) + "': expected " + std::string(expected));
}

const nlohmann::json& require(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  if (!obj.is_object()) ctx.fail(key, "a JSON object around it");
  auto it = obj.find(std::string(key));
  if (it == obj.end()) ctx.fail(key, "a value (it is missing)");
  return *it;
}

double get_number(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  const auto& v = require(obj, key, ctx);
  if (!v.is_number()) ctx.fail(key, "a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) ctx.fail(key, "a finite number");
  return d;
}

double get_positive(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  double d = get_number(obj, key, ctx);
  if (!(d > 0)) ctx.fail(key, "a number > 0");
  return d;
}

double get_non_negative(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  double d = get_number(obj, key, ctx);
  if (d < 0) ctx.fail(key, "a number >= 0");
  return d;
}

long long get_positive_int(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  const auto& v = require(obj, key, ctx);
  if (!v.is_number_integer() || v.get<long long>() <= 0) ctx.fail(key, "an integer > 0");
  return v.get<long long>();
}

long long get_int_or(const nlohmann::json& obj, std::string_view key, long long fallback, const JsonContext& ctx) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) ctx.fail(key, "an integer");
  return it->get<long long>();
}

double get_number_or(const nlohmann::json& obj, std::string_view key, double fallback, const JsonContext& ctx) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return fallback;
  return get_number(obj, key, ctx);
}

bool get_bool_or(const nlohmann::json& obj, std::string_view key, bool fallback, const JsonContext& ctx) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) ctx.fail(key, "true or false");
  return it->get<bool>();
}

std::string get_string(const nlohmann::json& obj, std::string_view key, const JsonContext& ctx) {
  const auto& v = require(obj, key, ctx);
  if (!v.is_string()) ctx.fail(key, "a string");
  return v.get<std::string>();
}

std::string get_string_or(const nlohmann::json& obj, std::string_view key, std::string fallback,
                          const JsonContext& ctx) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) ctx.fail(key, "a string");
  return it->get<std::string>();
}

std::optional<double> get_quantity(const nlohmann::json& obj, std::string_view base, Quantity q, const JsonContext& ctx,
                                   bool required, bool allow_zero) {
  if (!obj.is_object()) ctx.fail(base, "a JSON object around it");
  std::string key;
  std::optional<double> v;
  std::string expected;
  switch (q) {
    case Quantity::bytes:
      v = find_scaled(obj, base, kBytes, ctx, &key);
      expected = unit_list(base, kBytes);
      break;
    case Quantity::bytes_per_second:
    case Quantity::bits_per_second_as_bytes:
      v = find_scaled(obj, base, kBandwidth, ctx, &key);
      expected = unit_list(base, kBandwidth);
      break;
    case Quantity::seconds:
      v = find_scaled(obj, base, kSeconds, ctx, &key);
      expected = unit_list(base, kSeconds);
      break;
    case Quantity::flops_per_second:
      v = find_scaled(obj, base, kFlops, ctx, &key);
      expected = unit_list(base, kFlops);
      break;
  }
  if (!v) {
    if (required) ctx.fail(std::string(base) + "_*", "one of " + expected + " (it is missing)");
    return std::nullopt;
  }
  if (!std::isfinite(*v) || *v < 0 || (!allow_zero && *v == 0))
    ctx.fail(key, allow_zero ? "a number >= 0" : "a number > 0");
  return v;
}

std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string msg = e.what();
  const auto end = msg.rfind("] ", msg.find(' '));  // "[json.exception.parse_error.101] parse error at ..."
  return msg.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? msg.substr(end + 2) : msg;
}

nlohmann::json parse_json_text(std::string_view text, const std::string& name) {
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range 406 (number overflow)
    throw InputError(name + ": invalid JSON: " + json_error_text(e));
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), path);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string name = target.filename().string();
  name.insert(0, 1, '.');
  name.append(".tmpXXXXXX");
  std::string tmpl = (dir / name).string();
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw InputError(path + ": cannot create a temporary file in " + dir.string());
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw InputError(path + ": write failed");
    }
    done += static_cast<std::size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    throw InputError(path + ": fsync/close failed");
  }
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    ::unlink(tmpl.c_str());
    throw InputError(path + ": cannot rename temporary file into place");
  }
}

}  // namespace shardplan::simulator
