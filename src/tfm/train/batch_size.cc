#include "tfm/train/batch_size.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/model/parameters.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {

namespace {

constexpr int64_t kFloat = 4;
// The caching allocator's size classes round a block up by less than 25%, by about 10% in the
// measured steps (docs/TRAINING.md).
constexpr double kAllocatorRounding = 1.1;
// Automatic budgets are multiples of this many tokens.
constexpr int64_t kTokenMultiple = 64;

}  // namespace

TrainingMemory estimate_training_memory(const ModelConfig& c, int64_t length, DType precision,
                                        Device device) {
  TFM_CHECK(length >= 1, "memory estimate: sequence length {} must be at least 1", length);
  const double d = static_cast<double>(c.d_model), f = static_cast<double>(c.d_ff);
  const double h = static_cast<double>(c.heads), n = static_cast<double>(length);
  const double hk = h * static_cast<double>(c.d_k), hv = h * static_cast<double>(c.d_v);
  const double encoder_layers = static_cast<double>(c.layers);
  const double decoder_layers = static_cast<double>(c.decoder_depth());
  const bool bf16 = precision == DType::bf16;
  // The softmax weights of a query (and their dropped copy with attention dropout).
  const double weights = h * n * (c.attention_dropout > 0 ? 2 : 1);
  // Residual sum and LayerNorm output; pre-norm: LayerNorm, dropout and sum.
  const double residual = c.pre_norm() ? 3 * d : 2 * d;
  // Floats a token keeps per block; bf16 products add a bf16 copy of each product's input.
  const double self_attention =
      2 * hk + hv + hv + weights + d + residual + (bf16 ? (3 * d + hv) / 2 : 0);
  const double cross_attention_query = hk + hv + weights + d + residual + (bf16 ? (d + hv) / 2 : 0);
  const double cross_attention_memory = hk + hv + (bf16 ? d : 0);  // keys and values of a source
  const double ffn = f + d + residual + (bf16 ? (d + f) / 2 : 0);
  const double embedding = 3 * d;
  // With an output bias (config output_bias) the loss is not chunked: each target row keeps its
  // logits, their log-softmax and the logits' gradient, V floats each.
  const double output = 2 * d + (bf16 ? d / 2 : 0) + 2 +  // + the row's loss and nll
                        (c.output_bias ? 3 * static_cast<double>(c.vocab_size) : 0);

  const double encoder_layer = self_attention + ffn;
  const double decoder_layer = self_attention + cross_attention_query + ffn;
  const double per_source = encoder_layers * encoder_layer +
                            decoder_layers * cross_attention_memory + embedding +
                            (c.pre_norm() ? d : 0);
  // The backward pass: one decoder layer's gradients at a time.
  const double per_target =
      decoder_layers * decoder_layer + embedding + output + (c.pre_norm() ? d : 0) + decoder_layer;
  const double per_token = (per_source + per_target) / 2 * kFloat * kAllocatorRounding;

  const double params = static_cast<double>(parameter_count(c));
  const double vocab_by_d = static_cast<double>(c.vocab_size) * d;
  // Parameters, gradients, Adam's m and v.
  double state = 4 * params * kFloat;
  // bf16 products convert every weight once per forward pass (the backward multiplies the copy).
  if (bf16) state += params * 2;
  // The output layer's per-unit weight gradient, and its chunk of logits (and D's bf16 copy).
  const double chunk_rows = static_cast<double>(
      std::min<int64_t>(ops::output_cross_entropy_chunk_rows(c.vocab_size, device),
                        std::numeric_limits<int32_t>::max()));
  state += vocab_by_d * kFloat + chunk_rows * static_cast<double>(c.vocab_size) * (bf16 ? 6 : 4);
  TrainingMemory memory;
  memory.state_bytes = static_cast<int64_t>(std::ceil(state * kAllocatorRounding));
  memory.bytes_per_token = static_cast<int64_t>(std::ceil(per_token));
  return memory;
}

BatchSize choose_batch_size(const BatchSizeRequest& r) {
  TFM_CHECK(r.ranks >= 1, "batch size: {} ranks", r.ranks);
  TFM_CHECK(r.max_tokens == kAutoBatch || r.max_tokens >= 1,
            "data.max_tokens must be positive or auto, got {}", r.max_tokens);
  TFM_CHECK(r.accumulate == kAutoBatch || r.accumulate >= 1,
            "data.accumulate must be at least 1 or auto, got {}", r.accumulate);
  TFM_CHECK(r.update_tokens >= 0, "data.update_tokens must be >= 0 (0: off), got {}",
            r.update_tokens);
  TFM_CHECK(r.update_tokens == 0 || r.accumulate == kAutoBatch,
            "data.update_tokens ({}) and data.accumulate ({}) both set the size of an update: give "
            "data.accumulate: auto, or data.update_tokens: 0",
            r.update_tokens, r.accumulate);
  BatchSize chosen;
  chosen.ranks = r.ranks;
  chosen.max_tokens = r.max_tokens;
  if (r.max_tokens == kAutoBatch) {
    TFM_CHECK(r.memory.bytes_per_token > 0, "batch size: no memory estimate per token");
    TFM_CHECK(r.safety_fraction > 0 && r.safety_fraction <= 1,
              "batch size: safety fraction {} is outside (0, 1]", r.safety_fraction);
    const double usable = static_cast<double>(r.memory_bytes) * r.safety_fraction -
                          static_cast<double>(r.memory.state_bytes);
    const double fit = usable / static_cast<double>(r.memory.bytes_per_token);
    chosen.memory_tokens =
        fit <= 0 ? 0 : static_cast<int64_t>(std::min(fit, static_cast<double>(int64_t{1} << 40)));
    TFM_CHECK(chosen.memory_tokens >= r.min_tokens,
              "data.max_tokens auto: {:g} of the {} free holds {} tokens a batch by the estimate "
              "({} for the model, gradients and Adam, {} a token), fewer than one pair of "
              "data.max_length on each side ({}): lower data.max_length or the model's size, or "
              "use a device with more memory",
              r.safety_fraction, bytes_text(r.memory_bytes), chosen.memory_tokens,
              bytes_text(r.memory.state_bytes), bytes_text(r.memory.bytes_per_token), r.min_tokens);
    chosen.max_tokens =
        std::max(r.min_tokens, chosen.memory_tokens / kTokenMultiple * kTokenMultiple);
    // An update's worth on each rank is enough: larger batches would only overshoot it.
    if (r.update_tokens > 0)
      chosen.max_tokens =
          std::max(r.min_tokens, std::min(chosen.max_tokens, ceil_div(r.update_tokens, r.ranks)));
  }
  if (r.accumulate != kAutoBatch) {
    chosen.accumulate = r.accumulate;
  } else if (r.update_tokens > 0) {
    chosen.accumulate = ceil_div(r.update_tokens, chosen.max_tokens * r.ranks);
    // The same number of batches shared out evenly: the smallest budget that still makes the
    // update (never above what the memory allows, which made `accumulate` this large).
    if (r.max_tokens == kAutoBatch)
      chosen.max_tokens =
          std::max(r.min_tokens, ceil_div(r.update_tokens, chosen.accumulate * r.ranks));
  } else {
    chosen.accumulate = 1;
  }
  TFM_CHECK(chosen.accumulate <= kMaxAccumulate,
            "data.accumulate {} batches per update is more than {}: lower data.update_tokens ({}) "
            "or raise data.max_tokens ({})",
            chosen.accumulate, kMaxAccumulate, r.update_tokens, chosen.max_tokens);
  return chosen;
}

std::string bytes_text(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (std::abs(b) >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (std::abs(b) >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1 << 20));
  if (std::abs(b) >= 1024.0) return fmt::format("{:.0f} KiB", b / 1024);
  return fmt::format("{} B", bytes);
}

std::string describe_batch_size(const BatchSizeRequest& r, const BatchSize& chosen,
                                const std::string& memory_source, const std::string& model) {
  std::string line = "batch size: ";
  if (r.max_tokens == kAutoBatch)
    line += fmt::format(
        "{} free ({}); estimate {} + {} a padded token ({}) -> {} of it holds {} tokens a batch; ",
        bytes_text(r.memory_bytes), memory_source, bytes_text(r.memory.state_bytes),
        bytes_text(r.memory.bytes_per_token), model, fmt::format("{:g}", r.safety_fraction),
        chosen.memory_tokens);
  line += fmt::format("max_tokens {}{} x accumulate {}{} x {} rank{} = {} tokens an update",
                      chosen.max_tokens, r.max_tokens == kAutoBatch ? " (auto)" : "",
                      chosen.accumulate, r.accumulate == kAutoBatch ? " (auto)" : "", chosen.ranks,
                      chosen.ranks == 1 ? "" : "s", chosen.tokens_per_update());
  if (r.update_tokens > 0) line += fmt::format(" (data.update_tokens {})", r.update_tokens);
  return line;
}

}  // namespace tfm::internal
