// Greedy and beam search (section 6.1 of the paper: beam size 4, length penalty alpha = 0.6,
// maximum output length = input length + 50, early termination when possible), generic over a
// StepScorer so that a hand-written distribution can stand in for the model in tests.
//
// Conventions shared by both searches:
// - A hypothesis has at most max_length generated tokens, eos included: a hypothesis that reaches
//   max_length tokens without eos ends there (no extra step to append eos).
// - Its score is log_prob / lp(length) with lp(n) = ((5 + n) / 6)^alpha (Wu et al. 2016, eq. 14),
//   where length counts the generated tokens including eos, and log_prob sums their log p.
// - eos is not allowed as one of the first min_length tokens (its log-probability is set to -inf).
// - With no_repeat_ngram = n > 0, a hypothesis never takes a token that would make an n-gram of its
//   generated tokens (bos excluded, eos never blocked) appear a second time (fairseq's
//   --no-repeat-ngram-size): such tokens are dropped from its row before its best tokens are kept.
// - With constraints (decode/constraint.h, one start state per source), a row's log-probabilities
//   are masked before its best tokens are chosen: only the tokens its hypothesis' state allows
//   (eos when it may end) stay. The scorer's full rows (step()) are read on the host for that; a
//   hypothesis with nothing allowed drops out. Without constraints nothing of this runs.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/decode/constraint.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::decode {

// lp(length) = ((5 + length) / 6)^alpha.
double length_penalty(int64_t length, double alpha);

// The most probable next tokens of every row of a step: row r's are entries [r * m, r * m +
// counts[r]) of log_probs and tokens, best first (among equal log-probabilities the lower token
// first); counts[r] < m when fewer tokens have a finite log-probability.
struct StepTop {
  int64_t m = 0;
  std::vector<float> log_probs;  // [rows * m]
  std::vector<int32_t> tokens;   // [rows * m]
  std::vector<int32_t> counts;   // [rows]

  void resize(int64_t rows, int64_t per_row);
  // Fills row `row` with the best m of `ranked` (log-probability, token) pairs, best first, among
  // equal log-probabilities the lower token first; ranked is reordered.
  void set_row(int64_t row, std::vector<std::pair<float, int32_t>>& ranked);
  // Sized for `rows` rows of top's k; top's rows (possibly fewer) are copied, through the host.
  void assign(const ops::TopK& top, int64_t rows);
};

// Throws the error of a model whose output at decoding step `step` (0-based; the message counts
// from 1) is NaN or infinite: an overflow that a search would otherwise turn into empty output.
[[noreturn]] void fail_non_finite(int64_t step);

// What a search needs from a model. The search keeps `beam` rows per source (1 for greedy), rows
// of a source consecutive: row r belongs to the (r / beam)-th source still being searched.
class StepScorer {
 public:
  virtual ~StepScorer() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t vocab_size() const = 0;
  // log p(next token | prefix of row r) for every row, given each row's last token (bos at the
  // first step): [rows(), vocab_size()] f32. The search may overwrite the returned values.
  virtual Tensor step(const std::vector<int32_t>& last_tokens) = 0;
  // What the searches call: a step (as step()) that returns only the m most probable tokens of
  // every row; `excluded` >= 0 is a token never returned (eos before min_length). The default takes
  // them from step()'s rows; a scorer may find them without materialising [rows, vocab_size()].
  virtual void step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                        StepTop& out);
  // Keeps rows: new row i continues old row rows[i]; every group of `beam` consecutive new rows
  // comes from one old source (nn::DecoderState::select's contract).
  virtual void select(const std::vector<int64_t>& rows) = 0;
  // The attention weights over the source positions of the last step, [rows(), S], or an
  // undefined tensor when the scorer does not capture them.
  virtual Tensor last_attention() const { return {}; }
};

struct SearchOptions {
  int64_t beam_size = 4;
  double alpha = 0.6;      // length penalty exponent; 0 ranks by the plain sum of log p
  int64_t n_best = 1;      // hypotheses returned per source, at most beam_size
  int64_t min_length = 0;  // eos forbidden as one of the first min_length tokens
  int32_t bos_id = 2;
  int32_t eos_id = 3;
  bool early_stopping = true;   // false: every source runs until it has no live hypothesis left
  int64_t no_repeat_ngram = 0;  // > 0: no n-gram of this size twice in a hypothesis; 0: off
};

// The tokens that, appended to `tokens`, would repeat one of its n-grams: every token that followed
// an earlier occurrence of its last n - 1 tokens (for n = 1, every token it holds). Sorted, unique.
std::vector<int32_t> repeated_ngram_ends(const std::vector<int32_t>& tokens, int64_t n);

// The checks every search (and sampling) makes of its options and sources, `search` naming it in
// the errors: a finite alpha, no_repeat_ngram >= 0, bos and eos inside the vocabulary, and every
// maximum output length at least 1.
void check_search_conventions(const SearchOptions& options, int64_t vocab,
                              const std::vector<int64_t>& max_lengths, const char* search);

struct Hypothesis {
  std::vector<int32_t> tokens;  // the output, without bos and eos
  double log_prob = 0.0;        // sum of log p of the generated tokens (eos included)
  double score = 0.0;           // log_prob / length_penalty(length, alpha)
  int64_t length = 0;           // generated tokens: tokens.size() + (ended_by_eos ? 1 : 0)
  bool ended_by_eos = false;    // false: cut at the maximum length
  // Only when the scorer captures attention: per generated token (eos included), the weights over
  // the source positions (the scorer's row width; translate() trims them to the source length).
  std::vector<std::vector<float>> attention;
};

// Beam search over max_lengths.size() sources; the scorer must start with beam_size rows per
// source, all at the start of their sentence. Returns per source its n_best best finished
// hypotheses, best first (empty only when no hypothesis of finite probability exists).
//
// Each step extends every live hypothesis by every token, and keeps the 2k best candidates by sum
// of log p (k = beam_size; ties: lower beam, then lower token id). Walking them in order, a
// candidate that ends (eos, or the maximum length) is finished when it ranks among the first k (as
// fairseq: an eos outside the top k would not have been in a beam of k), and the first k that do
// not end become the next beam.
//
// Early termination: a source stops when it has n_best finished hypotheses and the n_best-th score
// is at least the best score any live hypothesis could still reach. A live hypothesis with sum of
// log p L <= 0 after `len` tokens ends with log p L' <= L at some length n in (len, max_length], so
// its score L' / lp(n) <= L / lp(n) <= L / max(lp(len + 1), lp(max_length)) (lp is monotonic in n;
// dividing a non-positive L by the largest lp gives the largest value). The bound uses the best L.
// This is tensor2tensor's bound (best alive log p / lp(max_length)) made valid for alpha < 0 too;
// because the n_best-th finished score already beats it, stopping never changes the output.
//
// constraints: empty (none), or one start state per source (the search owns them).
std::vector<std::vector<Hypothesis>> beam_search(
    StepScorer& scorer, const std::vector<int64_t>& max_lengths, const SearchOptions& options,
    std::vector<std::unique_ptr<ConstraintState>> constraints = {});

// Greedy search (beam size 1 without the second-best bookkeeping): one row per source, the most
// probable token at every step (ties: the lower id). Same conventions and output as beam_search
// with n_best = 1. Equal to beam_search with beam_size 1 when alpha = 0; with alpha > 0 that beam
// search may continue past an eos the greedy search stops at, when the live hypothesis could still
// overtake it under the length penalty. constraints as for beam_search.
std::vector<std::vector<Hypothesis>> greedy_search(
    StepScorer& scorer, const std::vector<int64_t>& max_lengths, const SearchOptions& options,
    std::vector<std::unique_ptr<ConstraintState>> constraints = {});

// A constrained step: scorer.step()'s rows on the host, and of row r only the tokens states[r]
// allows (eos when it may end; never `excluded`) ranked into `out` (m per row, best first, ties:
// the lower id). A row without a state (an empty beam slot) gets none. A NaN or +inf among the
// allowed log-probabilities is fail_non_finite(step); a -inf one is never chosen.
void constrained_step_top(StepScorer& scorer, const std::vector<int32_t>& last_tokens,
                          const std::vector<const ConstraintState*>& states, int64_t m,
                          int32_t excluded, int32_t eos_id, int64_t step, StepTop& out);

}  // namespace tfm::internal::decode
