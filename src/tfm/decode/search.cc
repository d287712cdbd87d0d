#include "tfm/decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "tfm/core/error.h"

namespace tfm::internal::decode {

double length_penalty(int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

void StepTop::resize(int64_t rows, int64_t per_row) {
  m = per_row;
  log_probs.resize(static_cast<size_t>(rows * per_row));
  tokens.resize(static_cast<size_t>(rows * per_row));
  counts.assign(static_cast<size_t>(rows), 0);
}

void StepTop::set_row(int64_t row, std::vector<std::pair<float, int32_t>>& ranked) {
  const auto count = std::min<int64_t>(m, static_cast<int64_t>(ranked.size()));
  std::partial_sort(ranked.begin(), ranked.begin() + count, ranked.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  for (int64_t i = 0; i < count; ++i) {
    log_probs[static_cast<size_t>(row * m + i)] = ranked[static_cast<size_t>(i)].first;
    tokens[static_cast<size_t>(row * m + i)] = ranked[static_cast<size_t>(i)].second;
  }
  counts[static_cast<size_t>(row)] = static_cast<int32_t>(count);
}

void StepTop::assign(const ops::TopK& top, int64_t rows) {
  const int64_t filled = top.values.dim(0), k = top.values.dim(1);
  resize(rows, k);
  // Beam bookkeeping reads the step's few best tokens on the host.
  const Tensor values = top.values.to(Device::cpu), indices = top.indices.to(Device::cpu),
               filled_counts = top.counts.to(Device::cpu);
  std::copy_n(values.data<float>(), filled * k, log_probs.begin());
  std::copy_n(indices.data<int32_t>(), filled * k, tokens.begin());
  std::copy_n(filled_counts.data<int32_t>(), filled, counts.begin());
}

void fail_non_finite(int64_t step) {
  fail(
      "decoding step {}: the model's log-probabilities are not finite (NaN or infinite logits): "
      "its "
      "activations overflow; check the model's weights",
      step + 1);
}

void StepScorer::step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                          StepTop& out) {
  Tensor log_probs = step(last_tokens);
  TFM_CHECK(log_probs.rank() == 2 && log_probs.dim(0) == rows() &&
                log_probs.dim(1) == vocab_size() && log_probs.dtype() == DType::f32,
            "search: the scorer returned {}, expected f32 [{}, {}]", log_probs.describe(), rows(),
            vocab_size());
  out.assign(ops::top_k(log_probs, m, excluded), rows());
}

namespace {

// log sum_{t in members} exp(values[t]) (0 for no members), from the largest term so that nothing
// overflows: m + log sum exp(values[t] - m).
float pooled_log_prob(const float* values, int64_t vocab, const std::vector<int32_t>* members,
                      int64_t step) {
  if (members == nullptr || members->empty()) return 0.0F;
  float largest = -std::numeric_limits<float>::infinity();
  for (int32_t token : *members) {
    TFM_CHECK(token >= 0 && token < vocab,
              "search: the constraint pools token {}, outside the vocabulary of {}", token, vocab);
    if (std::isnan(values[token]) || values[token] == std::numeric_limits<float>::infinity())
      fail_non_finite(step);
    largest = std::max(largest, values[token]);
  }
  if (largest == -std::numeric_limits<float>::infinity()) return largest;
  double sum = 0;
  for (int32_t token : *members) sum += std::exp(static_cast<double>(values[token] - largest));
  return largest + static_cast<float>(std::log(sum));
}

}  // namespace

void constrained_step_top(StepScorer& scorer, const std::vector<int32_t>& last_tokens,
                          const std::vector<const ConstraintState*>& states, int64_t m,
                          int32_t excluded, int32_t eos_id, int64_t step, StepTop& out) {
  const int64_t rows = scorer.rows(), vocab = scorer.vocab_size();
  TFM_CHECK(static_cast<int64_t>(states.size()) == rows, "search: {} constraint states for {} rows",
            states.size(), rows);
  const Tensor log_probs = scorer.step(last_tokens);
  TFM_CHECK(log_probs.rank() == 2 && log_probs.dim(0) == rows && log_probs.dim(1) == vocab &&
                log_probs.dtype() == DType::f32,
            "search: the scorer returned {}, expected f32 [{}, {}]", log_probs.describe(), rows,
            vocab);
  // The mask is applied where the allowed tokens are known, on the host: the row's allowed
  // entries are gathered and ranked, which is masking every other entry to -inf before the top-k.
  const Tensor host = log_probs.to(Device::cpu);
  const float* values = host.data<float>();
  out.resize(rows, m);
  std::vector<int32_t> allowed;
  std::vector<std::pair<float, int32_t>> ranked;
  for (int64_t row = 0; row < rows; ++row) {
    const ConstraintState* state = states[static_cast<size_t>(row)];
    if (state == nullptr) continue;
    allowed.clear();
    state->allowed(allowed);
    if (state->may_end()) allowed.push_back(eos_id);
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    ranked.clear();
    const float* row_values = values + row * vocab;
    const ConstraintState::Pooled pooled = state->pooled();
    for (int32_t token : allowed) {
      TFM_CHECK(token >= 0 && token < vocab,
                "search: the constraint allows token {}, outside the vocabulary of {}", token,
                vocab);
      const float value = token == pooled.token
                              ? pooled_log_prob(row_values, vocab, pooled.members, step)
                              : row_values[token];
      if (std::isnan(value) || value == std::numeric_limits<float>::infinity())
        fail_non_finite(step);
      if (token != excluded && value != -std::numeric_limits<float>::infinity())
        ranked.emplace_back(value, token);
    }
    out.set_row(row, ranked);
  }
}

std::vector<int32_t> repeated_ngram_ends(const std::vector<int32_t>& tokens, int64_t n) {
  TFM_CHECK(n >= 1, "no_repeat_ngram {} must be at least 1", n);
  std::vector<int32_t> ends;
  const auto length = static_cast<int64_t>(tokens.size());
  const int64_t prefix = n - 1;  // the n-gram's first n - 1 tokens, the hypothesis' last ones
  if (length < prefix) return ends;
  // An earlier n-gram starts at i when tokens[i, i + n - 1) equals the last n - 1 tokens; its last
  // token tokens[i + n - 1] is then blocked.
  for (int64_t i = 0; i + prefix < length; ++i) {
    if (std::equal(tokens.begin() + i, tokens.begin() + i + prefix, tokens.end() - prefix))
      ends.push_back(tokens[static_cast<size_t>(i + prefix)]);
  }
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  return ends;
}

void check_search_conventions(const SearchOptions& options, int64_t vocab,
                              const std::vector<int64_t>& max_lengths, const char* search) {
  TFM_CHECK(std::isfinite(options.alpha), "{}: length penalty alpha {} is not finite", search,
            options.alpha);
  TFM_CHECK(options.no_repeat_ngram >= 0, "{}: no_repeat_ngram {} must be >= 0 (0: off)", search,
            options.no_repeat_ngram);
  TFM_CHECK(options.eos_id >= 0 && options.eos_id < vocab && options.bos_id >= 0 &&
                options.bos_id < vocab,
            "{}: bos {} or eos {} is outside the vocabulary of {}", search, options.bos_id,
            options.eos_id, vocab);
  for (int64_t m : max_lengths)
    TFM_CHECK(m >= 1, "{}: maximum output length {} must be at least 1", search, m);
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A live hypothesis. log_prob = -inf marks an empty slot: its row is computed but never extended
// (the first step, where each source has one hypothesis for beam_size rows).
struct Partial {
  std::vector<int32_t> tokens;
  double log_prob = kNegInf;
  std::vector<std::vector<float>> attention;
  std::unique_ptr<ConstraintState> constraint;  // with constraints: what it allows next
};

struct SourceSearch {
  int64_t max_length = 0;
  std::vector<Partial> alive;
  std::vector<Hypothesis> finished;  // best score first; equal scores in the order found
};

void check_options(const StepScorer& scorer, const std::vector<int64_t>& max_lengths,
                   const SearchOptions& options, int64_t beam, const char* search) {
  TFM_CHECK(options.beam_size >= 1, "{}: beam size {} must be at least 1", search,
            options.beam_size);
  TFM_CHECK(options.n_best >= 1 && options.n_best <= beam,
            "{}: n_best {} must be in [1, {}] (the beam size)", search, options.n_best, beam);
  TFM_CHECK(scorer.rows() == static_cast<int64_t>(max_lengths.size()) * beam,
            "{}: the scorer has {} rows, expected {} sources x beam {}", search, scorer.rows(),
            max_lengths.size(), beam);
  check_search_conventions(options, scorer.vocab_size(), max_lengths, search);
}

// The token a step must not produce: eos before min_length.
int32_t excluded_token(int64_t step, const SearchOptions& options) {
  return step < options.min_length ? options.eos_id : -1;
}

// The sources' searches, each with one live hypothesis (and `beam` rows), their start states
// given (constraints empty: unconstrained).
std::vector<SourceSearch> start_searches(const std::vector<int64_t>& max_lengths, int64_t beam,
                                         std::vector<std::unique_ptr<ConstraintState>> constraints,
                                         const char* search) {
  TFM_CHECK(constraints.empty() || constraints.size() == max_lengths.size(),
            "{}: {} constraint states for {} sources", search, constraints.size(),
            max_lengths.size());
  std::vector<SourceSearch> searches(max_lengths.size());
  for (size_t s = 0; s < searches.size(); ++s) {
    searches[s].max_length = max_lengths[s];
    searches[s].alive.resize(static_cast<size_t>(beam));
    searches[s].alive[0].log_prob = 0.0;
    if (!constraints.empty()) {
      TFM_CHECK(constraints[s] != nullptr, "{}: source {} has no constraint state", search, s);
      searches[s].alive[0].constraint = std::move(constraints[s]);
    }
  }
  return searches;
}

// A step's best tokens: the scorer's own (unconstrained), or masked by the live hypotheses'
// states (an empty slot's row, log_prob -inf, has none).
// The m best tokens of every row, masked by the constraints when there are some.
void masked_best_tokens(StepScorer& scorer, const std::vector<int32_t>& last_tokens,
                        const std::vector<SourceSearch>& searches,
                        const std::vector<int64_t>& active, bool constrained, int64_t m,
                        int64_t step, const SearchOptions& options, StepTop& top) {
  const int32_t excluded = excluded_token(step, options);
  if (!constrained) {
    scorer.step_top(last_tokens, m, excluded, top);
    return;
  }
  std::vector<const ConstraintState*> states;
  for (int64_t source : active)
    for (const Partial& p : searches[static_cast<size_t>(source)].alive)
      states.push_back(p.log_prob == kNegInf ? nullptr : p.constraint.get());
  constrained_step_top(scorer, last_tokens, states, m, excluded, options.eos_id, step, top);
}

// The m best tokens of every row that repeat no n-gram of the row's hypothesis (n =
// options.no_repeat_ngram; 0: every token). They are among the row's m + b best, b the most
// tokens any row blocks, so one wider step finds them and the blocked ones are dropped.
void best_tokens(StepScorer& scorer, const std::vector<int32_t>& last_tokens,
                 const std::vector<SourceSearch>& searches, const std::vector<int64_t>& active,
                 bool constrained, int64_t m, int64_t step, const SearchOptions& options,
                 StepTop& top) {
  std::vector<std::vector<int32_t>> blocked;
  size_t most = 0;
  if (options.no_repeat_ngram > 0)
    for (int64_t source : active)
      for (const Partial& p : searches[static_cast<size_t>(source)].alive) {
        blocked.push_back(p.log_prob == kNegInf
                              ? std::vector<int32_t>{}
                              : repeated_ngram_ends(p.tokens, options.no_repeat_ngram));
        most = std::max(most, blocked.back().size());
      }
  if (most == 0) {
    masked_best_tokens(scorer, last_tokens, searches, active, constrained, m, step, options, top);
    return;
  }
  const int64_t wide_m = std::min(m + static_cast<int64_t>(most), scorer.vocab_size());
  StepTop wide;
  masked_best_tokens(scorer, last_tokens, searches, active, constrained, wide_m, step, options,
                     wide);
  const int64_t rows = scorer.rows();
  top.resize(rows, m);
  for (int64_t row = 0; row < rows; ++row) {
    const std::vector<int32_t>& row_blocked = blocked[static_cast<size_t>(row)];
    int32_t& kept = top.counts[static_cast<size_t>(row)];
    const int64_t first = row * wide_m, end = first + wide.counts[static_cast<size_t>(row)];
    for (int64_t e = first; e < end && kept < m; ++e) {
      const int32_t token = wide.tokens[static_cast<size_t>(e)];
      if (std::binary_search(row_blocked.begin(), row_blocked.end(), token)) continue;
      const auto at = static_cast<size_t>(row * m + kept++);
      top.tokens[at] = token;
      top.log_probs[at] = wide.log_probs[static_cast<size_t>(e)];
    }
  }
}

// The shape of a step's best tokens, and their log-probabilities: every one the search reads must
// be finite or -inf (never returned). A NaN or +inf is a model whose activations overflowed; a
// search over it would silently find nothing.
void check_top(const StepTop& top, const StepScorer& scorer, int64_t m, int64_t step) {
  TFM_CHECK(top.m == m && static_cast<int64_t>(top.counts.size()) == scorer.rows() &&
                top.log_probs.size() == static_cast<size_t>(scorer.rows() * m) &&
                top.tokens.size() == top.log_probs.size(),
            "search: the scorer returned {} best tokens for {} rows, expected {} for {}", top.m,
            top.counts.size(), m, scorer.rows());
  for (int64_t row = 0; row < scorer.rows(); ++row) {
    const int32_t count = top.counts[static_cast<size_t>(row)];
    TFM_CHECK(count >= 0 && count <= m, "search: the scorer filled {} of {} best tokens", count, m);
    for (int64_t e = row * m; e < row * m + count; ++e)
      if (!std::isfinite(top.log_probs[static_cast<size_t>(e)])) fail_non_finite(step);
  }
}

std::vector<float> attention_row(const Tensor& attention, int64_t row) {
  if (!attention.defined()) return {};
  const int64_t width = attention.dim(1);
  const float* p = attention.data<float>() + row * width;
  return std::vector<float>(p, p + width);
}

// Inserts h after every finished hypothesis whose score is at least h's.
void add_finished(std::vector<Hypothesis>& finished, Hypothesis h) {
  auto at = std::upper_bound(finished.begin(), finished.end(), h.score,
                             [](double score, const Hypothesis& f) { return score > f.score; });
  finished.insert(at, std::move(h));
}

Hypothesis finish(const Partial& parent, int32_t token, double log_prob, bool is_eos,
                  const Tensor& attention, int64_t row, double alpha) {
  Hypothesis h;
  h.tokens = parent.tokens;
  if (!is_eos) h.tokens.push_back(token);
  h.ended_by_eos = is_eos;
  h.length = static_cast<int64_t>(parent.tokens.size()) + 1;
  h.log_prob = log_prob;
  h.score = log_prob / length_penalty(h.length, alpha);
  h.attention = parent.attention;
  if (attention.defined()) h.attention.push_back(attention_row(attention, row));
  return h;
}

// The search's output: the n_best best finished hypotheses of each source.
std::vector<std::vector<Hypothesis>> best_of(std::vector<SourceSearch>& searches, int64_t n_best) {
  std::vector<std::vector<Hypothesis>> out(searches.size());
  for (size_t s = 0; s < searches.size(); ++s) {
    auto& finished = searches[s].finished;
    if (static_cast<int64_t>(finished.size()) > n_best)
      finished.resize(static_cast<size_t>(n_best));
    out[s] = std::move(finished);
  }
  return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> beam_search(
    StepScorer& scorer, const std::vector<int64_t>& max_lengths, const SearchOptions& options,
    std::vector<std::unique_ptr<ConstraintState>> constraints) {
  const int64_t k = options.beam_size;
  check_options(scorer, max_lengths, options, k, "beam search");
  const int64_t vocab = scorer.vocab_size();
  const size_t candidates_kept = static_cast<size_t>(2 * k);
  // A row has no more than `vocab` tokens to offer: a beam of half the vocabulary or more keeps
  // them all (the kernels take at most `vocab` per row).
  const int64_t per_row = std::min(2 * k, vocab);

  const bool constrained = !constraints.empty();
  std::vector<SourceSearch> searches =
      start_searches(max_lengths, k, std::move(constraints), "beam search");
  std::vector<int64_t> active(searches.size());  // the sources being searched, in row order
  std::iota(active.begin(), active.end(), int64_t{0});
  std::vector<int32_t> last_tokens(static_cast<size_t>(scorer.rows()), options.bos_id);
  StepTop top;

  struct Candidate {
    double log_prob;
    int64_t index;  // beam * vocab + token: the tie-break order
  };
  std::vector<Candidate> candidates;

  for (int64_t step = 0; !active.empty(); ++step) {
    // The 2k best tokens of every row: the 2k best extensions of a source are among them.
    best_tokens(scorer, last_tokens, searches, active, constrained, per_row, step, options, top);
    check_top(top, scorer, per_row, step);
    Tensor attention = scorer.last_attention();

    std::vector<int64_t> next_rows, next_active;
    std::vector<int32_t> next_tokens;
    const int64_t length = step + 1;  // tokens of every candidate, the new one included
    for (size_t slot = 0; slot < active.size(); ++slot) {
      SourceSearch& search = searches[static_cast<size_t>(active[slot])];
      const int64_t first_row = static_cast<int64_t>(slot) * k;

      candidates.clear();
      for (int64_t i = 0; i < k; ++i) {
        const double base = search.alive[static_cast<size_t>(i)].log_prob;
        if (base == kNegInf) continue;
        const int64_t row = first_row + i;
        for (int64_t e = row * top.m; e < row * top.m + top.counts[static_cast<size_t>(row)]; ++e)
          candidates.push_back({base + static_cast<double>(top.log_probs[static_cast<size_t>(e)]),
                                i * vocab + top.tokens[static_cast<size_t>(e)]});
      }
      auto better = [](const Candidate& a, const Candidate& b) {
        return a.log_prob > b.log_prob || (a.log_prob == b.log_prob && a.index < b.index);
      };
      const size_t kept = std::min(candidates.size(), candidates_kept);
      std::partial_sort(candidates.begin(), candidates.begin() + static_cast<int64_t>(kept),
                        candidates.end(), better);

      std::vector<Partial> next;
      std::vector<int64_t> parents;
      for (size_t rank = 0; rank < kept; ++rank) {
        const Candidate& c = candidates[rank];
        const int64_t parent = c.index / vocab;
        const auto token = static_cast<int32_t>(c.index % vocab);
        const Partial& from = search.alive[static_cast<size_t>(parent)];
        const bool is_eos = token == options.eos_id;
        if (is_eos || length == search.max_length) {
          if (static_cast<int64_t>(rank) < k)
            add_finished(search.finished, finish(from, token, c.log_prob, is_eos, attention,
                                                 first_row + parent, options.alpha));
        } else if (static_cast<int64_t>(next.size()) < k) {
          Partial p;
          p.tokens = from.tokens;
          p.tokens.push_back(token);
          p.log_prob = c.log_prob;
          p.attention = from.attention;
          if (attention.defined())
            p.attention.push_back(attention_row(attention, first_row + parent));
          if (constrained) {
            p.constraint = from.constraint->clone();
            p.constraint->advance(token);
          }
          next.push_back(std::move(p));
          parents.push_back(parent);
        }
      }

      // Early termination (the bound is derived in search.h).
      bool done = next.empty();
      const auto n_best = static_cast<size_t>(options.n_best);
      if (!done && options.early_stopping && search.finished.size() >= n_best) {
        const double largest_lp = std::max(length_penalty(length + 1, options.alpha),
                                           length_penalty(search.max_length, options.alpha));
        done = search.finished[n_best - 1].score >= next.front().log_prob / largest_lp;
      }
      if (done) continue;

      // Empty slots keep a row (every source has k) that is never extended.
      while (static_cast<int64_t>(next.size()) < k) {
        next.emplace_back();
        next.back().tokens = next.front().tokens;  // any real prefix: only its length matters
        parents.push_back(parents.front());
      }
      for (int64_t i = 0; i < k; ++i) {
        next_rows.push_back(first_row + parents[static_cast<size_t>(i)]);
        const auto& tokens = next[static_cast<size_t>(i)].tokens;
        next_tokens.push_back(tokens.back());
      }
      search.alive = std::move(next);
      next_active.push_back(active[slot]);
    }
    active = std::move(next_active);
    if (active.empty()) break;
    scorer.select(next_rows);
    last_tokens = std::move(next_tokens);
  }
  return best_of(searches, options.n_best);
}

std::vector<std::vector<Hypothesis>> greedy_search(
    StepScorer& scorer, const std::vector<int64_t>& max_lengths, const SearchOptions& options,
    std::vector<std::unique_ptr<ConstraintState>> constraints) {
  check_options(scorer, max_lengths, options, 1, "greedy search");
  const bool constrained = !constraints.empty();
  std::vector<SourceSearch> searches =
      start_searches(max_lengths, 1, std::move(constraints), "greedy search");
  std::vector<int64_t> active(searches.size());
  std::iota(active.begin(), active.end(), int64_t{0});
  std::vector<int32_t> last_tokens(static_cast<size_t>(scorer.rows()), options.bos_id);
  StepTop best;

  for (int64_t step = 0; !active.empty(); ++step) {
    best_tokens(scorer, last_tokens, searches, active, constrained, 1, step, options, best);
    check_top(best, scorer, 1, step);
    Tensor attention = scorer.last_attention();

    std::vector<int64_t> next_rows, next_active;
    std::vector<int32_t> next_tokens;
    const int64_t length = step + 1;
    for (size_t row = 0; row < active.size(); ++row) {
      SourceSearch& search = searches[static_cast<size_t>(active[row])];
      Partial& hypothesis = search.alive[0];
      if (best.counts[row] == 0) continue;  // nothing of finite probability: no hypothesis
      const int32_t token = best.tokens[row];
      const double log_prob = hypothesis.log_prob + static_cast<double>(best.log_probs[row]);
      const bool is_eos = token == options.eos_id;
      const auto r = static_cast<int64_t>(row);
      if (is_eos || length == search.max_length) {
        add_finished(search.finished,
                     finish(hypothesis, token, log_prob, is_eos, attention, r, options.alpha));
        continue;
      }
      hypothesis.tokens.push_back(token);
      hypothesis.log_prob = log_prob;
      if (constrained) hypothesis.constraint->advance(token);
      if (attention.defined()) hypothesis.attention.push_back(attention_row(attention, r));
      next_rows.push_back(r);
      next_tokens.push_back(token);
      next_active.push_back(active[row]);
    }
    active = std::move(next_active);
    if (active.empty()) break;
    scorer.select(next_rows);
    last_tokens = std::move(next_tokens);
  }
  return best_of(searches, 1);
}

}  // namespace tfm::internal::decode
