#include "tfm/io/text_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {
constexpr size_t kChunkBytes = 1 << 18;
constexpr size_t kMaxRead = size_t{1} << 30;
}  // namespace

LineReader::LineReader(std::filesystem::path path, int64_t max_line_bytes)
    : path_(std::move(path)), max_line_bytes_(max_line_bytes) {
  std::error_code ec;
  const std::optional<std::string> problem = file_type_problem(path_, true);
  // A missing file keeps its usual words; other problems (a directory, a loop of symbolic links)
  // are named as they are.
  const bool missing = !std::filesystem::exists(path_, ec) && !ec;  // a loop sets ec
  TFM_CHECK(!missing, "corpus file '{}' does not exist", path_.string());
  TFM_CHECK(!problem, "corpus file '{}': {}", path_.string(), problem.value_or(""));
  file_bytes_ = static_cast<int64_t>(std::filesystem::file_size(path_, ec));
  file_ = std::fopen(path_.c_str(), "rb");
  TFM_CHECK(file_ != nullptr, "cannot open '{}': {}", path_.string(), std::strerror(errno));
  buffer_.resize(kChunkBytes);
  try {
    read_raw();
    // gzip's magic bytes; anything else is plain text (as zlib's gzread decides).
    if (raw_.size() >= 2 && raw_[0] == 0x1f && raw_[1] == 0x8b) {
      zstream_ = std::make_unique<z_stream>();  // value-initialised: zlib's default allocator
      // 16 + MAX_WBITS: a gzip wrapper, the largest window.
      TFM_CHECK(inflateInit2(zstream_.get(), 16 + MAX_WBITS) == Z_OK,
                "'{}': cannot start decompressing (out of memory?)", path_.string());
      zstream_->next_in = raw_.data();
      zstream_->avail_in = static_cast<uInt>(raw_.size());
      member_open_ = true;
    }
  } catch (...) {
    close();
    throw;
  }
}

LineReader::~LineReader() {
  close();
}

void LineReader::close() {
  if (zstream_) inflateEnd(zstream_.get());
  zstream_.reset();
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

bool LineReader::read_raw() {
  raw_.resize(kChunkBytes);
  const size_t got = std::fread(raw_.data(), 1, raw_.size(), file_);
  TFM_CHECK(got == raw_.size() || !std::ferror(file_), "'{}': cannot read after line {}: {}",
            path_.string(), line_number_, std::strerror(errno));
  raw_.resize(got);
  raw_used_ = 0;
  raw_bytes_read_ += static_cast<int64_t>(got);
  return got > 0;
}

size_t LineReader::read_text(char* out, size_t capacity) {
  if (zstream_) return inflate_some(out, capacity);
  if (raw_used_ == raw_.size() && !read_raw()) return 0;
  const size_t n = std::min(capacity, raw_.size() - raw_used_);
  std::memcpy(out, raw_.data() + raw_used_, n);
  raw_used_ += n;
  return n;
}

size_t LineReader::inflate_some(char* out, size_t capacity) {
  z_stream& z = *zstream_;
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(capacity);
  while (z.avail_out == capacity) {  // until some text comes out
    if (z.avail_in == 0) {
      if (!read_raw()) break;  // the end of the file
      z.next_in = raw_.data();
      z.avail_in = static_cast<uInt>(raw_.size());
    }
    if (!member_open_) {
      // Bytes after a complete member: the next member (concatenated gzip files are one gzip
      // file), or not gzip at all, which the checks below refuse.
      member_start_ = raw_bytes_read_ - z.avail_in;
      member_open_ = true;
      inflateReset(&z);
    }
    const int code = inflate(&z, Z_NO_FLUSH);
    if (code == Z_STREAM_END) member_open_ = false;
    if (code == Z_OK || code == Z_STREAM_END || code == Z_BUF_ERROR) continue;
    // A later member that fails before giving any text is whatever followed the gzip data.
    TFM_CHECK(member_start_ == 0 || z.total_out > 0,
              "'{}': the bytes after the end of the gzip data (from byte {}) are not gzip "
              "(trailing garbage)",
              path_.string(), member_start_);
    fail("'{}': cannot read after line {}: {}", path_.string(), line_number_,
         z.msg != nullptr ? z.msg : zError(code));
  }
  if (z.avail_out == capacity && member_open_) {
    // The file ended inside a member.
    TFM_CHECK(member_start_ == 0 || z.total_out > 0,
              "'{}': the bytes after the end of the gzip data (from byte {}) are not a whole "
              "gzip member (trailing garbage or a cut file)",
              path_.string(), member_start_);
    fail("'{}': the gzip stream ends early after line {} (truncated or corrupt file)",
         path_.string(), line_number_);
  }
  return capacity - z.avail_out;
}

bool LineReader::fill() {
  if (at_end_) return false;
  // Keep the unread tail at the front, then read after it.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < kChunkBytes / 2) buffer_.resize(buffer_.size() * 2);
  // At most 1 GiB a call: zlib counts in 32 bits.
  const size_t got = read_text(buffer_.data() + end_, std::min(buffer_.size() - end_, kMaxRead));
  if (got == 0) {
    at_end_ = true;
    return false;
  }
  end_ += got;
  return true;
}

void LineReader::drop_rest_of_line() {
  for (;;) {
    const void* newline = std::memchr(buffer_.data() + begin_, '\n', end_ - begin_);
    if (newline != nullptr) {
      begin_ = static_cast<size_t>(static_cast<const char*>(newline) - buffer_.data()) + 1;
      return;
    }
    begin_ = end_;
    if (!fill()) return;
  }
}

bool LineReader::next(std::string& line) {
  last_too_long_ = false;
  size_t scanned = 0;  // bytes after begin_ already known to hold no newline
  for (;;) {
    const char* start = buffer_.data() + begin_;
    const size_t available = end_ - begin_;
    const void* newline = std::memchr(start + scanned, '\n', available - scanned);
    const size_t length = newline ? static_cast<const char*>(newline) - start : available;
    // Checked before reading further, so a file without newlines cannot fill the memory.
    if (max_line_bytes_ > 0 && static_cast<int64_t>(length) > max_line_bytes_) {
      TFM_CHECK(skip_over_long_, "{}:{}: line longer than the limit of {} bytes", path_.string(),
                line_number_ + 1, max_line_bytes_);
      drop_rest_of_line();
      line.clear();
      ++line_number_;
      last_too_long_ = true;
      return true;
    }
    if (newline == nullptr) {
      scanned = available;
      if (fill()) continue;  // fill() moves the unread bytes to the front: begin_ is now 0
      if (available == 0) return false;
    }
    const char* text = buffer_.data() + begin_;
    size_t kept = length;
    if (kept > 0 && text[kept - 1] == '\r') --kept;
    line.assign(text, kept);
    begin_ += newline ? length + 1 : length;
    ++line_number_;
    return true;
  }
}

double LineReader::read_fraction() const {
  // The file's bytes passed on so far, plain or compressed.
  const size_t unused = zstream_ ? zstream_->avail_in : raw_.size() - raw_used_;
  const auto offset = static_cast<double>(raw_bytes_read_ - static_cast<int64_t>(unused));
  return file_bytes_ > 0 ? std::min(1.0, offset / static_cast<double>(file_bytes_)) : 1.0;
}

int64_t LineReader::count_to_end() {
  int64_t lines = line_number_;
  bool open_line = false;  // bytes seen after the last newline
  for (;;) {
    const char* p = buffer_.data() + begin_;
    const char* stop = buffer_.data() + end_;
    while (p < stop) {
      const void* newline = std::memchr(p, '\n', stop - p);
      if (newline == nullptr) {
        open_line = true;
        break;
      }
      ++lines;
      open_line = false;
      p = static_cast<const char*>(newline) + 1;
    }
    begin_ = end_;
    if (!fill()) break;
  }
  line_number_ = lines + (open_line ? 1 : 0);
  return line_number_;
}

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) low = 0xA0;   // overlong
      if (c == 0xED) high = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) low = 0x90;   // overlong
      if (c == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + extra >= n) return i;  // truncated sequence
    if (s[i + 1] < low || s[i + 1] > high) return i;
    for (size_t k = 2; k <= extra; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += extra + 1;
  }
  return std::nullopt;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\v\f") == std::string_view::npos;
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::optional<std::string> file_type_problem(const std::filesystem::path& path, bool streams) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::string(std::strerror(errno));
  if (S_ISREG(info.st_mode)) return std::nullopt;
  if (S_ISDIR(info.st_mode)) return "is a directory";
  if (S_ISSOCK(info.st_mode)) return "is a socket, not a regular file";
  if (streams && (S_ISFIFO(info.st_mode) || S_ISCHR(info.st_mode))) return std::nullopt;
  if (S_ISFIFO(info.st_mode)) return "is a FIFO (a named pipe), not a regular file";
  return "is a device, not a regular file";
}

std::string read_file_bytes(const std::filesystem::path& path) {
  const std::optional<std::string> problem = file_type_problem(path);
  TFM_CHECK(!problem, "cannot open '{}': {}", path.string(), problem.value_or(""));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), "cannot open '{}': {}", path.string(),
            errno != 0 ? std::strerror(errno) : "unknown reason");
  std::ostringstream contents;
  contents << in.rdbuf();
  TFM_CHECK(!in.bad(), "cannot read '{}'", path.string());
  return std::move(contents).str();
}

}  // namespace tfm::internal
