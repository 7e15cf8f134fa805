// Fuzz target: a safetensors file (executor::io::SafetensorsReader): the 8-byte header length,
// the JSON header (dtypes, shapes, data_offsets, __metadata__) checked against the file size,
// then every tensor read whole and as a byte range, as sharded loading does.
#include <algorithm>
#include <vector>

#include "executor/io/safetensors.hpp"
#include "fuzz_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace io = shardplan::executor::io;
  return shardplan::fuzz::run_file_reader("input.safetensors", data, size, [](const std::string& path) {
    const io::SafetensorsReader reader(path);
    std::vector<unsigned char> buffer;
    for (const io::TensorInfo& t : reader.tensors()) {
      if (reader.find(t.name) != &reader.at(t.name)) __builtin_trap();
      buffer.resize(static_cast<size_t>(t.bytes()));
      reader.read(t.name, buffer.data(), buffer.size());
      const uint64_t half = t.bytes() / 2;
      reader.read_range(t.name, half, buffer.data(), static_cast<size_t>(t.bytes() - half));
    }
    for (const auto& [key, value] : reader.metadata()) (void)key.size(), (void)value.size();
  });
}
