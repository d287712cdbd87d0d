// The MPI job (Open MPI, MPICH): every rank of MPI_COMM_WORLD. Built only when CMake found MPI
// (TFM_HAVE_MPI); world() makes it when a launcher started this process as one of several ranks.
#pragma once

#include <climits>
#include <cstddef>
#include <memory>

#include "tfm/dist/communicator.h"

namespace tfm::internal::dist {

// Initialises MPI on the first call, at MPI_THREAD_SERIALIZED: the thread that made the first
// communicator (the main thread) and the communicator's own bucket thread call MPI, never at the
// same time; OpenMP workers never do. MPI is finalised at
// exit, unless a rank aborted, and is left alone when the program had initialised it itself.
// Each communicator works on its own duplicate of MPI_COMM_WORLD, so its messages never match
// another library's; making one is collective: every rank makes the same ones in the same order.
// max_count is the most elements one MPI call carries (MPI's counts are ints): longer buffers go in
// several calls. Tests make it small to exercise that split.
std::unique_ptr<Communicator> make_mpi(size_t max_count = INT_MAX);

}  // namespace tfm::internal::dist
