#include "tfm/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tfm/core/error.h"

namespace tfm::internal {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TFM_CHECK(fd >= 0, "cannot open '{}': {}", path.string(), std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    fail("cannot read the size of '{}': {}", path.string(), std::strerror(error));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int error = errno;
    ::close(fd);  // the mapping keeps the file open
    TFM_CHECK(mapped != MAP_FAILED, "cannot map '{}' ({} bytes): {}", path.string(), size_,
              std::strerror(error));
    data_ = static_cast<const char*>(mapped);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

}  // namespace tfm::internal
