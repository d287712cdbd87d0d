// The batching queue of tfm serve: sentences of concurrent jobs are decoded in shared batches and
// each job gets its own sentences' translations, in order, equal to translating them alone; the
// budget, the delay, the queue's limit, cancelled jobs and stopping.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "test_decode_helpers.h"
#include "tfm/core/allocator.h"
#include "tfm/core/tensor.h"
#include "tfm/nn/transformer.h"
#include "tfm/serve/batching_queue.h"
#include "tfm/serve/host_cache_bound.h"
#include "tfm/serve/request_error.h"

namespace tfm::internal::testing {
namespace {

using namespace std::chrono_literals;
using serve::BatchingQueue;
using serve::Clock;
using serve::QueueOptions;
using serve::SearchKey;

struct Batch {
  int64_t sentences, padded_tokens;
};

// Records every decoded batch.
class Recorder final : public serve::QueueObserver {
 public:
  void batch_decoded(int64_t sentences, int64_t padded, int64_t, double) override {
    std::lock_guard lock(mutex);
    batches.push_back({sentences, padded});
  }
  std::vector<Batch> all() {
    std::lock_guard lock(mutex);
    return batches;
  }
  std::mutex mutex;
  std::vector<Batch> batches;
};

class ServeQueue : public ::testing::Test {
 protected:
  ServeQueue() {
    nn::Transformer transformer(tiny_decoder_config());
    transformer.init(11);
    model_ =
        std::make_shared<const decode::InferenceModel>(transformer, decode::InferenceOptions{});
    search_.max_length_offset = 5;
    sources_ = random_sources({3, 7, 1, 5, 9, 2, 6, 4, 8, 3, 5, 7}, 40, 5);
  }

  // Each sentence translated alone with `key`'s search.
  std::vector<decode::Hypothesis> alone(const std::vector<int32_t>& source, const SearchKey& key) {
    decode::TranslateOptions options = search_;
    options.beam_size = key.beam_size;
    options.n_best = key.n_best;
    if (key.attention) options.attention = {model_->config().layers - 1, -1};
    return decode::translate(*model_, {source}, options).front();
  }

  static void expect_same(const std::vector<decode::Hypothesis>& got,
                          const std::vector<decode::Hypothesis>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].tokens, want[k].tokens);
      EXPECT_NEAR(got[k].score, want[k].score, 1e-4);
      EXPECT_EQ(got[k].attention.size(), want[k].attention.size());
    }
  }

  std::shared_ptr<const decode::InferenceModel> model_;
  decode::TranslateOptions search_;
  std::vector<std::vector<int32_t>> sources_;
};

TEST_F(ServeQueue, ConcurrentJobsGetTheirOwnSentencesInOrderAsIfTranslatedAlone) {
  Recorder recorder;
  QueueOptions options;
  options.max_delay = 20ms;  // long enough for the threads' jobs to meet in batches
  options.workers = 2;
  options.threads_per_worker = 1;
  BatchingQueue queue(model_, search_, options, &recorder);
  const std::vector<SearchKey> keys = {{1, 1, false}, {3, 2, false}, {4, 1, true}};
  constexpr int kThreads = 9;
  std::vector<std::vector<size_t>> picks(kThreads);
  std::vector<std::vector<std::vector<decode::Hypothesis>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    for (size_t i = 0; i < static_cast<size_t>(1 + t % 4); ++i)
      picks[t].push_back((static_cast<size_t>(t) * 5 + i * 7) % sources_.size());
    threads.emplace_back([&, t] {
      std::vector<std::vector<int32_t>> mine;
      for (size_t i : picks[t]) mine.push_back(sources_[i]);
      auto job = queue.submit(mine, keys[t % keys.size()]);
      ASSERT_TRUE(job->wait_until(Clock::now() + 60s));
      got[t] = job->results();
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    SCOPED_TRACE("job " + std::to_string(t));
    ASSERT_EQ(got[t].size(), picks[t].size());
    for (size_t i = 0; i < picks[t].size(); ++i)
      expect_same(got[t][i], alone(sources_[picks[t][i]], keys[t % keys.size()]));
  }
  // The jobs shared batches: fewer batches than sentences, and some of several sentences.
  const std::vector<Batch> batches = recorder.all();
  int64_t sentences = 0, largest = 0;
  for (const Batch& b : batches) {
    sentences += b.sentences;
    largest = std::max(largest, b.sentences);
  }
  EXPECT_EQ(sentences, 1 + 2 + 3 + 4 + 1 + 2 + 3 + 4 + 1);
  EXPECT_LT(static_cast<int64_t>(batches.size()), sentences);
  EXPECT_GT(largest, 1);
}

TEST_F(ServeQueue, ABatchStaysWithinTheTokenBudget) {
  Recorder recorder;
  QueueOptions options;
  options.batch_tokens = 20;
  options.max_delay = 200ms;  // the last sentences, short of the budget, wait this long
  BatchingQueue queue(model_, search_, options, &recorder);
  auto job = queue.submit(sources_, {1, 1, false});  // 60 tokens, longest 9
  ASSERT_TRUE(job->wait_until(Clock::now() + 60s));
  for (size_t i = 0; i < sources_.size(); ++i)
    expect_same(job->results()[i], alone(sources_[i], {1, 1, false}));
  EXPECT_GE(recorder.all().size(), 3u);
  for (const Batch& b : recorder.all())
    EXPECT_TRUE(b.padded_tokens <= 20 || b.sentences == 1) << b.sentences << " " << b.padded_tokens;
}

TEST_F(ServeQueue, ALoneSentenceIsDecodedAfterTheDelay) {
  QueueOptions options;
  options.batch_tokens = 1 << 20;
  options.max_delay = 30ms;
  BatchingQueue queue(model_, search_, options);
  const auto start = Clock::now();
  auto job = queue.submit({sources_[0]}, {});
  ASSERT_TRUE(job->wait_until(start + 60s));
  EXPECT_GE(Clock::now() - start, 30ms);
  expect_same(job->results()[0], alone(sources_[0], {}));
}

TEST_F(ServeQueue, AFullQueueRefusesWith503AndRetryAfter) {
  QueueOptions options;
  options.max_queued_sentences = 4;
  options.batch_tokens = 1 << 20;
  options.max_delay = 10s;
  BatchingQueue queue(model_, search_, options);
  auto first = queue.submit({sources_[0], sources_[1], sources_[2]}, {});
  try {
    queue.submit({sources_[3], sources_[4]}, {});
    FAIL() << "a fifth sentence was queued";
  } catch (const serve::RequestError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.retry_after_seconds(), 1);
    EXPECT_NE(std::string(e.what()).find("queue is full (3 sentences waiting, at most 4)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(queue.queued_sentences(), 3);
  queue.stop();  // decodes what is queued
  ASSERT_TRUE(first->wait_until(Clock::now()));
  EXPECT_EQ(first->results().size(), 3u);
  EXPECT_THROW(queue.submit({sources_[0]}, {}), serve::RequestError);  // stopped
}

TEST_F(ServeQueue, ATimedOutJobIsCancelledAndLeavesTheQueue) {
  QueueOptions options;
  options.batch_tokens = 1 << 20;
  options.max_delay = 10s;
  BatchingQueue queue(model_, search_, options);
  auto job = queue.submit({sources_[0], sources_[1]}, {});
  EXPECT_FALSE(job->wait_until(Clock::now() + 5ms));
  EXPECT_TRUE(job->cancelled());
  auto other = queue.submit({sources_[2]}, {});  // wakes a worker, which drops the cancelled
  for (int i = 0; i < 1000 && queue.queued_sentences() > 1; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(queue.queued_sentences(), 1);
  queue.stop();
  ASSERT_TRUE(other->wait_until(Clock::now()));
  expect_same(other->results()[0], alone(sources_[2], {}));
}

TEST_F(ServeQueue, StoppingDecodesEverythingQueuedFirst) {
  QueueOptions options;
  options.batch_tokens = 1 << 20;
  options.max_delay = 10s;
  BatchingQueue queue(model_, search_, options);
  std::vector<std::shared_ptr<serve::Job>> jobs;
  for (size_t i = 0; i < 4; ++i) jobs.push_back(queue.submit({sources_[i]}, {2, 1, false}));
  const auto start = Clock::now();
  queue.stop();
  EXPECT_LT(Clock::now() - start, 5s);  // not the 10 s delay
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(jobs[i]->wait_until(Clock::now()));
    expect_same(jobs[i]->results()[0], alone(sources_[i], {2, 1, false}));
  }
}

TEST_F(ServeQueue, RejectsBadOptions) {
  QueueOptions options;
  options.workers = 0;
  EXPECT_THROW(BatchingQueue(model_, search_, options), Error);
  options.workers = 1;
  options.batch_tokens = 0;
  EXPECT_THROW(BatchingQueue(model_, search_, options), Error);
}

}  // namespace
}  // namespace tfm::internal::testing

namespace tfm::internal::testing {
namespace {

// The bound after a batch: what was in use when it was made (the models) plus twice the largest
// working set since, and the allocator's cache trimmed to it.
TEST(HostCacheBound, IsTheModelsPlusTwiceTheLargestWorkingSet) {
  CachingAllocator& host = CachingAllocator::cpu();
  host.empty_cache();
  const Tensor models = Tensor::empty({1 << 18});  // 1 MiB "of models", alive throughout
  serve::HostCacheBound bound(nullptr);
  const size_t models_bytes = host.stats().bytes_in_use;
  size_t working = 0;
  {
    const Tensor a = Tensor::empty({3 << 18}), b = Tensor::empty({1 << 18});  // a batch: 4 MiB
    working = host.stats().bytes_in_use - models_bytes;
  }
  EXPECT_GE(working, size_t{4} << 20);
  bound.batch_decoded(1, 1, 1, 0.1);
  EXPECT_EQ(bound.limit(), models_bytes + 2 * working);
  {  // A smaller batch later leaves the bound where the largest put it.
    const Tensor c = Tensor::empty({1 << 16});
  }
  bound.batch_decoded(1, 1, 1, 0.1);
  EXPECT_EQ(bound.limit(), models_bytes + 2 * working);
  const AllocatorStats held = host.stats();
  EXPECT_LE(held.bytes_in_use + held.bytes_cached, bound.limit());
  host.set_cache_limit(0);  // the process's default again, for the tests after this one
}

}  // namespace
}  // namespace tfm::internal::testing
