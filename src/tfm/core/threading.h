// Thread count for our kernels (OpenMP) and oneDNN (built on the same OpenMP runtime).
#pragma once

namespace tfm {

// n <= 0 keeps the default (OMP_NUM_THREADS or the number of cores).
void set_num_threads(int n);
int num_threads();

}  // namespace tfm
