// A model directory that reads text, for the command-line tests: a random tiny Transformer
// (testing::tiny_decoder_config, max_positions 64) and the 120-piece BPE vocabulary of
// testing::train_tiny_vocab.
#pragma once

#include <filesystem>

#include "data_test_util.h"
#include "test_decode_helpers.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal::testing {

// Writes dir/model (with `heads` heads, weights from `seed`) and returns its path.
inline std::filesystem::path write_tiny_text_model(const std::filesystem::path& dir, int heads = 2,
                                                   uint64_t seed = 3) {
  const std::filesystem::path vocab = train_tiny_vocab(dir);
  ModelConfig config = tiny_decoder_config();
  config.vocab_size = 120;
  config.heads = heads;
  nn::Transformer transformer(config);
  transformer.init(seed);
  const std::filesystem::path model = dir / "model";
  save_model_dir(model, config, transformer.named_parameters());
  std::filesystem::copy_file(vocab, model / kVocabFileName);
  return model;
}

inline std::filesystem::path write_tiny_text_model(const TempDir& dir, int heads = 2,
                                                   uint64_t seed = 3) {
  return write_tiny_text_model(dir.path(), heads, seed);
}

}  // namespace tfm::internal::testing
