// A hand-written "model" for the search tests: a StepScorer whose next-token distribution is a
// fixed function of the source and the prefix.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "tfm/decode/search.h"

namespace tfm::internal::testing {

using decode::StepScorer;

constexpr int32_t kBos = 2, kEos = 3;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// p(next | source, prefix without bos) as a full distribution over the vocabulary.
using Distribution =
    std::function<std::vector<double>(int64_t source, const std::vector<int32_t>& prefix)>;

// Random weights for eos and the words (ids kEos..vocab-1; pad, unk and bos get 0), fixed per
// (source, prefix); eos's weight is scaled by eos_weight (below 1: longer outputs).
inline Distribution random_table(uint64_t seed, int64_t vocab, double eos_weight = 1.0) {
  return [seed, vocab, eos_weight](int64_t source, const std::vector<int32_t>& prefix) {
    uint64_t h = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(source) * 1000003u;
    for (int32_t t : prefix) h = (h ^ static_cast<uint64_t>(t)) * 0x100000001b3ull;
    std::mt19937_64 rng(h);
    std::uniform_real_distribution<double> u(0.05, 1.0);
    std::vector<double> p(static_cast<size_t>(vocab), 0.0);
    for (int32_t t = kEos; t < vocab; ++t) p[static_cast<size_t>(t)] = u(rng);
    p[kEos] *= eos_weight;
    double sum = 0;
    for (double x : p) sum += x;
    for (double& x : p) x /= sum;
    return p;
  };
}

// Keeps each row's prefix and source; step() appends the last token and returns log p as float.
class TableScorer : public StepScorer {
 public:
  TableScorer(int64_t vocab, int64_t sources, int64_t beam, Distribution distribution)
      : vocab_(vocab), beam_(beam), distribution_(std::move(distribution)) {
    for (int64_t s = 0; s < sources; ++s)
      for (int64_t i = 0; i < beam; ++i) {
        source_.push_back(s);
        prefix_.emplace_back();
      }
  }
  int64_t rows() const override { return static_cast<int64_t>(prefix_.size()); }
  int64_t vocab_size() const override { return vocab_; }
  Tensor step(const std::vector<int32_t>& last_tokens) override {
    ++steps_;
    EXPECT_EQ(static_cast<int64_t>(last_tokens.size()), rows());
    std::vector<float> out;
    for (size_t r = 0; r < prefix_.size(); ++r) {
      if (steps_ == 1) {
        EXPECT_EQ(last_tokens[r], kBos);
      } else {
        prefix_[r].push_back(last_tokens[r]);
      }
      for (double p : distribution_(source_[r], prefix_[r]))
        out.push_back(p > 0 ? static_cast<float>(std::log(p)) : kNegInf);
    }
    return Tensor::from_floats({rows(), vocab_}, out);
  }
  void select(const std::vector<int64_t>& rows) override {
    EXPECT_EQ(rows.size() % static_cast<size_t>(beam_), 0u);
    std::vector<int64_t> source;
    std::vector<std::vector<int32_t>> prefix;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i] / beam_, rows[i - i % static_cast<size_t>(beam_)] / beam_)
          << "a beam group mixes sources";
      source.push_back(source_[static_cast<size_t>(rows[i])]);
      prefix.push_back(prefix_[static_cast<size_t>(rows[i])]);
    }
    source_ = source;
    prefix_ = prefix;
  }
  int steps() const { return steps_; }

 private:
  int64_t vocab_, beam_;
  Distribution distribution_;
  std::vector<int64_t> source_;
  std::vector<std::vector<int32_t>> prefix_;
  int steps_ = 0;
};

}  // namespace tfm::internal::testing
