// Translation and scoring over a shared Model. A Translator is one worker: it owns its scratch
// state and its thread count, and is used by one thread at a time; threads that translate at once
// each take their own Translator over the same Model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/model.h"

namespace tfm {

struct TranslatorOptions {
  int threads = 0;  // threads of this translator's kernels; 0: the process default
};

// Search options, as in docs/DECODING.md (section 6.1 of the paper: beam 4, alpha 0.6, +50).
struct TranslationOptions {
  int64_t beam_size = 4;           // 1: greedy search
  double length_penalty = 0.6;     // alpha of ((5 + length) / 6)^alpha
  int64_t n_best = 1;              // hypotheses per sentence, at most beam_size
  int64_t max_length_offset = 50;  // maximum output tokens = source tokens + this
  int64_t max_length = 0;          // > 0: this maximum for every sentence instead
  int64_t min_length = 0;          // no end of sentence before this many tokens
  int64_t batch_size = 32;         // sentences per batch
};

struct Hypothesis {
  std::string text;                 // detokenized
  std::vector<std::string> tokens;  // its subword pieces, without the end of sentence
  double score = 0;                 // log_prob / ((5 + length) / 6)^alpha, as the search ranks them
  double log_prob = 0;  // sum of the log-probabilities of its tokens, end of sentence included
};

struct TranslationResult {
  std::vector<Hypothesis> hypotheses;  // best first; empty for an empty source
};

// The log-probability of a given target under the model, teacher-forced (every token is predicted
// from the source and the target's tokens before it).
struct ScoringResult {
  std::vector<std::string> tokens;     // the target's subword pieces, then "</s>"
  std::vector<float> token_log_probs;  // log p of each of `tokens`
  double log_prob = 0;                 // their sum
};

class Translator {
 public:
  explicit Translator(std::shared_ptr<const Model> model, const TranslatorOptions& options = {});
  ~Translator();
  Translator(Translator&&) noexcept;
  Translator& operator=(Translator&&) noexcept;

  // Translates raw sentences; results in input order. A source longer than the model's maximum
  // input length (its max_positions) is a tfm::Error naming it.
  std::vector<TranslationResult> translate(const std::vector<std::string>& sources,
                                           const TranslationOptions& options = {});

  // Scores targets[i] as a translation of sources[i] (as CTranslate2's score_batch).
  std::vector<ScoringResult> score(const std::vector<std::string>& sources,
                                   const std::vector<std::string>& targets,
                                   int64_t batch_size = 32);

  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
