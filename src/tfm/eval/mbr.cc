#include "tfm/eval/mbr.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/eval/bleu.h"
#include "tfm/eval/bleu_tokenizers.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::eval {

namespace {

constexpr int kOrders = 4;  // BLEU's n-gram orders, 1-4

BleuOptions utility_options() {
  BleuOptions options;
  options.smoothing = BleuSmoothing::kAddK;  // k = 1 (sacreBLEU's default)
  return options;
}

// A candidate as BLEU sees it, counted once for all its comparisons: its length in 13a tokens and
// per order its n-grams with their counts, sorted. An n-gram is its tokens' numbers (every distinct
// token of the list numbered from 1) packed 16 bits each into one key: exact while a list has
// fewer than 65536 distinct tokens.
struct CountedCandidate {
  int64_t length = 0;
  std::array<std::vector<std::pair<uint64_t, int64_t>>, kOrders> ngrams;
};

constexpr size_t kMaxPackedTokens = 0xffff;

// Numbers the 13a tokens of every text; false when the list has too many distinct tokens to pack.
bool count_candidates(const std::vector<std::string>& texts,
                      std::vector<CountedCandidate>& counted) {
  std::unordered_map<std::string, uint64_t> numbers;
  counted.assign(texts.size(), {});
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string tokenized = bleu_tokenized_line(texts[i], utility_options());
    std::vector<uint64_t> ids;
    for (std::string_view token : split_python_whitespace(tokenized)) {
      const uint64_t id = numbers.try_emplace(std::string(token), numbers.size() + 1).first->second;
      if (numbers.size() > kMaxPackedTokens) return false;
      ids.push_back(id);
    }
    CountedCandidate& c = counted[i];
    c.length = static_cast<int64_t>(ids.size());
    for (int n = 1; n <= kOrders; ++n) {
      std::vector<uint64_t> keys;
      for (size_t first = 0; first + static_cast<size_t>(n) <= ids.size(); ++first) {
        uint64_t key = 0;
        for (int k = 0; k < n; ++k) key = (key << 16) | ids[first + static_cast<size_t>(k)];
        keys.push_back(key);
      }
      std::sort(keys.begin(), keys.end());
      auto& grams = c.ngrams[static_cast<size_t>(n - 1)];
      for (uint64_t key : keys) {
        if (grams.empty() || grams.back().first != key)
          grams.emplace_back(key, 1);
        else
          ++grams.back().second;
      }
    }
  }
  return true;
}

// Sentence BLEU / 100 of h against r from their counts: the statistics corpus_bleu_statistics
// gives a one-line corpus (matches clipped by the reference's counts), scored by compute_bleu.
double counted_utility(const CountedCandidate& h, const CountedCandidate& r) {
  BleuStatistics stats;
  stats.sys_len = h.length;
  stats.ref_len = r.length;
  stats.nrefs = 1;
  for (size_t order = 0; order < kOrders; ++order) {
    const auto& mine = h.ngrams[order];
    const auto& theirs = r.ngrams[order];
    int64_t total = 0, matches = 0;
    auto other = theirs.begin();
    for (const auto& [key, count] : mine) {
      total += count;
      while (other != theirs.end() && other->first < key) ++other;
      if (other != theirs.end() && other->first == key) matches += std::min(count, other->second);
    }
    stats.counts.push_back(matches);
    stats.totals.push_back(total);
  }
  return compute_bleu(stats, utility_options()).score / 100.0;
}

}  // namespace

double mbr_utility(const std::string& hypothesis, const std::string& reference) {
  return sentence_bleu(hypothesis, {reference}, utility_options()).score / 100.0;
}

std::vector<double> mbr_expected_utilities(const std::vector<std::string>& texts,
                                           const std::vector<double>& scores,
                                           const MbrOptions& options) {
  TFM_CHECK(!texts.empty(), "MBR: no candidates");
  TFM_CHECK(texts.size() == scores.size(), "MBR: {} candidates but {} scores", texts.size(),
            scores.size());
  TFM_CHECK(std::isfinite(options.temperature) && options.temperature > 0,
            "MBR: the temperature must be a positive number, got {}", options.temperature);
  for (size_t i = 0; i < scores.size(); ++i)
    TFM_CHECK(std::isfinite(scores[i]), "MBR: candidate {} has the score {}", i + 1, scores[i]);
  for (size_t i = 0; i < texts.size(); ++i)
    TFM_CHECK(!find_invalid_utf8(texts[i]), "MBR: candidate {} is not valid UTF-8", i + 1);
  // w = softmax(s / T), from the largest score so that no exp overflows; or 1 / n.
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> weights(scores.size());
  double total = 0;
  for (size_t j = 0; j < scores.size(); ++j) {
    weights[j] = options.uniform ? 1.0 : std::exp((scores[j] - top) / options.temperature);
    total += weights[j];
  }
  for (double& w : weights) w /= total;

  std::vector<double> expected(texts.size(), 0.0);
  std::vector<CountedCandidate> counted;
  const bool packed = count_candidates(texts, counted);
  for (size_t i = 0; i < texts.size(); ++i)
    for (size_t j = 0; j < texts.size(); ++j)
      expected[i] += weights[j] * (packed ? counted_utility(counted[i], counted[j])
                                          : mbr_utility(texts[i], texts[j]));
  return expected;
}

size_t mbr_choice(const std::vector<std::string>& texts, const std::vector<double>& scores,
                  const MbrOptions& options) {
  const std::vector<double> expected = mbr_expected_utilities(texts, scores, options);
  // max_element returns the first of equal elements.
  return static_cast<size_t>(std::max_element(expected.begin(), expected.end()) - expected.begin());
}

void choose_by_mbr(const data::Vocabulary& vocab, std::vector<translation::NBest>& lists,
                   const MbrOptions& options) {
  // The lists are independent: one a thread at a time. An error is kept and thrown after the loop
  // (an exception must not leave an OpenMP region).
  std::exception_ptr error;
  const auto count = static_cast<int64_t>(lists.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t l = 0; l < count; ++l) {
    translation::NBest& list = lists[static_cast<size_t>(l)];
    if (list.size() < 2) continue;
    try {
      std::vector<std::string> texts;
      std::vector<double> scores;
      for (const decode::Hypothesis& h : list) {
        texts.push_back(translation::hypothesis_text(vocab, h));
        scores.push_back(h.score);
      }
      const auto chosen = static_cast<std::ptrdiff_t>(mbr_choice(texts, scores, options));
      std::rotate(list.begin(), list.begin() + chosen, list.begin() + chosen + 1);
    } catch (...) {
#pragma omp critical(tfm_mbr_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tfm::internal::eval
