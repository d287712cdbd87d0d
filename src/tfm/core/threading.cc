#include "tfm/core/threading.h"

#include <omp.h>

#include "tfm/core/error.h"

namespace tfm::internal {

void check_thread_count(int n, const char* what) {
  TFM_CHECK(n <= kMaxThreads, "{} {} is more than the maximum of {}", what, n, kMaxThreads);
}

void set_num_threads(int n) {
  check_thread_count(n, "threads");
  if (n > 0) omp_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}

ThreadCountScope::ThreadCountScope(int n) : previous_(num_threads()) {
  set_num_threads(n);
}

ThreadCountScope::~ThreadCountScope() {
  // Not set_num_threads: a destructor must not throw, and the count it restores was in force.
  if (previous_ > 0) omp_set_num_threads(previous_);
}

}  // namespace tfm::internal
