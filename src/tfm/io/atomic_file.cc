#include "tfm/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

// Makes the rename itself durable; failure here is not an error of the write (some file systems do
// not support fsync on directories), so it is ignored.
void sync_directory(const std::filesystem::path& directory) {
  int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  temporary_path_ = path_;
  temporary_path_ += ".tmp." + std::to_string(::getpid());
  fd_ = ::open(temporary_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TFM_CHECK(fd_ >= 0, "{}: cannot create {}: {}", path_.string(), temporary_path_.string(),
            errno_text());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  close_quietly();
  std::error_code ignored;
  std::filesystem::remove(temporary_path_, ignored);
}

void AtomicFileWriter::close_quietly() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  TFM_CHECK(fd_ >= 0 && !committed_, "{}: write after commit", path_.string());
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t written = ::write(fd_, p, bytes);
    if (written < 0 && errno == EINTR) continue;
    TFM_CHECK(written > 0, "{}: write failed: {}", path_.string(), errno_text());
    p += written;
    bytes -= static_cast<size_t>(written);
  }
}

void AtomicFileWriter::commit() {
  TFM_CHECK(fd_ >= 0 && !committed_, "{}: committed twice", path_.string());
  TFM_CHECK(::fsync(fd_) == 0, "{}: fsync failed: {}", path_.string(), errno_text());
  int closed = ::close(fd_);
  fd_ = -1;
  TFM_CHECK(closed == 0, "{}: close failed: {}", path_.string(), errno_text());
  TFM_CHECK(::rename(temporary_path_.c_str(), path_.c_str()) == 0, "{}: cannot rename {} to it: {}",
            path_.string(), temporary_path_.string(), errno_text());
  committed_ = true;
  sync_directory(path_.parent_path());
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  AtomicFileWriter writer(path);
  writer.write(contents);
  writer.commit();
}

}  // namespace tfm::internal
