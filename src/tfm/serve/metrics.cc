#include "tfm/serve/metrics.h"

#include <malloc.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <fstream>

#include "tfm/core/allocator.h"

namespace tfm::internal::serve {

namespace {

// The process's resident set size in bytes (/proc/self/statm's second field, in pages).
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0.0;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

prometheus::Histogram::BucketBoundaries powers_of_two(int count) {
  prometheus::Histogram::BucketBoundaries bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(static_cast<double>(1LL << i));
  return bounds;
}

// An unlabelled gauge or counter registered in `registry`.
prometheus::Gauge& gauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}
prometheus::Counter& counter(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("tfm_http_requests_total")
                    .Help("HTTP requests answered, by endpoint and status code")
                    .Register(*registry_)),
      latency_(prometheus::BuildHistogram()
                   .Name("tfm_http_request_duration_seconds")
                   .Help("Time from a request's arrival to its answer, by endpoint")
                   .Register(*registry_)),
      ready_(
          gauge(*registry_, "tfm_ready", "1 once every model is loaded and the server translates")),
      queue_(gauge(*registry_, "tfm_queue_sentences", "Sentences waiting to be decoded")),
      batch_sentences_(prometheus::BuildHistogram()
                           .Name("tfm_batch_sentences")
                           .Help("Sentences per decoded batch")
                           .Register(*registry_)
                           .Add({}, powers_of_two(10))),
      batch_tokens_(prometheus::BuildHistogram()
                        .Name("tfm_batch_padded_source_tokens")
                        .Help("Padded source tokens per decoded batch")
                        .Register(*registry_)
                        .Add({}, powers_of_two(14))),
      sentences_(counter(*registry_, "tfm_translated_sentences_total", "Sentences decoded")),
      target_tokens_(counter(*registry_, "tfm_target_tokens_total",
                             "Tokens generated (the best hypotheses', eos included)")),
      decode_seconds_(counter(*registry_, "tfm_decode_seconds_total",
                              "Time the decoding workers spent decoding")),
      tokens_per_second_(gauge(*registry_, "tfm_decode_target_tokens_per_second",
                               "Generated tokens per second of the last decoded batch")),
      resident_bytes_(gauge(*registry_, "tfm_process_resident_memory_bytes",
                            "Resident memory of the server process")),
      allocator_in_use_(gauge(*registry_, "tfm_host_allocator_in_use_bytes",
                              "Host memory of tensors alive (the caching allocator's)")),
      allocator_cached_(gauge(*registry_, "tfm_host_allocator_cached_bytes",
                              "Host memory the caching allocator keeps for reuse")),
      malloc_in_use_(gauge(*registry_, "tfm_malloc_in_use_bytes",
                           "Memory allocated through malloc and not freed (glibc's mallinfo2)")),
      malloc_free_(gauge(*registry_, "tfm_malloc_free_bytes",
                         "Freed memory that malloc's heaps still hold (glibc's mallinfo2)")) {}

void Metrics::request(const std::string& endpoint, int status, double seconds) {
  requests_.Add({{"endpoint", endpoint}, {"code", std::to_string(status)}}).Increment();
  static const prometheus::Histogram::BucketBoundaries bounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  latency_.Add({{"endpoint", endpoint}}, bounds).Observe(seconds);
}

void Metrics::set_ready(bool ready) {
  ready_.Set(ready ? 1.0 : 0.0);
}

void Metrics::batch_decoded(int64_t sentences, int64_t padded_source_tokens, int64_t target_tokens,
                            double seconds) {
  batch_sentences_.Observe(static_cast<double>(sentences));
  batch_tokens_.Observe(static_cast<double>(padded_source_tokens));
  sentences_.Increment(static_cast<double>(sentences));
  target_tokens_.Increment(static_cast<double>(target_tokens));
  decode_seconds_.Increment(seconds);
  if (seconds > 0) tokens_per_second_.Set(static_cast<double>(target_tokens) / seconds);
}

std::string Metrics::text(int64_t queued_sentences) const {
  queue_.Set(static_cast<double>(queued_sentences));
  resident_bytes_.Set(resident_bytes());
  const AllocatorStats host = CachingAllocator::cpu().stats();
  allocator_in_use_.Set(static_cast<double>(host.bytes_in_use));
  allocator_cached_.Set(static_cast<double>(host.bytes_cached));
  const struct mallinfo2 heap = mallinfo2();
  malloc_in_use_.Set(static_cast<double>(heap.uordblks + heap.hblkhd));
  malloc_free_.Set(static_cast<double>(heap.fordblks));
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace tfm::internal::serve
