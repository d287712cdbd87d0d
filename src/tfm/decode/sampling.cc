#include "tfm/decode/sampling.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/core/splitmix64.h"

namespace tfm::internal::decode {

void check_sampling_options(const SamplingOptions& options) {
  TFM_CHECK(options.samples >= 1, "sampling: {} samples per sentence; give at least 1",
            options.samples);
  TFM_CHECK(options.epsilon >= 0 && options.epsilon < 1,
            "sampling: epsilon {} must be in [0, 1) (0: every token may be drawn)",
            options.epsilon);
  TFM_CHECK(std::isfinite(options.temperature) && options.temperature > 0,
            "sampling: temperature {} must be a positive finite number", options.temperature);
}

int32_t draw_token(const float* log_probs, int64_t vocab, const std::vector<int32_t>& blocked,
                   double uniform, const SamplingOptions& options, int64_t step) {
  // The blocked tokens inside the vocabulary, each once, marked for this call (and unmarked on
  // every way out). Per thread, as the marks: a draw runs for every row at every step.
  thread_local std::vector<int32_t> unique_blocked;
  unique_blocked.clear();
  for (int32_t t : blocked)
    if (t >= 0 && t < vocab) unique_blocked.push_back(t);
  std::sort(unique_blocked.begin(), unique_blocked.end());
  unique_blocked.erase(std::unique(unique_blocked.begin(), unique_blocked.end()),
                       unique_blocked.end());
  thread_local std::vector<char> is_blocked;
  if (static_cast<int64_t>(is_blocked.size()) < vocab)
    is_blocked.resize(static_cast<size_t>(vocab));
  struct Marks {
    const std::vector<int32_t>& tokens;
    ~Marks() {
      for (int32_t t : tokens) is_blocked[static_cast<size_t>(t)] = 0;
    }
  } marks{unique_blocked};
  for (int32_t t : unique_blocked) is_blocked[static_cast<size_t>(t)] = 1;

  float largest = -std::numeric_limits<float>::infinity();
  int32_t best = -1;
  for (int64_t t = 0; t < vocab; ++t) {
    if (is_blocked[static_cast<size_t>(t)]) continue;
    const float v = log_probs[t];
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) fail_non_finite(step);
    if (v > largest) {
      largest = v;
      best = static_cast<int32_t>(t);
    }
  }
  if (best < 0 || largest == -std::numeric_limits<float>::infinity()) return -1;
  // Unnormalised q: w(t) = exp((v(t) - largest) / T), so q(t) = w(t) / sum(w) and the most
  // probable token has w = 1. q(t) >= epsilon is w(t) >= epsilon * sum(w).
  const double temperature = options.temperature;
  const auto weight = [&](int64_t t) {
    return std::exp((static_cast<double>(log_probs[t]) - largest) / temperature);
  };
  // At T = 1 the row's log-probabilities sum to 1 in probability, so sum(w) is exp(-largest) times
  // the mass the blocked tokens leave, without a pass over the vocabulary; when they leave little
  // (or at another T) the sum is taken token by token.
  double blocked_mass = 0;
  for (int32_t t : unique_blocked) blocked_mass += std::exp(static_cast<double>(log_probs[t]));
  double total = 0;
  if (temperature == 1.0 && options.epsilon > 0 && 1 - blocked_mass >= 1e-3) {
    total = std::exp(-static_cast<double>(largest)) * (1 - blocked_mass);
  } else {
    for (int64_t t = 0; t < vocab; ++t)
      if (!is_blocked[static_cast<size_t>(t)] &&
          log_probs[t] > -std::numeric_limits<float>::infinity())
        total += weight(t);
  }
  // Only tokens with w(t) >= threshold are kept: (v(t) - largest) / T >= log(threshold). That
  // bound (a little lower, for rounding) skips the rest without an exp; w decides.
  const double threshold = options.epsilon * total;
  const double lowest = threshold > 0 ? largest + temperature * std::log(threshold) - 1e-6
                                      : -std::numeric_limits<double>::infinity();
  thread_local std::vector<std::pair<int32_t, double>> kept;
  kept.clear();
  double kept_weight = 0;
  for (int64_t t = 0; t < vocab; ++t) {
    if (is_blocked[static_cast<size_t>(t)] || static_cast<double>(log_probs[t]) < lowest ||
        log_probs[t] == -std::numeric_limits<float>::infinity())
      continue;
    const double w = weight(t);
    if (w < threshold || w == 0) continue;
    kept.emplace_back(static_cast<int32_t>(t), w);
    kept_weight += w;
  }
  if (kept.empty()) return best;  // nothing reaches epsilon: the most probable token
  // The first token whose cumulative weight passes uniform * kept_weight (the last kept one when
  // rounding leaves the walk short).
  const double target = uniform * kept_weight;
  double cumulative = 0;
  for (const auto& [token, w] : kept) {
    cumulative += w;
    if (cumulative > target) return token;
  }
  return kept.back().first;
}

namespace {

// One sample being drawn: its source (index into max_lengths), its index among the source's
// samples, its key for the draws, and its tokens so far.
struct Sample {
  int64_t source = 0;
  int64_t index = 0;
  uint64_t key = 0;
  std::vector<int32_t> tokens;
  double log_prob = 0.0;
};

// A uniform number in [0, 1) with 53 random bits, a function of the sample's key and the step.
double uniform_draw(uint64_t key, int64_t step) {
  return static_cast<double>(splitmix64(key ^ splitmix64(static_cast<uint64_t>(step))) >> 11) *
         0x1p-53;
}

}  // namespace

std::vector<std::vector<Hypothesis>> sampling_search(StepScorer& scorer,
                                                     const std::vector<int64_t>& max_lengths,
                                                     const std::vector<uint64_t>& source_keys,
                                                     const SearchOptions& search,
                                                     const SamplingOptions& sampling) {
  check_sampling_options(sampling);
  const auto sources = static_cast<int64_t>(max_lengths.size());
  TFM_CHECK(static_cast<int64_t>(source_keys.size()) == sources,
            "sampling: {} source keys for {} sources", source_keys.size(), sources);
  TFM_CHECK(scorer.rows() == sources,
            "sampling: the scorer has {} rows, expected one per source ({})", scorer.rows(),
            sources);
  const int64_t vocab = scorer.vocab_size();
  check_search_conventions(search, vocab, max_lengths, "sampling");

  if (sources == 0) return {};
  // One row per sample: each source's row repeated `samples` times.
  std::vector<Sample> alive;
  std::vector<int64_t> repeated;
  for (int64_t s = 0; s < sources; ++s) {
    const uint64_t source_key =
        splitmix64(splitmix64(sampling.seed) ^ source_keys[static_cast<size_t>(s)]);
    for (int64_t i = 0; i < sampling.samples; ++i) {
      alive.push_back({s, i, splitmix64(source_key ^ static_cast<uint64_t>(i)), {}, 0.0});
      repeated.push_back(s);
    }
  }
  std::vector<std::vector<std::pair<int64_t, Hypothesis>>> drawn(static_cast<size_t>(sources));
  scorer.select(repeated);
  std::vector<int32_t> last_tokens(alive.size(), search.bos_id);

  for (int64_t step = 0; !alive.empty(); ++step) {
    const Tensor log_probs = scorer.step(last_tokens);
    TFM_CHECK(log_probs.rank() == 2 && log_probs.dim(0) == static_cast<int64_t>(alive.size()) &&
                  log_probs.dim(1) == vocab && log_probs.dtype() == DType::f32,
              "sampling: the scorer returned {}, expected f32 [{}, {}]", log_probs.describe(),
              alive.size(), vocab);
    const Tensor host = log_probs.to(Device::cpu);
    const float* values = host.data<float>();
    // The rows' draws are independent: one row a thread at a time. An error is kept and thrown
    // after the loop (an exception must not leave an OpenMP region).
    std::vector<int32_t> drawn_tokens(alive.size());
    std::exception_ptr error;
    const auto rows = static_cast<int64_t>(alive.size());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      try {
        const Sample& sample = alive[static_cast<size_t>(r)];
        std::vector<int32_t> blocked;
        if (search.no_repeat_ngram > 0)
          blocked = repeated_ngram_ends(sample.tokens, search.no_repeat_ngram);
        if (step < search.min_length) blocked.push_back(search.eos_id);
        drawn_tokens[static_cast<size_t>(r)] = draw_token(
            values + r * vocab, vocab, blocked, uniform_draw(sample.key, step), sampling, step);
      } catch (...) {
#pragma omp critical(tfm_sampling_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);

    std::vector<Sample> next;
    std::vector<int64_t> next_rows;
    std::vector<int32_t> next_tokens;
    const int64_t length = step + 1;
    for (size_t r = 0; r < alive.size(); ++r) {
      Sample& sample = alive[r];
      const int32_t token = drawn_tokens[r];
      if (token < 0) continue;  // nothing of finite probability: no hypothesis
      const float* row = values + static_cast<int64_t>(r) * vocab;
      sample.log_prob += static_cast<double>(row[token]);
      const bool is_eos = token == search.eos_id;
      if (is_eos || length == max_lengths[static_cast<size_t>(sample.source)]) {
        Hypothesis h;
        h.tokens = std::move(sample.tokens);
        if (!is_eos) h.tokens.push_back(token);
        h.log_prob = sample.log_prob;
        h.length = length;
        h.ended_by_eos = is_eos;
        h.score = h.log_prob / length_penalty(length, search.alpha);
        drawn[static_cast<size_t>(sample.source)].emplace_back(sample.index, std::move(h));
        continue;
      }
      sample.tokens.push_back(token);
      next_rows.push_back(static_cast<int64_t>(r));
      next_tokens.push_back(token);
      next.push_back(std::move(sample));
    }
    alive = std::move(next);
    if (alive.empty()) break;
    scorer.select(next_rows);
    last_tokens = std::move(next_tokens);
  }

  std::vector<std::vector<Hypothesis>> out(static_cast<size_t>(sources));
  for (size_t s = 0; s < drawn.size(); ++s) {
    auto& samples = drawn[s];
    std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
      return a.second.score > b.second.score ||
             (a.second.score == b.second.score && a.first < b.first);
    });
    for (auto& [index, h] : samples) out[s].push_back(std::move(h));
  }
  return out;
}

}  // namespace tfm::internal::decode
