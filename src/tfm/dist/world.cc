// world(): the job this process belongs to, from its launcher's environment.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"
#ifdef TFM_HAVE_MPI
#include "tfm/dist/mpi_communicator.h"
#endif

namespace tfm::internal::dist {

namespace {

// An integer environment variable, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return -1;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 ? static_cast<int>(parsed) : -1;
}

#ifdef TFM_HAVE_MPI
// Seconds the ranks of a job have to start MPI together: TFM_MPI_START_TIMEOUT, else 120.
double start_timeout() {
  const int seconds = env_int("TFM_MPI_START_TIMEOUT");
  return seconds > 0 ? seconds : 120.0;
}

// Ends this process (exit 1, which makes the launcher end the job) when MPI's start-up has not
// completed within the deadline. A rank that runs something other than `tfm train` (`mpirun -np 1
// tfm train ... : -np 1 tfm info`) never joins MPI_Init's exchange, and the others would wait in
// it forever; MPI offers no time-out of its own there.
class StartupWatchdog {
 public:
  StartupWatchdog(const LaunchInfo& launch, double seconds)
      : thread_([this, launch, seconds] { watch(launch, seconds); }) {}
  ~StartupWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

 private:
  void watch(const LaunchInfo& launch, double seconds) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (changed_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; }))
      return;
    std::fprintf(stderr,
                 "tfm: error: rank %d of %d: the job's ranks did not all start MPI within %g s "
                 "(TFM_MPI_START_TIMEOUT): every rank must run `tfm train` (a rank running "
                 "another program, as in `mpirun -np 1 tfm train ... : -np 1 tfm info`, never "
                 "joins); ending the job\n",
                 launch.rank, launch.size, seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members above exist
};
#endif

}  // namespace

LaunchInfo launch_info() {
  // Each launcher's own variables: Open MPI's mpirun, PMIx (srun --mpi=pmix, prterun), MPICH's
  // Hydra (PMI), and Slurm's srun (the step's task count: a batch script of an allocation with
  // several tasks also has SLURM_NTASKS, but is no rank of a job).
  struct Source {
    const char* rank;
    const char* size;
    const char* launcher;
  };
  const Source sources[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
                            {"PMIX_RANK", "PMIX_SIZE", "PMIx"},
                            {"PMI_RANK", "PMI_SIZE", "PMI (MPICH)"},
                            {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "srun (Slurm)"}};
  for (const Source& s : sources) {
    int rank = env_int(s.rank), size = env_int(s.size);
    if (rank >= 0 && size >= 1) return {rank, size, s.launcher};
  }
  return {};
}

Communicator& world() {
  static std::unique_ptr<Communicator> job = [] {
    LaunchInfo launch = launch_info();
    if (launch.size <= 1) return make_single_process();  // MPI is not even initialised
#ifdef TFM_HAVE_MPI
    // make_mpi's start-up is collective (MPI_Init, then a duplicate of the world and an exchange
    // of host names): a rank that never joins makes it hang.
    std::unique_ptr<Communicator> mpi;
    {
      StartupWatchdog watchdog(launch, start_timeout());
      mpi = make_mpi();
    }
    // They differ when the launcher is not the one of the MPI library tfm was built with (e.g. srun
    // without --mpi=pmix, or MPICH's mpiexec for Open MPI): each process would train alone.
    TFM_CHECK(mpi->rank() == launch.rank && mpi->size() == launch.size,
              "{} started this process as rank {} of {}, but MPI sees rank {} of {} ({}): start "
              "tfm with the launcher of the MPI it was built with (e.g. mpirun, srun --mpi=pmix)",
              launch.launcher, launch.rank, launch.size, mpi->rank(), mpi->size(), mpi->describe());
    return mpi;
#else
    fail(
        "this process is rank {} of {} started by {}, but tfm was built without MPI "
        "(libopenmpi-dev was not found at configure time): install it (scripts/setup.sh) and "
        "rebuild",
        launch.rank, launch.size, launch.launcher);
#endif
  }();
  return *job;
}

}  // namespace tfm::internal::dist
