#include "tfm/serve/batching_queue.h"

#include <algorithm>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/serve/request_error.h"

namespace tfm::internal::serve {

bool Job::wait_until(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (done_.wait_until(lock, deadline, [&] { return remaining_ == 0 || error_; })) return true;
  cancelled_ = true;
  return false;
}

const std::vector<std::vector<decode::Hypothesis>>& Job::results() const {
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  return results_;
}

bool Job::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void Job::finish(size_t index, std::vector<decode::Hypothesis> hypotheses) {
  std::lock_guard lock(mutex_);
  results_[index] = std::move(hypotheses);
  if (--remaining_ == 0) done_.notify_all();
}

void Job::fail(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = error;
  done_.notify_all();
}

BatchingQueue::BatchingQueue(std::shared_ptr<const decode::InferenceModel> model,
                             decode::TranslateOptions translate, QueueOptions options,
                             QueueObserver* observer)
    : model_(std::move(model)), translate_(translate), options_(options), observer_(observer) {
  TFM_CHECK(options_.workers >= 1, "a batching queue needs at least one worker, not {}",
            options_.workers);
  TFM_CHECK(options_.batch_tokens >= 1, "the batch token budget must be positive, not {}",
            options_.batch_tokens);
  for (int w = 0; w < options_.workers; ++w) workers_.emplace_back([this] { work(); });
}

BatchingQueue::~BatchingQueue() {
  stop();
}

std::shared_ptr<Job> BatchingQueue::submit(std::vector<std::vector<int32_t>> sources,
                                           const SearchKey& key) {
  auto job = std::make_shared<Job>(sources.size());
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw RequestError(503, "the server is shutting down", 1);
    const int64_t after = static_cast<int64_t>(pending_.size() + sources.size());
    if (after > options_.max_queued_sentences)
      throw request_error(503, "the queue is full ({} sentences waiting, at most {}); retry later",
                          pending_.size(), options_.max_queued_sentences)
          .with_retry_after(1);
    for (size_t i = 0; i < sources.size(); ++i)
      pending_.push_back({job, i, std::move(sources[i]), key, now});
  }
  changed_.notify_all();
  return job;
}

void BatchingQueue::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  workers_.clear();
}

void BatchingQueue::withdraw(const Job& job) {
  {
    std::lock_guard lock(mutex_);
    std::erase_if(pending_, [&](const Pending& p) { return p.job.get() == &job; });
  }
  changed_.notify_all();  // the oldest sentence, and so the next batch's deadline, may have changed
}

int64_t BatchingQueue::queued_sentences() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(pending_.size());
}

// The padded tokens of a batch of `count` sentences whose longest has `longest` tokens.
static int64_t padded(size_t count, size_t longest) {
  return static_cast<int64_t>(count * std::max<size_t>(longest, 1));
}

bool BatchingQueue::batch_due(Clock::time_point now, Clock::time_point& wake) {
  std::erase_if(pending_, [](const Pending& p) { return p.job->cancelled(); });
  if (pending_.empty()) return false;
  if (stopping_) return true;
  const Pending& oldest = pending_.front();
  wake = oldest.queued_at + options_.max_delay;
  if (now >= wake) return true;
  size_t count = 0, longest = 0;
  for (const Pending& p : pending_) {
    if (p.key != oldest.key) continue;
    ++count;
    longest = std::max(longest, p.source.size());
    if (padded(count, longest) >= options_.batch_tokens) return true;
  }
  return false;
}

std::vector<BatchingQueue::Pending> BatchingQueue::take_batch() {
  const SearchKey key = pending_.front().key;
  std::vector<Pending> batch;
  size_t longest = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->key != key) {
      ++it;
      continue;
    }
    const size_t with = std::max(longest, it->source.size());
    if (!batch.empty() && padded(batch.size() + 1, with) > options_.batch_tokens) break;
    longest = with;
    batch.push_back(std::move(*it));
    it = pending_.erase(it);
  }
  return batch;
}

void BatchingQueue::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    Clock::time_point wake = Clock::time_point::max();
    if (!batch_due(Clock::now(), wake)) {
      if (stopping_ && pending_.empty()) return;
      if (wake == Clock::time_point::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, wake);
      }
      continue;
    }
    std::vector<Pending> batch = take_batch();
    lock.unlock();
    decode(batch);
    lock.lock();
  }
}

void BatchingQueue::decode(std::vector<Pending>& batch) {
  const SearchKey& key = batch.front().key;
  decode::TranslateOptions options = translate_;
  options.beam_size = key.beam_size;
  options.n_best = key.n_best;
  if (key.attention) options.attention = {model_->config().decoder_depth() - 1, -1};
  options.batch_size = static_cast<int64_t>(batch.size());  // one batch: the budget made it
  options.batch_tokens = 0;
  std::vector<std::vector<int32_t>> sources;
  size_t longest = 0;
  for (Pending& p : batch) {
    longest = std::max(longest, p.source.size());
    sources.push_back(std::move(p.source));  // the batch needs only the jobs and places after
  }
  const Clock::time_point start = Clock::now();
  try {
    const decode::Translator translator(model_, options, options_.threads_per_worker);
    std::vector<std::vector<decode::Hypothesis>> results = translator.translate(sources);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    int64_t target_tokens = 0;
    for (const auto& hypotheses : results)
      if (!hypotheses.empty()) target_tokens += hypotheses.front().length;
    // The batch is counted before any of its requests can answer, so that metrics scraped after a
    // response always include its sentences.
    if (observer_)
      observer_->batch_decoded(static_cast<int64_t>(batch.size()), padded(batch.size(), longest),
                               target_tokens, seconds);
    for (size_t i = 0; i < batch.size(); ++i)
      batch[i].job->finish(batch[i].index, std::move(results[i]));
  } catch (...) {
    for (Pending& p : batch) p.job->fail(std::current_exception());
  }
}

}  // namespace tfm::internal::serve
