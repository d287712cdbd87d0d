#include "tfm/cli/text_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "tfm/core/error.h"
#include "tfm/io/text_lines.h"

namespace tfm::cli {

bool is_standard_stream(const std::string& path) {
  return path.empty() || path == "-";
}

std::string input_name(const std::string& path) {
  return is_standard_stream(path) ? "<stdin>" : path;
}

void check_standard_input(const std::string& input) {
  if (is_standard_stream(input))
    TFM_CHECK(fcntl(STDIN_FILENO, F_GETFD) != -1 || errno != EBADF,
              "standard input is closed; give the input file with -i");
}

std::vector<std::string> read_input_lines(const std::string& path) {
  if (!is_standard_stream(path)) return read_text_lines(path);
  return read_text_lines(std::cin, "<stdin>");
}

void open_for_writing(std::ofstream& file, const std::string& path) {
  errno = 0;
  file.open(path);
  TFM_CHECK(file.good(), "{}: cannot open for writing: {}", path,
            errno != 0 ? std::strerror(errno) : "unknown reason");
}

}  // namespace tfm::cli
