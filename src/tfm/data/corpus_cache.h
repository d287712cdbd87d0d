// The binary cache of an encoded corpus. The file name carries a key computed from what the
// contents depend on (both input files' path, size and modification time, the vocabulary's hash,
// the reading options), so a changed input or vocabulary misses the cache instead of reusing it.
//
// Layout (native byte order, i.e. little-endian on x86 and ARM):
//   "TFMCRP01"  u64 key  i64 lines  i64 empty_skipped  i64 pairs  i64 tokens
//   i64 offsets[2 * pairs + 1]   i32 ids[tokens]   "TFMCRPND"
// The offsets are those of Corpus: source i = ids[offsets[2i], offsets[2i+1]), target i =
// ids[offsets[2i+1], offsets[2i+2]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "tfm/data/corpus.h"

namespace tfm::data {

// What the cache holds: every pair that passed the line checks, before the max_length filter
// (so another max_length reuses the same file).
struct EncodedCorpus {
  Corpus corpus;
  int64_t lines = 0;
  int64_t empty_skipped = 0;
};

uint64_t corpus_cache_key(const std::filesystem::path& source, const std::filesystem::path& target,
                          const Vocabulary& vocab, const CorpusOptions& options);

// <cache_dir>/<source name>.<target name>.<key as 16 hex digits>.tfmcorpus
std::filesystem::path corpus_cache_file(const std::filesystem::path& cache_dir,
                                        const std::filesystem::path& source,
                                        const std::filesystem::path& target, uint64_t key);

// The cached corpus, or nullopt when the file is absent, has another key or is damaged (then the
// caller rebuilds and overwrites it).
std::optional<EncodedCorpus> read_corpus_cache(const std::filesystem::path& file, uint64_t key);

// Writes the file atomically (temporary file + rename): a crash never leaves a partial cache.
void write_corpus_cache(const std::filesystem::path& file, uint64_t key,
                        const EncodedCorpus& encoded);

}  // namespace tfm::data
