#include "tfm/data/corpus_cache.h"

#include <sys/stat.h>

#include <cstring>
#include <string>

#include "tfm/core/error.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_reader.h"

namespace tfm::data {

struct CorpusCacheAccess {
  static std::vector<int32_t>& tokens(Corpus& c) { return c.tokens_; }
  static std::vector<int64_t>& offsets(Corpus& c) { return c.offsets_; }
  static const std::vector<int32_t>& tokens(const Corpus& c) { return c.tokens_; }
  static const std::vector<int64_t>& offsets(const Corpus& c) { return c.offsets_; }
};

namespace {

constexpr char kMagic[8] = {'T', 'F', 'M', 'C', 'R', 'P', '0', '1'};
constexpr char kEndMagic[8] = {'T', 'F', 'M', 'C', 'R', 'P', 'N', 'D'};
constexpr size_t kHeaderBytes = 8 + 5 * 8;

// Path, size and modification time (nanoseconds) of a file, as text for the key.
std::string file_identity(const std::filesystem::path& path) {
  struct stat info {};
  TFM_CHECK(::stat(path.c_str(), &info) == 0, "corpus file '{}' does not exist", path.string());
  const int64_t mtime_ns =
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  return fmt::format("{}|{}|{}", std::filesystem::absolute(path).lexically_normal().string(),
                     static_cast<int64_t>(info.st_size), mtime_ns);
}

template <typename T>
void append_raw(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T read_raw(const std::string& in, size_t& at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

}  // namespace

uint64_t corpus_cache_key(const std::filesystem::path& source, const std::filesystem::path& target,
                          const Vocabulary& vocab, const CorpusOptions& options) {
  const std::string identity =
      fmt::format("tfm corpus cache v1\n{}\n{}\nvocab {}\nmax_line_bytes {}\nskip_empty_lines {}\n",
                  file_identity(source), file_identity(target), vocab.hash(),
                  options.max_line_bytes, options.skip_empty_lines);
  return fnv1a64(identity);
}

std::filesystem::path corpus_cache_file(const std::filesystem::path& cache_dir,
                                        const std::filesystem::path& source,
                                        const std::filesystem::path& target, uint64_t key) {
  return cache_dir / fmt::format("{}.{}.{:016x}.tfmcorpus", source.filename().string(),
                                 target.filename().string(), key);
}

std::optional<EncodedCorpus> read_corpus_cache(const std::filesystem::path& file, uint64_t key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  std::string bytes;
  try {
    bytes = read_file_bytes(file);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (bytes.size() < kHeaderBytes + 8 + 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    return std::nullopt;
  size_t at = 8;
  if (read_raw<uint64_t>(bytes, at) != key) return std::nullopt;
  EncodedCorpus out;
  out.lines = read_raw<int64_t>(bytes, at);
  out.empty_skipped = read_raw<int64_t>(bytes, at);
  const int64_t pairs = read_raw<int64_t>(bytes, at);
  const int64_t tokens = read_raw<int64_t>(bytes, at);
  if (pairs < 0 || tokens < 0 || out.lines < pairs + out.empty_skipped) return std::nullopt;
  const uint64_t expected = kHeaderBytes + 8 * (2 * static_cast<uint64_t>(pairs) + 1) +
                            4 * static_cast<uint64_t>(tokens) + 8;
  if (bytes.size() != expected) return std::nullopt;

  std::vector<int64_t>& offsets = CorpusCacheAccess::offsets(out.corpus);
  std::vector<int32_t>& ids = CorpusCacheAccess::tokens(out.corpus);
  offsets.resize(static_cast<size_t>(2 * pairs + 1));
  ids.resize(static_cast<size_t>(tokens));
  std::memcpy(offsets.data(), bytes.data() + at, offsets.size() * sizeof(int64_t));
  at += offsets.size() * sizeof(int64_t);
  std::memcpy(ids.data(), bytes.data() + at, ids.size() * sizeof(int32_t));
  at += ids.size() * sizeof(int32_t);
  if (std::memcmp(bytes.data() + at, kEndMagic, 8) != 0) return std::nullopt;
  // Every sequence non-empty and inside the ids: a damaged file must not become a bad batch.
  if (offsets.front() != 0 || offsets.back() != tokens) return std::nullopt;
  for (size_t k = 1; k < offsets.size(); ++k)
    if (offsets[k] <= offsets[k - 1]) return std::nullopt;
  return out;
}

void write_corpus_cache(const std::filesystem::path& file, uint64_t key,
                        const EncodedCorpus& encoded) {
  const std::vector<int64_t>& offsets = CorpusCacheAccess::offsets(encoded.corpus);
  const std::vector<int32_t>& ids = CorpusCacheAccess::tokens(encoded.corpus);
  std::string header(kMagic, 8);
  append_raw(header, key);
  append_raw(header, encoded.lines);
  append_raw(header, encoded.empty_skipped);
  append_raw(header, encoded.corpus.size());
  append_raw(header, static_cast<int64_t>(ids.size()));
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  TFM_CHECK(!ec, "cannot create the cache directory '{}': {}", file.parent_path().string(),
            ec.message());
  AtomicFileWriter writer(file);
  writer.write(header);
  writer.write(offsets.data(), offsets.size() * sizeof(int64_t));
  writer.write(ids.data(), ids.size() * sizeof(int32_t));
  writer.write(kEndMagic, 8);
  writer.commit();
}

}  // namespace tfm::data
