#include "tfm/data/corpus_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tfm/core/error.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::data {

namespace {

constexpr char kMagic[8] = {'T', 'F', 'M', 'C', 'R', 'P', '0', '2'};
constexpr char kEndMagic[8] = {'T', 'F', 'M', 'C', 'R', 'P', 'N', 'D'};
constexpr size_t kTrailerBytes = 8 * 8 + 8;
constexpr size_t kBufferBytes = size_t{4} << 20;

// Path, size and modification time (nanoseconds) of a file, as text for the key.
std::string file_identity(const std::filesystem::path& path) {
  struct stat info {};
  TFM_CHECK(::stat(path.c_str(), &info) == 0, "corpus file '{}' does not exist", path.string());
  const int64_t mtime_ns =
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  return fmt::format("{}|{}|{}", std::filesystem::absolute(path).lexically_normal().string(),
                     static_cast<int64_t>(info.st_size), mtime_ns);
}

size_t padded_to_8(size_t bytes) {
  return (bytes + 7) / 8 * 8;
}

}  // namespace

uint64_t corpus_cache_key(const std::filesystem::path& source, const std::filesystem::path& target,
                          const Vocabulary& vocab, const CorpusOptions& options) {
  const std::string identity = fmt::format(
      "tfm corpus cache v2\n{}\n{}\nvocab {}\nmax_line_bytes {}\nskip_empty_lines {}\n"
      "skip_invalid_lines {}\n",
      file_identity(source), file_identity(target), vocab.hash(), options.max_line_bytes,
      options.skip_empty_lines, options.skip_invalid_lines);
  return fnv1a64(identity);
}

std::filesystem::path corpus_cache_file(const std::filesystem::path& cache_dir,
                                        const std::filesystem::path& source,
                                        const std::filesystem::path& target, uint64_t key) {
  return cache_dir / fmt::format("{}.{}.{:016x}.tfmcorpus", source.filename().string(),
                                 target.filename().string(), key);
}

int64_t cache_id_bytes(int64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

std::optional<MappedCorpusCache> map_corpus_cache(const std::filesystem::path& file, uint64_t key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  MappedCorpusCache out;
  try {
    out.file = std::make_shared<const MappedFile>(file);
  } catch (const Error&) {
    return std::nullopt;
  }
  const char* bytes = out.file->data();
  const size_t size = out.file->size();
  if (size < 8 + kTrailerBytes || std::memcmp(bytes, kMagic, 8) != 0 ||
      std::memcmp(bytes + size - 8, kEndMagic, 8) != 0)
    return std::nullopt;
  CorpusCacheTrailer& t = out.trailer;
  std::memcpy(&t, bytes + size - kTrailerBytes, sizeof(t));
  static_assert(sizeof(CorpusCacheTrailer) == kTrailerBytes - 8);
  if (t.key != key || t.pairs < 0 || t.tokens < 0 || (t.id_bytes != 2 && t.id_bytes != 4) ||
      t.empty_skipped < 0 || t.invalid_skipped < 0 ||
      t.lines < t.pairs + t.empty_skipped + t.invalid_skipped || t.pairs > (int64_t{1} << 40) ||
      t.tokens > (int64_t{1} << 45))
    return std::nullopt;
  const size_t ids_bytes = padded_to_8(static_cast<size_t>(t.tokens * t.id_bytes));
  const size_t offset_count = 2 * static_cast<size_t>(t.pairs) + 1;
  if (size != 8 + ids_bytes + 8 * offset_count + kTrailerBytes) return std::nullopt;
  out.ids = bytes + 8;
  out.offsets = reinterpret_cast<const uint64_t*>(bytes + 8 + ids_bytes);
  // Every sequence non-empty and inside the ids: a damaged file must not become a bad batch.
  const uint64_t* o = out.offsets;
  if (o[0] != 0 || o[offset_count - 1] != static_cast<uint64_t>(t.tokens)) return std::nullopt;
  bool increasing = true;
  for (size_t k = 1; k < offset_count; ++k) increasing &= o[k] > o[k - 1];
  if (!increasing) return std::nullopt;
  return out;
}

CorpusCacheWriter::CorpusCacheWriter(const std::filesystem::path& file, uint64_t key,
                                     int64_t id_bytes) {
  TFM_CHECK(id_bytes == 2 || id_bytes == 4, "corpus cache ids take 2 or 4 bytes, not {}", id_bytes);
  trailer_.key = key;
  trailer_.id_bytes = id_bytes;
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  TFM_CHECK(!ec, "cannot create the cache directory '{}': {}", file.parent_path().string(),
            ec.message());
  writer_ = std::make_unique<AtomicFileWriter>(file);
  writer_->write(kMagic, 8);
  offsets_path_ = file;
  offsets_path_ += fmt::format(".offsets.tmp.{}", ::getpid());
  offsets_file_ = std::fopen(offsets_path_.c_str(), "w+b");
  TFM_CHECK(offsets_file_ != nullptr, "cannot create '{}': {}", offsets_path_.string(),
            std::strerror(errno));
  offset_buffer_.push_back(0);
}

CorpusCacheWriter::~CorpusCacheWriter() {
  if (offsets_file_ != nullptr) std::fclose(offsets_file_);
  std::error_code ignored;
  std::filesystem::remove(offsets_path_, ignored);
}

void CorpusCacheWriter::append(std::span<const int32_t> ids) {
  const size_t at = id_buffer_.size();
  id_buffer_.resize(at + ids.size() * static_cast<size_t>(trailer_.id_bytes));
  char* out = id_buffer_.data() + at;
  if (trailer_.id_bytes == 4) {
    std::memcpy(out, ids.data(), ids.size() * 4);
  } else {
    for (size_t j = 0; j < ids.size(); ++j) {
      TFM_CHECK(ids[j] >= 0 && ids[j] < 65536, "id {} does not fit a 16-bit corpus cache", ids[j]);
      const auto id = static_cast<uint16_t>(ids[j]);
      std::memcpy(out + 2 * j, &id, 2);
    }
  }
  trailer_.tokens += static_cast<int64_t>(ids.size());
  offset_buffer_.push_back(static_cast<uint64_t>(trailer_.tokens));
  for (int32_t id : ids) trailer_.unknown_tokens += id == kUnkId;
}

void CorpusCacheWriter::add(std::span<const int32_t> source, std::span<const int32_t> target) {
  TFM_CHECK(!source.empty() && !target.empty(), "corpus pair {} has an empty side", trailer_.pairs);
  append(source);
  append(target);
  ++trailer_.pairs;
  if (id_buffer_.size() >= kBufferBytes || offset_buffer_.size() * 8 >= kBufferBytes)
    flush_buffers();
}

void CorpusCacheWriter::flush_buffers() {
  writer_->write(id_buffer_.data(), id_buffer_.size());
  id_buffer_.clear();
  const size_t count = offset_buffer_.size();
  TFM_CHECK(std::fwrite(offset_buffer_.data(), 8, count, offsets_file_) == count,
            "cannot write '{}': {}", offsets_path_.string(), std::strerror(errno));
  offset_buffer_.clear();
}

void CorpusCacheWriter::commit(int64_t lines, int64_t empty_skipped, int64_t invalid_skipped) {
  flush_buffers();
  const size_t ids_bytes = static_cast<size_t>(trailer_.tokens * trailer_.id_bytes);
  const char zeros[8] = {};
  writer_->write(zeros, padded_to_8(ids_bytes) - ids_bytes);
  // The offsets, copied from the temporary file in blocks.
  TFM_CHECK(std::fflush(offsets_file_) == 0 && std::fseek(offsets_file_, 0, SEEK_SET) == 0,
            "cannot read back '{}': {}", offsets_path_.string(), std::strerror(errno));
  std::vector<char> block(kBufferBytes);
  size_t copied = 0;
  for (;;) {
    const size_t got = std::fread(block.data(), 1, block.size(), offsets_file_);
    if (got == 0) break;
    writer_->write(block.data(), got);
    copied += got;
  }
  const size_t expected = 8 * (2 * static_cast<size_t>(trailer_.pairs) + 1);
  TFM_CHECK(copied == expected, "'{}' holds {} bytes of offsets, expected {}",
            offsets_path_.string(), copied, expected);
  trailer_.lines = lines;
  trailer_.empty_skipped = empty_skipped;
  trailer_.invalid_skipped = invalid_skipped;
  writer_->write(&trailer_, sizeof(trailer_));
  writer_->write(kEndMagic, 8);
  writer_->commit();
}

}  // namespace tfm::internal::data
