// Translation and scoring over a shared Model. A Translator is a shared model and a thread count:
// every call keeps its scratch state (caches, beams) to itself, so any number of threads may call
// one Translator at once, each decoding in its own thread with `threads` OpenMP threads (as do
// threads with a Translator each over the same Model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tfm/export.h"
#include "tfm/model.h"

namespace tfm {

struct TranslatorOptions {
  // Threads of this translator's kernels, 0 to 4096 (tfm translate --threads); 0: the process
  // default.
  int threads = 0;
};

// The ranges of TranslationOptions (tfm translate's); a value outside is a tfm::Error.
inline constexpr int64_t kMaxBeamSize = 1024;      // beam_size in [1, 1024]
inline constexpr int64_t kMaxOutputLength = 1024;  // max_length, max_length_offset, min_length

// Search options, as in docs/DECODING.md (section 6.1 of the paper: beam 4, alpha 0.6, +50).
struct TranslationOptions {
  int64_t beam_size = 4;           // 1: greedy search; at most kMaxBeamSize
  double length_penalty = 0.6;     // alpha of ((5 + length) / 6)^alpha (finite)
  int64_t n_best = 1;              // hypotheses per sentence, at most beam_size
  int64_t max_length_offset = 50;  // maximum output tokens = source tokens + this (1 to 1024)
  int64_t max_length = 0;          // 1 to 1024: this maximum for every sentence instead; 0: none
  int64_t min_length = 0;          // no end of sentence before this many tokens (0 to 1024)
  int64_t batch_size = 32;         // sentences per batch
  int64_t batch_tokens = 0;        // > 0: also at most this many padded source tokens per batch
  // > 0: no output repeats an n-gram of this many tokens (fairseq's --no-repeat-ngram-size,
  // CTranslate2's no_repeat_ngram_size), at most kMaxOutputLength; 0: off.
  int64_t no_repeat_ngram_size = 0;
  // Minimum Bayes risk choice (`tfm translate --mbr`, docs/DECODING.md): the hypothesis with the
  // highest expected sentence BLEU against the n_best list (n_best >= 2), each weighted by
  // softmax(score / mbr_temperature), comes first; the others keep the search's order.
  bool mbr = false;
  double mbr_temperature = 1.0;  // > 0 and finite
  // > 0: this many translations drawn per sentence by epsilon sampling instead of a search (`tfm
  // translate --sampling`, docs/DECODING.md), at most kMaxBeamSize: the hypotheses are the samples,
  // best score first (beam_size and n_best are not used); with mbr, each sample weighs the same
  // and mbr_temperature is not used. No attention with sampling.
  int64_t sampling = 0;
  double sampling_epsilon = 0.02;     // in [0, 1): tokens of probability below it are never drawn
  double sampling_temperature = 1.0;  // > 0 and finite: draws from softmax(log p / T)
  uint64_t seed = 0;                  // the same seed, the same samples
  // Each hypothesis's encoder-decoder attention (Hypothesis::attention), as `tfm translate
  // --attention-output` writes it: one decoder layer's, one head's or the mean of the heads.
  bool return_attention = false;
  int64_t attention_layer = -1;  // 0-based; negative counts from the last layer (-1)
  int64_t attention_head = -1;   // 0-based; -1: the mean over the heads
  // Called on the translating thread after each batch with the (non-empty) sources finished so far
  // and their total. An exception it throws ends the call and propagates: a caller's progress
  // display, or its cancellation (Ctrl-C in the Python bindings).
  std::function<void(int64_t done, int64_t total)> progress;
};

struct Hypothesis {
  std::string text;                 // detokenized
  std::vector<std::string> tokens;  // its subword pieces, without the end of sentence
  double score = 0;                 // log_prob / ((5 + length) / 6)^alpha, as the search ranks them
  double log_prob = 0;  // sum of the log-probabilities of its tokens, end of sentence included
  // With return_attention: a row per generated token (`tokens`, then the end of sentence when the
  // search produced one), each the weights over the source's subword tokens (they sum to 1).
  std::vector<std::vector<float>> attention;
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

class TFM_API Translator {
 public:
  explicit Translator(std::shared_ptr<const Model> model, const TranslatorOptions& options = {});
  ~Translator();
  Translator(Translator&&) noexcept;
  Translator& operator=(Translator&&) noexcept;

  // Translates raw sentences; results in input order. A source longer than the model's maximum
  // input length (its max_positions) is a tfm::Error naming it.
  std::vector<TranslationResult> translate(const std::vector<std::string>& sources,
                                           const TranslationOptions& options = {});

  // The same for sources already split into the model's subword pieces (Model::tokenize); a piece
  // the vocabulary lacks reads as <unk>. An imported model whose sources end with </s> (Marian,
  // fairseq) gets it appended to each non-empty source, as translate() and CTranslate2 do.
  std::vector<TranslationResult> translate_tokens(
      const std::vector<std::vector<std::string>>& sources, const TranslationOptions& options = {});

  // Translates a text file (plain or gzip, UTF-8, one sentence a line) into `output` as `tfm
  // translate -i input -o output` does: 512 lines at a time, one line out per line in (the best
  // translation; empty for an empty line), or with n_best_output every hypothesis as "line |||
  // translation ||| score" (`--n-best-output`; lines counted from 0). `output` is written
  // atomically: on an error (or an exception from options.progress, whose counts cover the whole
  // file) nothing is left there. Returns the number of lines translated.
  int64_t translate_file(const std::filesystem::path& input, const std::filesystem::path& output,
                         const TranslationOptions& options = {}, bool n_best_output = false);

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
