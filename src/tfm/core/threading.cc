#include "tfm/core/threading.h"

#include <omp.h>

namespace tfm {

void set_num_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int num_threads() {
  return omp_get_max_threads();
}

ThreadCountScope::ThreadCountScope(int n) : previous_(num_threads()) {
  set_num_threads(n);
}

ThreadCountScope::~ThreadCountScope() {
  set_num_threads(previous_);
}

}  // namespace tfm
