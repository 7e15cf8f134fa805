#include "checkpointing.hpp"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "executor/errors.hpp"
#include "executor/io/checkpoint_store.hpp"
#include "tensor_io.hpp"

namespace shardplan::executor {

namespace fs = std::filesystem;

namespace {

// --inject-fault ckptkill:RANK:STEP (other kinds are the training loop's; it validates them).
void parse_checkpoint_fault(const std::string& spec, int& rank, int64_t& step) {
  long long at_step = -1;
  if (std::sscanf(spec.c_str(), "ckptkill:%d:%lld", &rank, &at_step) != 2) rank = -1;
  step = at_step;
}

// The fault: the shard is written in place (no temp file), cut to half its size as a crash in
// the middle of a plain write would leave it, then the rank dies as `kill -9` would kill it —
// before the manifest commits the checkpoint.
[[noreturn]] void write_torn_shard_and_die(const std::string& path, const io::SafetensorsWriter& w, int rank) {
  const auto written = w.write(path);
  fs::resize_file(path, written.bytes / 2);
  std::fprintf(stderr, "shardrun: rank %d: injected fault 'ckptkill': %s torn at %llu of %llu bytes; SIGKILL\n", rank,
               path.c_str(), static_cast<unsigned long long>(written.bytes / 2),
               static_cast<unsigned long long>(written.bytes));
  std::raise(SIGKILL);
  std::abort();
}

}  // namespace

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const torch::Device dev = comm.device();  // filled and read on the host, moved for the collective
  torch::Tensor len = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kLong).to(dev);
  torch::Tensor lens = torch::empty({comm.size()}, torch::TensorOptions().dtype(torch::kLong).device(dev));
  comm.all_gather(lens, len);
  lens = lens.cpu();
  const int64_t width = std::max<int64_t>(1, lens.max().item<int64_t>());
  torch::Tensor buf = torch::zeros({width}, torch::kByte);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  buf = buf.to(dev);
  torch::Tensor all = torch::empty({comm.size() * width}, torch::TensorOptions().dtype(torch::kByte).device(dev));
  comm.all_gather(all, buf);
  all = all.cpu();
  std::vector<std::string> out;
  const auto* bytes = static_cast<const char*>(all.data_ptr());
  for (int r = 0; r < comm.size(); ++r)
    out.emplace_back(bytes + r * width, static_cast<size_t>(lens[r].item<int64_t>()));
  return out;
}

Checkpointer::Checkpointer(const RunOptions& opt, const ProcessGroups& groups, nlohmann::json layout)
    : dir_(opt.checkpoint_dir),
      resume_(opt.resume),
      keep_last_(opt.keep_last),
      groups_(groups),
      layout_(std::move(layout)) {
  parse_checkpoint_fault(opt.inject_fault, kill_rank_, kill_step_);
}

void Checkpointer::save(ZeroEngine& engine, const TrainState& state) {
  io::CheckpointStore store(dir_);
  Communicator& world = groups_.world();
  std::string error;
  if (world.rank() == 0) {
    try {
      store.prepare(state.step);
    } catch (const std::exception& e) { error = e.what(); }
  }
  world.barrier();
  std::string record;
  const bool killed_here = world.rank() == kill_rank_ && state.step == kill_step_;
  if (killed_here && !engine.writes_checkpoint())
    write_torn_shard_and_die(store.partial_dir(state.step) + "/torn", {}, world.rank());
  if (error.empty() && engine.writes_checkpoint()) {
    try {
      io::SafetensorsWriter writer;
      for (const auto& [name, t] : engine.owned_state()) add_tensor(writer, name, t);
      writer.set_metadata({{"shard", engine.shard_key()}, {"step", std::to_string(state.step)}});
      if (killed_here)
        write_torn_shard_and_die(store.partial_dir(state.step) + "/" + engine.shard_key() + ".safetensors", writer,
                                 world.rank());
      const auto rec = store.write_shard(state.step, engine.shard_key() + ".safetensors", writer);
      record = nlohmann::json{{"file", rec.file}, {"bytes", rec.bytes}, {"crc32", rec.crc32}}.dump();
    } catch (const std::exception& e) { error = e.what(); }
  }
  const auto records = all_gather_strings(world, error.empty() ? record : "ERROR:" + error);
  std::vector<io::ShardRecord> shards;
  for (const auto& r : records) {
    if (r.rfind("ERROR:", 0) == 0) throw InputError("checkpoint " + dir_ + ": " + r.substr(6));
    if (r.empty()) continue;
    const auto j = nlohmann::json::parse(r);
    shards.push_back({j["file"].get<std::string>(), j["bytes"].get<uint64_t>(), j["crc32"].get<uint32_t>()});
  }
  if (world.rank() == 0) {
    TrainState st = state;
    st.layout = layout_;
    store.commit(state.step, shards, io::to_json(st), keep_last_);
  }
  world.barrier();
}

std::optional<TrainState> Checkpointer::load(ZeroEngine& engine, const std::string& dir,
                                             const nlohmann::json& manifest) {
  TrainState st = io::parse_checkpoint_state(manifest, dir, layout_);
  const io::SafetensorsReader reader((fs::path(dir) / (engine.shard_key() + ".safetensors")).string());
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& [name, t] : engine.owned_state()) tensors.emplace_back(name, read_tensor(reader, name));
  engine.load_state(tensors, st.adam_step);
  return st;
}

std::optional<TrainState> Checkpointer::restore(ZeroEngine& engine) {
  if (resume_ == "none" || resume_.empty()) return std::nullopt;
  Communicator& world = groups_.world();
  const std::string mine = engine.shard_key() + ".safetensors";
  auto all_ok = [&](bool ok) {
    torch::Tensor t = torch::tensor({ok ? 0 : 1}, torch::kInt).to(world.device());
    world.all_reduce(t, ReduceOp::max);
    return t.item<int>() == 0;
  };
  auto read_manifest = [](const std::string& dir) {
    std::ifstream in(fs::path(dir) / "manifest.json");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    return j;
  };
  if (resume_ != "auto") {  // an explicit checkpoint directory
    const nlohmann::json manifest = read_manifest(resume_);
    std::string why = manifest.is_discarded() || !manifest.is_object() ? "manifest.json missing or not JSON" : "";
    const io::CheckpointStore store(fs::path(resume_).parent_path().string());
    if (why.empty()) store.verify(resume_, manifest, {mine}, why);
    const auto whys = all_gather_strings(world, why);
    for (const auto& w : whys)
      if (!w.empty()) throw InputError(resume_ + ": not a usable checkpoint: " + w);
    return load(engine, resume_, manifest);
  }
  if (!enabled()) throw InputError("--resume auto: needs --checkpoint-dir");
  const io::CheckpointStore store(dir_);
  const auto steps = store.complete_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::string dir = store.step_dir(*it);
    const nlohmann::json manifest = read_manifest(dir);
    std::string why;
    const bool ok = !manifest.is_discarded() && store.verify(dir, manifest, {mine}, why);
    if (!ok) std::cerr << "shardrun: warning: rank " << world.rank() << ": " << dir << ": " << why << "; skipping\n";
    if (all_ok(ok)) return load(engine, dir, manifest);
  }
  if (!steps.empty())
    throw InputError(dir_ + ": none of the " + std::to_string(steps.size()) +
                     " checkpoints passed verification (see the warnings above)");
  return std::nullopt;
}

}  // namespace shardplan::executor
