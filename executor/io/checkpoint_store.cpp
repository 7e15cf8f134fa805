#include "executor/io/checkpoint_store.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"
#include "simulator/json_fields.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace shardplan::executor::io {
namespace {

constexpr const char* kPartialSuffix = ".partial";

std::string step_name(int64_t step) {
  EXECUTOR_CHECK(step >= 0, "checkpoint step must be >= 0, got " + std::to_string(step));
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

// Parses "step-<digits>" / "step-<digits>.partial" exactly as step_name() writes them.
bool parse_entry_name(const std::string& name, int64_t& step, bool& partial) {
  partial = name.size() > std::char_traits<char>::length(kPartialSuffix) && name.ends_with(kPartialSuffix);
  const std::string base =
      partial ? name.substr(0, name.size() - std::char_traits<char>::length(kPartialSuffix)) : name;
  if (!base.starts_with("step-") || base.size() < 13 || base.size() > 23) return false;
  const std::string digits = base.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  step = std::stoll(digits);
  return step_name(step) == base;
}

// A shard file must stay inside its step directory.
bool is_safe_relative(const std::string& file) {
  const fs::path p(file);
  if (file.empty() || p.is_absolute() || file == kManifestFile) return false;
  return std::all_of(p.begin(), p.end(), [](const fs::path& c) { return !c.empty() && c != "." && c != ".."; });
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// One shard line of a manifest, validated (it comes from disk).
bool parse_shard(const json& s, size_t i, ShardRecord& out, std::string& why) {
  auto non_negative = [&](const char* key) {
    return s.contains(key) && s[key].is_number_integer() && (s[key].is_number_unsigned() || s[key].get<int64_t>() >= 0);
  };
  const bool ok = s.is_object() && s.contains("file") && s["file"].is_string() && non_negative("bytes") &&
                  non_negative("crc32") && s["crc32"].get<uint64_t>() <= 0xffffffffULL;
  if (!ok) {
    why = "manifest.json: shards[" + std::to_string(i) +
          "]: expected {\"file\": string, \"bytes\": integer >= 0, "
          "\"crc32\": 32-bit unsigned integer}, found " +
          s.dump();
    return false;
  }
  out = {s["file"].get<std::string>(), s["bytes"].get<uint64_t>(), static_cast<uint32_t>(s["crc32"].get<uint64_t>())};
  if (!is_safe_relative(out.file)) {
    why = "manifest.json: shards[" + std::to_string(i) + "]: file '" + out.file +
          "' must be a relative path inside the checkpoint directory";
    return false;
  }
  return true;
}

// Size first (cheap, catches truncation), then the CRC-32 of the whole file.
bool check_shard(const std::string& dir, const ShardRecord& r, std::string& why) {
  const std::string path = (fs::path(dir) / r.file).string();
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) {
    why = "shard " + r.file + ": missing or unreadable (" + ec.message() + ")";
    return false;
  }
  if (size != r.bytes) {
    why = "shard " + r.file + ": truncated or wrong size (expected " + std::to_string(r.bytes) + " bytes, found " +
          std::to_string(size) + ")";
    return false;
  }
  FileDigest d;
  try {
    d = file_digest(path);
  } catch (const InputError& e) {
    why = "shard " + r.file + ": " + e.what();
    return false;
  }
  if (d.bytes != r.bytes || d.crc32 != r.crc32) {
    why = "shard " + r.file + ": checksum mismatch (expected crc32 " + hex32(r.crc32) + " over " +
          std::to_string(r.bytes) + " bytes, found " + hex32(d.crc32) + " over " + std::to_string(d.bytes) + ")";
    return false;
  }
  return true;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string root) : root_(std::move(root)) {
  EXECUTOR_CHECK(!root_.empty(), "CheckpointStore: empty root directory");
}

std::string CheckpointStore::step_dir(int64_t step) const { return (fs::path(root_) / step_name(step)).string(); }

std::string CheckpointStore::partial_dir(int64_t step) const { return step_dir(step) + kPartialSuffix; }

std::string CheckpointStore::prepare(int64_t step) {
  const std::string dir = partial_dir(step);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) throw InputError(dir + ": cannot remove the stale partial checkpoint: " + ec.message());
  make_dirs(dir);
  fsync_dir(root_);
  return dir;
}

std::string CheckpointStore::begin(int64_t step) {
  const std::string dir = partial_dir(step);
  make_dirs(dir);
  return dir;
}

ShardRecord CheckpointStore::write_shard(int64_t step, const std::string& file, const SafetensorsWriter& w) {
  EXECUTOR_CHECK(is_safe_relative(file), "CheckpointStore::write_shard: shard file '" + file +
                                             "' must be a relative path inside the step directory");
  const std::string dir = partial_dir(step);
  if (!fs::is_directory(dir)) {
    throw InputError(dir + ": partial checkpoint directory does not exist; rank 0 must call prepare(" +
                     std::to_string(step) + ") before shards are written");
  }
  const fs::path target = fs::path(dir) / file;
  if (target.parent_path() != fs::path(dir)) make_dirs(target.parent_path().string());
  const SafetensorsWriter::Written written = w.write(target.string());
  return {file, written.bytes, written.crc32};
}

void CheckpointStore::commit(int64_t step, const std::vector<ShardRecord>& shards, const json& state, int keep_last) {
  const std::string dir = partial_dir(step);
  if (!fs::is_directory(dir)) {
    throw InputError(dir + ": cannot commit step " + std::to_string(step) +
                     ": the partial checkpoint directory does not exist");
  }
  json list = json::array();
  std::set<std::string> seen;
  for (const ShardRecord& r : shards) {
    EXECUTOR_CHECK(is_safe_relative(r.file), "CheckpointStore::commit: bad shard file '" + r.file + "'");
    EXECUTOR_CHECK(seen.insert(r.file).second, "CheckpointStore::commit: shard '" + r.file + "' listed twice");
    const std::string path = (fs::path(dir) / r.file).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) throw InputError(path + ": shard listed for commit is missing (" + ec.message() + ")");
    if (size != r.bytes) {
      throw InputError(path + ": shard has " + std::to_string(size) + " bytes, its record says " +
                       std::to_string(r.bytes));
    }
    list.push_back({{"file", r.file}, {"bytes", r.bytes}, {"crc32", r.crc32}});
  }
  const json manifest = {{"schema", kCheckpointSchema}, {"step", step}, {"shards", std::move(list)}, {"state", state}};
  atomic_write_file((fs::path(dir) / kManifestFile).string(), manifest.dump(2) + "\n");  // last
  replace_dir(dir, step_dir(step));
  prune(step, keep_last);
}

std::vector<CheckpointStore::Entry> CheckpointStore::scan() const {
  std::vector<Entry> out;
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_directory(ec2)) continue;
    int64_t step = 0;
    bool partial = false;
    if (parse_entry_name(it->path().filename().string(), step, partial)) {
      out.push_back({step, it->path().string(), partial});
    }
  }
  // Ascending by step; for one step the partial sorts after the complete one.
  std::sort(out.begin(), out.end(),
            [](const Entry& a, const Entry& b) { return std::pair(a.step, a.partial) < std::pair(b.step, b.partial); });
  return out;
}

std::optional<json> CheckpointStore::load_manifest(const std::string& dir, int64_t step, std::string& why) const {
  const std::string path = (fs::path(dir) / kManifestFile).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "manifest.json missing or unreadable (incomplete checkpoint)";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  json m;
  try {
    m = json::parse(text.str());
  } catch (const json::exception& e) {  // parse_error, or out_of_range 406 (number overflow)
    why = "manifest.json is not valid JSON (" + simulator::json_error_text(e) + ")";
    return std::nullopt;
  }
  if (!m.is_object() || !m.contains("schema") || m["schema"] != kCheckpointSchema) {
    why = std::string("manifest.json: schema: expected \"") + kCheckpointSchema + "\"";
    return std::nullopt;
  }
  if (!m.contains("step") || !m["step"].is_number_integer() || m["step"].get<int64_t>() != step) {
    why = "manifest.json: step: expected " + std::to_string(step) + " (the directory's step)";
    return std::nullopt;
  }
  if (!m.contains("shards") || !m["shards"].is_array()) {
    why = "manifest.json: shards: expected an array";
    return std::nullopt;
  }
  return m;
}

std::vector<int64_t> CheckpointStore::complete_steps() const {
  std::vector<int64_t> steps;
  for (const Entry& e : scan()) {
    std::string why;
    if (!e.partial && load_manifest(e.path, e.step, why)) steps.push_back(e.step);
  }
  return steps;
}

bool CheckpointStore::verify(const std::string& dir, const json& manifest, const std::vector<std::string>& only_files,
                             std::string& why) const {
  if (!manifest.is_object() || !manifest.contains("shards") || !manifest["shards"].is_array()) {
    why = "manifest.json: shards: expected an array";
    return false;
  }
  std::map<std::string, ShardRecord> listed;
  for (size_t i = 0; i < manifest["shards"].size(); ++i) {
    ShardRecord r;
    if (!parse_shard(manifest["shards"][i], i, r, why)) return false;
    listed[r.file] = r;
  }
  std::vector<const ShardRecord*> targets;
  if (only_files.empty()) {
    for (const auto& [file, r] : listed) targets.push_back(&r);
  }
  for (const std::string& f : only_files) {
    const auto it = listed.find(f);
    if (it == listed.end()) {
      why = "shard " + f + ": not listed in manifest.json";
      return false;
    }
    targets.push_back(&it->second);
  }
  return std::all_of(targets.begin(), targets.end(), [&](const ShardRecord* r) { return check_shard(dir, *r, why); });
}

std::optional<CheckpointStore::Loaded> CheckpointStore::latest_valid(const std::vector<std::string>& only_files,
                                                                     std::vector<std::string>& warnings) const {
  const std::vector<Entry> entries = scan();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->partial) {
      warnings.push_back(it->path + ": never committed (incomplete checkpoint); ignoring");
      continue;
    }
    std::string why;
    std::optional<json> manifest = load_manifest(it->path, it->step, why);
    if (manifest && verify(it->path, *manifest, only_files, why)) {
      return Loaded{it->step, it->path, std::move(*manifest)};
    }
    warnings.push_back(it->path + ": " + why + "; skipping");
  }
  return std::nullopt;
}

// Best effort: the commit has already succeeded, so a directory that cannot be removed is left
// for the next commit to try again rather than reported as a failed checkpoint.
void CheckpointStore::prune(int64_t committed_step, int keep_last) const {
  const std::vector<Entry> entries = scan();
  std::vector<const Entry*> complete;
  bool removed = false;
  for (const Entry& e : entries) {
    std::string why;
    if (e.partial && e.step < committed_step) {
      std::error_code ec;
      removed |= fs::remove_all(e.path, ec) > 0;
    } else if (!e.partial && load_manifest(e.path, e.step, why)) {
      complete.push_back(&e);
    }
  }
  if (keep_last > 0 && complete.size() > static_cast<size_t>(keep_last)) {
    const size_t excess = complete.size() - static_cast<size_t>(keep_last);
    for (size_t i = 0; i < excess; ++i) {
      if (complete[i]->step == committed_step) continue;
      std::error_code ec;
      removed |= fs::remove_all(complete[i]->path, ec) > 0;
    }
  }
  if (removed) {
    try {
      fsync_dir(root_);
    } catch (const InputError&) {
      // Durability of a deletion is not worth failing a committed checkpoint for.
    }
  }
}

}  // namespace shardplan::executor::io
