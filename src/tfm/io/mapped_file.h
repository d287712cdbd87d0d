// A whole file mapped read-only into memory (mmap). Its pages belong to the page cache, not to the
// process's anonymous memory: a corpus cache of several gigabytes costs no resident memory of its
// own and is shared by every process that maps it, and it is paged in as it is read.
#pragma once

#include <cstddef>
#include <filesystem>

namespace tfm::internal {

class MappedFile {
 public:
  // Maps `path`; throws tfm::Error naming it when it cannot be opened or mapped. An empty file maps
  // to size() 0 and data() nullptr.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tfm::internal
