// Translation of many sentences with a trained Transformer: batches of sources (sorted by length so
// that a batch holds sentences of similar length), one encoder pass per batch, then greedy search
// (beam_size 1) or beam search over an incremental decoder (TransformerScorer). Finished sentences
// leave the batch; results come back in input order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/decode/search.h"
#include "tfm/decode/transformer_scorer.h"
#include "tfm/nn/transformer.h"

namespace tfm::decode {

struct TranslateOptions {
  int64_t beam_size = 4;           // 1: greedy search
  double alpha = 0.6;              // length penalty exponent
  int64_t n_best = 1;              // hypotheses per sentence, at most beam_size
  int64_t max_length_offset = 50;  // maximum output tokens (eos included) = source length + this
  int64_t max_length = 0;          // > 0: this maximum for every sentence instead
  int64_t min_length = 0;          // eos forbidden as one of the first min_length tokens
  int64_t batch_size = 32;         // source sentences per batch (at most)
  int64_t batch_tokens = 0;        // > 0: also at most this many padded source tokens per batch
  bool sort_by_length = true;      // batch sentences of similar length together
  bool early_stopping = true;      // see beam_search
  AttentionProbe attention;        // encoder-decoder weights to return per output token
  // Longest source accepted, in tokens (a longer one is an error: the encoder's attention grows
  // with the square of the length); 0: the model's max_positions.
  int64_t max_input_length = 0;
  // Operand type of the matrix products (ops::AutocastScope): f32, or bf16 (f32 accumulation,
  // weights converted once per translate() call); everything else stays f32.
  DType precision = DType::f32;
};

// The search options translate() derives (token ids from the model's config).
SearchOptions search_options(const TranslateOptions& options, const ModelConfig& config);

// The longest source translate() accepts: options.max_input_length, or the model's max_positions.
// Learned position tables hold no more than max_positions (an error if asked for more).
int64_t max_input_length(const TranslateOptions& options, const ModelConfig& config);

// The maximum output length of a source of `source_length` tokens: source length + offset (or the
// fixed maximum), no more than the learned position table holds.
int64_t max_output_length(int64_t source_length, const TranslateOptions& options,
                          const ModelConfig& config);

// Packs, inside the caller's ops::AutocastScope, every weight a translation multiplies with (in
// the scope's product type), so that translate() calls inside that scope find them ready. Without
// it the first call packs them on first use (about a tenth of a second for `base`).
void prepare_weights(const nn::Transformer& model);

// Translates every source (token ids as the model was trained on, without bos/eos padding) and
// returns per source its n_best hypotheses, best first, in input order; a source longer than
// max_input_length() is an error naming it. With an attention probe each hypothesis carries, per
// generated token, the weights over that source's positions.
std::vector<std::vector<Hypothesis>> translate(const nn::Transformer& model,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options);

}  // namespace tfm::decode
