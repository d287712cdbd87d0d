#include "tfm/decode/attention_maps.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"
#include "tfm/decode/translate.h"
#include "tfm/nn/context.h"

namespace tfm::internal::decode {

namespace {

void check_ids(const std::vector<int32_t>& ids, int64_t vocab, const char* which) {
  for (size_t i = 0; i < ids.size(); ++i)
    TFM_CHECK(ids[i] >= 0 && ids[i] < vocab,
              "attention: {} token {} is id {}, outside the vocabulary of {}", which, i, ids[i],
              vocab);
}

// Attention weights are a softmax's: NaN or infinite ones mean the activations overflowed, and
// would be written as a page of nulls. `where` names the step and layer.
template <typename Where>
void check_finite(const float* weights, int64_t n, const Where& where) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(weights[i]))
      fail(
          "attention: {}: the weights are not finite (NaN or infinite activations): the model's "
          "activations overflow; check its weights",
          where());
}

}  // namespace

AttentionMaps attention_maps(const InferenceModel& inference, const std::vector<int32_t>& source,
                             const std::vector<int32_t>& target) {
  const nn::Transformer& model = inference.transformer();
  const ModelConfig& config = model.config();
  const auto S = static_cast<int64_t>(source.size());
  const auto T = static_cast<int64_t>(target.size()) + 1;
  TFM_CHECK(S > 0, "attention: the source sentence is empty");
  const int64_t longest = max_input_length(TranslateOptions{}, config);
  TFM_CHECK(S <= longest,
            "attention: the source sentence has {} tokens, more than the model's maximum input "
            "length {}",
            S, longest);
  TFM_CHECK(!config.learned_positions() || T <= config.longest_sequence(),
            "attention: the target sentence has {} tokens and eos, more than the model's learned "
            "position table of {}",
            T - 1, config.longest_sequence());
  check_ids(source, config.vocab_size, "source");
  check_ids(target, config.vocab_size, "target");

  AttentionMaps maps;
  maps.encoder_layers = config.layers;
  maps.decoder_layers = config.decoder_depth();
  maps.heads = config.heads;
  maps.source_length = S;
  maps.target_length = T;
  const int64_t L = maps.encoder_layers, H = maps.heads;

  // The encoder, its self-attention weights recorded ([1, h, S, S] per layer).
  auto ctx = nn::ForwardContext::inference(inference.precision());
  std::vector<Tensor> encoder_weights;
  ctx.record_attention(&encoder_weights);
  const std::vector<int32_t> lengths{static_cast<int32_t>(S)};
  const Tensor memory =
      model.encode(Tensor::from_ints({1, S}, source).to(inference.device()), lengths, ctx);
  TFM_CHECK(static_cast<int64_t>(encoder_weights.size()) == L,
            "attention: the encoder recorded {} attentions for {} layers", encoder_weights.size(),
            L);
  maps.encoder = Tensor::empty({L, H, S, S});
  for (int64_t l = 0; l < L; ++l) {
    const Tensor host = encoder_weights[static_cast<size_t>(l)].to(Device::cpu);
    check_finite(host.data<float>(), H * S * S,
                 [&] { return fmt::format("encoder layer {} self-attention", l); });
    std::copy_n(host.data<float>(), H * S * S, maps.encoder.data<float>() + l * H * S * S);
  }

  // The decoder, one step per input token bos y1..yn, as a beam of one.
  const int64_t D = maps.decoder_layers;
  maps.decoder = Tensor::zeros({D, H, T, T});
  maps.cross = Tensor::empty({D, H, T, S});
  nn::DecoderState state = model.start_decoding(memory, lengths, 1, T, inference.precision());
  nn::StepAttention step;
  step.want_self = step.want_cross = true;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t token = t == 0 ? config.decoder_start() : target[static_cast<size_t>(t - 1)];
    model.decode_hidden(Tensor::from_ints({1}, {token}).to(inference.device()), state, &step);
    for (int64_t l = 0; l < D; ++l) {
      // self[l]: [1, h, t + 1]; cross[l]: [1, h, S].
      const float* self = step.self[static_cast<size_t>(l)].data<float>();
      const float* cross = step.cross[static_cast<size_t>(l)].data<float>();
      const auto where = [&] {
        return fmt::format("decoding step {}, decoder layer {}", t + 1, l);
      };
      check_finite(self, H * (t + 1), where);
      check_finite(cross, H * S, where);
      for (int64_t h = 0; h < H; ++h) {
        std::copy_n(self + h * (t + 1), t + 1,
                    maps.decoder.data<float>() + ((l * H + h) * T + t) * T);
        std::copy_n(cross + h * S, S, maps.cross.data<float>() + ((l * H + h) * T + t) * S);
      }
    }
  }
  return maps;
}

}  // namespace tfm::internal::decode
