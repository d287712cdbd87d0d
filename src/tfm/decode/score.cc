#include "tfm/decode/score.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"
#include "tfm/decode/translate.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::decode {

namespace {

// Logit rows projected at once: at most this many f32 values of [rows, V] logits (64 MB).
constexpr int64_t kMaxLogitValues = int64_t{16} << 20;

// Appends log p(targets[r]) of each row r of `log_probs` [targets.size(), V] (ops::log_softmax's
// output, read from a CPU copy) to `out`; `out`'s log_prob is their sum, in double. A value that
// is not finite (NaN, or -inf, which finite logits never give) is an error naming sentence
// `sentence`: the model's activations overflowed.
void gather_log_probs(const float* log_probs, int64_t vocab, const std::vector<int32_t>& targets,
                      size_t sentence, TargetScore& out) {
  for (size_t r = 0; r < targets.size(); ++r) {
    const float log_prob = log_probs[static_cast<int64_t>(r) * vocab + targets[r]];
    TFM_CHECK(std::isfinite(log_prob),
              "score: sentence {}, target token {}: the model's log-probability is not finite "
              "(NaN or infinite logits): its activations overflow; check the model's weights",
              sentence, r + 1);
    out.token_log_probs.push_back(log_prob);
    out.log_prob += log_prob;
  }
}

}  // namespace

std::vector<TargetScore> score(const InferenceModel& inference,
                               const std::vector<std::vector<int32_t>>& sources,
                               const std::vector<std::vector<int32_t>>& targets,
                               const ScoreOptions& options) {
  const nn::Transformer& model = inference.transformer();
  const DType precision = inference.precision();
  const ModelConfig& config = model.config();
  TFM_CHECK(sources.size() == targets.size(), "score: {} sources but {} targets", sources.size(),
            targets.size());
  TFM_CHECK(options.batch_size >= 1, "score: batch size {} must be at least 1", options.batch_size);
  const int64_t longest = max_input_length(TranslateOptions{}, config);
  for (size_t i = 0; i < sources.size(); ++i) {
    TFM_CHECK(!sources[i].empty(), "score: source sentence {} is empty", i);
    TFM_CHECK(static_cast<int64_t>(sources[i].size()) <= longest,
              "score: source sentence {} has {} tokens, more than the maximum input length {}", i,
              sources[i].size(), longest);
    TFM_CHECK(!config.learned_positions() ||
                  static_cast<int64_t>(targets[i].size()) + 1 <= config.longest_sequence(),
              "score: target sentence {} has {} tokens and eos, more than the model's learned "
              "position table of {}",
              i, targets[i].size(), config.longest_sequence());
    for (const int32_t id : targets[i])
      TFM_CHECK(id >= 0 && id < config.vocab_size,
                "score: target sentence {} has token {}, outside the vocabulary of {}", i, id,
                config.vocab_size);
  }
  auto ctx = nn::ForwardContext::inference(precision);
  std::vector<TargetScore> results(sources.size());
  const auto batch_size = static_cast<size_t>(options.batch_size);
  for (size_t begin = 0; begin < sources.size(); begin += batch_size) {
    const size_t end = std::min(sources.size(), begin + batch_size);
    const auto batch = static_cast<int64_t>(end - begin);
    int64_t width = 0, length = 0;  // longest source; longest target with eos
    for (size_t i = begin; i < end; ++i) {
      width = std::max(width, static_cast<int64_t>(sources[i].size()));
      length = std::max(length, static_cast<int64_t>(targets[i].size()) + 1);
    }
    // Right-padded sources; decoder inputs bos y1..yn and the tokens they predict, y1..yn eos.
    std::vector<int32_t> src(static_cast<size_t>(batch * width), config.pad_id);
    std::vector<int32_t> tgt_in(static_cast<size_t>(batch * length), config.pad_id);
    std::vector<int32_t> lengths;
    for (size_t i = begin; i < end; ++i) {
      const auto row = static_cast<int64_t>(i - begin);
      std::copy(sources[i].begin(), sources[i].end(), src.begin() + row * width);
      tgt_in[static_cast<size_t>(row * length)] = config.decoder_start();
      std::copy(targets[i].begin(), targets[i].end(), tgt_in.begin() + row * length + 1);
      lengths.push_back(static_cast<int32_t>(sources[i].size()));
    }
    const Device device = model.output_embedding().device();
    const Tensor memory =
        model.encode(Tensor::from_ints({batch, width}, src).to(device), lengths, ctx);
    const Tensor hidden =
        model.decode(Tensor::from_ints({batch, length}, tgt_in).to(device), memory, lengths, ctx);
    // Padded positions come after a sentence's eos: causal attention keeps them out of the
    // positions that are read.
    const int64_t vocab = config.vocab_size;
    const int64_t chunk = std::max<int64_t>(1, kMaxLogitValues / (length * vocab));
    for (int64_t first = 0; first < batch; first += chunk) {
      const int64_t last = std::min(batch, first + chunk);
      // log softmax on the logits' device; a CPU copy of it gives the targets' entries.
      const Tensor logits = model.output_logits(hidden.slice_rows(first, last), precision);
      const Tensor log_probs =
          ops::log_softmax(logits.view({logits.numel() / vocab, vocab})).to(Device::cpu);
      const float* values = log_probs.data<float>();
      for (int64_t row = first; row < last; ++row) {
        const auto& target = targets[begin + static_cast<size_t>(row)];
        std::vector<int32_t> predicted(target.begin(), target.end());
        predicted.push_back(config.eos_id);
        const size_t sentence = begin + static_cast<size_t>(row);
        gather_log_probs(values + (row - first) * length * vocab, vocab, predicted, sentence,
                         results[sentence]);
      }
    }
  }
  return results;
}

}  // namespace tfm::internal::decode
