// Data-parallel training throughput (docs/BENCHMARKS.md, bench/distributed.sh): TrainingSession
// updates of a preset or config.json on synthetic batches, run alone (1 process x T threads) or
// under mpirun (N ranks x T threads, each rank its own batch of `batch` pairs, so the job's update
// holds N batches). Prints one JSON line on rank 0:
//   seconds_per_step      the update (forward, backward, all-reduce, Adam), median over steps
//   tokens_per_second     the job's source + target tokens per second
//   allreduce_bytes       the gradients summed per update (4 bytes a parameter)
//   allreduce_exposed_s   the wait for the all-reduce after the backward (median)
//   allreduce_standalone_s a blocking all-reduce of the same bytes alone (median), and its rate
//   hidden_fraction       1 - exposed / standalone: the share of the all-reduce hidden behind the
//                         backward
// The fields of bench_train_step (framework, threads, batch, ...) keep their meaning. --device cuda
// trains on the GPU (several ranks on one machine take GPU local rank % count; the gradients are
// reduced as tfm train reduces them, docs/DISTRIBUTED.md "GPU ranks"); each update is timed to the
// end of its last kernel.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "synthetic_batch.h"
#include "tfm/core/error.h"
#include "tfm/core/openmp_wait.h"
#include "tfm/core/threading.h"
#include "tfm/dist/communicator.h"
#include "tfm/model/config.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/train/session.h"

namespace {

using tfm::internal::bench::random_ids;
using tfm::internal::bench::rounded;

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  tfm::internal::use_default_openmp_spin(argv);  // as the tfm command (core/openmp_wait.h)
  CLI::App app{"tfm data-parallel training benchmark (run under mpirun for several ranks)"};
  std::string preset = "base", config_path, precision = "f32", device_option = "cpu";
  int64_t vocab = 37000, batch_size = 128, src_len = 32, tgt_len = 32;
  int steps = 5, warmup = 2, threads = 1;
  double bucket_mb = 4;
  auto* preset_option = app.add_option("--preset", preset, "model preset");
  app.add_option("--config", config_path, "model config.json instead of a preset")
      ->excludes(preset_option)
      ->check(CLI::ExistingFile);
  auto* vocab_option = app.add_option("--vocab", vocab, "vocabulary size (default: 37000)");
  app.add_option("--precision", precision, "f32 or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--device", device_option, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--batch", batch_size, "sentence pairs per rank");
  app.add_option("--src-len", src_len, "source tokens per sentence");
  app.add_option("--tgt-len", tgt_len, "target tokens per sentence");
  app.add_option("--steps", steps, "timed updates")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "untimed updates first")->check(CLI::Range(0, 1000000));
  app.add_option("--threads", threads, "threads per rank");
  app.add_option("--bucket-mb", bucket_mb, "all-reduce bucket size (MiB)");
  CLI11_PARSE(app, argc, argv);

  try {
    tfm::internal::dist::Communicator& comm = tfm::internal::dist::world();
    tfm::internal::set_num_threads(threads);
    const tfm::internal::Device device = tfm::internal::ops::parse_device(device_option);
    tfm::internal::ops::use_device(device);
    tfm::internal::ModelConfig config = config_path.empty()
                                            ? tfm::internal::preset(preset)
                                            : tfm::internal::load_config(config_path);
    if (config_path.empty() || vocab_option->count() > 0) config.vocab_size = vocab;
    tfm::internal::validate(config);
    tfm::internal::SessionOptions options;
    options.schedule = tfm::internal::NoamSchedule{config.d_model, 4000, 1.0};
    options.precision = tfm::internal::ops::parse_precision(precision, "--precision");
    options.communicator = &comm;
    options.device = device;
    options.bucket_bytes = static_cast<int64_t>(bucket_mb * (1 << 20));
    tfm::internal::TrainingSession session(config, options);
    session.broadcast_state(0);

    std::mt19937 rng(11 + static_cast<unsigned>(comm.rank()));
    const auto v = static_cast<int32_t>(config.vocab_size);
    tfm::internal::Tensor src = random_ids(batch_size, src_len, v, rng, -1);
    tfm::internal::Tensor tgt_out = random_ids(batch_size, tgt_len, v, rng, -1);
    tfm::internal::Tensor tgt_in = random_ids(batch_size, tgt_len, v, rng, config.bos_id);
    const std::vector<tfm::internal::nn::Batch> batches = {
        tfm::internal::nn::Batch::from_ids(src, tgt_in, tgt_out, config.pad_id)};

    using clock = std::chrono::steady_clock;
    std::vector<double> step_seconds, exposed;
    tfm::internal::UpdateResult last;
    for (int step = 0; step < warmup + steps; ++step) {
      comm.barrier();
      const auto t0 = clock::now();
      last = session.update(batches, comm.rank());
      tfm::internal::ops::synchronize(device);  // Adam's kernels may still be queued
      const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
      if (step < warmup) continue;
      // The slowest rank's time is the job's.
      const std::vector<uint64_t> all = comm.all_gather(static_cast<uint64_t>(seconds * 1e9));
      step_seconds.push_back(static_cast<double>(*std::max_element(all.begin(), all.end())) / 1e9);
      // Likewise the wait after the backward: the latest rank's.
      const std::vector<uint64_t> waits =
          comm.all_gather(static_cast<uint64_t>(session.all_reduce_stats().exposed_seconds * 1e9));
      exposed.push_back(static_cast<double>(*std::max_element(waits.begin(), waits.end())) / 1e9);
    }
    // The same bytes all-reduced alone, blocking.
    const int64_t bytes = session.all_reduce_stats().bytes;
    std::vector<float> buffer(static_cast<size_t>(bytes / 4), 1.0f);
    std::vector<double> standalone;
    for (int i = 0; i < (comm.size() > 1 ? 2 + steps : 0); ++i) {
      comm.barrier();
      const auto t0 = clock::now();
      comm.all_reduce_sum(std::span<float>(buffer));
      if (i >= 2) standalone.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
    if (comm.rank() != 0) return 0;
    const double per_step = median(step_seconds);
    const double tokens = static_cast<double>(last.source_tokens + last.target_tokens);
    const double alone = median(standalone), exposed_s = median(exposed);
    nlohmann::ordered_json row = {
        {"framework", "tfm"},
        {"mode", precision},
        {"device", device_option},
        {"preset", config_path.empty() ? preset : ""},
        {"config", config_path},
        {"vocab", config.vocab_size},
        {"ranks", comm.size()},
        {"threads_per_rank", threads},
        {"threads", threads * comm.size()},
        {"batch", batch_size},
        {"src_len", src_len},
        {"tgt_len", tgt_len},
        {"steps", steps},
        {"seconds_per_step", rounded(per_step, 4)},
        {"seconds_per_step_min",
         rounded(*std::min_element(step_seconds.begin(), step_seconds.end()), 4)},
        {"seconds_per_step_max",
         rounded(*std::max_element(step_seconds.begin(), step_seconds.end()), 4)},
        {"tokens_per_second", rounded(tokens / per_step, 1)},
        {"allreduce_bytes", comm.size() > 1 ? bytes : 0},
        {"allreduce_buckets", session.all_reduce_stats().buckets},
        {"allreduce_exposed_s", rounded(exposed_s, 4)},
        {"allreduce_standalone_s", rounded(alone, 4)},
        {"allreduce_gbps", rounded(alone > 0 ? static_cast<double>(bytes) / alone / 1e9 : 0, 3)},
        {"allreduce_busbw_gbps", rounded(alone > 0 ? 2.0 * (comm.size() - 1) / comm.size() *
                                                         static_cast<double>(bytes) / alone / 1e9
                                                   : 0,
                                         3)},
        {"hidden_fraction", rounded(alone > 0 ? 1.0 - exposed_s / alone : 0, 3)},
        {"loss", rounded(last.loss, 4)}};
    std::printf("%s\n", row.dump().c_str());
  } catch (const tfm::Error& error) {
    std::fprintf(stderr, "bench_train_dist: %s\n", error.what());
    if (tfm::internal::dist::launch_info().size > 1) tfm::internal::dist::world().abort(1);
    return 1;
  }
  return 0;
}
