// An exclusive lock on a run directory for the lifetime of a training run, so that two `tfm train`
// into one directory cannot delete each other's checkpoints. It is an flock(2) on
// "<run_dir>/.lock", which holds the holder's pid; the kernel releases it when the process ends,
// however it ends (kill -9 included), so no stale lock is ever left behind.
#pragma once

#include <filesystem>

namespace tfm {

class RunDirectoryLock {
 public:
  // Creates the directory when needed and takes the lock, or throws tfm::Error naming the
  // directory and the pid of the process that holds it.
  explicit RunDirectoryLock(const std::filesystem::path& run_dir);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tfm
