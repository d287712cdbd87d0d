// Training-step throughput: forward + backward + Adam update of a preset (or of a config.json,
// e.g. a training run's checkpoint's) on a synthetic batch of `batch` pairs of src_len source and
// tgt_len target tokens (no padding), timed after warm-up steps. Prints one JSON line with the
// fields bench/train_step_pytorch.py prints, so that bench/train_step.sh can put both side by side.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "peak_memory.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/model/config.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/schedule.h"

namespace {

tfm::Tensor random_ids(int64_t rows, int64_t cols, int32_t vocab, std::mt19937& rng,
                       int32_t first) {
  std::uniform_int_distribution<int32_t> dist(4, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = (first >= 0 && i % cols == 0) ? first : dist(rng);
  return tfm::Tensor::from_ints({rows, cols}, ids);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tfm training-step benchmark"};
  std::string preset = "base";
  std::string config_path;
  int64_t vocab = 37000, batch_size = 128, src_len = 32, tgt_len = 32;
  int steps = 3, warmup = 2, threads = 2;
  auto* preset_option = app.add_option("--preset", preset, "model preset");
  app.add_option("--config", config_path,
                 "model config.json (docs/MODEL_FORMAT.md) instead of a preset; its vocab_size "
                 "unless --vocab is given")
      ->excludes(preset_option)
      ->check(CLI::ExistingFile);
  auto* vocab_option = app.add_option("--vocab", vocab, "vocabulary size (default: 37000)");
  app.add_option("--batch", batch_size, "sentence pairs per batch");
  app.add_option("--src-len", src_len, "source tokens per sentence");
  app.add_option("--tgt-len", tgt_len, "target tokens per sentence");
  app.add_option("--steps", steps, "timed steps")->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup,
                 "untimed steps first (the caching allocator fills during the first two)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--threads", threads, "threads");
  CLI11_PARSE(app, argc, argv);

  tfm::set_num_threads(threads);
  const bool from_file = !config_path.empty();
  tfm::ModelConfig config;
  try {
    config = from_file ? tfm::load_config(config_path) : tfm::preset(preset);
    if (!from_file || vocab_option->count() > 0) config.vocab_size = vocab;
    tfm::validate(config);
    TFM_CHECK(std::max(src_len, tgt_len) <= config.max_positions,
              "--src-len/--tgt-len ({}) exceed the model's max_positions ({})",
              std::max(src_len, tgt_len), config.max_positions);
  } catch (const tfm::Error& error) {
    std::fprintf(stderr, "bench_train_step: %s\n", error.what());
    return 1;
  }
  vocab = config.vocab_size;
  tfm::nn::Transformer model(config);
  model.init(7);
  tfm::Adam adam(model.parameters());
  tfm::NoamSchedule schedule{config.d_model, 4000, 1.0};

  std::mt19937 rng(11);
  tfm::Tensor src = random_ids(batch_size, src_len, static_cast<int32_t>(vocab), rng, -1);
  tfm::Tensor tgt_out = random_ids(batch_size, tgt_len, static_cast<int32_t>(vocab), rng, -1);
  tfm::Tensor tgt_in =
      random_ids(batch_size, tgt_len, static_cast<int32_t>(vocab), rng, config.bos_id);
  tfm::nn::Batch batch = tfm::nn::Batch::from_ids(src, tgt_in, tgt_out, config.pad_id);

  using clock = std::chrono::steady_clock;
  double forward_s = 0, backward_s = 0, update_s = 0, loss = 0;
  int64_t allocations_before = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    int64_t allocations_at_start = tfm::CachingAllocator::cpu().stats().system_allocations;
    if (step == warmup) {
      forward_s = backward_s = update_s = 0;
      allocations_before = tfm::CachingAllocator::cpu().stats().system_allocations;
    }
    auto t0 = clock::now();
    tfm::Tape tape;
    tfm::ops::CrossEntropyResult result;
    {
      tfm::TapeScope scope(tape);
      auto ctx = tfm::nn::ForwardContext::training(static_cast<uint64_t>(step) + 1);
      result = model.loss(batch, ctx);
    }
    auto t1 = clock::now();
    tape.backward(result.loss);
    auto t2 = clock::now();
    adam.step(schedule.learning_rate(step + 1));
    adam.zero_grad();
    auto t3 = clock::now();
    forward_s += std::chrono::duration<double>(t1 - t0).count();
    backward_s += std::chrono::duration<double>(t2 - t1).count();
    update_s += std::chrono::duration<double>(t3 - t2).count();
    loss = result.loss.to_floats()[0];
    std::fprintf(stderr, "step %d: loss %.4f, %.2f s, %lld new blocks from the system\n", step,
                 loss, std::chrono::duration<double>(t3 - t0).count(),
                 static_cast<long long>(tfm::CachingAllocator::cpu().stats().system_allocations -
                                        allocations_at_start));
  }
  double per_step = (forward_s + backward_s + update_s) / steps;
  double tokens = static_cast<double>(batch.src_tokens + batch.tgt_tokens);
  int64_t steady_allocations =
      tfm::CachingAllocator::cpu().stats().system_allocations - allocations_before;
  std::printf(
      "{\"framework\": \"tfm\", \"mode\": \"f32\", \"preset\": %s, \"config\": %s, "
      "\"vocab\": %lld, \"threads\": %d, "
      "\"src_tokens\": %lld, \"tgt_tokens\": %lld, \"seconds_per_step\": %.4f, "
      "\"forward_s\": %.4f, \"backward_s\": %.4f, \"update_s\": %.4f, "
      "\"tokens_per_second\": %.1f, \"target_tokens_per_second\": %.1f, \"peak_rss_mb\": %.1f, "
      "\"steady_state_system_allocations\": %lld, \"loss\": %.4f}\n",
      nlohmann::json(from_file ? "" : preset).dump().c_str(),
      nlohmann::json(config_path).dump().c_str(), static_cast<long long>(vocab), threads,
      static_cast<long long>(batch.src_tokens), static_cast<long long>(batch.tgt_tokens), per_step,
      forward_s / steps, backward_s / steps, update_s / steps, tokens / per_step,
      static_cast<double>(batch.tgt_tokens) / per_step, peak_rss_mb(),
      static_cast<long long>(steady_allocations), loss);
  return 0;
}
