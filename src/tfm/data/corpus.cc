#include "tfm/data/corpus.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "tfm/core/error.h"
#include "tfm/data/corpus_cache.h"

namespace tfm::data {

namespace {

// Lines are read and checked in order (errors name the first bad line), then encoded a chunk at a
// time on all threads: SentencePiece's Encode is const and thread-safe.
constexpr size_t kChunkPairs = 8192;

struct PendingChunk {
  std::vector<std::string> source;
  std::vector<std::string> target;
  std::vector<int64_t> line;
  void clear() {
    source.clear();
    target.clear();
    line.clear();
  }
};

void check_line(const LineReader& reader, const std::string& text) {
  if (auto bad = find_invalid_utf8(text))
    fail("{}:{}: invalid UTF-8 at byte {}", reader.path().string(), reader.line_number(), *bad + 1);
}

void encode_chunk(const PendingChunk& chunk, const Vocabulary& vocab, const LineReader& source,
                  const LineReader& target, bool skip_empty, EncodedCorpus& out) {
  const int64_t n = static_cast<int64_t>(chunk.line.size());
  std::vector<std::vector<int32_t>> source_ids(n), target_ids(n);
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 64)
  for (int64_t i = 0; i < n; ++i) {
    try {
      source_ids[i] = vocab.encode(chunk.source[i]);
      target_ids[i] = vocab.encode(chunk.target[i]);
    } catch (...) {
#pragma omp critical(tfm_corpus_encode_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  for (int64_t i = 0; i < n; ++i) {
    // A line of characters the normaliser removes encodes to nothing, like an empty line.
    const bool source_empty = source_ids[i].empty();
    if (source_empty || target_ids[i].empty()) {
      if (skip_empty) {
        ++out.empty_skipped;
        continue;
      }
      fail(
          "{}:{}: line encodes to no subword tokens (enable skipping empty lines to drop the pair)",
          (source_empty ? source : target).path().string(), chunk.line[i]);
    }
    out.corpus.add(source_ids[i], target_ids[i]);
  }
}

EncodedCorpus read_and_encode(const std::filesystem::path& source_path,
                              const std::filesystem::path& target_path, const Vocabulary& vocab,
                              const CorpusOptions& options) {
  LineReader source(source_path, options.max_line_bytes);
  LineReader target(target_path, options.max_line_bytes);
  EncodedCorpus out;
  PendingChunk chunk;
  std::string source_line, target_line;
  for (;;) {
    const bool has_source = source.next(source_line);
    const bool has_target = target.next(target_line);
    if (has_source != has_target) {
      const int64_t source_lines = has_source ? source.count_to_end() : source.line_number();
      const int64_t target_lines = has_target ? target.count_to_end() : target.line_number();
      fail("parallel files differ in length: '{}' has {} lines, '{}' has {}", source_path.string(),
           source_lines, target_path.string(), target_lines);
    }
    if (!has_source) break;
    ++out.lines;
    check_line(source, source_line);
    check_line(target, target_line);
    const bool source_blank = is_blank(source_line);
    if (source_blank || is_blank(target_line)) {
      if (options.skip_empty_lines) {
        ++out.empty_skipped;
        continue;
      }
      fail("{}:{}: empty line (enable skipping empty lines to drop such pairs)",
           (source_blank ? source : target).path().string(), source.line_number());
    }
    chunk.source.push_back(std::move(source_line));
    chunk.target.push_back(std::move(target_line));
    chunk.line.push_back(source.line_number());
    if (chunk.line.size() == kChunkPairs) {
      encode_chunk(chunk, vocab, source, target, options.skip_empty_lines, out);
      chunk.clear();
    }
  }
  encode_chunk(chunk, vocab, source, target, options.skip_empty_lines, out);
  return out;
}

}  // namespace

void Corpus::add(std::span<const int32_t> source, std::span<const int32_t> target) {
  TFM_CHECK(!source.empty() && !target.empty(), "corpus pair {} has an empty side", size());
  tokens_.insert(tokens_.end(), source.begin(), source.end());
  offsets_.push_back(static_cast<int64_t>(tokens_.size()));
  tokens_.insert(tokens_.end(), target.begin(), target.end());
  offsets_.push_back(static_cast<int64_t>(tokens_.size()));
}

Corpus Corpus::from_pairs(
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& pairs) {
  Corpus corpus;
  for (const auto& [source, target] : pairs) corpus.add(source, target);
  corpus.stats_.lines = corpus.stats_.pairs = corpus.size();
  for (int64_t i = 0; i < corpus.size(); ++i) {
    corpus.stats_.source_tokens += corpus.source_length(i);
    corpus.stats_.target_tokens += corpus.target_length(i);
    corpus.stats_.longest_source = std::max(corpus.stats_.longest_source, corpus.source_length(i));
    corpus.stats_.longest_target = std::max(corpus.stats_.longest_target, corpus.target_length(i));
  }
  return corpus;
}

Corpus Corpus::load(const std::filesystem::path& source, const std::filesystem::path& target,
                    const Vocabulary& vocab, const CorpusOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  std::error_code ec;
  for (const auto& path : {source, target})
    TFM_CHECK(std::filesystem::exists(path, ec), "corpus file '{}' does not exist", path.string());

  std::filesystem::path cache_file;
  uint64_t key = 0;
  std::optional<EncodedCorpus> encoded;
  if (!options.cache_dir.empty()) {
    key = corpus_cache_key(source, target, vocab, options);
    cache_file = corpus_cache_file(options.cache_dir, source, target, key);
    encoded = read_corpus_cache(cache_file, key);
  }
  const bool from_cache = encoded.has_value();
  if (!from_cache) {
    encoded = read_and_encode(source, target, vocab, options);
    if (!cache_file.empty()) write_corpus_cache(cache_file, key, *encoded);
  }

  // Drop the pairs over max_length in place (the corpus may be large).
  Corpus corpus = std::move(encoded->corpus);
  CorpusStats& stats = corpus.stats_;
  stats = CorpusStats{};
  stats.lines = encoded->lines;
  stats.empty_skipped = encoded->empty_skipped;
  const int64_t limit = options.max_length;
  int64_t kept = 0;
  int64_t write_at = 0;
  for (int64_t i = 0; i < corpus.size(); ++i) {
    const int64_t begin = corpus.offsets_[2 * i];
    const int64_t middle = corpus.offsets_[2 * i + 1];
    const int64_t end = corpus.offsets_[2 * i + 2];
    const int64_t source_length = middle - begin, target_length = end - middle;
    if (limit > 0 && (source_length > limit || target_length + 1 > limit)) {
      ++stats.too_long_skipped;
      continue;
    }
    stats.unknown_tokens +=
        std::count(corpus.tokens_.begin() + begin, corpus.tokens_.begin() + end, kUnkId);
    if (write_at != begin)  // moves left: std::copy allows this overlap
      std::copy(corpus.tokens_.begin() + begin, corpus.tokens_.begin() + end,
                corpus.tokens_.begin() + write_at);
    corpus.offsets_[2 * kept + 1] = write_at + source_length;
    corpus.offsets_[2 * kept + 2] = write_at + source_length + target_length;
    write_at += source_length + target_length;
    ++kept;
    stats.source_tokens += source_length;
    stats.target_tokens += target_length;
    stats.longest_source = std::max(stats.longest_source, source_length);
    stats.longest_target = std::max(stats.longest_target, target_length);
  }
  corpus.tokens_.resize(static_cast<size_t>(write_at));
  corpus.offsets_.resize(static_cast<size_t>(2 * kept + 1));
  stats.pairs = kept;
  stats.from_cache = from_cache;
  stats.cache_file = cache_file;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return corpus;
}

std::string CorpusStats::summary() const {
  const int64_t tokens = source_tokens + target_tokens;
  std::string text = fmt::format(
      "{} pairs of {} lines ({} skipped as empty, {} as too long); {} source + {} target "
      "tokens, longest {} / {}, unknown {:.3f}%",
      pairs, lines, empty_skipped, too_long_skipped, source_tokens, target_tokens, longest_source,
      longest_target, tokens > 0 ? 100.0 * static_cast<double>(unknown_tokens) / tokens : 0.0);
  if (cache_file.empty()) return text + fmt::format("; encoded in {:.2f} s (no cache)", seconds);
  return text + fmt::format("; {} {} in {:.2f} s",
                            from_cache ? "loaded from" : "encoded, cached in", cache_file.string(),
                            seconds);
}

}  // namespace tfm::data
