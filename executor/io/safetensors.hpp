#pragma once
// safetensors files (https://github.com/huggingface/safetensors), plain C++, no LibTorch.
//   Layout: u64 little-endian N | N bytes of UTF-8 JSON header | data buffer.
//   Header: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//            optional "__metadata__": {"<key>": "<string>"}}; offsets relative to the buffer.
//   SafetensorsReader — validates the whole header against the file size on open (one-line
//                       InputError per problem: truncation, bad JSON, bad entry, overlaps,
//                       duplicates), then reads tensors or byte ranges of them on demand
//                       with pread (thread-safe; the file stays open).
//   SafetensorsWriter — collects tensors (copied, or borrowed without copying), then writes
//                       the file atomically (temp + fsync + rename + fsync dir) in the
//                       reference layout: compact JSON, __metadata__ first, tensors in `add`
//                       order and packed back to back, header padded with spaces to 8 bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/io/fs_util.hpp"

namespace shardplan::executor::io {

enum class DType { F32, F16, BF16, F64, I64, I32, I8, U8, BOOL };

size_t dtype_size(DType dtype);
const char* to_string(DType dtype);
// `context` starts the error message, e.g. "<path>: tensor 'w'".
DType dtype_from_string(const std::string& text, const std::string& context);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;   // empty: a scalar (0-d, one element)
  uint64_t begin = 0, end = 0;  // byte offsets into the data buffer
  [[nodiscard]] int64_t numel() const;
  [[nodiscard]] uint64_t bytes() const { return end - begin; }
};

class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  [[nodiscard]] const std::vector<TensorInfo>& tensors() const { return tensors_; }  // header order
  [[nodiscard]] const TensorInfo* find(const std::string& name) const;               // nullptr if absent
  // InputError "<path>: tensor '<name>': not in the file" if absent.
  [[nodiscard]] const TensorInfo& at(const std::string& name) const;
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  [[nodiscard]] const std::string& path() const { return file_.path(); }
  [[nodiscard]] uint64_t data_start() const { return data_start_; }  // 8 + N

  // Whole tensor; dst_bytes must equal its size (InputError naming both sizes otherwise).
  void read(const std::string& name, void* dst, size_t dst_bytes) const;
  // `bytes` bytes of the tensor starting `byte_offset` bytes into it (e.g. a row block of a
  // matrix, for sharded loading); the range must lie inside the tensor.
  void read_range(const std::string& name, uint64_t byte_offset, void* dst, size_t bytes) const;

 private:
  void parse_header(const std::string& header);
  void check_layout() const;

  ReadOnlyFile file_;
  uint64_t data_start_ = 0;
  uint64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsWriter {
 public:
  // Copies `bytes` bytes from `data`. `bytes` must equal numel(shape) * dtype_size(dtype),
  // names must be unique, non-empty and not "__metadata__" (std::logic_error otherwise).
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes);
  // Same, without a copy: `data` must stay valid and unchanged until the last write() returns
  // (for multi-GB shards whose tensors already live in memory).
  void add_borrowed(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes);
  void set_metadata(std::map<std::string, std::string> metadata) { metadata_ = std::move(metadata); }

  struct Written {
    uint64_t bytes = 0;  // size of the whole file
    uint32_t crc32 = 0;  // zlib CRC-32 of the whole file
  };
  // Atomic: either the complete file is at `path` afterwards or the previous state is.
  Written write(const std::string& path) const;
  // The header exactly as write() lays it out (8-byte length prefix + padded JSON).
  [[nodiscard]] std::string header_bytes() const;
  [[nodiscard]] size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const unsigned char* data;
    size_t bytes;
    std::shared_ptr<std::vector<unsigned char>> owned;  // null when borrowed
  };
  void add_entry(Entry entry);

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace shardplan::executor::io
