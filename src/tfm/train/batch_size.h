// The batch size of a run from the memory of its device (data.max_tokens: auto, data.accumulate:
// auto, data.update_tokens; docs/TRAINING.md, "Batch size from the device's memory"). Pure
// functions, numbers in and numbers out: the training loop measures the memory
// (ops::memory_available) and prints the line these return.
//
// The memory of a training step is modelled as
//   state + tokens * bytes_per_token
// where `state` does not depend on the batch (parameters, gradients and Adam's two moments, 16
// bytes a parameter; the bf16 copies of the weights that bf16 products make each forward pass;
// the pre-softmax projection's per-unit weight gradient and its chunk of logits) and
// `bytes_per_token` is what every padded token of the batch keeps for the backward pass. With
// d = d_model, f = d_ff, h = heads, hk = h * d_k, hv = h * d_v, N = layers and n the longest
// sequence (data.max_length: the attention weights of a query are n floats a head), in f32 floats:
//   encoder layer, per source token:  2 hk + hv (Q, K, V) + hv (heads) + h n (softmax weights)
//                                     + d (output projection) + 2 d (residual sum, LayerNorm)
//                                     + f (ReLU) + d + 2 d (FFN output, residual, LayerNorm)
//   decoder layer, per target token:  the same, plus cross-attention's queries, heads, h n
//                                     weights, output, residual and LayerNorm (hk + hv + h n + 3 d)
//   decoder layer, per source token:  cross-attention's keys and values (hk + hv)
//   embeddings: 3 d a token (lookup, + position, dropout); the output layer: 2 d a target token
//   (the hidden state's per-unit gradient, and its gradient); bf16 products keep a bf16 copy of
//   every product's input besides (half its floats); attention dropout keeps a second copy of
//   the weights; pre-norm blocks keep one d more each.
// The backward pass needs, besides, the gradients of one decoder layer at a time: one more
// decoder layer per target token. A budget of padded tokens is about half source and half target
// tokens (a translation's sides have similar lengths), so bytes_per_token is the mean of a source
// token's and a target token's bytes. Both parts are raised by a tenth for the caching allocator
// (its size classes round a block up by less than 25%). bench/batch_memory.sh checks the estimate
// against the measured peak memory of training steps (docs/TRAINING.md has the figures): it is
// 10-35% above it at the sequence length it is given; the batches of a real corpus are mostly
// shorter than data.max_length, whose attention it charges every batch.
#pragma once

#include <cstdint>
#include <string>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/model/config.h"

namespace tfm::internal {

// data.max_tokens and data.accumulate given as `auto`.
inline constexpr int64_t kAutoBatch = -1;

// The most batches an update may accumulate on a rank (data.accumulate, given or auto): each is
// held in memory until the update, and a larger number would be hours an update.
inline constexpr int64_t kMaxAccumulate = 1024;

// The share of the free memory that the estimate may fill by default (data.memory_fraction): the
// rest absorbs what the estimate leaves out (the runtime's own buffers, the C library's heap, other
// processes).
inline constexpr double kMemorySafetyFraction = 0.8;

struct TrainingMemory {
  int64_t state_bytes = 0;      // independent of the batch
  int64_t bytes_per_token = 0;  // per padded token (source or target) of a batch
  int64_t bytes(int64_t tokens) const { return state_bytes + tokens * bytes_per_token; }
};

// The estimate above for one training step of `config` with sequences of at most `length` tokens
// and products in `precision` on `device` (which sets the output layer's chunk of logits).
TrainingMemory estimate_training_memory(const ModelConfig& config, int64_t length, DType precision,
                                        Device device);

struct BatchSizeRequest {
  int64_t max_tokens = 4096;  // > 0, or kAutoBatch (from the memory)
  int64_t accumulate = 1;     // >= 1, or kAutoBatch (from update_tokens)
  int64_t update_tokens = 0;  // padded tokens an update should hold over every rank; 0: off
  int64_t ranks = 1;
  // The smallest batch worth having: one pair of data.max_length tokens on each side.
  int64_t min_tokens = 2;
  // Only read when max_tokens is auto: the memory this rank may use, and the estimate.
  int64_t memory_bytes = 0;
  TrainingMemory memory;
  double safety_fraction = kMemorySafetyFraction;
};

struct BatchSize {
  int64_t max_tokens = 0;
  int64_t accumulate = 1;
  int64_t ranks = 1;
  // With max_tokens auto: the most tokens a batch may hold by the memory (before update_tokens
  // or rounding); 0 otherwise.
  int64_t memory_tokens = 0;
  int64_t tokens_per_update() const { return max_tokens * accumulate * ranks; }
};

// Batches per update and their budget:
//   max_tokens auto: the most tokens whose estimate fits safety_fraction of memory_bytes, rounded
//     down to a multiple of 64; with update_tokens, no more than an update needs, shared out
//     evenly over the accumulated batches (max_tokens = ceil(update_tokens / (accumulate * ranks)),
//     so that an update does not overshoot by most of a batch);
//   accumulate auto: ceil(update_tokens / (max_tokens * ranks)), or 1 without update_tokens.
// Errors (one line) when the memory holds less than min_tokens, when accumulate is given with
// update_tokens (both say how big an update is), or for out-of-range numbers.
BatchSize choose_batch_size(const BatchSizeRequest& request);

// The start-of-training line: the memory seen and where it comes from (`memory_source`, e.g.
// "cpu: MemAvailable"), the estimate, and the batches chosen, e.g.
//   batch size: 17.9 GiB free (cpu: MemAvailable); estimate 1.02 GiB + 301 KiB a padded token
//   (base, max_length 256, bf16) -> the memory holds 46580 tokens a batch (0.8 of it);
//   max_tokens 25024 (auto) x accumulate 2 (auto) x 1 rank = 50048 tokens an update
//   (data.update_tokens 50000)
std::string describe_batch_size(const BatchSizeRequest& request, const BatchSize& chosen,
                                const std::string& memory_source, const std::string& model);

// "17.9 GiB", "301 KiB", "812 B".
std::string bytes_text(int64_t bytes);

}  // namespace tfm::internal
