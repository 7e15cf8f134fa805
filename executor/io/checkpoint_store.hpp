#pragma once
// The checkpoint directory protocol: sharded, atomic, checksummed (no MPI, no LibTorch).
//   <root>/step-00001200/          a complete checkpoint: shard files + manifest.json (written
//                                  last). Only directories named step-<8+ digits> whose manifest
//                                  parses count as complete.
//   <root>/step-00001200.partial/  one being written; renamed to the final name on commit, so a
//                                  crash at any point leaves the previous checkpoint intact.
// Protocol for a multi-rank job (the caller does the collectives):
//   rank 0: prepare(step)           — removes a stale partial of this step, creates it
//   barrier
//   every rank: write_shard(step, "rank-00003.safetensors", writer) -> ShardRecord
//   gather the records to rank 0
//   rank 0: commit(step, records, state, keep_last) — manifest, rename, prune
// begin(step) only creates the partial directory (idempotent, never cleans), so any rank may
// call it concurrently; stale files in it are harmless because only the shards listed in the
// manifest belong to the checkpoint. partial_dir(step) only names it.
// Loading: latest_valid(files this rank reads, warnings) returns the newest checkpoint whose
// listed shards have the recorded size and CRC-32, skipping (with a warning line each)
// corrupt, truncated or manifest-less ones.
// manifest.json: {"schema": "shardplan.checkpoint/1", "step": N,
//                 "shards": [{"file", "bytes", "crc32"}], "state": <caller JSON>}
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "executor/io/safetensors.hpp"

namespace shardplan::executor::io {

inline constexpr const char* kCheckpointSchema = "shardplan.checkpoint/1";
inline constexpr const char* kManifestFile = "manifest.json";

struct ShardRecord {
  std::string file;  // relative to the step directory
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string root);

  [[nodiscard]] const std::string& root() const { return root_; }
  [[nodiscard]] std::string step_dir(int64_t step) const;     // <root>/step-00000042
  [[nodiscard]] std::string partial_dir(int64_t step) const;  // <root>/step-00000042.partial

  // Rank 0: removes any stale <root>/step-N.partial (a crashed earlier attempt) and creates it
  // empty (and <root> if needed). Returns its path.
  std::string prepare(int64_t step);
  // Any rank: creates the partial directory if missing (safe concurrently); never removes.
  std::string begin(int64_t step);

  // Writes `w` atomically to <partial_dir(step)>/<file>; `file` is relative (subdirectories are
  // created; no "..", no absolute paths). The partial directory must exist.
  ShardRecord write_shard(int64_t step, const std::string& file, const SafetensorsWriter& w);

  // Rank 0, after every rank's write_shard returned: checks each listed shard exists with the
  // recorded size, writes manifest.json atomically, renames the partial directory to
  // step_dir(step) (replacing an existing one) and fsyncs <root>. Then prunes: keeps the newest
  // `keep_last` complete checkpoints by step (keep_last <= 0 keeps all; the one just committed
  // is always kept) and removes *.partial directories of older steps.
  void commit(int64_t step, const std::vector<ShardRecord>& shards, const nlohmann::json& state, int keep_last);

  // Steps of complete checkpoints (manifest parses and matches the directory), ascending.
  [[nodiscard]] std::vector<int64_t> complete_steps() const;

  struct Loaded {
    int64_t step = 0;
    std::string dir;
    nlohmann::json manifest;
  };
  // The newest complete checkpoint whose shards pass verify(); `only_files` empty = all
  // shards, else only those (each must be listed). Each skipped directory appends one line to
  // `warnings`: "<dir>: shard <file>: checksum mismatch (expected 0x…, found 0x…); skipping".
  // Uncommitted *.partial directories newer than the result are noted too. nullopt if none.
  std::optional<Loaded> latest_valid(const std::vector<std::string>& only_files,
                                     std::vector<std::string>& warnings) const;

  // Checks the manifest's shard list and the size + CRC-32 of the shards (those in
  // `only_files`, or all). On failure `why` is set to one line ("shard <file>: …").
  bool verify(const std::string& dir, const nlohmann::json& manifest, const std::vector<std::string>& only_files,
              std::string& why) const;

 private:
  struct Entry {
    int64_t step;
    std::string path;
    bool partial;
  };
  [[nodiscard]] std::vector<Entry> scan() const;  // step-N and step-N.partial dirs, by step
  // Parses <dir>/manifest.json and checks schema + step; nullopt with `why` set otherwise.
  std::optional<nlohmann::json> load_manifest(const std::string& dir, int64_t step, std::string& why) const;
  void prune(int64_t committed_step, int keep_last) const;

  std::string root_;
};

}  // namespace shardplan::executor::io
