#include "tfm/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {

std::string read_holder(int fd) {
  char buffer[64] = {};
  const ssize_t got = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::string text(buffer, got > 0 ? static_cast<size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "unknown" : text;
}

}  // namespace

RunDirectoryLock::RunDirectoryLock(const std::filesystem::path& run_dir, LockWait wait) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  TFM_CHECK(!ec, "{}: cannot create the run directory: {}", run_dir.string(), ec.message());
  const std::filesystem::path file = run_dir / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TFM_CHECK(fd_ >= 0, "{}: cannot open the run directory's lock: {}", file.string(),
            std::strerror(errno));
  if (::flock(fd_, wait == LockWait::yes ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK)
      fail("{} is in use by another training run (pid {}); wait for it or stop it first",
           run_dir.string(), holder);
    fail("{}: cannot lock: {}", file.string(), std::strerror(error));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  const bool noted = ::ftruncate(fd_, 0) == 0 &&
                     ::pwrite(fd_, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size());
  (void)noted;  // the pid only serves the message above: the lock excludes without it
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace tfm::internal
