// The Transformer as a StepScorer: incremental decoding with a key/value cache
// (nn::DecoderState), log-softmax of the step's logits, and optionally the encoder-decoder
// attention weights of one decoder layer for every step.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/decode/search.h"
#include "tfm/nn/transformer.h"

namespace tfm::decode {

// Which encoder-decoder attention weights to keep per output token.
struct AttentionProbe {
  int64_t layer = -1;  // decoder layer; < 0: none
  int64_t head = -1;   // head; < 0: the mean over the heads
  bool enabled() const { return layer >= 0; }
};

class TransformerScorer final : public StepScorer {
 public:
  // memory: model.encode()'s output for the sources, [sources, S, d_model]; `beam` rows per source;
  // capacity: the longest output expected (the caches grow past it if needed).
  TransformerScorer(const nn::Transformer& model, const Tensor& memory,
                    const std::vector<int32_t>& source_lengths, int64_t beam, int64_t capacity,
                    AttentionProbe probe = {});

  int64_t rows() const override { return state_.rows(); }
  int64_t vocab_size() const override { return model_.config().vocab_size; }
  Tensor step(const std::vector<int32_t>& last_tokens) override;
  void select(const std::vector<int64_t>& rows) override { state_.select(rows); }
  Tensor last_attention() const override { return attention_; }

  const nn::DecoderState& state() const { return state_; }

 private:
  const nn::Transformer& model_;
  nn::DecoderState state_;
  AttentionProbe probe_;
  Tensor attention_;  // [rows, S] of the last step, when probed
};

// In place: row <- row - log(sum(exp(row))) for each of `rows` rows of `n` values.
void log_softmax_rows(float* values, int64_t rows, int64_t n);

}  // namespace tfm::decode
