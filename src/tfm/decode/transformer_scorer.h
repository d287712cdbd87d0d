// The Transformer as a StepScorer: incremental decoding with a key/value cache
// (nn::DecoderState), log-softmax of the step's logits, and optionally the encoder-decoder
// attention weights of one decoder layer for every step. The first step, the same for every beam
// row of a source, runs once per source.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tfm/decode/inference_model.h"
#include "tfm/decode/search.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal::decode {

// Which encoder-decoder attention weights to keep per output token.
struct AttentionProbe {
  static constexpr int64_t kAllLayers = -2;
  int64_t layer = -1;  // decoder layer; kAllLayers: the mean over the layers; other < 0: none
  int64_t head = -1;   // head; < 0: the mean over the heads
  bool enabled() const { return layer >= 0 || layer == kAllLayers; }
};

class TransformerScorer final : public StepScorer {
 public:
  // memory: the model's encoder output for the sources (encoded in the model's precision),
  // [sources, S, d_model]; `beam` rows per source; capacity: the longest output expected (the
  // caches grow past it if needed). The scorer owns its decoder state; the model is only read.
  //
  // Over an inference model: products in its precision, with its packed weights.
  TransformerScorer(const InferenceModel& model, const Tensor& memory,
                    const std::vector<int32_t>& source_lengths, int64_t beam, int64_t capacity,
                    AttentionProbe probe = {});
  // Over a plain model: f32 products with its weights as they are (tests, tools).
  TransformerScorer(const nn::Transformer& model, const Tensor& memory,
                    const std::vector<int32_t>& source_lengths, int64_t beam, int64_t capacity,
                    AttentionProbe probe = {});

  int64_t rows() const override { return state_.sources() * beam_; }
  int64_t vocab_size() const override { return model_.config().vocab_size; }
  Tensor step(const std::vector<int32_t>& last_tokens) override;
  // The decoder step, then the output projection fused with log-softmax and the top-m selection
  // (ops::output_log_softmax_top): the [rows, V] logits are never stored. With bf16 products the
  // projection takes bf16 operands, like every other product.
  void step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                StepTop& out) override;
  void select(const std::vector<int64_t>& rows) override;
  Tensor last_attention() const override { return attention_; }

  const nn::DecoderState& state() const { return state_; }

 private:
  // blocks: the output projection packed in blocks of kOutputBlockTokens (empty: the plain
  // embedding).
  TransformerScorer(const nn::Transformer& model, DType precision,
                    const std::vector<std::shared_ptr<const ops::PackedWeight>>& blocks,
                    const Tensor& memory, const std::vector<int32_t>& source_lengths, int64_t beam,
                    int64_t capacity, AttentionProbe probe);

  // The decoder state's rows for these last tokens: until the first select() the state has one
  // row per source, which computes the first step once for all of a source's beam rows (they all
  // start from bos); tokens that differ within a source widen it first.
  std::vector<int32_t> state_tokens(const std::vector<int32_t>& last_tokens);
  // Whether the state has one row per source where the search sees beam_.
  bool narrow() const { return state_.beam != beam_; }
  // Throws (fail_non_finite) when one of the first `computed_rows` rows of `top` has fewer tokens
  // than a finite model gives: its log-probabilities were NaN or infinite.
  void check_complete(const StepTop& top, int64_t computed_rows, int32_t excluded) const;
  // Keeps the probed weights of the step, [rows, S], from the kept layers' weights (the probed
  // layer's, or every layer's): their mean, of the probed head (or the mean over the heads).
  void keep_attention(const std::vector<Tensor>& layers);

  const nn::Transformer& model_;
  DType precision_;
  std::vector<std::shared_ptr<const ops::PackedWeight>> output_blocks_;
  int64_t beam_;
  nn::DecoderState state_;
  AttentionProbe probe_;
  Tensor attention_;   // [rows, S] of the last step, when probed
  int64_t steps_ = 0;  // step_top calls so far: the decoding step errors name
};

}  // namespace tfm::internal::decode
