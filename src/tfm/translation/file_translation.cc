#include "tfm/translation/file_translation.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tfm::internal::translation {

void translate_chunks(const data::Vocabulary& vocab, std::vector<std::vector<int32_t>> encoded,
                      const Search& search, const std::function<void(std::string_view)>& write,
                      const ChunkedTranslation& options) {
  const size_t lines = encoded.size();
  for (size_t begin = 0; begin < lines; begin += options.chunk) {
    const size_t end = std::min(lines, begin + options.chunk);
    std::vector<std::vector<int32_t>> sources(
        std::make_move_iterator(encoded.begin() + static_cast<std::ptrdiff_t>(begin)),
        std::make_move_iterator(encoded.begin() + static_cast<std::ptrdiff_t>(end)));
    const std::vector<NBest> results = translate_nonempty(sources, search);
    std::string out;  // the chunk's lines
    for (size_t i = begin; i < end; ++i) {
      const NBest* nbest = sources[i - begin].empty() ? nullptr : &results[i - begin];
      out += output_lines(vocab, i, sources[i - begin], nbest, options.format);
      if (options.on_line) options.on_line(i, nbest);
    }
    write(out);
    if (options.on_chunk) options.on_chunk(end);
  }
}

}  // namespace tfm::internal::translation
