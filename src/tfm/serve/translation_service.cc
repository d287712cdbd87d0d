#include "tfm/serve/translation_service.h"

#include <utility>

#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/eval/mbr.h"
#include "tfm/io/text_reader.h"
#include "tfm/serve/request_error.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::serve {

TranslationService::TranslationService(std::vector<ServedModel> models,
                                       decode::TranslateOptions search, QueueOptions queue,
                                       RequestLimits limits, QueueObserver* observer)
    : cache_bound_(observer), search_(search), limits_(limits) {
  TFM_CHECK(!models.empty(), "a translation service needs at least one model");
  for (ServedModel& served : models) {
    for (const Entry& e : entries_)
      TFM_CHECK(e.served.name != served.name, "two models are named '{}'", served.name);
    auto batching = std::make_unique<BatchingQueue>(served.model, search, queue, &cache_bound_);
    entries_.push_back({std::move(served), std::move(batching)});
  }
}

TranslationService::~TranslationService() {
  stop();
}

void TranslationService::stop() {
  for (Entry& e : entries_) e.queue->stop();
}

std::vector<std::string> TranslationService::model_names() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.served.name);
  return names;
}

const TranslationService::Entry& TranslationService::entry(const std::string& name) const {
  if (name.empty()) return entries_.front();
  for (const Entry& e : entries_)
    if (e.served.name == name) return e;
  throw request_error(400, "unknown model '{}'; this server has: {}", name,
                      fmt::join(model_names(), ", "));
}

const ServedModel& TranslationService::model(const std::string& name) const {
  return entry(name).served;
}

int64_t TranslationService::queued_sentences() const {
  int64_t total = 0;
  for (const Entry& e : entries_) total += e.queue->queued_sentences();
  return total;
}

TranslationResult TranslationService::translate(const TranslationRequest& request) const {
  const Clock::time_point deadline = Clock::now() + limits_.timeout;
  const Entry& e = entry(request.model);
  const data::Vocabulary& vocab = *e.served.vocab;
  const int64_t sentences = static_cast<int64_t>(request.sentences.size());
  if (sentences > limits_.max_sentences)
    throw request_error(400, "{} sentences in one request, more than the maximum {}", sentences,
                        limits_.max_sentences);
  SearchKey key;
  key.beam_size = request.beam_size > 0 ? request.beam_size : search_.beam_size;
  key.n_best = request.n_best;
  key.attention = request.alignment;
  if (key.beam_size > limits_.max_beam_size)
    throw request_error(400, "beam_size {} is more than the maximum {}", key.beam_size,
                        limits_.max_beam_size);
  if (key.n_best < 1 || key.n_best > key.beam_size)
    throw request_error(400, "n_best {} must be between 1 and the beam size {}", key.n_best,
                        key.beam_size);
  if (request.mbr && key.n_best < 2)
    throw request_error(400,
                        "mbr chooses from the n-best list: ask for n_best of at least 2 (or "
                        "alternatives of at least 1), not {}",
                        key.n_best);

  // Every sentence is checked and encoded before any is queued.
  const int64_t max_input = decode::max_input_length(search_, e.served.model->config());
  std::vector<std::vector<int32_t>> encoded(request.sentences.size());
  for (size_t i = 0; i < request.sentences.size(); ++i) {
    const std::string& text = request.sentences[i];
    if (static_cast<int64_t>(text.size()) > limits_.max_sentence_chars)
      throw request_error(400, "sentence {}: {} bytes, more than the maximum {}", i, text.size(),
                          limits_.max_sentence_chars);
    if (const auto bad = find_invalid_utf8(text))
      throw request_error(400, "sentence {}: invalid UTF-8 at byte {}", i, *bad);
    encoded[i] = vocab.encode(text);
    if (static_cast<int64_t>(encoded[i].size()) > max_input)
      throw request_error(400, "{}",
                          translation::too_long_message(fmt::format("sentence {}:", i),
                                                        encoded[i].size(), max_input));
  }

  // Empty sentences are not queued: they translate as empty lines, as tfm translate's do.
  std::vector<translation::NBest> found = translation::translate_nonempty(
      encoded, [&](const std::vector<std::vector<int32_t>>& queued) {
        std::shared_ptr<Job> job = e.queue->submit(queued, key);
        if (!job->wait_until(deadline)) {
          e.queue->withdraw(*job);
          throw request_error(504, "the translation took longer than the request timeout ({} ms)",
                              limits_.timeout.count());
        }
        return job->results();
      });
  if (request.mbr) {
    // On this HTTP thread alone, as the detokenizing below: an OpenMP team started here would
    // spin beside the decoding workers' threads.
    const ThreadCountScope one_thread(1);
    eval::choose_by_mbr(vocab, found);
  }
  TranslationResult result(request.sentences.size());
  for (size_t i = 0; i < found.size(); ++i) {
    for (const decode::Hypothesis& h : found[i]) {
      TranslatedHypothesis t{translation::hypothesis_text(vocab, h), h.score, {}};
      if (request.alignment) t.alignment = translation::word_alignment(vocab, encoded[i], h, 0.0);
      result[i].push_back(std::move(t));
    }
    if (result[i].empty()) result[i].emplace_back();
  }
  return result;
}

}  // namespace tfm::internal::serve
