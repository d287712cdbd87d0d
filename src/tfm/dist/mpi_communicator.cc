// The MPI communicator: MPI's C API, errors returned (MPI_ERRORS_RETURN) and thrown as tfm::Error.
// Open MPI's and MPICH's mpi.h would pull in the deprecated C++ bindings, which we neither use nor
// link: skip them.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "tfm/dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::internal::dist {

namespace {

// "MPI <what> failed on rank <rank>: <MPI's own message>", one line; rank < 0 when not known yet.
[[noreturn]] void mpi_fail(int code, const std::string& what, int rank) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  std::string message = length > 0 ? std::string(text, strnlen(text, length))
                                   : "MPI error code " + std::to_string(code);
  std::string where = rank >= 0 ? fmt::format(" on rank {}", rank) : "";
  fail("MPI {} failed{}: {}", what, where, one_line(message));
}

// MPI's lifetime in this process: initialised by the first make_mpi, finalised by this static's
// destructor at exit, after every communicator made from it (statics are destroyed in reverse
// order). Never finalised after MPI_Abort: the job is being torn down, and Finalize could wait
// for ranks that are gone.
struct Runtime {
  bool owned = false;  // false when the program had initialised MPI before us
  bool aborted = false;
  int thread_level = MPI_THREAD_SINGLE;

  Runtime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      MPI_Query_thread(&thread_level);
    } else {
      int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &thread_level);
      if (code != MPI_SUCCESS) mpi_fail(code, "initialisation (MPI_Init_thread)", -1);
      owned = true;
    }
    // Errors come back as codes (a program that initialised MPI itself keeps its own choice for
    // MPI_COMM_WORLD; our communicators set theirs).
    if (owned) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (thread_level < MPI_THREAD_SERIALIZED) {
      if (owned) MPI_Finalize();
      fail("MPI provides thread level {}, tfm needs MPI_THREAD_SERIALIZED ({})", thread_level,
           static_cast<int>(MPI_THREAD_SERIALIZED));
    }
  }
  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && !aborted && !finalized) MPI_Finalize();
  }
};

Runtime& runtime() {
  static Runtime instance;
  return instance;
}

// The library's name and version, e.g. "Open MPI v4.1.4" (Open MPI's string goes on with the
// package and date after a comma; MPICH's is several lines, "MPICH Version:\t4.0.2" first).
std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown library";
  std::string version(text, strnlen(text, length));
  version = version.substr(0, version.find_first_of(",\n"));
  std::replace(version.begin(), version.end(), '\t', ' ');
  while (!version.empty() && version.back() == ' ') version.pop_back();
  return version;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(Runtime& mpi, size_t max_count) : mpi_(mpi), max_count_(max_count) {
    TFM_CHECK(max_count >= 1 && max_count <= INT_MAX, "MPI message size {} is not in 1..INT_MAX",
              max_count);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "communicator (MPI_Comm_dup)");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    library_ = library_version();
    hosts_ = count_hosts();
  }
  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (reducer_.joinable()) reducer_.join();
    // A correct program has waited for its reductions; after MPI_Finalize nothing may be freed.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !mpi_.aborted) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return fmt::format("MPI ({}), {} rank{} on {} host{}", library_, size_, size_ == 1 ? "" : "s",
                       hosts_, hosts_ == 1 ? "" : "s");
  }

  void all_reduce_sum(std::span<float> data) override {
    wait_all();
    all_reduce(data, MPI_FLOAT);
  }
  void all_reduce_sum(std::span<double> data) override {
    wait_all();
    all_reduce(data, MPI_DOUBLE);
  }

  std::vector<uint64_t> all_gather(uint64_t value) override {
    wait_all();
    std::vector<uint64_t> values(size_);
    check(MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, comm_),
          "all_gather (MPI_Allgather)");
    return values;
  }

  void broadcast(void* data, size_t bytes, int root) override {
    TFM_CHECK(root >= 0 && root < size_, "broadcast from rank {} of a job of {} ranks", root,
              size_);
    wait_all();
    char* begin = static_cast<char*>(data);
    for (size_t done = 0; done < bytes; done += max_count_)
      check(MPI_Bcast(begin + done, chunk(bytes, done), MPI_BYTE, root, comm_),
            "broadcast (MPI_Bcast)");
  }

  void barrier() override {
    wait_all();
    check(MPI_Barrier(comm_), "barrier (MPI_Barrier)");
  }

  // Bucket reductions run on a thread of their own, one blocking MPI_Allreduce after the other in
  // the order started, while the caller computes. Open MPI's non-blocking collectives advance
  // only inside MPI calls of the caller (between two steps of the backward, a long product gives
  // them none), and its blocking all-reduce is the faster algorithm. While that thread works, the
  // caller makes no MPI call (the blocking collectives above wait for it first): one MPI call at a
  // time, MPI_THREAD_SERIALIZED.
  void start_all_reduce_sum(std::span<float> data) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(data);
      ++started_;
    }
    if (!reducer_.joinable()) reducer_ = std::thread([this] { reduce_buckets(); });
    changed_.notify_all();
  }

  void progress() override {}

  void wait_all() override {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return finished_ == started_; });
    if (!error_.empty()) {
      const std::string error = error_;
      error_.clear();
      throw Error(error);
    }
  }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);  // the caller's reason, before the launcher kills this process
    mpi_.aborted = true;
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; in case an implementation does
  }

 private:
  void reduce_buckets() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing left
      const std::span<float> bucket = pending_.front();
      pending_.pop_front();
      lock.unlock();
      std::string error;
      try {
        all_reduce(bucket, MPI_FLOAT);
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      if (!error.empty() && error_.empty()) error_ = error;
      ++finished_;
      changed_.notify_all();
    }
  }

  void check(int code, const char* what) const {
    if (code != MPI_SUCCESS) mpi_fail(code, what, rank_);
  }

  // The count of the MPI call that starts at element `done` of `total`.
  int chunk(size_t total, size_t done) const {
    return static_cast<int>(std::min(max_count_, total - done));
  }

  template <typename T>
  void all_reduce(std::span<T> data, MPI_Datatype type) {
    for (size_t done = 0; done < data.size(); done += max_count_)
      check(MPI_Allreduce(MPI_IN_PLACE, data.data() + done, chunk(data.size(), done), type, MPI_SUM,
                          comm_),
            "all_reduce_sum (MPI_Allreduce)");
  }

  // The number of distinct processor (host) names among the ranks.
  int count_hosts() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    check(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
    std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
    check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                        MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_),
          "host names (MPI_Allgather)");
    std::set<std::string> distinct;
    for (int r = 0; r < size_; ++r) {
      const char* begin = names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      distinct.emplace(begin, strnlen(begin, MPI_MAX_PROCESSOR_NAME));
    }
    return static_cast<int>(distinct.size());
  }

  Runtime& mpi_;
  size_t max_count_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string library_;
  int hosts_ = 1;
  // The bucket reductions (start_all_reduce_sum) and their thread.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::span<float>> pending_;
  size_t started_ = 0, finished_ = 0;
  std::string error_;  // the first failed reduction's, thrown by wait_all
  bool stopping_ = false;
  std::thread reducer_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi(size_t max_count) {
  Runtime& mpi = runtime();
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  TFM_CHECK(main_thread,
            "MPI is used from a thread other than the one that initialised it (tfm "
            "initialises it at MPI_THREAD_SERIALIZED: make the communicator on the main thread)");
  return std::make_unique<MpiCommunicator>(mpi, max_count);
}

}  // namespace tfm::internal::dist
