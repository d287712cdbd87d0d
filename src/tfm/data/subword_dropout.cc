#include "tfm/data/subword_dropout.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "tfm/core/error.h"

namespace tfm::internal::data {

SubwordDropout::SubwordDropout(const Vocabulary& vocab, double probability, int64_t max_length,
                               bool targets)
    : vocab_(vocab), probability_(probability), max_length_(max_length), targets_(targets) {
  TFM_CHECK(probability > 0 && probability < 1, "BPE-dropout must be in (0, 1), got {}",
            probability);
  TFM_CHECK(vocab.is_bpe(),
            "vocabulary '{}' is not a BPE model: BPE-dropout (data.bpe_dropout) needs one",
            vocab.path().string());
}

void SubwordDropout::resegment_side(std::vector<std::vector<int32_t>>& sequences,
                                    int64_t longest) const {
  for (std::vector<int32_t>& ids : sequences) {
    if (std::find(ids.begin(), ids.end(), kUnkId) != ids.end()) continue;
    std::vector<int32_t> sampled = vocab_.sample_encode(vocab_.decode(ids), probability_);
    if (sampled.empty() || (longest > 0 && static_cast<int64_t>(sampled.size()) > longest))
      continue;
    ids = std::move(sampled);
  }
}

void SubwordDropout::resegment(std::vector<std::vector<int32_t>>& sources,
                               std::vector<std::vector<int32_t>>& targets, uint64_t key) const {
  // The seed is process-wide and read when a thread first draws: one batch at a time. SentencePiece
  // takes the largest unsigned value to mean "a random seed", so the key never folds to it.
  static std::mutex seeding;
  const std::lock_guard<std::mutex> lock(seeding);
  const auto seed = static_cast<unsigned>(key ^ (key >> 32)) % std::numeric_limits<unsigned>::max();
  sentencepiece::SetRandomGeneratorSeed(seed);
  std::exception_ptr errors[2];
  auto on_a_thread = [](std::exception_ptr& error, auto work) {
    return std::thread([&error, work] {
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
    });
  };
  std::thread source_thread = on_a_thread(errors[0], [&] { resegment_side(sources, max_length_); });
  std::thread target_thread = on_a_thread(errors[1], [&] {
    if (targets_) resegment_side(targets, max_length_ > 0 ? max_length_ - 1 : 0);
  });
  source_thread.join();
  target_thread.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace tfm::internal::data
