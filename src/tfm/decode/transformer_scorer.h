// The Transformer as a StepScorer: incremental decoding with a key/value cache
// (nn::DecoderState), log-softmax of the step's logits, and optionally the encoder-decoder
// attention weights of one decoder layer for every step. The first step, the same for every beam
// row of a source, runs once per source.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/decode/search.h"
#include "tfm/nn/transformer.h"

namespace tfm::cpu {
class PackedWeight;
}

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

  int64_t rows() const override { return state_.sources() * beam_; }
  int64_t vocab_size() const override { return model_.config().vocab_size; }
  Tensor step(const std::vector<int32_t>& last_tokens) override;
  // The decoder step, then the output projection fused with log-softmax and the top-m selection
  // (ops::output_log_softmax_top): the [rows, V] logits are never stored. Under an
  // ops::AutocastScope of bf16 the projection takes bf16 operands, like every other product.
  void step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                StepTop& out) override;
  void select(const std::vector<int64_t>& rows) override;
  Tensor last_attention() const override { return attention_; }

  const nn::DecoderState& state() const { return state_; }

  // The output projection packed in the blocks step_top multiplies with (kVocabBlock tokens each,
  // ops::packed_weight); empty outside any autocast scope.
  static std::vector<const cpu::PackedWeight*> packed_output_blocks(const Tensor& embedding);

 private:
  // The decoder state's rows for these last tokens: until the first select() the state has one
  // row per source, which computes the first step once for all of a source's beam rows (they all
  // start from bos); tokens that differ within a source widen it first.
  std::vector<int32_t> state_tokens(const std::vector<int32_t>& last_tokens);
  // Whether the state has one row per source where the search sees beam_.
  bool narrow() const { return state_.beam != beam_; }
  // Keeps the probed layer's weights of the step, [rows, S] (the probed head or the mean).
  void keep_attention(const Tensor& heads);

  const nn::Transformer& model_;
  int64_t beam_;
  nn::DecoderState state_;
  AttentionProbe probe_;
  Tensor attention_;  // [rows, S] of the last step, when probed
  // Vocabulary columns per product of the output layer: a [128, 1024] f32 block of logits (512 KiB)
  // stays in the core's cache while its row loops read it.
  static constexpr int64_t kVocabBlock = 1024;
};

}  // namespace tfm::decode
