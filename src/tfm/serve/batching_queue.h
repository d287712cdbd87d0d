// Batching across requests: the sentences of concurrent requests wait in one queue, and decoding
// workers (each a thread with its own OpenMP thread count) take them as batches. A worker takes a
// batch once the sentences waiting for the same search options fill the token budget, or once the
// oldest of them has waited the maximum delay; it takes the oldest first, up to the budget, and
// decodes them with the batched search (decode::translate sorts them by length). Each request's
// job gets its sentences back in its own order. HTTP threads only submit and wait: they never
// decode.
#pragma once

#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tfm/decode/inference_model.h"
#include "tfm/decode/search.h"
#include "tfm/decode/translate.h"

namespace tfm::internal::serve {

using Clock = std::chrono::steady_clock;

// What a request may choose of the search; sentences are batched together only when equal.
struct SearchKey {
  int64_t beam_size = 4;
  int64_t n_best = 1;
  bool attention = false;  // the alignment's attention (the last layer's, mean over the heads)
  auto operator<=>(const SearchKey&) const = default;
};

struct QueueOptions {
  int64_t batch_tokens = 4096;  // padded source tokens per batch (at least one sentence)
  std::chrono::microseconds max_delay{5000};  // the longest a sentence waits for company
  int64_t max_queued_sentences = 1024;        // beyond it submit() refuses (503)
  int workers = 1;                            // decoding threads
  int threads_per_worker = 0;                 // OpenMP threads of each; <= 0: the process's count
};

// Told of every decoded batch (the server's metrics).
class QueueObserver {
 public:
  virtual ~QueueObserver() = default;
  virtual void batch_decoded(int64_t sentences, int64_t padded_source_tokens, int64_t target_tokens,
                             double seconds) = 0;
};

// One request's sentences: filled in by the workers, waited for by the request's thread.
class Job {
 public:
  explicit Job(size_t sentences) : results_(sentences), remaining_(sentences) {}

  // Waits until every sentence is decoded (true) or `deadline` passes (false: the job is then
  // cancelled, and its sentences still waiting are dropped from the queue).
  bool wait_until(Clock::time_point deadline);
  // Per sentence its n-best hypotheses; rethrows a decoding error. Only after wait_until is true.
  const std::vector<std::vector<decode::Hypothesis>>& results() const;
  bool cancelled() const;

 private:
  friend class BatchingQueue;
  void finish(size_t index, std::vector<decode::Hypothesis> hypotheses);
  void fail(std::exception_ptr error);

  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::vector<decode::Hypothesis>> results_;
  size_t remaining_;
  std::exception_ptr error_;
  bool cancelled_ = false;
};

class BatchingQueue {
 public:
  // `translate` holds the options every search shares (alpha, lengths); a SearchKey sets the rest.
  BatchingQueue(std::shared_ptr<const decode::InferenceModel> model,
                decode::TranslateOptions translate, QueueOptions options,
                QueueObserver* observer = nullptr);
  ~BatchingQueue();  // stop()
  BatchingQueue(const BatchingQueue&) = delete;
  BatchingQueue& operator=(const BatchingQueue&) = delete;

  // Queues the sentences (token ids, none empty) of one request. A RequestError 503 (with
  // Retry-After) when the queue would hold more than max_queued_sentences, or when stopping.
  std::shared_ptr<Job> submit(std::vector<std::vector<int32_t>> sources, const SearchKey& key);

  // Drops the job's sentences still waiting (a request that timed out).
  void withdraw(const Job& job);

  // Refuses new work, decodes what is queued, and joins the workers.
  void stop();

  int64_t queued_sentences() const;
  const decode::InferenceModel& model() const { return *model_; }

 private:
  struct Pending {
    std::shared_ptr<Job> job;
    size_t index;  // the sentence's place in its job
    std::vector<int32_t> source;
    SearchKey key;
    Clock::time_point queued_at;
  };

  void work();
  // Under the lock: drops cancelled sentences, then whether a batch for the oldest sentence's key
  // is due (budget filled, delay passed, or stopping); `wake` is when it will be.
  bool batch_due(Clock::time_point now, Clock::time_point& wake);
  std::vector<Pending> take_batch();  // under the lock
  void decode(std::vector<Pending>& batch);

  std::shared_ptr<const decode::InferenceModel> model_;
  decode::TranslateOptions translate_;
  QueueOptions options_;
  QueueObserver* observer_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tfm::internal::serve
