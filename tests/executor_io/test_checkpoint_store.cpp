// Checkpoint directory protocol: layout, pruning, crash leftovers, corruption detection and
// fallback, concurrent shard writers.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/io/checkpoint_store.hpp"
#include "executor/io/fs_util.hpp"
#include "simulator/errors.hpp"
#include "support/temp_dir.hpp"

namespace shardplan::executor::io {
namespace checkpoint_store_test {  // named, not anonymous: the files share a unity-build unit

namespace fs = std::filesystem;
using nlohmann::json;
using shardplan::simulator::InputError;
using shardplan::testing::TempDir;

SafetensorsWriter shard_writer(float value, size_t n = 64) {
  const std::vector<float> v(n, value);
  SafetensorsWriter w;
  w.add("w", DType::F32, {static_cast<int64_t>(n)}, v.data(), n * sizeof(float));
  return w;
}

// What a training job does for one checkpoint: rank 0 prepares, `ranks` shards are written,
// rank 0 commits.
void save(CheckpointStore& store, int64_t step, int ranks = 2, int keep_last = 0) {
  store.prepare(step);
  std::vector<ShardRecord> records;
  for (int r = 0; r < ranks; ++r) {
    records.push_back(store.write_shard(step, "rank-" + std::to_string(r) + ".safetensors",
                                        shard_writer(static_cast<float>(step * 10 + r))));
  }
  store.commit(step, records, json{{"optimizer_step", step}, {"loss_scale", 65536.0}}, keep_last);
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void flip_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CheckpointStore, CommitProducesTheLayoutAndManifest) {
  TempDir tmp;
  CheckpointStore store(tmp.file("ckpt"));  // root created on demand
  save(store, 1200);
  EXPECT_EQ(names_in(tmp.file("ckpt")), (std::vector<std::string>{"step-00001200"}));
  const std::string dir = tmp.file("ckpt/step-00001200");
  EXPECT_EQ(store.step_dir(1200), dir);
  EXPECT_EQ(store.partial_dir(1200), dir + ".partial");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"manifest.json", "rank-0.safetensors", "rank-1.safetensors"}));

  std::ifstream in(dir + "/manifest.json");
  const json m = json::parse(in);
  EXPECT_EQ(m["schema"], "shardplan.checkpoint/1");
  EXPECT_EQ(m["step"], 1200);
  EXPECT_EQ(m["state"]["optimizer_step"], 1200);
  EXPECT_EQ(m["state"]["loss_scale"], 65536.0);
  ASSERT_EQ(m["shards"].size(), 2u);
  for (const auto& s : m["shards"]) {
    const FileDigest d = file_digest(dir + "/" + s["file"].get<std::string>());
    EXPECT_EQ(s["bytes"], d.bytes);
    EXPECT_EQ(s["crc32"], d.crc32);
  }
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{1200}));
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1200);
  EXPECT_EQ(loaded->dir, dir);
  EXPECT_EQ(loaded->manifest, m);
  EXPECT_TRUE(warnings.empty());
  SafetensorsReader r(dir + "/rank-1.safetensors");
  float x = 0;
  r.read_range("w", 0, &x, 4);
  EXPECT_EQ(x, 12001.f);
}

TEST(CheckpointStore, KeepLastPrunesTheOldest) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  for (int64_t s = 1; s <= 5; ++s) save(store, s * 100, 1, 3);
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{300, 400, 500}));
  EXPECT_FALSE(fs::exists(store.step_dir(100)));
  EXPECT_FALSE(fs::exists(store.step_dir(200)));
  save(store, 600, 1, 0);  // keep_last <= 0 keeps all
  save(store, 700, 1, -1);
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{300, 400, 500, 600, 700}));
  save(store, 800, 1, 1);
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{800}));
  // Other entries of the root are left alone.
  fs::create_directory(tmp.file("logs"));
  save(store, 900, 1, 1);
  EXPECT_EQ(names_in(tmp.path()), (std::vector<std::string>{"logs", "step-00000900"}));
}

TEST(CheckpointStore, APartialCheckpointIsNeverLoaded) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  save(store, 100);
  // Crash while writing step 200: shards written, no commit.
  store.prepare(200);
  store.write_shard(200, "rank-0.safetensors", shard_writer(1.f));
  store.write_shard(200, "rank-1.safetensors", shard_writer(2.f));
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{100}));
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 100);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "step-00000200.partial")) << warnings[0];
  EXPECT_TRUE(contains(warnings[0], "never committed")) << warnings[0];

  // The restarted job saves step 150: the stale partial of the older step 100 would go, the
  // one of step 200 (newer) stays until a commit passes it.
  store.prepare(50);
  save(store, 150);
  EXPECT_FALSE(fs::exists(store.partial_dir(50)));
  EXPECT_TRUE(fs::exists(store.partial_dir(200)));
  save(store, 250);
  EXPECT_FALSE(fs::exists(store.partial_dir(200)));
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{100, 150, 250}));
}

TEST(CheckpointStore, PrepareCleansAStalePartialBeginDoesNot) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  const std::string dir = store.prepare(7);
  EXPECT_EQ(dir, store.partial_dir(7));
  std::ofstream(dir + "/stale.bin") << "junk";
  EXPECT_EQ(store.begin(7), dir);  // idempotent, keeps what is there
  EXPECT_TRUE(fs::exists(dir + "/stale.bin"));
  store.prepare(7);
  EXPECT_TRUE(fs::is_empty(dir));
  // Stale files in a partial directory do not end up in the checkpoint.
  std::ofstream(dir + "/stale.bin") << "junk";
  const ShardRecord r = store.write_shard(7, "rank-0.safetensors", shard_writer(3.f));
  store.commit(7, {r}, json::object(), 0);
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->manifest["shards"].size(), 1u);
}

TEST(CheckpointStore, AFlippedByteIsCaughtByTheChecksum) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  save(store, 1);
  save(store, 2);
  flip_byte(store.step_dir(2) + "/rank-1.safetensors", 200);
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  const std::string& w = warnings[0];
  EXPECT_TRUE(contains(w, store.step_dir(2) + ": shard rank-1.safetensors: checksum mismatch (expected")) << w;
  EXPECT_TRUE(contains(w, "; skipping")) << w;
  // A rank that reads only the intact shard may still use step 2; the other one may not.
  warnings.clear();
  EXPECT_EQ(store.latest_valid({"rank-0.safetensors"}, warnings)->step, 2);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(store.latest_valid({"rank-1.safetensors"}, warnings)->step, 1);
  warnings.clear();
  EXPECT_EQ(store.latest_valid({"rank-7.safetensors"}, warnings), std::nullopt);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(contains(warnings[0], "shard rank-7.safetensors: not listed in manifest.json")) << warnings[0];
}

TEST(CheckpointStore, ATruncatedShardIsSkipped) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  save(store, 10);
  save(store, 20);
  const std::string shard = store.step_dir(20) + "/rank-0.safetensors";
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size - 100);
  std::vector<std::string> warnings;
  EXPECT_EQ(store.latest_valid({}, warnings)->step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0], "shard rank-0.safetensors: truncated or wrong size (expected " +
                                        std::to_string(size) + " bytes, found " + std::to_string(size - 100)))
      << warnings[0];
  std::string why;
  std::ifstream in(store.step_dir(20) + "/manifest.json");
  EXPECT_FALSE(store.verify(store.step_dir(20), json::parse(in), {}, why));
  EXPECT_TRUE(contains(why, "truncated")) << why;
}

TEST(CheckpointStore, AMissingOrBrokenManifestMeansIncomplete) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  save(store, 1);
  save(store, 2);
  save(store, 3);
  fs::remove(store.step_dir(3) + "/manifest.json");
  std::ofstream(store.step_dir(2) + "/manifest.json", std::ios::trunc) << "{\"schema\": \"shardplan.checkpoint/1\",";
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{1}));
  std::vector<std::string> warnings;
  EXPECT_EQ(store.latest_valid({}, warnings)->step, 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_TRUE(contains(warnings[0], "step-00000003: manifest.json missing")) << warnings[0];
  EXPECT_TRUE(contains(warnings[1], "step-00000002: manifest.json is not valid JSON")) << warnings[1];
  // A manifest of another step, or of another schema, does not count either.
  fs::copy_file(store.step_dir(1) + "/manifest.json", store.step_dir(3) + "/manifest.json");
  EXPECT_EQ(store.complete_steps(), (std::vector<int64_t>{1}));
}

TEST(CheckpointStore, FallsBackAcrossSeveralBadCheckpoints) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  for (int64_t s = 1; s <= 5; ++s) save(store, s);
  flip_byte(store.step_dir(5) + "/rank-0.safetensors", 3);  // in the header length
  fs::resize_file(store.step_dir(4) + "/rank-1.safetensors", 10);
  fs::remove(store.step_dir(3) + "/manifest.json");
  fs::remove(store.step_dir(2) + "/rank-0.safetensors");
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step, 1);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_TRUE(contains(warnings[0], "step-00000005: shard rank-0.safetensors: checksum mismatch")) << warnings[0];
  EXPECT_TRUE(contains(warnings[1], "step-00000004: shard rank-1.safetensors: truncated")) << warnings[1];
  EXPECT_TRUE(contains(warnings[2], "step-00000003: manifest.json missing")) << warnings[2];
  EXPECT_TRUE(contains(warnings[3], "step-00000002: shard rank-0.safetensors: missing")) << warnings[3];

  fs::remove(store.step_dir(1) + "/rank-1.safetensors");
  warnings.clear();
  EXPECT_EQ(store.latest_valid({}, warnings), std::nullopt);
  EXPECT_EQ(warnings.size(), 5u);
  CheckpointStore empty(tmp.file("nothing-here"));
  EXPECT_EQ(empty.latest_valid({}, warnings), std::nullopt);
  EXPECT_TRUE(empty.complete_steps().empty());
}

TEST(CheckpointStore, VerifyRejectsMalformedShardLists) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  std::string why;
  EXPECT_TRUE(store.verify(tmp.path().string(), json{{"shards", json::array()}}, {}, why));
  EXPECT_FALSE(store.verify(tmp.path().string(), json{{"shards", 3}}, {}, why));
  EXPECT_TRUE(contains(why, "shards: expected an array")) << why;
  const json escape = {{"shards", {{{"file", "../secret"}, {"bytes", 1}, {"crc32", 0}}}}};
  EXPECT_FALSE(store.verify(tmp.path().string(), escape, {}, why));
  EXPECT_TRUE(contains(why, "must be a relative path inside")) << why;
  const json bad_crc = {{"shards", {{{"file", "a"}, {"bytes", 1}, {"crc32", 1LL << 33}}}}};
  EXPECT_FALSE(store.verify(tmp.path().string(), bad_crc, {}, why));
  EXPECT_TRUE(contains(why, "shards[0]")) << why;
}

TEST(CheckpointStore, ProtocolMisuseIsReported) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  EXPECT_THROW(store.write_shard(5, "rank-0.safetensors", shard_writer(1.f)), InputError);  // no prepare
  EXPECT_THROW(store.commit(5, {}, json::object(), 0), InputError);
  store.prepare(5);
  EXPECT_THROW(store.write_shard(5, "../escape.safetensors", shard_writer(1.f)), std::logic_error);
  EXPECT_THROW(store.write_shard(5, "manifest.json", shard_writer(1.f)), std::logic_error);
  EXPECT_THROW(store.commit(5, {{"rank-0.safetensors", 10, 0}}, json::object(), 0), InputError);  // missing
  const ShardRecord r = store.write_shard(5, "rank-0.safetensors", shard_writer(1.f));
  EXPECT_THROW(store.commit(5, {{r.file, r.bytes + 1, r.crc32}}, json::object(), 0), InputError);
  EXPECT_THROW(store.commit(5, {r, r}, json::object(), 0), std::logic_error);
  EXPECT_THROW((void)store.step_dir(-1), std::logic_error);
  EXPECT_TRUE(fs::exists(store.partial_dir(5)));  // nothing committed by the failed attempts
  EXPECT_TRUE(store.complete_steps().empty());
}

TEST(CheckpointStore, RecommittingAStepReplacesIt) {
  TempDir tmp;
  CheckpointStore store(tmp.path().string());
  save(store, 3, 2);
  save(store, 3, 1);  // e.g. resumed from step 3 and saved it again with another layout
  EXPECT_EQ(names_in(tmp.path()), (std::vector<std::string>{"step-00000003"}));
  EXPECT_EQ(names_in(store.step_dir(3)), (std::vector<std::string>{"manifest.json", "rank-0.safetensors"}));
  std::vector<std::string> warnings;
  EXPECT_EQ(store.latest_valid({}, warnings)->manifest["shards"].size(), 1u);
}

TEST(CheckpointStore, ConcurrentRanksShareThePartialDirectory) {
  TempDir tmp;
  CheckpointStore store(tmp.file("root"));
  constexpr int kRanks = 8;
  store.prepare(42);  // rank 0, before the barrier
  std::vector<ShardRecord> records(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      CheckpointStore mine(tmp.file("root"));  // each rank has its own store object
      EXPECT_EQ(mine.begin(42), mine.partial_dir(42));
      records[r] = mine.write_shard(42, "tp" + std::to_string(r % 2) + "/rank-" + std::to_string(r) + ".safetensors",
                                    shard_writer(static_cast<float>(r), 1000));
    });
  }
  for (auto& t : ranks) t.join();
  store.commit(42, records, json{{"world_size", kRanks}}, 2);
  std::vector<std::string> warnings;
  const auto loaded = store.latest_valid({}, warnings);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->manifest["shards"].size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(names_in(loaded->dir), (std::vector<std::string>{"manifest.json", "tp0", "tp1"}));
  EXPECT_EQ(names_in(loaded->dir + "/tp1").size(), static_cast<size_t>(kRanks / 2));
  EXPECT_TRUE(warnings.empty());
  // Every rank verifies just its own shard.
  for (int r = 0; r < kRanks; ++r) {
    std::vector<std::string> w;
    const std::string file = "tp" + std::to_string(r % 2) + "/rank-" + std::to_string(r) + ".safetensors";
    EXPECT_EQ(store.latest_valid({file}, w)->step, 42);
  }
}

TEST(FsUtil, DigestIsZlibCrc32OfTheWholeFile) {
  TempDir tmp;
  std::string text(3 << 20, '\0');  // more than one read buffer
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 7 + i / 13);
  const FileDigest d = atomic_write_file(tmp.file("a.bin"), text);
  EXPECT_EQ(d.bytes, text.size());
  EXPECT_EQ(d.crc32, ::crc32(0L, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  const FileDigest again = file_digest(tmp.file("a.bin"));
  EXPECT_EQ(again.bytes, d.bytes);
  EXPECT_EQ(again.crc32, d.crc32);
  const FileDigest empty = atomic_write_file(tmp.file("empty.bin"), "");
  EXPECT_EQ(empty.bytes, 0u);
  EXPECT_EQ(empty.crc32, 0u);
  EXPECT_EQ(file_digest(tmp.file("empty.bin")).crc32, 0u);
  EXPECT_EQ(crc32_update(crc32_update(0, "12345", 5), "6789", 4), 0xcbf43926u);  // the CRC-32 check value
  EXPECT_THROW(file_digest(tmp.file("absent")), InputError);
}

TEST(FsUtil, AnUncommittedWriterLeavesNothing) {
  TempDir tmp;
  std::string temp;
  {
    AtomicFileWriter w(tmp.file("x"));
    w.write("partial");
    temp = w.temp_path();
    EXPECT_TRUE(fs::exists(temp));
    EXPECT_EQ(fs::path(temp).parent_path(), tmp.path());
  }
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::is_empty(tmp.path()));
  AtomicFileWriter w(tmp.file("y"));
  w.commit();
  EXPECT_THROW(w.commit(), std::logic_error);
  EXPECT_THROW(w.write("more"), std::logic_error);
  EXPECT_EQ(fs::file_size(tmp.file("y")), 0u);
}

TEST(FsUtil, MakeDirsAndReplaceDir) {
  TempDir tmp;
  make_dirs(tmp.file("a/b/c"));
  make_dirs(tmp.file("a/b/c"));  // idempotent
  std::ofstream(tmp.file("a/b/c/f")) << "1";
  tmp.write("file", "x");
  EXPECT_THROW(make_dirs(tmp.file("file")), InputError);
  EXPECT_THROW(make_dirs(tmp.file("file/sub")), InputError);
  replace_dir(tmp.file("a/b/c"), tmp.file("d"));  // to a new name
  EXPECT_TRUE(fs::exists(tmp.file("d/f")));
  make_dirs(tmp.file("e"));
  std::ofstream(tmp.file("e/g")) << "2";
  replace_dir(tmp.file("e"), tmp.file("d"));  // over a non-empty directory
  EXPECT_TRUE(fs::exists(tmp.file("d/g")));
  EXPECT_FALSE(fs::exists(tmp.file("d/f")));
  EXPECT_FALSE(fs::exists(tmp.file("e")));
  EXPECT_THROW(replace_dir(tmp.file("absent"), tmp.file("z")), InputError);
}

}  // namespace checkpoint_store_test
}  // namespace shardplan::executor::io
