#include "tfm/decode/transformer_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::decode {

TransformerScorer::TransformerScorer(const InferenceModel& model, const Tensor& memory,
                                     const std::vector<int32_t>& source_lengths, int64_t beam,
                                     int64_t capacity, AttentionProbe probe)
    : TransformerScorer(model.transformer(), model.precision(), model.output_blocks(), memory,
                        source_lengths, beam, capacity, probe) {}

TransformerScorer::TransformerScorer(const nn::Transformer& model, const Tensor& memory,
                                     const std::vector<int32_t>& source_lengths, int64_t beam,
                                     int64_t capacity, AttentionProbe probe)
    : TransformerScorer(model, DType::f32, {}, memory, source_lengths, beam, capacity, probe) {}

TransformerScorer::TransformerScorer(
    const nn::Transformer& model, DType precision,
    const std::vector<std::shared_ptr<const ops::PackedWeight>>& blocks, const Tensor& memory,
    const std::vector<int32_t>& source_lengths, int64_t beam, int64_t capacity,
    AttentionProbe probe)
    : model_(model),
      precision_(precision),
      output_blocks_(blocks),
      beam_(beam),
      state_(model.start_decoding(memory, source_lengths, 1, capacity, precision)),
      probe_(probe) {
  TFM_CHECK(beam >= 1, "transformer scorer: beam {} must be at least 1", beam);
  const auto& c = model.config();
  TFM_CHECK(!probe.enabled() || (probe.layer < c.decoder_depth() && probe.head < c.heads),
            "attention probe: layer {} / head {} is outside the model's {} decoder layers / {} "
            "heads",
            probe.layer, probe.head, c.decoder_depth(), c.heads);
}

std::vector<int32_t> TransformerScorer::state_tokens(const std::vector<int32_t>& last_tokens) {
  TFM_CHECK(static_cast<int64_t>(last_tokens.size()) == rows(),
            "transformer scorer: {} last tokens for {} rows", last_tokens.size(), rows());
  if (!narrow()) return last_tokens;
  std::vector<int32_t> first;
  for (size_t r = 0; r < last_tokens.size(); r += static_cast<size_t>(beam_)) {
    if (!std::equal(last_tokens.begin() + static_cast<int64_t>(r) + 1,
                    last_tokens.begin() + static_cast<int64_t>(r) + beam_,
                    last_tokens.begin() + static_cast<int64_t>(r))) {
      state_.widen(beam_);
      return last_tokens;
    }
    first.push_back(last_tokens[r]);
  }
  return first;
}

void TransformerScorer::select(const std::vector<int64_t>& rows) {
  if (narrow()) state_.widen(beam_);
  state_.select(rows);
}

Tensor TransformerScorer::step(const std::vector<int32_t>& last_tokens) {
  const std::vector<int32_t> ids = state_tokens(last_tokens);
  Tensor tokens = Tensor::from_ints({static_cast<int64_t>(ids.size())}, ids)
                      .to(model_.output_embedding().device());
  nn::StepAttention weights;
  weights.want_cross = probe_.enabled();
  weights.layer = probe_.layer;  // one layer, or every layer for kAllLayers (< 0)
  Tensor logits = ops::log_softmax(model_.decode_step(tokens, state_, &weights));
  if (probe_.enabled()) keep_attention(weights.cross);
  if (!narrow()) return logits;
  // Every beam row of a source gets its source's row: a gather of rows, as the cache's.
  const int64_t vocab = logits.dim(1);
  std::vector<int64_t> source_rows(static_cast<size_t>(rows()));
  for (int64_t r = 0; r < rows(); ++r) source_rows[static_cast<size_t>(r)] = r / beam_;
  Tensor wide = Tensor::empty({rows(), vocab}, DType::f32, logits.device());
  ops::cache_gather(logits.view({logits.dim(0), 1, vocab}), Tensor(), source_rows, 1,
                    wide.view({rows(), 1, vocab}));
  return wide;
}

void TransformerScorer::step_top(const std::vector<int32_t>& last_tokens, int64_t m,
                                 int32_t excluded, StepTop& out) {
  const std::vector<int32_t> ids = state_tokens(last_tokens);
  Tensor tokens = Tensor::from_ints({static_cast<int64_t>(ids.size())}, ids)
                      .to(model_.output_embedding().device());
  nn::StepAttention weights;
  weights.want_cross = probe_.enabled();
  weights.layer = probe_.layer;  // one layer, or every layer for kAllLayers (< 0)
  Tensor hidden = model_.decode_hidden(tokens, state_, &weights);
  if (probe_.enabled()) keep_attention(weights.cross);

  // An inference model's embedding is packed per block of kOutputBlockTokens tokens (in its
  // product type) at load, as its linears are; a plain model's is used as it is.
  const Tensor& embedding = model_.output_embedding();
  // An int8 embedding takes the f32 hidden state (quantised per row in the product).
  const bool int8 = !output_blocks_.empty() && output_blocks_.front()->dtype() == DType::i8;
  const bool bf16 = precision_ == DType::bf16 && !int8;
  Tensor a = bf16 ? ops::to_bf16(hidden) : hidden;
  const ops::TopK top = ops::output_log_softmax_top(a, embedding, m, excluded, output_blocks_,
                                                    kOutputBlockTokens, model_.output_bias());
  out.assign(top, rows());
  check_complete(out, top.values.dim(0), excluded);
  ++steps_;
  if (narrow()) {
    // Computed for row s (one per source) into the first rows; every beam row of source s gets
    // row s's tokens, from the last source back so that nothing is overwritten before it is read.
    for (int64_t r = rows() - 1; r >= 0; --r) {
      const int64_t s = r / beam_;
      std::copy_n(out.log_probs.begin() + s * m, m, out.log_probs.begin() + r * m);
      std::copy_n(out.tokens.begin() + s * m, m, out.tokens.begin() + r * m);
      out.counts[static_cast<size_t>(r)] = out.counts[static_cast<size_t>(s)];
    }
  }
}

void TransformerScorer::check_complete(const StepTop& top, int64_t computed_rows,
                                       int32_t excluded) const {
  // A model with finite logits gives every token a finite log-probability, so each row has its m
  // best (or every token there is): a row with fewer dropped NaN or infinite values. O(rows).
  const int64_t vocab = vocab_size();
  const int64_t available = vocab - (excluded >= 0 && excluded < vocab ? 1 : 0);
  const int64_t expected = std::min(top.m, available);
  for (int64_t r = 0; r < computed_rows; ++r)
    if (top.counts[static_cast<size_t>(r)] < expected) fail_non_finite(steps_);
}

void TransformerScorer::keep_attention(const std::vector<Tensor>& layers) {
  // Per kept layer [state rows, h, S] -> [rows, S]: the mean over the kept layers (the probed one,
  // or all) of the probed head (or the mean over the heads); a narrow state's row for every beam
  // row of its source.
  const int64_t h = layers.front().dim(1), keys = layers.front().dim(2);
  const int64_t per_row = narrow() ? beam_ : 1;
  attention_ = Tensor::zeros({rows(), keys});
  float* to = attention_.data<float>();
  const int64_t heads_used = probe_.head >= 0 ? 1 : h;
  const float weight = 1.0f / static_cast<float>(static_cast<int64_t>(layers.size()) * heads_used);
  for (const Tensor& layer : layers) {
    const float* from = layer.data<float>();
    for (int64_t r = 0; r < rows(); ++r) {
      const int64_t state_row = r / per_row;
      for (int64_t head = 0; head < h; ++head) {
        if (probe_.head >= 0 && head != probe_.head) continue;
        for (int64_t j = 0; j < keys; ++j)
          to[r * keys + j] += weight * from[(state_row * h + head) * keys + j];
      }
    }
  }
}

}  // namespace tfm::internal::decode
