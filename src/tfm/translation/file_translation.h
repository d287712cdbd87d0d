// Chunked translation of a file's lines (tfm translate -i, tfm::Translator::translate_file): the
// lines are encoded and held to the length policy first (text_translation.h: encode_lines), then
// translated a chunk at a time, each chunk's output lines handed to the writer as one piece, so
// that a long file shows progress and both callers batch the same sentences together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::translation {

// Lines per chunk: tfm translate's progress unit (its --chunk) and translate_file's.
inline constexpr size_t kDefaultChunk = 512;

struct ChunkedTranslation {
  size_t chunk = kDefaultChunk;
  LineFormat format;
  // Called for each input line once its chunk is translated, before the chunk is written, with its
  // n-best list (nullptr for an empty line): attention output, token counts.
  std::function<void(size_t line, const NBest* nbest)> on_line;
  // Called after each chunk is written, with the number of lines done so far.
  std::function<void(size_t done)> on_chunk;
};

// Translates `encoded` (one entry per input line, empty for an empty line) chunk by chunk with
// `search` and writes each chunk's output lines (output_lines) with `write`.
void translate_chunks(const data::Vocabulary& vocab, std::vector<std::vector<int32_t>> encoded,
                      const Search& search, const std::function<void(std::string_view)>& write,
                      const ChunkedTranslation& options);

}  // namespace tfm::internal::translation
