// What the HTTP endpoints share: the served models (each with its vocabulary and its own batching
// queue) and a translation of raw sentences: check them against the limits, encode them, queue
// them, wait (up to the request's deadline) and detokenize. Thread-safe: every HTTP thread calls
// translate() at once; the queues' workers do the decoding.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/decode/inference_model.h"
#include "tfm/serve/batching_queue.h"
#include "tfm/serve/host_cache_bound.h"

namespace tfm::internal::serve {

struct ServedModel {
  std::string name;
  std::filesystem::path dir;
  std::shared_ptr<const decode::InferenceModel> model;
  std::shared_ptr<const data::Vocabulary> vocab;
};

struct RequestLimits {
  int64_t max_sentences = 128;        // per request
  int64_t max_sentence_chars = 4000;  // bytes of one sentence (UTF-8)
  int64_t max_beam_size = 16;
  std::chrono::milliseconds timeout{30000};  // a request's whole wait for its translations
};

struct TranslationRequest {
  std::string model;                   // empty: the default (first) model
  std::vector<std::string> sentences;  // raw text
  int64_t beam_size = 0;               // 0: the server's default
  int64_t n_best = 1;
  bool alignment = false;
  // The n-best list's minimum Bayes risk choice first, the others in the search's order
  // (eval/mbr.h, at temperature 1; needs n_best >= 2).
  bool mbr = false;
};

struct TranslatedHypothesis {
  std::string text;
  double score = 0.0;     // the search's score: log p / length penalty
  std::string alignment;  // Pharaoh "i-j ..." word pairs (source-target), when asked for
};

// Per sentence its n-best translations, best first (an empty sentence: one empty translation).
using TranslationResult = std::vector<std::vector<TranslatedHypothesis>>;

class TranslationService {
 public:
  // One queue per model, each with `queue` options; `search` holds the default beam size and the
  // options every search shares. The first model is the default one. Built once the models are
  // loaded: from then on the host allocator's cache is bounded (host_cache_bound.h).
  TranslationService(std::vector<ServedModel> models, decode::TranslateOptions search,
                     QueueOptions queue, RequestLimits limits, QueueObserver* observer = nullptr);
  ~TranslationService();  // stop()

  // Throws RequestError: 400 (bad sentence, option or unknown model), 503 (queue full, stopping),
  // 504 (deadline passed).
  TranslationResult translate(const TranslationRequest& request) const;

  // Refuses new requests, finishes what is queued, joins the workers.
  void stop();

  std::vector<std::string> model_names() const;
  const ServedModel& model(const std::string& name) const;  // RequestError 400 if unknown
  int64_t queued_sentences() const;
  const RequestLimits& limits() const { return limits_; }

 private:
  struct Entry {
    ServedModel served;
    std::unique_ptr<BatchingQueue> queue;
  };
  const Entry& entry(const std::string& name) const;

  HostCacheBound cache_bound_;  // before the queues: their workers report to it
  std::vector<Entry> entries_;
  decode::TranslateOptions search_;
  RequestLimits limits_;
};

}  // namespace tfm::internal::serve
