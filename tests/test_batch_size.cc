// The batch size from the device's memory (train/batch_size.h): the memory estimate and the choice
// of max_tokens and accumulate, numbers in and numbers out.
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/ops/device.h"
#include "tfm/ops/ops.h"
#include "tfm/train/batch_size.h"

namespace tfm::internal {
namespace {

using testing::expect_error;

constexpr int64_t kGiB = int64_t{1} << 30;

// The base model at max_length 256, f32, worked by hand from the formula of batch_size.h (floats a
// token; d 512, d_ff 2048, h 8, h d_k = h d_v = 512, h n = 2048):
//   self-attention 3*512 + 512 + 2048 + 512 + 2*512 = 5632, cross-attention's queries 4608 and a
//   source's keys and values 1024, FFN 2048 + 3*512 = 3584, embeddings 1536, output 2*512 + 2;
//   a source token 6 * (5632 + 3584 + 1024) + 1536 = 62976, a target token
//   6 * 13824 + 1536 + 1026 + 13824 (the backward's layer) = 99330;
//   (62976 + 99330) / 2 floats * 4 bytes * 1.1 (the allocator) = 357074 bytes a padded token.
TEST(RecipeBatchSize, EstimateOfTheBaseModel) {
  const ModelConfig base = preset("base");
  const TrainingMemory memory = estimate_training_memory(base, 256, DType::f32, Device::cpu);
  EXPECT_EQ(memory.bytes_per_token, 357074);
  // Parameters, gradients and Adam's moments (16 bytes each), the output layer's per-unit weight
  // gradient and a chunk of logits, raised by a tenth for the allocator.
  const double params = static_cast<double>(parameter_count(base));
  const double chunk =
      static_cast<double>(ops::output_cross_entropy_chunk_rows(base.vocab_size, Device::cpu));
  const double vocab = static_cast<double>(base.vocab_size);
  EXPECT_NEAR(static_cast<double>(memory.state_bytes),
              1.1 * (16 * params + 4 * vocab * 512 + 4 * chunk * vocab), 1.0);
  EXPECT_EQ(memory.bytes(1000), memory.state_bytes + 1000 * memory.bytes_per_token);
  // A GPU's chunk of logits is larger (1 GiB).
  EXPECT_GT(estimate_training_memory(base, 256, DType::f32, Device::cuda).state_bytes,
            memory.state_bytes + kGiB / 2);
}

TEST(RecipeBatchSize, EstimateGrowsWithEachDimension) {
  const ModelConfig base = preset("base");
  auto per_token = [](const ModelConfig& c, int64_t length, DType precision = DType::f32) {
    return estimate_training_memory(c, length, precision, Device::cpu).bytes_per_token;
  };
  // The attention weights: h floats a token and position, in every encoder layer, twice in every
  // decoder layer and in the backward's layer: 4 * 1.1 * 8 * (6 + 12 + 2) / 2 bytes.
  EXPECT_NEAR(static_cast<double>(per_token(base, 257) - per_token(base, 256)), 352.0, 1.0);
  ModelConfig wider = base;
  wider.d_ff = 4096;  // one d_ff a token per layer, and the backward's: 4 * 1.1 * 13 / 2 each
  EXPECT_NEAR(static_cast<double>(per_token(wider, 256) - per_token(base, 256)), 2048 * 28.6, 1.0);
  ModelConfig deeper = base;
  deeper.layers = 12;
  EXPECT_GT(per_token(deeper, 256), per_token(base, 256) * 3 / 2);
  // bf16 products keep bf16 copies of the products' inputs (and of the weights) besides.
  EXPECT_GT(per_token(base, 256, DType::bf16), per_token(base, 256));
  EXPECT_GT(estimate_training_memory(base, 256, DType::bf16, Device::cpu).state_bytes,
            estimate_training_memory(base, 256, DType::f32, Device::cpu).state_bytes);
  EXPECT_GT(per_token(preset("big"), 256), per_token(base, 256));
  expect_error([&] { estimate_training_memory(base, 0, DType::f32, Device::cpu); }, {"length"});
}

BatchSizeRequest request(int64_t max_tokens, int64_t accumulate, int64_t update_tokens,
                         int64_t ranks = 1) {
  BatchSizeRequest r;
  r.max_tokens = max_tokens;
  r.accumulate = accumulate;
  r.update_tokens = update_tokens;
  r.ranks = ranks;
  r.min_tokens = 512;
  // 1 GiB of state and 100 KiB a token.
  r.memory.state_bytes = kGiB;
  r.memory.bytes_per_token = 100 * 1024;
  return r;
}

TEST(RecipeBatchSize, GivenNumbersStayAsTheyAre) {
  const BatchSize chosen = choose_batch_size(request(4096, 6, 0));
  EXPECT_EQ(chosen.max_tokens, 4096);
  EXPECT_EQ(chosen.accumulate, 6);
  EXPECT_EQ(chosen.memory_tokens, 0);
  EXPECT_EQ(chosen.tokens_per_update(), 4096 * 6);
}

TEST(RecipeBatchSize, AccumulateMakesTheUpdateTokensOverEveryRank) {
  BatchSize one = choose_batch_size(request(4096, kAutoBatch, 50000));
  EXPECT_EQ(one.accumulate, 13);  // ceil(50000 / 4096)
  EXPECT_EQ(one.max_tokens, 4096);
  EXPECT_EQ(one.tokens_per_update(), 53248);
  BatchSize eight = choose_batch_size(request(4096, kAutoBatch, 50000, 8));
  EXPECT_EQ(eight.accumulate, 2);  // ceil(50000 / 32768)
  EXPECT_EQ(eight.tokens_per_update(), 65536);
  // Without update_tokens, auto is one batch an update.
  EXPECT_EQ(choose_batch_size(request(4096, kAutoBatch, 0)).accumulate, 1);
}

TEST(RecipeBatchSize, MaxTokensFromTheMemory) {
  // 10 GiB * 0.8 - 1 GiB = 7 GiB for 100 KiB tokens: 73400 tokens.
  BatchSizeRequest big = request(kAutoBatch, kAutoBatch, 0);
  big.memory_bytes = 10 * kGiB;
  BatchSize chosen = choose_batch_size(big);
  EXPECT_EQ(chosen.memory_tokens, 73400);
  EXPECT_EQ(chosen.max_tokens, 73344);  // a multiple of 64
  EXPECT_EQ(chosen.accumulate, 1);
  // With update_tokens: no bigger than an update needs.
  big.update_tokens = 50000;
  chosen = choose_batch_size(big);
  EXPECT_EQ(chosen.max_tokens, 50000);
  EXPECT_EQ(chosen.accumulate, 1);
  EXPECT_EQ(chosen.tokens_per_update(), 50000);
  // 4 GiB: 3.2 - 1 GiB hold 23068 tokens (23040 in multiples of 64), so 3 batches an update,
  // shared out evenly: ceil(50000 / 3) = 16667 tokens each.
  BatchSizeRequest small = big;
  small.memory_bytes = 4 * kGiB;
  chosen = choose_batch_size(small);
  EXPECT_EQ(chosen.memory_tokens, 23068);
  EXPECT_EQ(chosen.accumulate, 3);
  EXPECT_EQ(chosen.max_tokens, 16667);
  EXPECT_EQ(chosen.tokens_per_update(), 50001);
  // Two ranks: 25000 a rank, so 2 batches each of 12500.
  small.ranks = 2;
  chosen = choose_batch_size(small);
  EXPECT_EQ(chosen.accumulate, 2);
  EXPECT_EQ(chosen.max_tokens, 12500);
  EXPECT_EQ(chosen.tokens_per_update(), 50000);
  // A given max_tokens with accumulate auto ignores the memory.
  BatchSizeRequest given = small;
  given.max_tokens = 8192;
  given.ranks = 1;
  chosen = choose_batch_size(given);
  EXPECT_EQ(chosen.max_tokens, 8192);
  EXPECT_EQ(chosen.accumulate, 7);
}

TEST(RecipeBatchSize, TooLittleMemoryAndContradictionsAreErrors) {
  BatchSizeRequest tiny = request(kAutoBatch, kAutoBatch, 50000);
  tiny.memory_bytes = kGiB + kGiB / 4;  // 1 GiB of 1.25 * 0.8: nothing left for tokens
  expect_error(
      [&] { choose_batch_size(tiny); },
      {"data.max_tokens auto", "0.8 of the 1.25 GiB free holds 0 tokens", "data.max_length"});
  tiny.memory_bytes = 2 * kGiB;  // 0.6 GiB: 6291 tokens, enough
  EXPECT_EQ(choose_batch_size(tiny).accumulate, 8);
  tiny.min_tokens = 8192;
  expect_error([&] { choose_batch_size(tiny); }, {"6291 tokens", "(8192)"});
  expect_error([&] { choose_batch_size(request(4096, 2, 50000)); },
               {"data.update_tokens", "data.accumulate", "auto"});
  expect_error([&] { choose_batch_size(request(0, 1, 0)); }, {"data.max_tokens"});
  expect_error([&] { choose_batch_size(request(4096, 0, 0)); }, {"data.accumulate"});
  expect_error([&] { choose_batch_size(request(4096, kAutoBatch, -5)); }, {"data.update_tokens"});
}

TEST(RecipeBatchSize, TheLogLineSaysWhatWasSeenAndChosen) {
  BatchSizeRequest r = request(kAutoBatch, kAutoBatch, 50000);
  r.memory_bytes = 4 * kGiB;
  const BatchSize chosen = choose_batch_size(r);
  const std::string line = describe_batch_size(r, chosen, "cpu: MemAvailable", "base");
  EXPECT_EQ(line,
            "batch size: 4.00 GiB free (cpu: MemAvailable); estimate 1.00 GiB + 100 KiB a padded "
            "token (base) -> 0.8 of it holds 23068 tokens a batch; max_tokens 16667 (auto) x "
            "accumulate 3 (auto) x 1 rank = 50001 tokens an update (data.update_tokens 50000)");
  const BatchSizeRequest given = request(4096, kAutoBatch, 50000, 2);
  EXPECT_EQ(describe_batch_size(given, choose_batch_size(given), "", "base"),
            "batch size: max_tokens 4096 x accumulate 7 (auto) x 2 ranks = 57344 tokens an update "
            "(data.update_tokens 50000)");
  EXPECT_EQ(bytes_text(812), "812 B");
  EXPECT_EQ(bytes_text(300 * 1024), "300 KiB");
  EXPECT_EQ(bytes_text(int64_t{5} << 20), "5.0 MiB");
}

TEST(RecipeBatchSize, TheDeviceReportsItsMemory) {
  const ops::MemoryAvailable cpu = ops::memory_available(Device::cpu);
  EXPECT_GT(cpu.bytes, int64_t{64} << 20);
  EXPECT_NE(cpu.source.find("cpu"), std::string::npos);
  if (!ops::device_unavailable_reason(Device::cuda).empty()) return;
  const ops::MemoryAvailable gpu = ops::memory_available(Device::cuda);
  EXPECT_GT(gpu.bytes, int64_t{64} << 20);
  EXPECT_NE(gpu.source.find("cuda"), std::string::npos);
}

}  // namespace
}  // namespace tfm::internal
