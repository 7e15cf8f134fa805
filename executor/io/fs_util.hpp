#pragma once
// Durable file-system helpers for checkpoints (POSIX, no LibTorch).
//   AtomicFileWriter   — writes <path> via a uniquely named temp file in the same directory;
//                        commit() fsyncs it, renames it over <path> and fsyncs the directory,
//                        so readers see either the old file or the complete new one. An
//                        uncommitted writer removes its temp file (no partial target, ever).
//   FileDigest         — size + zlib CRC-32 of a file's bytes (what manifests record).
//   file_digest        — streams a file through crc32_z.
//   fsync_dir          — makes renames/creations inside a directory durable.
//   make_dirs          — mkdir -p that tolerates concurrent creators (several ranks).
//   replace_dir        — moves a finished directory into place, swapping atomically with an
//                        existing one where the file system supports it.
//   ReadOnlyFile       — an open descriptor for positional reads (pread), shared by threads.
// I/O failures throw simulator::InputError with one line: "<path>: <what failed>: <errno text>".
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardplan::executor::io {

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// CRC-32 (zlib polynomial, as `crc32` of zlib / Python's zlib.crc32) continued from `crc`.
uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes);

// Size and CRC-32 of the whole file; InputError if it cannot be read.
FileDigest file_digest(const std::string& path);

// fsync of a directory (after creating, renaming or removing entries in it).
void fsync_dir(const std::string& dir);

// Creates `dir` and its parents; an existing directory (also one created concurrently by
// another process) is fine.
void make_dirs(const std::string& dir);

// Renames directory `from` to `to`. If `to` exists it is replaced: exchanged atomically
// (renameat2 RENAME_EXCHANGE) and the old contents removed; where the file system cannot
// exchange, `to` is removed first. fsyncs the parent of `to`.
void replace_dir(const std::string& from, const std::string& to);

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);  // creates the temp file now
  ~AtomicFileWriter();                          // removes the temp file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // fsync + close + rename over the target + fsync(dir). Returns size and CRC-32 of the file.
  FileDigest commit();

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const std::string& temp_path() const { return temp_; }

 private:
  void abandon() noexcept;

  std::string path_;
  std::string temp_;
  int fd_ = -1;
  FileDigest digest_;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically (AtomicFileWriter in one call).
FileDigest atomic_write_file(const std::string& path, std::string_view bytes);

class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::string& path);  // InputError if it cannot be opened
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;

  [[nodiscard]] uint64_t size() const { return size_; }  // at open time
  [[nodiscard]] const std::string& path() const { return path_; }
  // Reads exactly `bytes` at `offset`; InputError (saying "truncated") if the file ends first.
  void pread_exact(void* dst, size_t bytes, uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace shardplan::executor::io
