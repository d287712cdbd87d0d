// Shared by the decoding tests: a tiny Transformer configuration and random source sentences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tfm/decode/search.h"
#include "tfm/model/config.h"

namespace tfm::internal::testing {

// d_v != d_k so that key and value widths cannot be confused; dropout 0 (decoding is inference).
inline ModelConfig tiny_decoder_config(const char* norm = "post",
                                       const char* positional = "sinusoidal",
                                       bool attention_bias = false) {
  ModelConfig c = preset("base");
  c.layers = 2;
  c.d_model = 16;
  c.d_ff = 32;
  c.heads = 2;
  c.d_k = 8;
  c.d_v = 4;
  c.vocab_size = 40;
  c.max_positions = 64;
  c.dropout = 0.0;
  c.norm = norm;
  c.positional = positional;
  c.attention_bias = attention_bias;
  return c;
}

// Sentences of the given lengths with word ids (no pad/unk/bos/eos) drawn from a seeded generator.
inline std::vector<std::vector<int32_t>> random_sources(const std::vector<int>& lengths,
                                                        int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> word(4, vocab - 1);
  std::vector<std::vector<int32_t>> out;
  for (int length : lengths) {
    std::vector<int32_t> s;
    for (int i = 0; i < length; ++i) s.push_back(word(rng));
    out.push_back(s);
  }
  return out;
}

// How far two translations of the same sources agree (the best hypothesis of each): sentences with
// the same output, tokens equal at the same position, and the largest relative change of the score
// of a sentence with the same output.
struct Agreement {
  int same = 0, tokens = 0, same_tokens = 0;
  double score_change = 0.0;
};

inline Agreement agreement(const std::vector<std::vector<decode::Hypothesis>>& got,
                           const std::vector<std::vector<decode::Hypothesis>>& want) {
  Agreement r;
  for (size_t s = 0; s < want.size(); ++s) {
    const decode::Hypothesis &a = got[s][0], &b = want[s][0];
    for (size_t t = 0; t < b.tokens.size(); ++t, ++r.tokens)
      r.same_tokens += t < a.tokens.size() && a.tokens[t] == b.tokens[t];
    if (a.tokens != b.tokens) continue;
    ++r.same;
    r.score_change = std::max(r.score_change, std::fabs(a.score - b.score) / std::fabs(b.score));
  }
  return r;
}

}  // namespace tfm::internal::testing
