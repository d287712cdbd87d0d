#include "tfm/io/text_lines.h"

#include <cerrno>
#include <cstring>
#include <iterator>
#include <memory>

#include "tfm/core/error.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal {

namespace {

void check_utf8(const std::string& line, std::string_view name, int64_t line_number) {
  if (const auto bad = find_invalid_utf8(line))
    fail("'{}' line {} is not valid UTF-8 (byte 0x{:02x} at column {})", name, line_number,
         static_cast<unsigned char>(line[*bad]), *bad + 1);
}

std::vector<std::string> split_and_check(const std::string& bytes, std::string_view name) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    std::string line = bytes.substr(start, end - start);
    check_utf8(line, name, static_cast<int64_t>(lines.size()) + 1);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::vector<std::string> read_text_lines(const std::filesystem::path& path) {
  const std::string name = path.string();
  // Checked before LineReader, whose messages speak of corpora: "cannot open 'x': No such file or
  // directory", "... is a directory", "... Too many levels of symbolic links".
  const std::optional<std::string> problem = file_type_problem(path, true);
  TFM_CHECK(!problem, "cannot open '{}': {}", name, problem.value_or(""));
  // LineReader reads plain and gzip files alike; no line-length limit here.
  LineReader reader(path, 0);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) {
    check_utf8(line, name, reader.line_number());
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> read_text_lines(std::istream& in, std::string_view name) {
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  TFM_CHECK(!in.bad(), "cannot read {}", name);
  return split_and_check(bytes, name);
}

}  // namespace tfm::internal
