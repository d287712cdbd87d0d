// The public API tests' model (tests/test_public_api*.cc): a tiny translation model trained for a
// few updates through tfm::train, with only <tfm/...> headers, as an outside program would.
#pragma once

#include <tfm/tfm.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tfm::internal::testing {

inline std::vector<std::string> api_sentences(int count, const std::vector<std::string>& words,
                                              unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < count; ++i) {
    std::string line;
    for (unsigned w = 0, n = 3 + rng() % 8; w < n; ++w)
      line += (w ? " " : "") + words[rng() % words.size()];
    lines.push_back(line + ".");
  }
  return lines;
}

inline void api_write_lines(const std::filesystem::path& path,
                            const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& line : lines) out << line << "\n";
}

// Writes dir/en.txt, dir/de.txt and dir/recipe.yaml: a 1-layer model (d_model 16, 2 heads) with a
// 60-piece vocabulary learned from 300 generated sentence pairs.
inline std::filesystem::path write_api_recipe(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  api_write_lines(dir / "en.txt", api_sentences(300,
                                                {"a", "man", "dog", "runs", "in", "the", "park",
                                                 "two", "girls", "play", "red", "ball"},
                                                1));
  api_write_lines(dir / "de.txt", api_sentences(300,
                                                {"ein", "mann", "hund", "läuft", "im", "park",
                                                 "zwei", "mädchen", "spielen", "rot", "ball"},
                                                2));
  std::ofstream(dir / "recipe.yaml")
      << "model:\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  d_k: 8\n  d_v: 8\n"
      << "  max_positions: 64\ndata:\n  train_source: " << (dir / "en.txt").string()
      << "\n  train_target: " << (dir / "de.txt").string()
      << "\n  vocab_size: 60\n  max_tokens: 400\noptimizer:\n  warmup: 4\n"
      << "training:\n  log_every: 100\n  threads: 1\ncheckpoints:\n  every_steps: 8\n";
  return dir / "recipe.yaml";
}

// 8 updates of that recipe into dir/run; the result names the checkpoint (a model directory).
inline tfm::TrainingResult train_api_model(const std::filesystem::path& dir) {
  tfm::TrainingOptions options;
  options.recipe = write_api_recipe(dir);
  options.run_dir = dir / "run";
  options.max_steps = 8;
  options.device = tfm::ComputeDevice::cpu;  // the enum, over the recipe's default
  return tfm::train(options);
}

}  // namespace tfm::internal::testing
