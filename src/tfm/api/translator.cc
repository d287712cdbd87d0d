// tfm::Translator: strings in, hypotheses or scores out, over decode::translate and decode::score.
#include "tfm/translator.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "tfm/api/model_impl.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_lines.h"

namespace tfm {

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

// The search options of a public call, attention probe and progress included.
// The CLI's ranges (tfm translate): a beam or a length past them would only allocate without
// bound (a beam of 2^31, a maximum length of 10^9).
void check_search_ranges(const TranslationOptions& options) {
  TFM_CHECK(options.beam_size >= 1 && options.beam_size <= kMaxBeamSize,
            "translate: beam size {} must be in [1, {}]", options.beam_size, kMaxBeamSize);
  TFM_CHECK(options.n_best >= 1 && options.n_best <= options.beam_size,
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
}

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
  decoding.progress = options.progress;
  if (options.return_attention) {
    const int64_t layer = options.attention_layer < 0 ? config.layers + options.attention_layer
                                                      : options.attention_layer;
    TFM_CHECK(layer >= 0 && layer < config.layers,
              "translate: attention_layer {} out of range: the model has {} decoder layers",
              options.attention_layer, config.layers);
    TFM_CHECK(options.attention_head >= -1 && options.attention_head < config.heads,
              "translate: attention_head {} out of range: the model has {} heads (-1: their mean)",
              options.attention_head, config.heads);
    decoding.attention = {layer, options.attention_head};
  }
  return decoding;
}

// Translates sources given as subword ids; empty ones are not translated (their results stay
// empty), and errors name the caller's index.
std::vector<TranslationResult> translate_ids(const Model::Impl& m, int threads,
                                             std::vector<std::vector<int32_t>> sources,
                                             const TranslationOptions& options) {
  const decode::TranslateOptions decoding = decoding_options(options, m.config);
  const int64_t longest = decode::max_input_length(decoding, m.config);
  std::vector<std::vector<int32_t>> ids;
  std::vector<size_t> positions;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) continue;
    TFM_CHECK(static_cast<int64_t>(sources[i].size()) <= longest,
              "translate: source {} has {} subword tokens, more than the maximum input length {}",
              i, sources[i].size(), longest);
    ids.push_back(std::move(sources[i]));
    positions.push_back(i);
  }
  std::vector<TranslationResult> results(sources.size());
  if (ids.empty()) return results;
  ThreadCountScope thread_count(threads);
  const auto found = decode::translate(*m.model, ids, decoding);
  for (size_t k = 0; k < found.size(); ++k)
    for (const decode::Hypothesis& h : found[k]) {
      Hypothesis& out = results[positions[k]].hypotheses.emplace_back();
      out.text = m.vocab.decode(h.tokens);
      for (const int32_t id : h.tokens) out.tokens.push_back(m.vocab.piece(id));
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
  std::vector<std::vector<int32_t>> ids(sources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    for (const std::string& piece : sources[i]) ids[i].push_back(m.vocab.id(piece));
  return translate_ids(m, impl_->threads, std::move(ids), options);
}

int64_t Translator::translate_file(const std::filesystem::path& input,
                                   const std::filesystem::path& output,
                                   const TranslationOptions& options, bool n_best_output) {
  const std::vector<std::string> lines = read_text_lines(input);
  // Every line is encoded (and checked for length) before anything is translated or written.
  const Model::Impl& m = ModelAccess::impl(*impl_->model);
  const int64_t longest = decode::max_input_length(decoding_options(options, m.config), m.config);
  std::vector<std::vector<int32_t>> encoded;
  int64_t total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    encoded.push_back(m.vocab.encode(lines[i]));
    TFM_CHECK(static_cast<int64_t>(encoded.back().size()) <= longest,
              "{}:{}: {} subword tokens, more than the maximum input length {}", input.string(),
              i + 1, encoded.back().size(), longest);
    if (!encoded.back().empty()) ++total;
  }
  AtomicFileWriter writer(output);
  // As `tfm translate`: chunks of 512 lines, so that both batch the same sentences together.
  constexpr size_t kChunk = 512;
  int64_t done_before = 0;
  for (size_t begin = 0; begin < lines.size(); begin += kChunk) {
    const size_t end = std::min(lines.size(), begin + kChunk);
    TranslationOptions chunk_options = options;
    chunk_options.return_attention = false;  // a file holds text only
    if (options.progress)
      chunk_options.progress = [&](int64_t done, int64_t) {
        options.progress(done_before + done, total);
      };
    std::vector<std::vector<int32_t>> chunk(encoded.begin() + static_cast<int64_t>(begin),
                                            encoded.begin() + static_cast<int64_t>(end));
    const auto in_chunk = std::count_if(
        chunk.begin(), chunk.end(), [](const std::vector<int32_t>& ids) { return !ids.empty(); });
    const std::vector<TranslationResult> results =
        translate_ids(m, impl_->threads, std::move(chunk), chunk_options);
    done_before += in_chunk;
    std::ostringstream out;
    for (size_t i = begin; i < end; ++i) {
      const std::vector<Hypothesis>& nbest = results[i - begin].hypotheses;
      if (!n_best_output)
        out << (nbest.empty() ? std::string() : nbest.front().text) << "\n";
      else
        for (const Hypothesis& h : nbest)
          out << i << " ||| " << h.text << " ||| " << h.score << "\n";
    }
    writer.write(out.str());
  }
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
    target_ids.push_back(m.vocab.encode(targets[i]));
  }
  decode::ScoreOptions options;
  options.batch_size = batch_size;
  ThreadCountScope threads(impl_->threads);
  const auto scores = decode::score(*m.model, source_ids, target_ids, options);
  std::vector<ScoringResult> results(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    for (const int32_t id : target_ids[i]) results[i].tokens.push_back(m.vocab.piece(id));
    results[i].tokens.push_back(m.vocab.piece(m.config.eos_id));
    results[i].token_log_probs = scores[i].token_log_probs;
    results[i].log_prob = scores[i].log_prob;
  }
  return results;
}

}  // namespace tfm
