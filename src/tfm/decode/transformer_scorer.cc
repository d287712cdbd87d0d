#include "tfm/decode/transformer_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"
#include "tfm/ops/autocast.h"

namespace tfm::decode {

void log_softmax_rows(float* values, int64_t rows, int64_t n) {
  // log softmax(x)_j = x_j - m - log(sum_i exp(x_i - m)) with m = max x: exact for any row whose
  // maximum is finite, and no probability underflows to log(0).
#pragma omp parallel for schedule(static) if (rows * n >= cpu::kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = values + r * n;
    float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
    for (int64_t j = 0; j < n; ++j) max = row[j] > max ? row[j] : max;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += cpu::exp_f32(row[j] - max);
    const float log_norm = max + std::log(sum);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] -= log_norm;
  }
}

TransformerScorer::TransformerScorer(const nn::Transformer& model, const Tensor& memory,
                                     const std::vector<int32_t>& source_lengths, int64_t beam,
                                     int64_t capacity, AttentionProbe probe)
    : model_(model),
      state_(model.start_decoding(memory, source_lengths, beam, capacity)),
      probe_(probe) {
  const auto& c = model.config();
  TFM_CHECK(!probe.enabled() || (probe.layer < c.layers && probe.head < c.heads),
            "attention probe: layer {} / head {} is outside the model's {} layers / {} heads",
            probe.layer, probe.head, c.layers, c.heads);
}

Tensor TransformerScorer::step(const std::vector<int32_t>& last_tokens) {
  Tensor tokens = Tensor::from_ints({static_cast<int64_t>(last_tokens.size())}, last_tokens);
  Tensor heads;
  Tensor logits =
      model_.decode_step(tokens, state_, probe_.layer, probe_.enabled() ? &heads : nullptr);
  log_softmax_rows(logits.data<float>(), logits.dim(0), logits.dim(1));
  if (probe_.enabled()) keep_attention(heads);
  return logits;
}

void TransformerScorer::step_top(const std::vector<int32_t>& last_tokens, int64_t m,
                                 int32_t excluded, StepTop& out) {
  Tensor tokens = Tensor::from_ints({static_cast<int64_t>(last_tokens.size())}, last_tokens);
  Tensor heads;
  Tensor hidden =
      model_.decode_hidden(tokens, state_, probe_.layer, probe_.enabled() ? &heads : nullptr);
  if (probe_.enabled()) keep_attention(heads);

  // Inside an autocast scope the embedding is packed, once, per block of kVocabBlock tokens (in
  // the scope's product type), as ops::linear packs its weights; outside, it is used as it is.
  const Tensor& embedding = model_.output_embedding();
  const int64_t vocab = embedding.dim(0);
  const std::vector<const cpu::PackedWeight*> packed = packed_output_blocks(embedding);
  const bool bf16 = ops::autocast_dtype() == DType::bf16;
  Tensor a = bf16 ? ops::to_bf16(hidden) : hidden;
  cpu::LogSoftmaxTopArgs args;
  args.hidden = a.raw();
  args.dtype = a.dtype();
  args.block = kVocabBlock;
  if (packed.empty()) {
    args.embedding = embedding.data<float>();
  } else {
    args.packed_blocks = packed.data();
  }
  args.rows = hidden.dim(0);
  args.d = hidden.dim(1);
  args.vocab = vocab;
  args.m = m;
  args.excluded = excluded;
  out.resize(args.rows, m);
  cpu::log_softmax_top(args, out.log_probs.data(), out.tokens.data(), out.counts.data());
}

std::vector<const cpu::PackedWeight*> TransformerScorer::packed_output_blocks(
    const Tensor& embedding) {
  std::vector<const cpu::PackedWeight*> blocks;
  if (ops::autocast_depth() == 0) return blocks;
  const int64_t vocab = embedding.dim(0);
  for (int64_t first = 0; first < vocab; first += kVocabBlock)
    blocks.push_back(
        ops::packed_weight(embedding.slice_rows(first, std::min(vocab, first + kVocabBlock))));
  return blocks;
}

void TransformerScorer::keep_attention(const Tensor& heads) {
  // [rows, h, S] -> [rows, S]: the probed head, or the mean over the heads.
  const int64_t rows = heads.dim(0), h = heads.dim(1), keys = heads.dim(2);
  attention_ = Tensor::zeros({rows, keys});
  const float* from = heads.data<float>();
  float* to = attention_.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t head = 0; head < h; ++head) {
      if (probe_.head >= 0 && head != probe_.head) continue;
      const float weight = probe_.head >= 0 ? 1.0f : 1.0f / static_cast<float>(h);
      for (int64_t j = 0; j < keys; ++j)
        to[r * keys + j] += weight * from[(r * h + head) * keys + j];
    }
  }
}

}  // namespace tfm::decode
