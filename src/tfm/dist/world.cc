// world(): the job this process belongs to, from its launcher's environment.
#include <cstdlib>
#include <string>

#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"

namespace tfm::dist {

namespace {

// An integer environment variable, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 ? static_cast<int>(parsed) : -1;
}

}  // namespace

LaunchInfo launch_info() {
  // Each launcher's own variables: Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun), MPICH's
  // Hydra (PMI), and Slurm's srun.
  struct Source {
    const char* rank;
    const char* size;
    const char* launcher;
  };
  const Source sources[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
                            {"PMIX_RANK", "PMIX_SIZE", "PMIx"},
                            {"PMI_RANK", "PMI_SIZE", "PMI (MPICH)"},
                            {"SLURM_PROCID", "SLURM_NTASKS", "srun (Slurm)"}};
  for (const Source& s : sources) {
    int rank = env_int(s.rank), size = env_int(s.size);
    if (rank >= 0 && size >= 1) return {rank, size, s.launcher};
  }
  return {};
}

Communicator& world() {
  static std::unique_ptr<Communicator> job = [] {
    LaunchInfo launch = launch_info();
    TFM_CHECK(launch.size <= 1,
              "this process is rank {} of {} started by {}, but tfm was built without MPI "
              "(libopenmpi-dev was not found at configure time): install it (scripts/setup.sh) "
              "and rebuild",
              launch.rank, launch.size, launch.launcher);
    return make_single_process();
  }();
  return *job;
}

}  // namespace tfm::dist
