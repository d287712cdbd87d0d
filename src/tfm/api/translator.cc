// tfm::Translator: strings in, hypotheses or scores out, over decode::translate and decode::score.
#include "tfm/translator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include "tfm/api/model_impl.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/mbr.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_lines.h"
#include "tfm/translation/file_translation.h"
#include "tfm/translation/text_translation.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

struct Translator::Impl {
  std::shared_ptr<const Model> model;
  int threads = 0;
};

Translator::Translator(std::shared_ptr<const Model> model, const TranslatorOptions& options)
    : impl_(std::make_unique<Impl>()) {
  TFM_CHECK(model != nullptr, "Translator: no model (a null pointer)");
  TFM_CHECK(options.threads >= 0, "Translator: threads {} must be >= 0 (0: the default)",
            options.threads);
  check_thread_count(options.threads, "Translator: threads");
  impl_->model = std::move(model);
  impl_->threads = options.threads;
}

Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;

const Model& Translator::model() const {
  return *impl_->model;
}

namespace {

// The CLI's ranges (tfm translate): a beam or a length past them would only allocate without
// bound (a beam of 2^31, a maximum length of 10^9).
void check_search_ranges(const TranslationOptions& options) {
  TFM_CHECK(options.beam_size >= 1 && options.beam_size <= kMaxBeamSize,
            "translate: beam size {} must be in [1, {}]", options.beam_size, kMaxBeamSize);
  TFM_CHECK(options.sampling >= 0 && options.sampling <= kMaxBeamSize,
            "translate: sampling {} must be in [0, {}] (0: a search)", options.sampling,
            kMaxBeamSize);
  TFM_CHECK(options.sampling > 0 || (options.n_best >= 1 && options.n_best <= options.beam_size),
            "translate: n_best {} must be between 1 and the beam size {}", options.n_best,
            options.beam_size);
  TFM_CHECK(std::isfinite(options.length_penalty), "translate: length_penalty {} is not finite",
            options.length_penalty);
  TFM_CHECK(options.max_length_offset >= 1 && options.max_length_offset <= kMaxOutputLength,
            "translate: max_length_offset {} must be in [1, {}]", options.max_length_offset,
            kMaxOutputLength);
  TFM_CHECK(options.max_length >= 0 && options.max_length <= kMaxOutputLength,
            "translate: max_length {} must be in [0, {}] (0: source length + max_length_offset)",
            options.max_length, kMaxOutputLength);
  TFM_CHECK(options.min_length >= 0 && options.min_length <= kMaxOutputLength,
            "translate: min_length {} must be in [0, {}]", options.min_length, kMaxOutputLength);
  TFM_CHECK(options.batch_tokens >= 0, "translate: batch_tokens {} must be >= 0 (0: no limit)",
            options.batch_tokens);
  TFM_CHECK(options.no_repeat_ngram_size >= 0 && options.no_repeat_ngram_size <= kMaxOutputLength,
            "translate: no_repeat_ngram_size {} must be in [0, {}] (0: off)",
            options.no_repeat_ngram_size, kMaxOutputLength);
  TFM_CHECK(!options.mbr || options.sampling > 0 || options.n_best >= 2,
            "translate: mbr chooses from the n_best list: give it at least 2 hypotheses "
            "(e.g. beam_size 16, n_best 16), not {}",
            options.n_best);
  TFM_CHECK(!options.mbr || options.sampling != 1,
            "translate: mbr chooses among the samples: draw at least 2, not 1");
  TFM_CHECK(options.sampling == 0 || !options.return_attention,
            "translate: sampling returns no attention (it comes from a search)");
  TFM_CHECK(std::isfinite(options.mbr_temperature) && options.mbr_temperature > 0,
            "translate: mbr_temperature {} must be a positive finite number",
            options.mbr_temperature);
}

// The search options of a public call, attention probe and progress included.
decode::TranslateOptions decoding_options(const TranslationOptions& options,
                                          const ModelConfig& config) {
  check_search_ranges(options);
  decode::TranslateOptions decoding;
  decoding.beam_size = options.beam_size;
  decoding.alpha = options.length_penalty;
  decoding.n_best = options.n_best;
  decoding.max_length_offset = options.max_length_offset;
  decoding.max_length = options.max_length;
  decoding.min_length = options.min_length;
  decoding.batch_size = options.batch_size;
  decoding.batch_tokens = options.batch_tokens;
  decoding.no_repeat_ngram = options.no_repeat_ngram_size;
  decoding.sampling = {options.sampling, options.sampling_epsilon, options.sampling_temperature,
                       options.seed};
  if (options.sampling > 0) decode::check_sampling_options(decoding.sampling);
  decoding.progress = options.progress;
  if (options.return_attention) {
    const int64_t decoder_layers = config.decoder_depth();
    const int64_t layer = options.attention_layer < 0 ? decoder_layers + options.attention_layer
                                                      : options.attention_layer;
    TFM_CHECK(layer >= 0 && layer < decoder_layers,
              "translate: attention_layer {} out of range: the model has {} decoder layers",
              options.attention_layer, decoder_layers);
    TFM_CHECK(options.attention_head >= -1 && options.attention_head < config.heads,
              "translate: attention_head {} out of range: the model has {} heads (-1: their mean)",
              options.attention_head, config.heads);
    decoding.attention = {layer, options.attention_head};
  }
  return decoding;
}

// decode::translate over the model with the translator's thread count; with options.mbr, each
// n-best list's minimum Bayes risk choice is then moved to its front.
translation::Search search_with(const Model::Impl& m, int threads,
                                const decode::TranslateOptions& decoding,
                                const TranslationOptions& options) {
  std::optional<eval::MbrOptions> mbr;
  if (options.mbr) mbr = eval::MbrOptions{options.mbr_temperature, options.sampling > 0};
  return [&m, threads, &decoding, mbr](const std::vector<std::vector<int32_t>>& ids) {
    ThreadCountScope thread_count(threads);
    std::vector<translation::NBest> lists = decode::translate(*m.model, ids, decoding);
    if (mbr) eval::choose_by_mbr(m.vocab, lists, *mbr);
    return lists;
  };
}

// Translates sources given as subword ids; empty ones are not translated (their results stay
// empty), and errors name the caller's index.
std::vector<TranslationResult> translate_ids(const Model::Impl& m, int threads,
                                             std::vector<std::vector<int32_t>> sources,
                                             const TranslationOptions& options) {
  const decode::TranslateOptions decoding = decoding_options(options, m.config);
  const translation::LengthPolicy policy{decode::max_input_length(decoding, m.config),
                                         translation::LongInputs::reject};
  for (size_t i = 0; i < sources.size(); ++i)
    translation::apply_length_policy(sources[i], policy,
                                     fmt::format("translate: source {} has", i));
  const std::vector<translation::NBest> found =
      translation::translate_nonempty(sources, search_with(m, threads, decoding, options));
  std::vector<TranslationResult> results(sources.size());
  for (size_t i = 0; i < found.size(); ++i)
    for (const decode::Hypothesis& h : found[i]) {
      Hypothesis& out = results[i].hypotheses.emplace_back();
      out.text = translation::hypothesis_text(m.vocab, h);
      out.tokens = translation::pieces(m.vocab, h.tokens);
      out.score = h.score;
      out.log_prob = h.log_prob;
      out.attention = h.attention;
    }
  return results;
}

}  // namespace

std::vector<TranslationResult> Translator::translate(const std::vector<std::string>& sources,
                                                     const TranslationOptions& options) {
  const Model::Impl& m = ModelAccess::impl(*impl_->model);
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(sources.size());
  for (const std::string& source : sources) ids.push_back(m.vocab.encode(source));
  return translate_ids(m, impl_->threads, std::move(ids), options);
}

std::vector<TranslationResult> Translator::translate_tokens(
    const std::vector<std::vector<std::string>>& sources, const TranslationOptions& options) {
  const Model::Impl& m = ModelAccess::impl(*impl_->model);
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(sources.size());
  for (const std::vector<std::string>& pieces : sources) ids.push_back(m.vocab.source_ids(pieces));
  return translate_ids(m, impl_->threads, std::move(ids), options);
}

int64_t Translator::translate_file(const std::filesystem::path& input,
                                   const std::filesystem::path& output,
                                   const TranslationOptions& options, bool n_best_output) {
  const std::vector<std::string> lines = read_text_lines(input);
  const Model::Impl& m = ModelAccess::impl(*impl_->model);
  // Every line is encoded (and checked for length) before anything is translated or written.
  const translation::LengthPolicy policy{
      decode::max_input_length(decoding_options(options, m.config), m.config),
      translation::LongInputs::reject};
  std::vector<std::vector<int32_t>> encoded =
      translation::encode_lines(m.vocab, lines, policy, input.string());
  const auto total = static_cast<int64_t>(
      std::count_if(encoded.begin(), encoded.end(),
                    [](const std::vector<int32_t>& ids) { return !ids.empty(); }));
  AtomicFileWriter writer(output);
  TranslationOptions text_options = options;
  text_options.return_attention = false;  // a file holds text only
  decode::TranslateOptions decoding = decoding_options(text_options, m.config);
  // The progress counts cover the whole file: the sources of the chunks before, then this one's.
  int64_t done_before = 0;
  if (options.progress)
    decoding.progress = [&](int64_t done, int64_t) { options.progress(done_before + done, total); };
  const translation::Search search = search_with(m, impl_->threads, decoding, options);
  translation::ChunkedTranslation
      chunks;  // as `tfm translate`: the same sentences batched together
  chunks.format.n_best = n_best_output;
  translation::translate_chunks(
      m.vocab, std::move(encoded),
      [&](const std::vector<std::vector<int32_t>>& ids) {
        auto found = search(ids);
        done_before += static_cast<int64_t>(ids.size());
        return found;
      },
      [&](std::string_view text) { writer.write(text); }, chunks);
  writer.commit();
  return static_cast<int64_t>(lines.size());
}

std::vector<ScoringResult> Translator::score(const std::vector<std::string>& sources,
                                             const std::vector<std::string>& targets,
                                             int64_t batch_size) {
  const Model::Impl& m = ModelAccess::impl(*impl_->model);
  TFM_CHECK(sources.size() == targets.size(), "score: {} sources but {} targets", sources.size(),
            targets.size());
  std::vector<std::vector<int32_t>> source_ids, target_ids;
  for (size_t i = 0; i < sources.size(); ++i) {
    source_ids.push_back(m.vocab.encode(sources[i]));
    target_ids.push_back(m.vocab.encode_target(targets[i]));
  }
  decode::ScoreOptions options;
  options.batch_size = batch_size;
  ThreadCountScope threads(impl_->threads);
  const auto scores = decode::score(*m.model, source_ids, target_ids, options);
  std::vector<ScoringResult> results(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    results[i].tokens = translation::pieces(m.vocab, target_ids[i]);
    results[i].tokens.push_back(m.vocab.piece(m.config.eos_id));
    results[i].token_log_probs = scores[i].token_log_probs;
    results[i].log_prob = scores[i].log_prob;
  }
  return results;
}

}  // namespace tfm
