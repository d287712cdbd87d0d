// Test fixtures for the data layer: generated parallel text (seeded, with non-ASCII letters), gzip
// writing, a tiny SentencePiece vocabulary trained in a temporary directory, and running the tfm
// binary.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "build_paths.h"
#include "temp_dir.h"
#include "tfm/data/vocab.h"

namespace tfm::internal::testing {

// `count` sentences of 3..14 words drawn from a small word list; `german` picks the list with
// umlauts and sharp s, so the text is multi-byte UTF-8.
inline std::vector<std::string> generated_sentences(int count, bool german, uint64_t seed) {
  static const std::vector<std::string> english = {
      "a",     "the",    "man",     "woman", "dog",     "is",     "are",    "running", "in",
      "park",  "two",    "young",   "girls", "playing", "with",   "ball",   "street",  "red",
      "shirt", "walks",  "down",    "next",  "to",      "water",  "people", "sitting", "on",
      "bench", "child",  "jumping", "into",  "pool",    "black",  "white",  "group",   "of",
      "men",   "riding", "bikes",   "city",  "smiling", "camera", "green",  "field"};
  static const std::vector<std::string> deutsch = {
      "ein",    "eine",   "der",    "die",       "das",     "mann",    "frau",    "hund",
      "läuft",  "im",     "park",   "zwei",      "junge",   "mädchen", "spielen", "mit",
      "ball",   "straße", "rotes",  "hemd",      "geht",    "neben",   "wasser",  "leute",
      "sitzen", "auf",    "bank",   "kind",      "springt", "größer",  "schwarz", "weiß",
      "gruppe", "männer", "fahren", "fahrräder", "stadt",   "lächelt", "kamera",  "grünen"};
  const auto& words = german ? deutsch : english;
  std::mt19937_64 rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < count; ++i) {
    const int length = 3 + static_cast<int>(rng() % 12);
    std::string line;
    for (int w = 0; w < length; ++w) {
      if (w > 0) line += ' ';
      std::string word = words[rng() % words.size()];
      if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      line += word;
    }
    lines.push_back(line + (rng() % 3 == 0 ? " ." : "."));
  }
  return lines;
}

inline std::string joined_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline void write_gzip(const std::filesystem::path& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes 300 generated English and German lines to dir/{en,de}.txt and trains a 120-piece BPE
// vocabulary on both, returning the .model path.
inline std::filesystem::path train_tiny_vocab(const std::filesystem::path& dir, int64_t size = 120,
                                              const std::string& type = "bpe") {
  write_text(dir / "en.txt", joined_lines(generated_sentences(300, false, 11)));
  write_text(dir / "de.txt", joined_lines(generated_sentences(300, true, 12)));
  data::VocabTrainOptions options;
  options.inputs = {dir / "en.txt", dir / "de.txt"};
  options.output_prefix = dir / ("vocab_" + type);
  options.model_type = type;
  options.vocab_size = size;
  options.num_threads = 1;
  return data::train_vocabulary(options).model_path;
}

inline std::filesystem::path train_tiny_vocab(const TempDir& dir, int64_t size = 120,
                                              const std::string& type = "bpe") {
  return train_tiny_vocab(dir.path(), size, type);
}

// A path in single quotes, for a shell command line. fmt, not operator+: GCC 12 reports a false
// -Wrestrict on some std::string concatenations.
inline std::string quoted(const std::filesystem::path& p) {
  return fmt::format("'{}'", p.string());
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct CommandResult {
  int status;
  std::string out, err;
};

// Runs the built tfm binary with `arguments` (already shell-quoted).
inline CommandResult run_tfm_command(const std::string& arguments, const TempDir& dir) {
  const auto out = dir / "stdout", err = dir / "stderr";
  const std::string command = std::string("'") + tfm_binary_dir() + "/tfm' " + arguments + " > '" +
                              out.string() + "' 2> '" + err.string() + "'";
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err)};
}

}  // namespace tfm::internal::testing
