// Atomic file replacement: a reader sees either the old file or the complete new one, never a
// partial write (a crash or a full disk during a checkpoint must not destroy the previous
// checkpoint).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace tfm::internal {

// Writes to "<path>.tmp.<pid>", and on commit() flushes, fsyncs, renames it over `path` and fsyncs
// the directory. Destroyed without commit() (an exception on the way), it removes the temporary
// file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  void close_quietly();

  std::filesystem::path path_;
  std::filesystem::path temporary_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole of `contents` into `path`, atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace tfm::internal
