// Every attention weight of one sentence pair, for looking at attention (tfm attention) and for
// word alignments: the encoder's self-attention from its one pass over the source, then the
// incremental decoder that translates (nn::Transformer::decode_hidden, the same code as the
// searches) stepped over bos y1..yn, each step's self- and encoder-decoder weights kept. There is
// no second implementation of the forward pass: a translation's weights are this code's weights.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/decode/inference_model.h"

namespace tfm::internal::decode {

struct AttentionMaps {
  int64_t encoder_layers = 0, decoder_layers = 0, heads = 0;
  int64_t source_length = 0;  // S: the source's tokens (no bos/eos)
  int64_t target_length = 0;  // T = n + 1: decoder inputs bos y1..yn; outputs y1..yn eos
  // Host f32 tensors, every row summing to 1 over the keys it may see:
  Tensor encoder;  // [encoder_layers, heads, S, S]
  Tensor decoder;  // [decoder_layers, heads, T, T]: query t is input t; later keys weigh 0
  Tensor cross;    // [decoder_layers, heads, T, S]: row t is the step that outputs y_{t+1}
                   // (eos at t = n)
};

// The weights of `model` for source x (token ids without bos/eos) and target y1..yn (without
// bos/eos), with the model's precision. The source must be non-empty and no longer than
// max_input_length(TranslateOptions{}, config); ids must be in the vocabulary; with learned
// positions the target with eos must fit the table. Errors say which.
AttentionMaps attention_maps(const InferenceModel& model, const std::vector<int32_t>& source,
                             const std::vector<int32_t>& target);

}  // namespace tfm::internal::decode
