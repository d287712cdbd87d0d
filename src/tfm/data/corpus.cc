#include "tfm/data/corpus.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "tfm/core/error.h"
#include "tfm/data/corpus_cache.h"
#include "tfm/data/word_encoder.h"
#include "tfm/io/progress_meter.h"

namespace tfm::internal::data {

namespace {

using Clock = std::chrono::steady_clock;

// Lines are read and checked in order (errors name the first bad line), then encoded a chunk at a
// time on all threads: SentencePiece's Encode is const and thread-safe, each thread has its own
// word memo.
constexpr size_t kChunkPairs = 16384;
// The word memo is checked against whole-sentence encoding on the first lines and every this
// many lines after them.
constexpr int64_t kCheckEvery = 1000;

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

// Thrown when a sampled line's word-memo ids differ from whole-sentence encoding: the corpus is
// then encoded again, a sentence at a time.
struct WordMemoMismatch {
  std::string where;
};

struct EncodeCounts {
  int64_t lines = 0;
  int64_t empty_skipped = 0;
  int64_t invalid_skipped = 0;
};

// Why a line cannot be used, or "" when it can.
std::string line_problem(const LineReader& reader, const std::string& text) {
  if (reader.last_line_too_long()) return "line longer than the limit";
  if (auto bad = find_invalid_utf8(text)) return fmt::format("invalid UTF-8 at byte {}", *bad + 1);
  return "";
}

constexpr int64_t kNamedSkips = 5;  // invalid lines named in progress reports

using PairSink = std::function<void(std::span<const int32_t>, std::span<const int32_t>)>;

class ChunkEncoder {
 public:
  ChunkEncoder(const Vocabulary& vocab, bool word_memo) : vocab_(vocab), word_memo_(word_memo) {
    if (word_memo)
      for (int t = 0; t < omp_get_max_threads(); ++t)
        memos_.push_back(std::make_unique<WordEncoder>(vocab));
  }

  void encode(const PendingChunk& chunk, const LineReader& source, const LineReader& target,
              bool skip_empty, EncodeCounts& counts, const PairSink& sink) {
    const auto n = static_cast<int64_t>(chunk.line.size());
    source_ids_.resize(static_cast<size_t>(n));
    target_ids_.resize(static_cast<size_t>(n));
    std::exception_ptr error;
    int64_t mismatch = -1;
#pragma omp parallel for schedule(dynamic, 64)
    for (int64_t i = 0; i < n; ++i) {
      try {
        encode_one(chunk.source[i], source_ids_[i]);
        encode_one(chunk.target[i], target_ids_[i]);
        const int64_t line = chunk.line[i];
        if (word_memo_ && (line <= kCheckEvery || line % kCheckEvery == 0) &&
            (source_ids_[i] != vocab_.encode(chunk.source[i]) ||
             target_ids_[i] != vocab_.encode(chunk.target[i]))) {
#pragma omp critical(tfm_corpus_memo_mismatch)
          if (mismatch < 0 || line < mismatch) mismatch = line;
        }
      } catch (...) {
#pragma omp critical(tfm_corpus_encode_error)
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    if (mismatch >= 0)
      throw WordMemoMismatch{fmt::format("{}:{}", source.path().string(), mismatch)};
    for (int64_t i = 0; i < n; ++i) {
      // A line of characters the normaliser removes encodes to nothing, like an empty line.
      const bool source_empty = source_ids_[i].empty();
      if (source_empty || target_ids_[i].empty()) {
        if (skip_empty) {
          ++counts.empty_skipped;
          continue;
        }
        fail(
            "{}:{}: line encodes to no subword tokens (enable skipping empty lines to drop the "
            "pair)",
            (source_empty ? source : target).path().string(), chunk.line[i]);
      }
      sink(source_ids_[i], target_ids_[i]);
    }
  }

 private:
  void encode_one(const std::string& text, std::vector<int32_t>& out) {
    if (!word_memo_) {
      out = vocab_.encode(text);
      return;
    }
    out.clear();
    memos_[static_cast<size_t>(omp_get_thread_num())]->encode(text, out);
  }

  const Vocabulary& vocab_;
  bool word_memo_;
  std::vector<std::unique_ptr<WordEncoder>> memos_;
  std::vector<std::vector<int32_t>> source_ids_, target_ids_;
};

// Reads both files in step, checks every line and hands each encoded pair to `sink`.
EncodeCounts read_and_encode(const std::filesystem::path& source_path,
                             const std::filesystem::path& target_path, const Vocabulary& vocab,
                             const CorpusOptions& options, bool word_memo, const PairSink& sink) {
  LineReader source(source_path, options.max_line_bytes);
  LineReader target(target_path, options.max_line_bytes);
  source.skip_over_long_lines(options.skip_invalid_lines);
  target.skip_over_long_lines(options.skip_invalid_lines);
  ProgressMeter progress(options.progress, "encoding " + source_path.filename().string(), "pairs");
  ChunkEncoder encoder(vocab, word_memo);
  EncodeCounts counts;
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
    ++counts.lines;
    const std::string source_problem = line_problem(source, source_line);
    const std::string target_problem = line_problem(target, target_line);
    if (!source_problem.empty() || !target_problem.empty()) {
      const LineReader& bad = source_problem.empty() ? target : source;
      const std::string where =
          fmt::format("{}:{}: {}", bad.path().string(), bad.line_number(),
                      source_problem.empty() ? target_problem : source_problem);
      TFM_CHECK(options.skip_invalid_lines, "{}", where);
      if (counts.invalid_skipped++ < kNamedSkips && options.progress)
        options.progress(fmt::format(
            "{}: pair skipped{}", where,
            counts.invalid_skipped == kNamedSkips ? " (later ones are only counted)" : ""));
      continue;
    }
    const bool source_blank = is_blank(source_line);
    if (source_blank || is_blank(target_line)) {
      if (options.skip_empty_lines) {
        ++counts.empty_skipped;
        continue;
      }
      fail("{}:{}: empty line (enable skipping empty lines to drop such pairs)",
           (source_blank ? source : target).path().string(), source.line_number());
    }
    chunk.source.push_back(std::move(source_line));
    chunk.target.push_back(std::move(target_line));
    chunk.line.push_back(source.line_number());
    if (chunk.line.size() == kChunkPairs) {
      encoder.encode(chunk, source, target, options.skip_empty_lines, counts, sink);
      chunk.clear();
      progress.update(counts.lines, source.read_fraction());
    }
  }
  encoder.encode(chunk, source, target, options.skip_empty_lines, counts, sink);
  return counts;
}

// Runs `attempt(word_memo)`, and again a sentence at a time when the word memo disagrees with
// whole-sentence encoding (a vocabulary with pieces across spaces).
template <typename Attempt>
void with_word_memo_fallback(const CorpusOptions& options, CorpusStats& stats,
                             const Attempt& attempt) {
  if (options.word_memo) {
    try {
      attempt(true);
      stats.word_memo = true;
      return;
    } catch (const WordMemoMismatch& mismatch) {
      if (options.progress)
        options.progress(fmt::format(
            "{}: word-at-a-time encoding differs from whole-sentence encoding with this "
            "vocabulary: encoding whole sentences",
            mismatch.where));
    }
  }
  attempt(false);
}

}  // namespace

void Corpus::copy_ids(uint64_t sequence, int32_t* out) const {
  const uint64_t* o = offsets();
  const uint64_t begin = o[sequence], end = o[sequence + 1];
  if (mapped_ids_ == nullptr) {
    std::copy(ids_.begin() + static_cast<std::ptrdiff_t>(begin),
              ids_.begin() + static_cast<std::ptrdiff_t>(end), out);
  } else if (id_bytes_ == 2) {
    const auto* ids = reinterpret_cast<const uint16_t*>(mapped_ids_);
    std::copy(ids + begin, ids + end, out);
  } else {
    const auto* ids = reinterpret_cast<const int32_t*>(mapped_ids_);
    std::copy(ids + begin, ids + end, out);
  }
}

std::vector<int32_t> Corpus::source(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(source_length(i)));
  copy_source(i, out.data());
  return out;
}

std::vector<int32_t> Corpus::target(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(target_length(i)));
  copy_target(i, out.data());
  return out;
}

void Corpus::add(std::span<const int32_t> source, std::span<const int32_t> target) {
  TFM_CHECK(mapped_ids_ == nullptr && kept_.empty(),
            "pairs can only be added to a corpus held in memory");
  TFM_CHECK(!source.empty() && !target.empty(), "corpus pair {} has an empty side", size());
  ids_.insert(ids_.end(), source.begin(), source.end());
  offsets_.push_back(ids_.size());
  ids_.insert(ids_.end(), target.begin(), target.end());
  offsets_.push_back(ids_.size());
  ++size_;
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

void Corpus::keep_pairs_up_to(int64_t max_length) {
  // Stats of the kept pairs, and the index of kept pairs when some are dropped. The unknown
  // tokens of all pairs are known (counted while encoding); those of dropped pairs are taken off.
  CorpusStats& stats = stats_;
  const int64_t stored_pairs = size_;
  TFM_CHECK(stored_pairs < (int64_t{1} << 32), "a corpus of {} pairs: at most 2^32 are supported",
            stored_pairs);
  const uint64_t* o = offsets();
  int64_t kept = 0;
  bool indexed = false;  // kept_ lists the kept pairs: from the first dropped pair on
  for (int64_t i = 0; i < stored_pairs; ++i) {
    const auto source_length = static_cast<int64_t>(o[2 * i + 1] - o[2 * i]);
    const auto target_length = static_cast<int64_t>(o[2 * i + 2] - o[2 * i + 1]);
    if (max_length > 0 && (source_length > max_length || target_length + 1 > max_length)) {
      if (!indexed) {  // the first dropped pair: every pair before it was kept
        kept_.reserve(static_cast<size_t>(stored_pairs));
        for (int64_t k = 0; k < i; ++k) kept_.push_back(static_cast<uint32_t>(k));
        indexed = true;
      }
      ++stats.too_long_skipped;
      std::vector<int32_t> ids(static_cast<size_t>(source_length + target_length));
      copy_ids(2 * static_cast<uint64_t>(i), ids.data());
      copy_ids(2 * static_cast<uint64_t>(i) + 1, ids.data() + source_length);
      stats.unknown_tokens -= std::count(ids.begin(), ids.end(), kUnkId);
      continue;
    }
    if (indexed) kept_.push_back(static_cast<uint32_t>(i));
    ++kept;
    stats.source_tokens += source_length;
    stats.target_tokens += target_length;
    stats.longest_source = std::max(stats.longest_source, source_length);
    stats.longest_target = std::max(stats.longest_target, target_length);
  }
  size_ = kept;
  stats.pairs = kept;
}

Corpus Corpus::load(const std::filesystem::path& source, const std::filesystem::path& target,
                    const Vocabulary& vocab, const CorpusOptions& options) {
  const auto started = Clock::now();
  std::error_code ec;
  for (const auto& path : {source, target})
    TFM_CHECK(std::filesystem::exists(path, ec), "corpus file '{}' does not exist", path.string());

  Corpus corpus;
  CorpusStats& stats = corpus.stats_;
  if (options.cache_dir.empty()) {
    with_word_memo_fallback(options, stats, [&](bool word_memo) {
      corpus.ids_.clear();
      corpus.offsets_.assign(1, 0);
      corpus.size_ = 0;
      const EncodeCounts counts = read_and_encode(
          source, target, vocab, options, word_memo,
          [&corpus](std::span<const int32_t> s, std::span<const int32_t> t) { corpus.add(s, t); });
      stats.lines = counts.lines;
      stats.empty_skipped = counts.empty_skipped;
      stats.invalid_skipped = counts.invalid_skipped;
    });
    stats.unknown_tokens = std::count(corpus.ids_.begin(), corpus.ids_.end(), kUnkId);
  } else {
    const uint64_t key = corpus_cache_key(source, target, vocab, options);
    const std::filesystem::path file = corpus_cache_file(options.cache_dir, source, target, key);
    std::optional<MappedCorpusCache> cache = map_corpus_cache(file, key);
    stats.from_cache = cache.has_value();
    if (!cache) {
      with_word_memo_fallback(options, stats, [&](bool word_memo) {
        CorpusCacheWriter writer(file, key, cache_id_bytes(vocab.size()));
        const EncodeCounts counts =
            read_and_encode(source, target, vocab, options, word_memo,
                            [&writer](std::span<const int32_t> s, std::span<const int32_t> t) {
                              writer.add(s, t);
                            });
        writer.commit(counts.lines, counts.empty_skipped, counts.invalid_skipped);
      });
      cache = map_corpus_cache(file, key);
      TFM_CHECK(cache.has_value(), "the corpus cache '{}' just written does not read back",
                file.string());
    }
    corpus.file_ = cache->file;
    corpus.mapped_ids_ = cache->ids;
    corpus.mapped_offsets_ = cache->offsets;
    corpus.id_bytes_ = cache->trailer.id_bytes;
    corpus.size_ = cache->trailer.pairs;
    stats.lines = cache->trailer.lines;
    stats.empty_skipped = cache->trailer.empty_skipped;
    stats.invalid_skipped = cache->trailer.invalid_skipped;
    stats.unknown_tokens = cache->trailer.unknown_tokens;
    stats.cache_file = file;
  }
  stats.id_bytes = corpus.id_bytes_;
  corpus.keep_pairs_up_to(options.max_length);
  corpus.stats_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return corpus;
}

std::string CorpusStats::summary() const {
  const int64_t tokens = source_tokens + target_tokens;
  std::string text = fmt::format(
      "{} pairs of {} lines ({} skipped as empty, {} as too long{}); {} source + {} target "
      "tokens, longest {} / {}, unknown {:.3f}%",
      pairs, lines, empty_skipped, too_long_skipped,
      invalid_skipped > 0 ? fmt::format(", {} as invalid", invalid_skipped) : "", source_tokens,
      target_tokens, longest_source, longest_target,
      tokens > 0 ? 100.0 * static_cast<double>(unknown_tokens) / tokens : 0.0);
  if (cache_file.empty()) return text + fmt::format("; encoded in {:.2f} s (no cache)", seconds);
  return text + fmt::format("; {} {} ({}-byte ids) in {:.2f} s",
                            from_cache ? "mapped from" : "encoded, cached in", cache_file.string(),
                            id_bytes, seconds);
}

}  // namespace tfm::internal::data
