// The binary cache of an encoded corpus. The file name carries a key computed from what the
// contents depend on (both input files' path, size and modification time, the vocabulary's hash,
// the reading options), so a changed input or vocabulary misses the cache instead of reusing it.
//
// Layout (native byte order, i.e. little-endian on x86 and ARM), written front to back while the
// corpus is encoded, so that memory stays bounded however large the corpus:
//   "TFMCRP02"
//   ids[tokens]                u16 when the vocabulary has at most 65536 pieces, else i32
//   zero bytes up to a multiple of 8
//   u64 offsets[2 * pairs + 1] sequence k is ids[offsets[k], offsets[k+1]): the source of pair i
//                              is sequence 2i, its target 2i+1
//   trailer: u64 key, i64 lines, i64 empty_skipped, i64 invalid_skipped, i64 pairs, i64 tokens,
//            i64 id_bytes, i64 unknown_tokens, "TFMCRPND"
// The counts are known only at the end, hence a trailer; a reader maps the file and reads it first.
// The cache holds every pair that passed the line checks, before the max_length filter (so another
// max_length reuses the same file).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "tfm/data/corpus.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/mapped_file.h"

namespace tfm::internal::data {

struct CorpusCacheTrailer {
  uint64_t key = 0;
  int64_t lines = 0;
  int64_t empty_skipped = 0;
  int64_t invalid_skipped = 0;
  int64_t pairs = 0;
  int64_t tokens = 0;
  int64_t id_bytes = 0;
  int64_t unknown_tokens = 0;
};

uint64_t corpus_cache_key(const std::filesystem::path& source, const std::filesystem::path& target,
                          const Vocabulary& vocab, const CorpusOptions& options);

// <cache_dir>/<source name>.<target name>.<key as 16 hex digits>.tfmcorpus
std::filesystem::path corpus_cache_file(const std::filesystem::path& cache_dir,
                                        const std::filesystem::path& source,
                                        const std::filesystem::path& target, uint64_t key);

// 2 when every id of the vocabulary fits 16 bits, else 4.
int64_t cache_id_bytes(int64_t vocab_size);

// A cache file mapped into memory, its parts located and checked.
struct MappedCorpusCache {
  std::shared_ptr<const MappedFile> file;
  CorpusCacheTrailer trailer;
  const char* ids = nullptr;
  const uint64_t* offsets = nullptr;
};

// The mapped cache, or nullopt when the file is absent, has another key or is damaged (then the
// caller rebuilds and overwrites it).
std::optional<MappedCorpusCache> map_corpus_cache(const std::filesystem::path& file, uint64_t key);

// Streams pairs into a new cache file: ids go straight to the file, offsets to a temporary file
// beside it, appended at commit(), which then renames the whole into place atomically. Destroyed
// without commit() (an error on the way, a fallback), it leaves nothing behind.
class CorpusCacheWriter {
 public:
  CorpusCacheWriter(const std::filesystem::path& file, uint64_t key, int64_t id_bytes);
  ~CorpusCacheWriter();
  CorpusCacheWriter(const CorpusCacheWriter&) = delete;
  CorpusCacheWriter& operator=(const CorpusCacheWriter&) = delete;

  // Appends one pair (no bos/eos); every id must be below 2^(8 * id_bytes).
  void add(std::span<const int32_t> source, std::span<const int32_t> target);
  void commit(int64_t lines, int64_t empty_skipped, int64_t invalid_skipped);

 private:
  void append(std::span<const int32_t> ids);
  void flush_buffers();

  std::filesystem::path offsets_path_;
  std::unique_ptr<AtomicFileWriter> writer_;
  std::FILE* offsets_file_ = nullptr;
  CorpusCacheTrailer trailer_;
  std::vector<char> id_buffer_;
  std::vector<uint64_t> offset_buffer_;
};

}  // namespace tfm::internal::data
