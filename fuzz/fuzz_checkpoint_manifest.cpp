// Fuzz target: a checkpoint's manifest.json as `--resume auto` meets it (executor::io): the
// input is <root>/step-00000007/manifest.json next to one 64-byte shard, rank-00000.safetensors
// (CRC-32 0xfcf0f6f3, what the seed corpus lists). The store lists complete checkpoints, picks
// the newest that verifies (all shards, then this rank's), and the trainer's state is parsed
// from it (step, adam_step, loss_scale, good_steps, layout) as Checkpointer::load does.
#include <string>
#include <vector>

#include "executor/io/checkpoint_state.hpp"
#include "executor/io/checkpoint_store.hpp"
#include "fuzz_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace io = shardplan::executor::io;
  static const std::string root = [] {
    const std::string shard(64, 's');  // CRC-32 0xfcf0f6f3
    (void)shardplan::fuzz::write_input("ckpt/step-00000007/rank-00000.safetensors",
                                       reinterpret_cast<const uint8_t*>(shard.data()), shard.size());
    return (shardplan::fuzz::scratch_dir() / "ckpt").string();
  }();
  return shardplan::fuzz::run_file_reader("ckpt/step-00000007/manifest.json", data, size, [](const std::string&) {
    const nlohmann::json layout = {{"tp", 1}, {"dp", 2}, {"pp", 1}, {"zero", 1}, {"model", "tiny-gpt"}};
    const io::CheckpointStore store(root);
    (void)store.complete_steps();
    std::vector<std::string> warnings;
    for (const std::vector<std::string>& files :
         {std::vector<std::string>{}, std::vector<std::string>{"rank-00000.safetensors"}}) {
      if (const auto loaded = store.latest_valid(files, warnings)) {
        const io::CheckpointState st = io::parse_checkpoint_state(loaded->manifest, loaded->dir, layout);
        if (st.step < 0 || st.adam_step < 0 || st.good_steps < 0 || !(st.loss_scale >= 0)) __builtin_trap();
      }
    }
  });
}
