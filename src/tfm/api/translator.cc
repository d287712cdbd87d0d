// tfm::Translator: strings in, hypotheses or scores out, over decode::translate and decode::score.
#include "tfm/translator.h"

#include <utility>

#include "tfm/api/model_impl.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"

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
  impl_->model = std::move(model);
  impl_->threads = options.threads;
}

Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;

const Model& Translator::model() const {
  return *impl_->model;
}

std::vector<TranslationResult> Translator::translate(const std::vector<std::string>& sources,
                                                     const TranslationOptions& options) {
  const Model::Impl& m = impl_->model->impl();
  TFM_CHECK(options.n_best >= 1 && options.n_best <= options.beam_size,
            "translate: n_best {} must be between 1 and the beam size {}", options.n_best,
            options.beam_size);
  decode::TranslateOptions decoding;
  decoding.beam_size = options.beam_size;
  decoding.alpha = options.length_penalty;
  decoding.n_best = options.n_best;
  decoding.max_length_offset = options.max_length_offset;
  decoding.max_length = options.max_length;
  decoding.min_length = options.min_length;
  decoding.batch_size = options.batch_size;
  const int64_t longest = decode::max_input_length(decoding, m.config);

  // Empty sources are not translated (their results stay empty); errors name the caller's index.
  std::vector<std::vector<int32_t>> ids;
  std::vector<size_t> positions;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::vector<int32_t> encoded = m.vocab.encode(sources[i]);
    if (encoded.empty()) continue;
    TFM_CHECK(static_cast<int64_t>(encoded.size()) <= longest,
              "translate: source {} has {} subword tokens, more than the maximum input length {}",
              i, encoded.size(), longest);
    ids.push_back(std::move(encoded));
    positions.push_back(i);
  }
  std::vector<TranslationResult> results(sources.size());
  if (ids.empty()) return results;
  ThreadCountScope threads(impl_->threads);
  const auto found = decode::translate(*m.model, ids, decoding);
  for (size_t k = 0; k < found.size(); ++k)
    for (const decode::Hypothesis& h : found[k]) {
      Hypothesis& out = results[positions[k]].hypotheses.emplace_back();
      out.text = m.vocab.decode(h.tokens);
      for (const int32_t id : h.tokens) out.tokens.push_back(m.vocab.piece(id));
      out.score = h.score;
      out.log_prob = h.log_prob;
    }
  return results;
}

std::vector<ScoringResult> Translator::score(const std::vector<std::string>& sources,
                                             const std::vector<std::string>& targets,
                                             int64_t batch_size) {
  const Model::Impl& m = impl_->model->impl();
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
