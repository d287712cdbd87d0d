// Shared by the decoding tests: a tiny Transformer configuration and random source sentences.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tfm/model/config.h"

namespace tfm::testing {

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

}  // namespace tfm::testing
