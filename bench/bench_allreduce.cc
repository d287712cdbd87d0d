// The sum all-reduce of f32 buffers between the ranks of an MPI job, as data-parallel training
// sums its gradients. Run under a launcher:
//   mpirun -np 2 build/release/bench_allreduce [--sizes-mb 4 64] [--repeats 10] [--async]
// Times Communicator::all_reduce_sum (or, with --async, the bucketed path of the trainer: a
// start_all_reduce_sum per --bucket-mb bucket with a progress() after each, then wait_all()) after
// --warmup untimed runs, and prints one JSON line per size on rank 0. A repeat starts after a
// barrier and lasts as long as its slowest rank. algbw_gbps = bytes / seconds / 1e9; busbw_gbps =
// 2(n-1)/n times that, the bytes each rank sends in a ring all-reduce (NCCL tests' convention):
// comparable across rank counts and with a link's bandwidth.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tfm/dist/communicator.h"

namespace {

struct Options {
  // 4 MB, 64 MB, and the gradients of base (63,045,632 parameters) and big (214,171,648).
  std::vector<double> sizes_mb = {4, 64, 252.182528, 856.686592};
  int warmup = 2, repeats = 10;
  bool async = false;
  double bucket_mb = 25;  // PyTorch DDP's default bucket
};

// One all-reduce of `data` the way the options say; returns the slowest rank's seconds.
double time_once(tfm::internal::dist::Communicator& comm, std::span<float> data,
                 const Options& options) {
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  if (options.async) {
    const size_t bucket = std::max<size_t>(1, static_cast<size_t>(options.bucket_mb * 1e6 / 4));
    for (size_t done = 0; done < data.size(); done += bucket) {
      comm.start_all_reduce_sum(data.subspan(done, std::min(bucket, data.size() - done)));
      comm.progress();
    }
    comm.wait_all();
  } else {
    comm.all_reduce_sum(data);
  }
  const auto nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - start);
  const std::vector<uint64_t> all = comm.all_gather(static_cast<uint64_t>(nanoseconds.count()));
  return static_cast<double>(*std::max_element(all.begin(), all.end())) / 1e9;
}

void run(tfm::internal::dist::Communicator& comm, const Options& options) {
  if (comm.rank() == 0) std::fprintf(stderr, "bench_allreduce: %s\n", comm.describe().c_str());
  const double n = comm.size();
  for (double mb : options.sizes_mb) {
    // Zeros: the sum's speed does not depend on the values, and zeros stay finite over repeats.
    std::vector<float> data(static_cast<size_t>(mb * 1e6 / sizeof(float)), 0.0f);
    for (int i = 0; i < options.warmup; ++i) time_once(comm, data, options);
    std::vector<double> seconds;
    for (int i = 0; i < options.repeats; ++i) seconds.push_back(time_once(comm, data, options));
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const double bytes = static_cast<double>(data.size() * sizeof(float));
    nlohmann::ordered_json line = {{"bench", "all_reduce_sum"},
                                   {"mode", options.async ? "async" : "blocking"},
                                   {"ranks", comm.size()},
                                   {"bytes", data.size() * sizeof(float)},
                                   {"repeats", options.repeats},
                                   {"median_s", median},
                                   {"min_s", seconds.front()},
                                   {"max_s", seconds.back()},
                                   {"algbw_gbps", bytes / median / 1e9},
                                   {"busbw_gbps", 2 * (n - 1) / n * bytes / median / 1e9}};
    if (options.async) line["bucket_bytes"] = static_cast<int64_t>(options.bucket_mb * 1e6);
    if (comm.rank() == 0) std::printf("%s\n", line.dump().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sum all-reduce of f32 buffers across the ranks of an MPI job (run under mpirun)"};
  Options options;
  app.add_option("--sizes-mb", options.sizes_mb, "buffer sizes in MB (1e6 bytes)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "untimed runs per size")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--repeats", options.repeats, "timed runs per size")->check(CLI::PositiveNumber);
  app.add_flag("--async", options.async, "start/progress/wait_all per bucket instead of blocking");
  app.add_option("--bucket-mb", options.bucket_mb, "bucket size of --async in MB")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  tfm::internal::dist::Communicator* comm = nullptr;
  try {
    comm = &tfm::internal::dist::world();
    run(*comm, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    // One failing rank must not leave the others waiting in a collective.
    if (comm != nullptr && comm->size() > 1) comm->abort(1);
    return 1;
  }
  return 0;
}
