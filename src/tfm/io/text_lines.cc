#include "tfm/io/text_lines.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>

#include "tfm/core/error.h"
#include "tfm/eval/bleu_tokenizers.h"

namespace tfm {

namespace {

std::vector<std::string> split_and_check(const std::string& bytes, std::string_view name) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    std::string line = bytes.substr(start, end - start);
    if (const auto bad = eval::first_invalid_utf8(line))
      fail("'{}' line {} is not valid UTF-8 (byte 0x{:02x} at column {})", name, lines.size() + 1,
           static_cast<unsigned char>(line[*bad]), *bad + 1);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::string> read_text_lines(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  TFM_CHECK(!std::filesystem::is_directory(path, ec), "'{}' is a directory, not a text file", name);
  // zlib reads files that are not gzip-compressed as they are, so one path serves both.
  errno = 0;
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(name.c_str(), "rb"), gzclose);
  if (!file) fail("cannot open '{}': {}", name, errno ? std::strerror(errno) : "out of memory");
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const int got = gzread(file.get(), buffer, sizeof buffer);
    if (got < 0) {
      int code = 0;
      fail("cannot read '{}': {}", name, gzerror(file.get(), &code));
    }
    if (got == 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return split_and_check(bytes, name);
}

std::vector<std::string> read_text_lines(std::istream& in, std::string_view name) {
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  TFM_CHECK(!in.bad(), "cannot read {}", name);
  return split_and_check(bytes, name);
}

}  // namespace tfm
