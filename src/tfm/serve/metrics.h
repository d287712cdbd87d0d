// The server's metrics, served at GET /metrics in the Prometheus text format (prometheus-cpp's
// registry and serializer): requests by endpoint and status code, their latency, the queue's
// length, the decoded batches' sizes, tokens and decoding time, the process's resident memory and
// the host caching allocator's bytes in use and cached.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "tfm/serve/batching_queue.h"

namespace tfm::internal::serve {

class Metrics final : public QueueObserver {
 public:
  Metrics();

  // One answered request: its endpoint ("/translate"), status code and time taken.
  void request(const std::string& endpoint, int status, double seconds);
  void set_ready(bool ready);

  void batch_decoded(int64_t sentences, int64_t padded_source_tokens, int64_t target_tokens,
                     double seconds) override;

  // Everything above, with the queue's length now, in the Prometheus text exposition format.
  std::string text(int64_t queued_sentences) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Gauge& ready_;
  prometheus::Gauge& queue_;
  prometheus::Histogram& batch_sentences_;
  prometheus::Histogram& batch_tokens_;
  prometheus::Counter& sentences_;
  prometheus::Counter& target_tokens_;
  prometheus::Counter& decode_seconds_;
  prometheus::Gauge& tokens_per_second_;
  prometheus::Gauge& resident_bytes_;
  prometheus::Gauge& allocator_in_use_;
  prometheus::Gauge& allocator_cached_;
  prometheus::Gauge& malloc_in_use_;
  prometheus::Gauge& malloc_free_;
};

}  // namespace tfm::internal::serve
