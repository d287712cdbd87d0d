// Translation of many sentences with a trained Transformer: batches of sources (sorted by length so
// that a batch holds sentences of similar length), one encoder pass per batch, then greedy search
// (beam_size 1) or beam search over an incremental decoder (TransformerScorer). Finished sentences
// leave the batch; results come back in input order.
//
// translate() reads an InferenceModel (built once, shared, immutable) and keeps every piece of
// scratch state (decoder caches, buffers) in the call; a Translator is a decoding worker: the
// shared model, its options and its own thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tfm/decode/constraint.h"
#include "tfm/decode/inference_model.h"
#include "tfm/decode/sampling.h"
#include "tfm/decode/search.h"
#include "tfm/decode/transformer_scorer.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal::decode {

struct TranslateOptions {
  int64_t beam_size = 4;           // 1: greedy search
  double alpha = 0.6;              // length penalty exponent
  int64_t n_best = 1;              // hypotheses per sentence, at most beam_size
  int64_t max_length_offset = 50;  // maximum output tokens (eos included) = source length + this
  int64_t max_length = 0;          // > 0: this maximum for every sentence instead
  int64_t min_length = 0;          // eos forbidden as one of the first min_length tokens
  int64_t batch_size = 32;         // source sentences per batch (at most)
  int64_t batch_tokens = 0;        // > 0: also at most this many padded source tokens per batch
  bool sort_by_length = true;      // batch sentences of similar length together
  bool early_stopping = true;      // see beam_search
  int64_t no_repeat_ngram = 0;     // > 0: no n-gram of this size twice in an output (search.h)
  // samples > 0: that many hypotheses drawn per sentence (decode/sampling.h) instead of a search;
  // beam_size and n_best are then not used, and neither constraints nor attention probes apply.
  // Sentence i's draws are keyed by i (its index in translate()'s sources) and the seed.
  SamplingOptions sampling;
  AttentionProbe attention;  // encoder-decoder weights to return per output token
  // What each hypothesis may continue with (decode/constraint.h); its start() gets the source's
  // index in translate()'s sources. None: the search as without constraints, byte for byte.
  std::shared_ptr<const Constraint> constraint;
  // Longest source accepted, in tokens (a longer one is an error: the encoder's attention grows
  // with the square of the length); 0: the model's max_positions.
  int64_t max_input_length = 0;
  // Called on the translating thread after each batch with the sources finished so far and their
  // total. An exception it throws ends the translation and propagates (a caller's cancellation).
  std::function<void(int64_t done, int64_t total)> progress;
  // The products' operand type is the model's (InferenceOptions::precision), fixed at load.
};

// The search options translate() derives (token ids from the model's config).
SearchOptions search_options(const TranslateOptions& options, const ModelConfig& config);

// The longest source translate() accepts: options.max_input_length, or the model's max_positions.
// Learned position tables hold no more than max_positions (an error if asked for more).
int64_t max_input_length(const TranslateOptions& options, const ModelConfig& config);

// The maximum output length of a source of `source_length` tokens: source length + offset (or the
// fixed maximum), no more than the learned position table holds.
int64_t max_output_length(int64_t source_length, const TranslateOptions& options,
                          const ModelConfig& config);

// Translates every source (token ids as the model was trained on, without bos/eos padding) and
// returns per source its n_best hypotheses, best first, in input order; a source longer than
// max_input_length() is an error naming it. With an attention probe each hypothesis carries, per
// generated token, the weights over that source's positions. Runs with the calling thread's
// OpenMP thread count; any number of threads may translate with one model at once.
std::vector<std::vector<Hypothesis>> translate(const InferenceModel& model,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options);

// An ensemble (decode/ensemble_scorer.h): every model encodes each batch and keeps its own
// decoder state, and each step's distribution is the mean of their probabilities. The models must
// agree on the task, the vocabulary size and the special ids (the caller checks that their
// vocabularies are the same); a source may be as long as the least of their maximum input lengths
// and an output as long as every model allows. No attention probe (it would be one model's). One
// model: the translate() above, byte for byte.
std::vector<std::vector<Hypothesis>> translate(const std::vector<const InferenceModel*>& models,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options);

// A one-off translation with a model that is not an InferenceModel (validation during training,
// tests): packs `model`'s weights in `precision` for this call, then translate() above. A model
// that translates more than once should be loaded as an InferenceModel.
std::vector<std::vector<Hypothesis>> translate(const nn::Transformer& model,
                                               const std::vector<std::vector<int32_t>>& sources,
                                               const TranslateOptions& options,
                                               DType precision = DType::f32);

// A decoding worker: a shared model, the options of its translations, and its own OpenMP thread
// count. Workers in different threads share the model and nothing else; one worker serves one
// thread at a time (a server gives each decoding thread its own).
class Translator {
 public:
  // threads <= 0: the calling thread's count (OMP_NUM_THREADS or the number of cores).
  Translator(std::shared_ptr<const InferenceModel> model, TranslateOptions options = {},
             int threads = 0);
  // An ensemble of models (the ensemble translate() above); model() is the first.
  Translator(std::vector<std::shared_ptr<const InferenceModel>> models,
             TranslateOptions options = {}, int threads = 0);

  // translate(model(), sources, options()) with threads() OpenMP threads in the calling thread
  // (its count is restored afterwards; other threads' counts are never touched).
  std::vector<std::vector<Hypothesis>> translate(
      const std::vector<std::vector<int32_t>>& sources) const;

  const InferenceModel& model() const { return *models_.front(); }
  const std::shared_ptr<const InferenceModel>& shared_model() const { return models_.front(); }
  size_t models() const { return models_.size(); }
  const TranslateOptions& options() const { return options_; }
  int threads() const { return threads_; }

 private:
  std::vector<std::shared_ptr<const InferenceModel>> models_;  // one, or an ensemble's
  TranslateOptions options_;
  int threads_;
};

}  // namespace tfm::internal::decode
