// Line-by-line reading of text corpora, plain or gzip-compressed (a file that starts with the gzip
// magic bytes is inflated with zlib; concatenated gzip members are read one after the other, as
// gzip -d does), with the checks every corpus reader needs: a bound on the line length and UTF-8
// validation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct z_stream_s;

namespace tfm::internal {

inline constexpr int64_t kDefaultMaxLineBytes = 64 * 1024;

class LineReader {
 public:
  // Throws when the file does not exist or cannot be opened. max_line_bytes <= 0: no limit.
  explicit LineReader(std::filesystem::path path, int64_t max_line_bytes = kDefaultMaxLineBytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" (and without a "\r" before it); false at the end of the file.
  // A last line without a newline still counts. Throws, naming file and line, on a line longer
  // than the limit (unless skip_over_long_lines), a corrupt or truncated gzip stream, or bytes
  // after the last gzip member that are not another member (trailing garbage).
  bool next(std::string& line);
  // Instead of throwing, next() passes over a line longer than the limit without holding it: it
  // returns it empty, and last_line_too_long() is true.
  void skip_over_long_lines(bool skip) { skip_over_long_ = skip; }
  bool last_line_too_long() const { return last_too_long_; }
  // Reads to the end without any check and returns the number of lines in the whole file.
  int64_t count_to_end();
  // Share of the file read so far, in [0, 1] (of the compressed bytes for a gzip file): for
  // progress reports.
  double read_fraction() const;
  // 1-based number of the line next() returned last.
  int64_t line_number() const { return line_number_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  bool fill();  // false at the end of the file
  // Up to `capacity` bytes of text (inflated for a gzip file) into `out`; 0 at the end.
  size_t read_text(char* out, size_t capacity);
  size_t inflate_some(char* out, size_t capacity);
  bool read_raw();  // the next chunk of the file into raw_; false at its end
  void drop_rest_of_line();
  void close();

  std::filesystem::path path_;
  int64_t max_line_bytes_;
  int64_t file_bytes_ = 0;
  std::FILE* file_ = nullptr;
  std::unique_ptr<z_stream_s> zstream_;  // null for a plain file
  std::vector<unsigned char> raw_;       // the last chunk read from the file
  size_t raw_used_ = 0;                  // of raw_, passed on (plain files)
  int64_t raw_bytes_read_ = 0;           // from the file so far
  int64_t member_start_ = 0;             // file offset of the gzip member being inflated
  bool member_open_ = false;             // inside a gzip member (its end not reached yet)
  std::vector<char> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool at_end_ = false;
  bool skip_over_long_ = false;
  bool last_too_long_ = false;
  int64_t line_number_ = 0;
};

// Byte offset of the first byte that is not part of a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are malformed), or nullopt when `text` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// True when the line holds nothing but ASCII white space.
bool is_blank(std::string_view line);

// 64-bit FNV-1a: a cheap content hash for cache keys (not a cryptographic hash).
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL);

// Why `path` cannot be read as a regular file (with `streams`, a FIFO or a character device such
// as /dev/stdin will do too), or nullopt when it can: stat's reason as strerror words it ("No such
// file or directory", "Too many levels of symbolic links" for a loop of links, "Permission
// denied"), or "is a directory", "is a FIFO (a named pipe), not a regular file", "is a device,
// not a regular file", "is a socket, not a regular file". Symbolic links are followed. Only stat
// looks at the file, so a FIFO never blocks here.
std::optional<std::string> file_type_problem(const std::filesystem::path& path,
                                             bool streams = false);

// The whole file's bytes; throws naming the file when it is not a regular file (a directory
// would read as empty, a device as endless) or cannot be read.
std::string read_file_bytes(const std::filesystem::path& path);

}  // namespace tfm::internal
