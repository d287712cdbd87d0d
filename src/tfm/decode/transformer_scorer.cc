#include "tfm/decode/transformer_scorer.h"

#include <cmath>
#include <limits>

#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"

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
  if (probe_.enabled()) {
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
  return logits;
}

}  // namespace tfm::decode
