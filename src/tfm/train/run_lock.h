// An exclusive lock on a run directory for the lifetime of a training run, so that two `tfm train`
// into one directory cannot delete each other's checkpoints. It is an flock(2) on
// "<run_dir>/.lock", which holds the holder's pid; the kernel releases it when the process ends,
// however it ends (kill -9 included), so no stale lock is ever left behind.
#pragma once

#include <filesystem>

namespace tfm::internal {

// What a lock held by another process means: an error (two training runs into one directory), or
// a wait until it is released (sweep processes that learn one shared vocabulary once).
enum class LockWait { no, yes };

class RunDirectoryLock {
 public:
  // Creates the directory when needed and takes the lock. With LockWait::no a lock held elsewhere
  // throws tfm::Error naming the directory and the pid of the process that holds it; with
  // LockWait::yes it waits for it.
  explicit RunDirectoryLock(const std::filesystem::path& run_dir, LockWait wait = LockWait::no);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tfm::internal
