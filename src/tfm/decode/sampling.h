// Sampled decoding: independent draws from the model's distribution, the candidates of a minimum
// Bayes risk choice (eval/mbr.h) that stand for the distribution without a beam's bias towards
// its mode. Epsilon sampling (Hewitt et al. 2022), which Freitag et al. 2023 found the best
// candidates for MBR in translation: at each step the tokens whose probability is below epsilon
// are never drawn, which cuts the long tail of unlikely tokens that makes plain (ancestral)
// samples wander.
//
// At each step of a sample, with the search's conventions (decode/search.h: eos not among the
// first min_length tokens, no repeated n-gram with no_repeat_ngram, max_length tokens at most):
//   q(t) = softmax(log p(t | prefix) / temperature) over the tokens still allowed,
//   kept = { t : q(t) >= epsilon } (the most probable token when that is empty),
// and the token is drawn from q restricted to `kept`, renormalised. The hypothesis keeps the
// model's own log p of its tokens (not q's), and its score as the search's (log p / lp(length)).
//
// The draws are pure functions of (seed, source key, sample index, step): the same seed gives the
// same samples of a sentence whatever else is in its batch.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/decode/search.h"

namespace tfm::internal::decode {

struct SamplingOptions {
  int64_t samples = 0;       // hypotheses drawn per source; 0: no sampling (a search instead)
  double epsilon = 0.02;     // in [0, 1): tokens of probability below it are never drawn
  double temperature = 1.0;  // > 0: below 1 sharpens the distribution, above 1 flattens it
  uint64_t seed = 0;
};

// Checks the options (the error names the problem): samples >= 1, epsilon in [0, 1), a positive
// finite temperature.
void check_sampling_options(const SamplingOptions& options);

// Draws options.samples hypotheses for each of max_lengths.size() sources. The scorer starts with
// one row per source at the start of its sentence; the search repeats each source's row (select)
// into one row per sample. source_keys (one per source) key the draws. Returns per source its
// samples sorted by score, best first (equal scores in the order drawn); a sample drawn twice is
// there twice, as the distribution's estimate needs. search gives min_length, no_repeat_ngram,
// alpha and the special ids (beam_size and n_best are not used).
std::vector<std::vector<Hypothesis>> sampling_search(StepScorer& scorer,
                                                     const std::vector<int64_t>& max_lengths,
                                                     const std::vector<uint64_t>& source_keys,
                                                     const SearchOptions& search,
                                                     const SamplingOptions& sampling);

// The token drawn from one step's row of log-probabilities (log_probs[t] = log p(t | prefix), for
// `vocab` tokens, a normalised row: at T = 1 its mass less the blocked tokens' is taken as the
// total instead of summing the row), as sampling_search draws it: `blocked` tokens (sorted or not)
// are never drawn, `uniform` in [0, 1) picks the token. Returns -1 when no token has a finite
// log-probability; a NaN or +inf among the allowed ones is an error (fail_non_finite(step)).
int32_t draw_token(const float* log_probs, int64_t vocab, const std::vector<int32_t>& blocked,
                   double uniform, const SamplingOptions& options, int64_t step);

}  // namespace tfm::internal::decode
