#include "tfm/io/text_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tfm/core/error.h"

namespace tfm {

namespace {
constexpr size_t kChunkBytes = 1 << 18;
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
  file_ = gzopen(path_.c_str(), "rb");
  TFM_CHECK(file_ != nullptr, "cannot open '{}': {}", path_.string(), std::strerror(errno));
  gzbuffer(file_, kChunkBytes);
  buffer_.resize(kChunkBytes);
}

LineReader::~LineReader() {
  if (file_ != nullptr) gzclose(file_);
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
  const unsigned request = static_cast<unsigned>(buffer_.size() - end_);
  const int got = gzread(file_, buffer_.data() + end_, request);
  if (got < 0) {
    int code = 0;
    std::string_view message = gzerror(file_, &code);
    // zlib's message starts with the path, which ours already names.
    const std::string prefix = path_.string() + ": ";
    if (message.starts_with(prefix)) message.remove_prefix(prefix.size());
    fail("'{}': cannot read after line {}: {}", path_.string(), line_number_,
         code == Z_ERRNO ? std::string_view(std::strerror(errno)) : message);
  }
  if (got == 0) {
    // At the end, gzread returns 0 even when the stream stopped early: zlib then reports
    // Z_BUF_ERROR ("unexpected end of file") for a gzip member cut before its trailer.
    int code = 0;
    gzerror(file_, &code);
    TFM_CHECK(code != Z_BUF_ERROR,
              "'{}': the gzip stream ends early after line {} (truncated or corrupt file)",
              path_.string(), line_number_);
    at_end_ = true;
    return false;
  }
  end_ += static_cast<size_t>(got);
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
  // gzoffset: the raw bytes zlib has read from the file, plain or compressed.
  const auto offset = static_cast<double>(gzoffset(file_));
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

}  // namespace tfm
