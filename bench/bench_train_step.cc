// Training-step throughput: forward + backward + Adam update of a preset (or of a config.json,
// e.g. a training run's checkpoint's, or of a training recipe's model section) on a synthetic batch
// of `batch` pairs of src_len source and tgt_len target tokens (no padding), timed after warm-up
// steps. Prints one JSON line with the fields bench/train_step_pytorch.py prints, so that
// bench/train_step.sh and bench/suite.sh can put both side by side, plus where the step's time
// goes: forward, backward, optimizer, and the share spent inside matrix products
// (cpu::gemm_stats()).
//
// --precision bf16 runs forward and backward with bf16 products (nn::ForwardContext's precision:
// bf16 operands, f32 parameters, gradients and Adam state), as PyTorch's autocast mode.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "peak_memory.h"
#include "region_times_mark.h"
#include "synthetic_batch.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/core/openmp_wait.h"
#include "tfm/core/threading.h"
#include "tfm/dist/communicator.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/model/config.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/train/adam.h"
#include "tfm/train/batch_size.h"
#include "tfm/train/flat_parameters.h"
#include "tfm/train/gradient_buckets.h"
#include "tfm/train/recipe.h"
#include "tfm/train/schedule.h"

namespace {

using tfm::internal::bench::random_ids;
using tfm::internal::bench::rounded;

}  // namespace

int main(int argc, char** argv) {
  tfm::internal::use_default_openmp_spin(argv);  // as the tfm command (core/openmp_wait.h)
  CLI::App app{"tfm training-step benchmark"};
  std::string preset = "base";
  std::string config_path, recipe_path, write_config_path, precision = "f32", device_option = "cpu";
  int64_t vocab = 37000, batch_size = 128, src_len = 32, tgt_len = 32;
  int steps = 3, warmup = 2, threads = 2;
  bool gemm_shapes = false;
  auto* preset_option = app.add_option("--preset", preset, "model preset");
  app.add_option("--config", config_path,
                 "model config.json (docs/MODEL_FORMAT.md) instead of a preset; its vocab_size "
                 "unless --vocab is given")
      ->excludes(preset_option)
      ->check(CLI::ExistingFile);
  app.add_option("--recipe", recipe_path,
                 "training recipe (YAML, docs/TRAINING.md) whose model section and data.vocab_size "
                 "give the model; only those are read, but ${VAR}s elsewhere must be set")
      ->excludes(preset_option)
      ->excludes("--config")
      ->check(CLI::ExistingFile);
  app.add_option("--write-config", write_config_path,
                 "write the model's config.json here (e.g. a recipe's, for PyTorch's side)");
  app.add_option("--device", device_option, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precision, "f32 or bf16 (products with bf16 operands)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  auto* vocab_option = app.add_option("--vocab", vocab, "vocabulary size (default: 37000)");
  app.add_option("--batch", batch_size, "sentence pairs per batch");
  app.add_option("--src-len", src_len, "source tokens per sentence");
  app.add_option("--tgt-len", tgt_len, "target tokens per sentence");
  app.add_option("--steps", steps, "timed steps")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup,
                 "untimed steps first (the caching allocator fills during the first two)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--threads", threads, "threads");
  app.add_flag("--gemm-shapes", gemm_shapes,
               "also list the timed steps' products by kind (gemm_shapes: shape, calls, seconds "
               "and GFLOP/s per step)");
  CLI11_PARSE(app, argc, argv);

  tfm::internal::set_num_threads(threads);
  const bool from_file = !config_path.empty() || !recipe_path.empty();
  tfm::internal::ModelConfig config;
  tfm::internal::DType product = tfm::internal::DType::f32;
  tfm::internal::Device device = tfm::internal::Device::cpu;
  try {
    product = tfm::internal::ops::parse_precision(precision, "--precision");
    device = tfm::internal::ops::parse_device(device_option);
    tfm::internal::ops::use_device(device);
    if (!recipe_path.empty()) {
      const tfm::internal::TrainRecipe recipe = tfm::internal::load_recipe(recipe_path);
      config = recipe.model_config(recipe.vocab_size);
    } else {
      config = from_file ? tfm::internal::load_config(config_path) : tfm::internal::preset(preset);
    }
    if (!from_file || vocab_option->count() > 0) config.vocab_size = vocab;
    tfm::internal::validate(config);
    TFM_CHECK(std::max(src_len, tgt_len) <= config.max_positions,
              "--src-len/--tgt-len ({}) exceed the model's max_positions ({})",
              std::max(src_len, tgt_len), config.max_positions);
    if (!write_config_path.empty()) tfm::internal::save_config(write_config_path, config);
  } catch (const tfm::Error& error) {
    std::fprintf(stderr, "bench_train_step: %s\n", error.what());
    return 1;
  }
  vocab = config.vocab_size;
  // What the process holds before the model (libraries, the runtime): the memory estimate of
  // train/batch_size.h is compared with the peak above it.
  const double baseline_rss = rss_mb();
  // Initialised on the host (the same weights on every device), then copied to the device into
  // one buffer laid out as the gradients' (as TrainingSession does), so that Adam updates the whole
  // model in one pass, as in `tfm train`.
  tfm::internal::nn::Transformer initial(config);
  initial.init(7);
  const tfm::internal::FlatParameters parameters = tfm::internal::flatten(
      initial.named_parameters(), device, tfm::internal::FlatLayout::reversed);
  tfm::internal::nn::Transformer model(config, parameters.views);
  const auto communicator = tfm::internal::dist::make_single_process();
  const tfm::internal::GradientBuckets gradients(model.parameters(), *communicator, 1 << 25);
  tfm::internal::Adam adam(model.parameters());
  TFM_CHECK(adam.use_flat(parameters.flat, gradients.flat()),
            "the parameters and their gradients are not laid out alike");
  tfm::internal::NoamSchedule schedule{config.d_model, 4000, 1.0};

  std::mt19937 rng(11);
  tfm::internal::Tensor src = random_ids(batch_size, src_len, static_cast<int32_t>(vocab), rng, -1);
  tfm::internal::Tensor tgt_out =
      random_ids(batch_size, tgt_len, static_cast<int32_t>(vocab), rng, -1);
  tfm::internal::Tensor tgt_in =
      random_ids(batch_size, tgt_len, static_cast<int32_t>(vocab), rng, config.bos_id);
  tfm::internal::nn::Batch batch =
      tfm::internal::nn::Batch::from_ids(src, tgt_in, tgt_out, config.pad_id).to(device);
  // On a GPU the clock is read after the queued work has finished.
  auto now = [device] {
    tfm::internal::ops::synchronize(device);
    return std::chrono::steady_clock::now();
  };

  using clock = std::chrono::steady_clock;
  double forward_s = 0, backward_s = 0, update_s = 0, loss = 0, min_step = 1e30, max_step = 0;
  int64_t allocations_before = 0;
  tfm::internal::ops::Bf16Conversions conversions_before{};
  for (int step = 0; step < warmup + steps; ++step) {
    int64_t allocations_at_start =
        tfm::internal::CachingAllocator::cpu().stats().system_allocations;
    if (step == warmup) {
      forward_s = backward_s = update_s = 0;
      allocations_before = tfm::internal::CachingAllocator::cpu().stats().system_allocations;
      conversions_before = tfm::internal::ops::bf16_conversions();
      tfm::internal::cpu::reset_gemm_stats();
      if (gemm_shapes) tfm::internal::cpu::set_gemm_shape_stats(true);
      mark_region_times_start();  // bench/region_times.sh
    }
    clock::time_point t0, t1, t2;
    tfm::internal::ops::CrossEntropyResult result;
    {
      t0 = now();
      tfm::internal::Tape tape;
      {
        tfm::internal::TapeScope scope(tape);
        auto ctx =
            tfm::internal::nn::ForwardContext::training(static_cast<uint64_t>(step) + 1, product);
        result = model.loss(batch, ctx);
      }
      t1 = now();
      tape.backward(result.loss);
      t2 = now();
    }
    adam.step(schedule.learning_rate(step + 1));
    adam.zero_grad();
    auto t3 = now();
    forward_s += std::chrono::duration<double>(t1 - t0).count();
    backward_s += std::chrono::duration<double>(t2 - t1).count();
    update_s += std::chrono::duration<double>(t3 - t2).count();
    if (step >= warmup) {
      const double step_s = std::chrono::duration<double>(t3 - t0).count();
      min_step = std::min(min_step, step_s);
      max_step = std::max(max_step, step_s);
    }
    loss = result.loss.to_floats()[0];
    std::fprintf(
        stderr, "step %d: loss %.4f, %.2f s, %lld new blocks from the system\n", step, loss,
        std::chrono::duration<double>(t3 - t0).count(),
        static_cast<long long>(tfm::internal::CachingAllocator::cpu().stats().system_allocations -
                               allocations_at_start));
  }
  double per_step = (forward_s + backward_s + update_s) / steps;
  double tokens = static_cast<double>(batch.src_tokens + batch.tgt_tokens);
  int64_t steady_allocations =
      tfm::internal::CachingAllocator::cpu().stats().system_allocations - allocations_before;
  const tfm::internal::cpu::GemmStats gemm = tfm::internal::cpu::gemm_stats();
  const tfm::internal::ops::Bf16Conversions conversions = tfm::internal::ops::bf16_conversions();
  const double gemm_per_step = gemm.seconds / steps;
  const tfm::internal::TrainingMemory estimate =
      tfm::internal::estimate_training_memory(config, std::max(src_len, tgt_len), product, device);
  nlohmann::ordered_json row = {
      {"framework", "tfm"},
      {"device", tfm::internal::ops::describe_device(device)},
      {"mode", precision},
      {"precision", precision},
      {"preset", from_file ? "" : preset},
      {"config", config_path},
      {"recipe", recipe_path},
      {"model", tfm::internal::config_to_json(config)},
      {"vocab", vocab},
      {"threads", threads},
      {"batch", batch_size},
      {"src_len", src_len},
      {"tgt_len", tgt_len},
      {"steps", steps},
      {"src_tokens", batch.src_tokens},
      {"tgt_tokens", batch.tgt_tokens},
      {"seconds_per_step", rounded(per_step, 4)},
      {"min_seconds_per_step", rounded(min_step, 4)},
      {"max_seconds_per_step", rounded(max_step, 4)},
      {"forward_s", rounded(forward_s / steps, 4)},
      {"backward_s", rounded(backward_s / steps, 4)},
      {"update_s", rounded(update_s / steps, 4)},
      {"tokens_per_second", rounded(tokens / per_step, 1)},
      {"target_tokens_per_second", rounded(static_cast<double>(batch.tgt_tokens) / per_step, 1)},
      {"peak_rss_mb", rounded(peak_rss_mb(), 1)},
      {"baseline_rss_mb", rounded(baseline_rss, 1)},
      // train/batch_size.h's estimate of the step's memory (state + tokens x bytes per token, at
      // the longer of the two lengths), to compare with peak_rss_mb - baseline_rss_mb
      // (peak_device_mb on a GPU); bench/batch_memory.sh tabulates them.
      {"estimated_mb",
       rounded(static_cast<double>(estimate.bytes(batch.src_tokens + batch.tgt_tokens)) / (1 << 20),
               1)},
      {"estimated_state_mb", rounded(static_cast<double>(estimate.state_bytes) / (1 << 20), 1)},
      {"estimated_kib_per_token", rounded(static_cast<double>(estimate.bytes_per_token) / 1024, 2)},
      {"peak_device_mb",
       device == tfm::internal::Device::cpu
           ? 0.0
           : rounded(static_cast<double>(tfm::internal::CachingAllocator::for_device(device)
                                             .stats()
                                             .peak_bytes_in_use) /
                         (1 << 20),
                     1)},
      {"steady_state_system_allocations", steady_allocations},
      // Products through cpu::gemm (oneDNN), per timed step, and the rest of the step.
      {"gemm_calls_per_step", gemm.calls / steps},
      {"gemm_seconds_per_step", rounded(gemm_per_step, 4)},
      {"gemm_flops_per_step", gemm.flops / steps},
      {"gemm_gflops_per_second",
       rounded(gemm.seconds > 0 ? gemm.flops / gemm.seconds / 1e9 : 0, 1)},
      {"outside_gemm_fraction", rounded(1.0 - gemm_per_step / per_step, 4)},
      // Tensors rounded to bf16 by a pass of their own (ops::to_bf16), per timed step: the
      // conversions that no other op's pass writes on the way.
      {"bf16_conversions_per_step", (conversions.calls - conversions_before.calls) / steps},
      {"bf16_converted_elements_per_step",
       (conversions.elements - conversions_before.elements) / steps},
      {"loss", rounded(loss, 4)}};
  if (gemm_shapes) {
    nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
    for (const auto& kind : tfm::internal::cpu::gemm_shape_stats())
      kinds.push_back({{"shape", kind.shape},
                       {"calls_per_step", static_cast<double>(kind.calls) / steps},
                       {"seconds_per_step", rounded(kind.seconds / steps, 6)},
                       {"gflops_per_second",
                        rounded(kind.seconds > 0 ? kind.flops / kind.seconds / 1e9 : 0, 1)}});
    row["gemm_shapes"] = kinds;
  }
  std::printf("%s\n", row.dump().c_str());
  return 0;
}
