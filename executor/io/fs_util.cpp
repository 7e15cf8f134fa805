#include "executor/io/fs_util.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28, _GNU_SOURCE)
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "executor/errors.hpp"

namespace fs = std::filesystem;

namespace shardplan::executor::io {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw InputError(path + ": " + what + ": " + std::generic_category().message(err));
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// A name no other writer (thread, process, or rank on another host sharing the file system)
// picks: 64 random bits + pid + a per-process counter. O_EXCL catches the impossible rest.
std::string temp_name_for(const std::string& path) {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  static std::atomic<uint64_t> counter{0};
  uint64_t r = 0;
  {
    std::lock_guard lock(mutex);
    r = rng();
  }
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-%llx-%ld-%llu", static_cast<unsigned long long>(r),
                static_cast<long>(::getpid()), static_cast<unsigned long long>(counter++));
  const fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + suffix)).string();
}

int open_retrying(const std::string& path, int flags, mode_t mode = 0) {
  for (;;) {
    const int fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t bytes) {
  if (bytes == 0) return crc;  // zlib treats a null buffer as "return the initial value" (0)
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes)));
}

FileDigest file_digest(const std::string& path) {
  const int fd = open_retrying(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(path, "cannot open for reading", err);
  }
  std::vector<unsigned char> buf(1 << 20);
  FileDigest d;
  d.crc32 = static_cast<uint32_t>(::crc32_z(0L, Z_NULL, 0));
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      fail(path, "read failed", err);
    }
    if (n == 0) break;
    d.crc32 = crc32_update(d.crc32, buf.data(), static_cast<size_t>(n));
    d.bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return d;
}

void fsync_dir(const std::string& dir) {
  const int fd = open_retrying(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(dir, "cannot open directory to fsync it", err);
  }
  // EINVAL: the file system does not support fsync on directories (nothing more to do).
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int err = errno;
    ::close(fd);
    fail(dir, "fsync of the directory failed", err);
  }
  ::close(fd);
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Another rank may have created it between our check and mkdir: only a non-directory fails.
  std::error_code ec2;
  if (!fs::is_directory(dir, ec2)) { fail(dir, "cannot create directory", ec ? ec.value() : ENOTDIR); }
}

void replace_dir(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    if (err != ENOTEMPTY && err != EEXIST) fail(to, "cannot rename " + from + " to it", err);
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(from);  // now holds the replaced contents
    } else {
      fs::remove_all(to);  // no atomic exchange here: remove, then rename
      if (::rename(from.c_str(), to.c_str()) != 0) {
        const int err2 = errno;
        fail(to, "cannot rename " + from + " to it", err2);
      }
    }
  }
  fsync_dir(parent_of(to));
}

// ---------------------------------------------------------------------------------------------

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  for (int attempt = 0; attempt < 8 && fd_ < 0; ++attempt) {
    temp_ = temp_name_for(path_);
    fd_ = open_retrying(temp_, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const int err = errno;
    if (fd_ < 0 && err != EEXIST) fail(path_, "cannot create a temporary file in " + parent_of(path_), err);
  }
  if (fd_ < 0) fail(path_, "cannot create a unique temporary file", EEXIST);
  digest_.crc32 = static_cast<uint32_t>(::crc32_z(0L, Z_NULL, 0));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abandon();
}

void AtomicFileWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  EXECUTOR_CHECK(fd_ >= 0 && !committed_, "AtomicFileWriter::write after commit");
  const auto* p = static_cast<const unsigned char*>(data);
  digest_.crc32 = crc32_update(digest_.crc32, p, bytes);
  digest_.bytes += bytes;
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      abandon();
      fail(path_, "write failed", err);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

FileDigest AtomicFileWriter::commit() {
  EXECUTOR_CHECK(fd_ >= 0 && !committed_, "AtomicFileWriter::commit twice");
  if (::fsync(fd_) != 0) {
    const int err = errno;
    abandon();
    fail(path_, "fsync failed", err);
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    abandon();
    fail(path_, "close failed", err);
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    abandon();
    fail(path_, "cannot rename the temporary file over it", err);
  }
  committed_ = true;
  fsync_dir(parent_of(path_));
  return digest_;
}

FileDigest atomic_write_file(const std::string& path, std::string_view bytes) {
  AtomicFileWriter w(path);
  w.write(bytes);
  return w.commit();
}

// ---------------------------------------------------------------------------------------------

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path) {
  fd_ = open_retrying(path, O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    fail(path, "cannot open for reading", err);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail(path, "cannot stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(path + ": expected a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

void ReadOnlyFile::pread_exact(void* dst, size_t bytes, uint64_t offset) const {
  EXECUTOR_CHECK(fd_ >= 0, "ReadOnlyFile used after move");
  auto* p = static_cast<unsigned char*>(dst);
  uint64_t pos = offset;
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(pos));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      fail(path_, "read failed at byte " + std::to_string(pos), err);
    }
    if (n == 0) {
      throw InputError(path_ + ": file is truncated: expected " + std::to_string(bytes) + " more bytes at offset " +
                       std::to_string(pos) + ", but the file ends there");
    }
    p += n;
    pos += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace shardplan::executor::io
