// Reading a text corpus as lines: plain or gzip-compressed (detected from the content, so a ".gz"
// suffix is not needed), checked to be UTF-8 line by line so that a bad byte is reported with the
// file and line it is in.
#pragma once

#include <filesystem>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::internal {

// The lines of a file (io/text_reader.h's LineReader: split at '\n', a '\r' before it removed), a
// last line without '\n' counts; an empty file has no lines. Throws tfm::Error naming the file when
// it cannot be opened or decompressed, and naming the file and line (1-based) and the offending
// byte when a line is not valid UTF-8.
std::vector<std::string> read_text_lines(const std::filesystem::path& path);

// The same for an already open stream (e.g. std::cin, never decompressed, split at '\n' only);
// `name` is what error messages call it.
std::vector<std::string> read_text_lines(std::istream& in, std::string_view name);

}  // namespace tfm::internal
