#include "tfm/decode/translate.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/decode/ensemble_scorer.h"

namespace tfm::internal::decode {

SearchOptions search_options(const TranslateOptions& options, const ModelConfig& config) {
  SearchOptions search;
  search.beam_size = options.beam_size;
  search.alpha = options.alpha;
  search.n_best = options.n_best;
  search.min_length = options.min_length;
  search.bos_id = config.decoder_start();
  search.eos_id = config.eos_id;
  search.early_stopping = options.early_stopping;
  search.no_repeat_ngram = options.no_repeat_ngram;
  return search;
}

int64_t max_input_length(const TranslateOptions& options, const ModelConfig& config) {
  TFM_CHECK(options.max_input_length >= 0, "maximum input length {} must be >= 0 (0: the model's)",
            options.max_input_length);
  if (options.max_input_length == 0) return config.longest_sequence();
  TFM_CHECK(!config.learned_positions() || options.max_input_length <= config.longest_sequence(),
            "maximum input length {} exceeds the model's learned position table of {}",
            options.max_input_length, config.longest_sequence());
  return options.max_input_length;
}

int64_t max_output_length(int64_t source_length, const TranslateOptions& options,
                          const ModelConfig& config) {
  int64_t length =
      options.max_length > 0 ? options.max_length : source_length + options.max_length_offset;
  // Learned positions end at the table; sinusoids have no end.
  if (config.learned_positions()) length = std::min(length, config.longest_sequence());
  return std::max<int64_t>(length, 1);
}

namespace {

// The ensemble's members must read and write the same tokens.
void check_ensemble(const std::vector<const InferenceModel*>& models,
                    const TranslateOptions& options) {
  TFM_CHECK(!models.empty(), "translate: no model");
  for (const InferenceModel* model : models)
    TFM_CHECK(model != nullptr, "translate: a missing model");
  if (models.size() == 1) return;
  TFM_CHECK(!options.attention.enabled(),
            "translate: attention weights are one model's, not an ensemble's of {}", models.size());
  const ModelConfig& first = models.front()->config();
  for (size_t i = 1; i < models.size(); ++i) {
    const ModelConfig& config = models[i]->config();
    TFM_CHECK(config.task == first.task, "ensemble: model {} is a {} model, model 1 a {} model",
              i + 1, config.task, first.task);
    TFM_CHECK(config.vocab_size == first.vocab_size && config.pad_id == first.pad_id &&
                  config.eos_id == first.eos_id && config.decoder_start() == first.decoder_start(),
              "ensemble: model {} has {} tokens (pad {}, start {}, eos {}), model 1 {} (pad {}, "
              "start {}, eos {}): an ensemble needs one vocabulary",
              i + 1, config.vocab_size, config.pad_id, config.decoder_start(), config.eos_id,
              first.vocab_size, first.pad_id, first.decoder_start(), first.eos_id);
  }
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate(const InferenceModel& model,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options) {
  return translate(std::vector<const InferenceModel*>{&model}, sources, options);
}

std::vector<std::vector<Hypothesis>> translate(const std::vector<const InferenceModel*>& models,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options) {
  check_ensemble(models, options);
  const ModelConfig& config = models.front()->config();
  TFM_CHECK(options.batch_size >= 1, "translate: batch size {} must be at least 1",
            options.batch_size);
  TFM_CHECK(options.beam_size >= 1, "translate: beam size {} must be at least 1",
            options.beam_size);
  int64_t longest = max_input_length(options, config);
  for (const InferenceModel* model : models)
    longest = std::min(longest, max_input_length(options, model->config()));
  for (size_t i = 0; i < sources.size(); ++i) {
    TFM_CHECK(!sources[i].empty(), "translate: source sentence {} is empty", i);
    TFM_CHECK(static_cast<int64_t>(sources[i].size()) <= longest,
              "translate: source sentence {} has {} tokens, more than the maximum input length {}",
              i, sources[i].size(), longest);
  }
  const SearchOptions search = search_options(options, config);
  const bool sampling = options.sampling.samples > 0;
  if (sampling) {
    check_sampling_options(options.sampling);
    TFM_CHECK(!options.constraint, "translate: sampling takes no constraints");
    TFM_CHECK(!options.attention.enabled(),
              "translate: sampling keeps no attention weights (alignments and attention output "
              "come from a search)");
  }

  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (options.sort_by_length) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  }

  std::vector<std::vector<Hypothesis>> results(sources.size());
  // The longest output every model allows (learned position tables end).
  const auto output_length = [&](int64_t source_length) {
    int64_t length = max_output_length(source_length, options, config);
    for (const InferenceModel* model : models)
      length = std::min(length, max_output_length(source_length, options, model->config()));
    return length;
  };
  const auto batch_size = static_cast<size_t>(options.batch_size);
  for (size_t begin = 0, end = 0; begin < order.size(); begin = end) {
    // A batch takes sentences while it has fewer than batch_size and, with a token budget, while
    // its padded size (sentences x longest source) stays within batch_tokens; one sentence always
    // fits.
    int64_t width = 0;
    for (end = begin; end < order.size() && end - begin < batch_size; ++end) {
      const int64_t wider = std::max(width, static_cast<int64_t>(sources[order[end]].size()));
      if (options.batch_tokens > 0 && end > begin &&
          wider * static_cast<int64_t>(end - begin + 1) > options.batch_tokens)
        break;
      width = wider;
    }
    const auto batch = static_cast<int64_t>(end - begin);

    // Right-padded source ids, their lengths, and each sentence's maximum output length.
    std::vector<int32_t> ids(static_cast<size_t>(batch * width), config.pad_id);
    std::vector<int32_t> lengths;
    std::vector<int64_t> max_lengths;
    std::vector<uint64_t> keys;  // the sources' indices, the keys of their samples' draws
    std::vector<std::unique_ptr<ConstraintState>> constraints;
    for (size_t i = begin; i < end; ++i) {
      const auto& source = sources[order[i]];
      std::copy(source.begin(), source.end(),
                ids.begin() + static_cast<int64_t>(i - begin) * width);
      lengths.push_back(static_cast<int32_t>(source.size()));
      max_lengths.push_back(output_length(static_cast<int64_t>(source.size())));
      keys.push_back(static_cast<uint64_t>(order[i]));
      if (options.constraint)
        constraints.push_back(
            options.constraint->start(static_cast<int64_t>(order[i]), max_lengths.back()));
    }
    const int64_t capacity = *std::max_element(max_lengths.begin(), max_lengths.end());
    // Each model encodes the batch for its own scorer.
    std::vector<std::unique_ptr<StepScorer>> scorers;
    for (const InferenceModel* model : models) {
      auto ctx = nn::ForwardContext::inference(model->precision());
      Tensor memory = model->transformer().encode(
          Tensor::from_ints({batch, width}, ids).to(model->device()), lengths, ctx);
      scorers.push_back(std::make_unique<TransformerScorer>(
          *model, memory, lengths, sampling ? 1 : options.beam_size, capacity, options.attention));
    }
    std::unique_ptr<StepScorer> ensemble;
    if (scorers.size() > 1) ensemble = std::make_unique<EnsembleScorer>(std::move(scorers));
    StepScorer& scorer = ensemble ? *ensemble : *scorers.front();
    auto found = sampling ? sampling_search(scorer, max_lengths, keys, search, options.sampling)
                 : options.beam_size == 1
                     ? greedy_search(scorer, max_lengths, search, std::move(constraints))
                     : beam_search(scorer, max_lengths, search, std::move(constraints));
    for (size_t i = begin; i < end; ++i) {
      auto& hypotheses = found[i - begin];
      for (auto& h : hypotheses)
        for (auto& weights : h.attention) weights.resize(sources[order[i]].size());
      results[order[i]] = std::move(hypotheses);
    }
    if (options.progress)
      options.progress(static_cast<int64_t>(end), static_cast<int64_t>(sources.size()));
  }
  return results;
}

std::vector<std::vector<Hypothesis>> translate(const nn::Transformer& model,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options, DType precision) {
  const InferenceModel packed(model, {precision, model.output_embedding().device()});
  return translate(packed, sources, options);
}

Translator::Translator(std::shared_ptr<const InferenceModel> model, TranslateOptions options,
                       int threads)
    : Translator(std::vector<std::shared_ptr<const InferenceModel>>{std::move(model)},
                 std::move(options), threads) {}

Translator::Translator(std::vector<std::shared_ptr<const InferenceModel>> models,
                       TranslateOptions options, int threads)
    : models_(std::move(models)), options_(std::move(options)), threads_(threads) {
  TFM_CHECK(!models_.empty(), "translator: no model");
  for (const auto& model : models_) TFM_CHECK(model != nullptr, "translator: no model");
  check_thread_count(threads_, "translator: threads");
}

std::vector<std::vector<Hypothesis>> Translator::translate(
    const std::vector<std::vector<int32_t>>& sources) const {
  const ThreadCountScope threads(threads_);
  std::vector<const InferenceModel*> models;
  for (const auto& model : models_) models.push_back(model.get());
  return decode::translate(models, sources, options_);
}

}  // namespace tfm::internal::decode
