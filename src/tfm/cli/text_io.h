// Files and standard streams of the text commands (translate, parse, linearise): "" or "-" means
// standard input or output, and a file that cannot be opened is a one-line error with the reason.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/atomic_file.h"

namespace tfm::internal::cli {

// Whether `path` names a standard stream ("" or "-").
bool is_standard_stream(const std::string& path);

// The name errors use: "<stdin>" for a standard stream, else the path.
std::string input_name(const std::string& path);

// When `input` is standard input, throws if descriptor 0 is closed. Call it before opening any
// file: with descriptor 0 closed, the next file opened would take its place.
void check_standard_input(const std::string& input);

// The lines of the input file (plain or gzip) or of standard input.
std::vector<std::string> read_input_lines(const std::string& path);

// Opens `file` for writing `path`, or throws naming the path and errno's reason.
void open_for_writing(std::ofstream& file, const std::string& path);

// The output of translate and parse: standard output for "" or "-"; a regular file (or a path that
// does not exist yet) through a sibling temporary file renamed over it by commit(), so that a
// failure (a full disk) leaves the old file as it was; anything else (/dev/null, a FIFO) written in
// place. A failed write throws naming the path and the reason (strerror).
class TextOutput {
 public:
  explicit TextOutput(const std::string& path);
  ~TextOutput();
  TextOutput(const TextOutput&) = delete;
  TextOutput& operator=(const TextOutput&) = delete;

  void write(std::string_view text);
  // Flushes, and for a regular file renames the temporary file over the path. Without commit()
  // (an exception on the way) the temporary file is removed.
  void commit();

 private:
  std::string name_;                        // what errors call it
  std::unique_ptr<AtomicFileWriter> file_;  // a regular file
  int fd_ = -1;                             // standard output, or a special file opened in place
  bool close_fd_ = false;
};

}  // namespace tfm::internal::cli
