// Token-budget batching (the paper's section 5.1: "sentence pairs were batched together by
// approximate sequence length"). A batch's cost is its padded size: B * (S + T), S the longest
// source and T the longest target + 1 (tgt_in = bos y, tgt_out = y eos) in the batch.
//
// One epoch's plan, from (seed, epoch) only:
//   1. shuffle the pair indices;
//   2. cut them into windows of about window_batches batches' worth of pairs;
//   3. sort each window by the longer side, max(S, T + 1), then by source and target length (ties
//      keep the shuffled order);
//   4. cut each sorted window greedily into batches whose padded size fits max_tokens (and at most
//      max_pairs pairs);
//   5. shuffle the order of all the epoch's batches.
// So batches hold pairs of similar length, yet which pairs meet and in what order changes every
// epoch; the same (corpus, options, seed, epoch) always gives the same plan. Shuffling uses
// std::mt19937_64 (fully specified by the standard) with our own Fisher-Yates, so plans are the
// same with every standard library.
//
// A pair that alone exceeds max_tokens (or has a side of 65535 tokens or more) can never be
// batched: it is skipped (every epoch) and counted in skipped_pairs(), not an error, so one odd
// pair cannot stop a training run; callers report the count.
//
// With subword dropout (BPE-dropout, data/subword_dropout.h) every epoch's pairs are first
// segmented anew, drawn from (seed, epoch), and the epoch's plan is made from the new lengths, so
// the budget holds for the batches as they are; the epoch's segmentation is held in memory.
//
// Memory: the batcher holds only each usable pair's index and lengths (8 bytes a pair) and the
// current epoch's plan (4 bytes a pair); the token ids stay in the corpus (a mapped cache file)
// until a batch is made.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tfm/data/corpus.h"
#include "tfm/data/subword_dropout.h"

namespace tfm::internal::data {

struct BatcherOptions {
  // Budget of padded source + padded target tokens per batch. The paper's batches held about
  // 25000 source and 25000 target tokens.
  int64_t max_tokens = 50000;
  int64_t max_pairs = 0;  // at most this many pairs per batch; 0: no limit
  // Pairs sorted together, in batches' worth (estimated from the corpus's mean pair size); larger
  // windows pad less, smaller ones mix lengths more. 0: sort the whole corpus at once.
  int64_t window_batches = 100;
  // false: no shuffling at all (evaluation): the whole corpus sorted by length, batches in
  // that order, the same every epoch.
  bool shuffle = true;
};

struct BatchPlan {
  std::vector<uint32_t> pairs;  // corpus indices, in batch row order
  int64_t source_width = 0;     // S: the longest source
  int64_t target_width = 0;     // T: the longest target + 1
  int64_t padded_tokens() const {
    return static_cast<int64_t>(pairs.size()) * (source_width + target_width);
  }
};

// What a plan makes of its corpus: how many of the padded tokens are real ones.
struct PlanSummary {
  int64_t batches = 0;
  int64_t pairs = 0;
  int64_t real_tokens = 0;    // source + target + 1 per pair (the bos or eos position)
  int64_t padded_tokens = 0;  // sum of the batches' padded_tokens()
  int64_t largest_batch = 0;  // padded tokens of the largest batch
};
PlanSummary summarize_plan(const Corpus& corpus, const std::vector<BatchPlan>& plan);

// A batch of sentence pairs as token ids on the host, each row right-padded with kPadId, row-major:
// src [rows, source_width] = x (no bos/eos), tgt_in and tgt_out [rows, target_width] = bos y and
// y eos. The model's tensors are made from it above data/ (train::model_batch), so that data/ and
// nn/ do not depend on each other.
struct TokenBatch {
  int64_t rows = 0;
  int64_t source_width = 0;
  int64_t target_width = 0;
  std::vector<int32_t> src, tgt_in, tgt_out;
};

class Batcher {
 public:
  // Where the batcher stands: the next batch next() returns is batch `batch` of epoch `epoch`
  // (both from 0). Saved in checkpoints; restore() continues exactly there.
  struct State {
    int64_t epoch = 0;
    int64_t batch = 0;
    bool operator==(const State&) const = default;
  };

  // `corpus` (and `subword_dropout`, when given) must outlive the batcher. Throws when no pair fits
  // the budget.
  Batcher(const Corpus& corpus, const BatcherOptions& options, uint64_t seed,
          const SubwordDropout* subword_dropout = nullptr);

  // The batches of an epoch, in order (without subword dropout: with it only the current epoch's
  // plan() has its segmentation at hand).
  std::vector<BatchPlan> epoch_plan(int64_t epoch) const;
  // The token ids of a plan's pairs: src = x (no bos/eos), tgt_in = bos y, tgt_out = y eos, each
  // row right-padded with pad. With subword dropout the pairs are the current epoch's.
  TokenBatch make_batch(const BatchPlan& plan) const;

  // The batch at state(), then advances; after an epoch's last batch comes the next epoch's first.
  TokenBatch next();
  // Advances past the batch at state() without making it (another rank's batch).
  void skip();
  State state() const { return state_; }
  // Continues from a saved state (batch may equal the epoch's batch count: the epoch is done).
  void restore(const State& state);
  // Batches in the current epoch.
  int64_t batches_in_epoch() const { return static_cast<int64_t>(plan_.size()); }

  int64_t skipped_pairs() const { return static_cast<int64_t>(skipped_); }
  int64_t pairs_per_epoch() const { return static_cast<int64_t>(usable_.size()); }
  const BatcherOptions& options() const { return options_; }
  // A hash of the seed, the options and every pair's lengths: what the plans depend on. Saved
  // beside State, it tells a resumed run whether the state still means the same batches.
  uint64_t fingerprint() const { return fingerprint_; }
  // The current epoch's batches, in order.
  const std::vector<BatchPlan>& plan() const { return plan_; }
  // The pairs of the current epoch's batches: the corpus, or with subword dropout its epoch's
  // segmentation.
  const Corpus& current_corpus() const { return epoch_corpus_ ? *epoch_corpus_ : corpus_; }

 private:
  // A pair that fits the budget alone, with its widths: S and T + 1.
  struct Entry {
    uint32_t pair;
    uint16_t source_width;
    uint16_t target_width;
  };

  // An epoch's plan, and with subword dropout the segmentation it is of (else nullptr).
  struct Epoch {
    std::vector<BatchPlan> plan;
    std::shared_ptr<const Corpus> corpus;
  };
  Epoch make_epoch(int64_t epoch) const;
  std::vector<Entry> usable_entries(const Corpus& corpus, size_t& skipped) const;
  std::vector<BatchPlan> plan_entries(std::vector<Entry> order, int64_t epoch) const;
  // The corpus segmented anew for an epoch, pair for pair.
  std::shared_ptr<const Corpus> resegmented(int64_t epoch) const;
  static void sort_window(std::vector<Entry>::iterator first, std::vector<Entry>::iterator last);
  void cut_window(std::vector<Entry>::const_iterator first, std::vector<Entry>::const_iterator last,
                  std::vector<BatchPlan>& batches) const;
  uint64_t compute_fingerprint() const;

  const Corpus& corpus_;
  BatcherOptions options_;
  uint64_t seed_;
  std::vector<Entry> usable_;  // in corpus order
  size_t skipped_ = 0;
  size_t window_pairs_ = 0;
  State state_;
  std::vector<BatchPlan> plan_;  // of state_.epoch
  uint64_t fingerprint_ = 0;
  const SubwordDropout* subword_dropout_ = nullptr;
  std::shared_ptr<const Corpus> epoch_corpus_;  // state_.epoch's segmentation (subword dropout)
};

}  // namespace tfm::internal::data
