#include "data_source.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "executor/data/token_cache.hpp"
#include "executor/errors.hpp"
#include "executor/io/fs_util.hpp"

extern char** environ;

namespace shardplan::executor {

namespace {

namespace fs = std::filesystem;

std::string tool_path() {
  if (const char* env = std::getenv("SHARDPLAN_TOKENIZE")) return env;
  return (fs::read_symlink("/proc/self/exe").parent_path() / "shardplan-tokenize").string();
}

// What produced a cache: the data spec, the tokenizer's checksum and the sequence length.
std::string cache_key(const RunOptions& o, int seq_len) {
  const auto digest = io::file_digest(o.tokenizer);
  return o.data + "|tokenizer-crc32=" + std::to_string(digest.crc32) + "|seq_len=" + std::to_string(seq_len);
}

std::string cache_path(const RunOptions& o, const std::string& key) {
  const uint32_t h = io::crc32_update(0, key.data(), key.size());
  char name[64];
  std::snprintf(name, sizeof(name), "tokens-%08x.safetensors", h);
  return (fs::path(o.out_dir) / name).string();
}

void run_tool(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw InputError(args[0] + ": cannot run the tokenizer tool (" + std::strerror(rc) + ")");
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const std::string prefix = "shardplan-tokenize: error: ";
  if (last.rfind(prefix, 0) == 0) last = last.substr(prefix.size());
  throw InputError(last.empty() ? "tokenizing " + args[2] + " failed (see " + log + ")" : last);
}

}  // namespace

std::string prepare_token_cache(const RunOptions& o, int64_t model_vocab, int seq_len) {
  if (o.data == "synthetic" || o.data.ends_with(".safetensors")) return "";
  if (o.tokenizer.empty())
    throw InputError("--tokenizer: required for --data " + o.data + " (a sentencepiece tokenizer.model)");
  if (!fs::is_regular_file(o.tokenizer)) throw InputError(o.tokenizer + ": tokenizer: no such file");
  const std::string key = cache_key(o, seq_len);
  const std::string path = cache_path(o, key);
  const auto meta = data::token_cache_metadata(path);
  if (auto it = meta.find("key"); it != meta.end() && it->second == key) return path;
  io::make_dirs(o.out_dir);
  run_tool({tool_path(), "encode", "--data", o.data, "--tokenizer", o.tokenizer, "--seq-len", std::to_string(seq_len),
            "--out", path, "--model-vocab", std::to_string(model_vocab), "--key", key},
           (fs::path(o.out_dir) / "tokenize.log").string());
  return path;
}

std::unique_ptr<data::Dataset> open_dataset(const RunOptions& o, int64_t model_vocab, int seq_len) {
  if (o.data == "synthetic")
    return data::make_synthetic_dataset(o.synthetic_samples, seq_len, static_cast<int>(model_vocab), o.seed);
  const std::string path = o.data.ends_with(".safetensors") ? o.data : cache_path(o, cache_key(o, seq_len));
  auto ds = data::load_token_cache(path, model_vocab);
  if (ds->seq_len() != seq_len)
    throw InputError(path + ": token cache has seq_len " + std::to_string(ds->seq_len()) + ", the plan needs " +
                     std::to_string(seq_len));
  return ds;
}

}  // namespace shardplan::executor
