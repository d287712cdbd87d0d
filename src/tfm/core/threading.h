// Thread count for our kernels (OpenMP) and oneDNN (built on the same OpenMP runtime).
//
// OpenMP keeps the thread count per calling thread (the nthreads-var ICV of its implicit task):
// set_num_threads in one std::thread leaves every other thread's count alone, which is what lets
// decoding workers that share one model each run with their own number of threads.
#pragma once

namespace tfm::internal {

// The most threads a caller may ask for (the CLI's --threads range): OpenMP starts every thread
// asked for, and a runtime asked for 100000 ends the process instead of failing.
inline constexpr int kMaxThreads = 4096;

// Throws a tfm::Error naming `what` (e.g. "Translator: threads") unless n <= kMaxThreads.
void check_thread_count(int n, const char* what);

// The calling thread's count for its next parallel regions; n <= 0 keeps it (OMP_NUM_THREADS or the
// number of cores); n > kMaxThreads is an error.
void set_num_threads(int n);
int num_threads();

// Sets the calling thread's count for the scope's lifetime and restores the previous one after;
// n <= 0 changes nothing; n > kMaxThreads is an error.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int n);
  ~ThreadCountScope();
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_;
};

}  // namespace tfm::internal
