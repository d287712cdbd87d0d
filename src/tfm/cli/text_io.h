// Files and standard streams of the text commands (translate, parse, linearise): "" or "-" means
// standard input or output, and a file that cannot be opened is a one-line error with the reason.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace tfm::cli {

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

}  // namespace tfm::cli
