#include "tfm/cli/text_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "tfm/core/error.h"
#include "tfm/io/text_lines.h"

namespace tfm::internal::cli {

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

TextOutput::TextOutput(const std::string& path) : name_(input_name(path)) {
  if (name_ == "<stdin>") name_ = "<stdout>";
  if (is_standard_stream(path)) {
    std::cout.flush();  // what was written through std::cout comes first
    fd_ = STDOUT_FILENO;
    return;
  }
  // A symbolic link keeps pointing where it did: the file it names is replaced.
  std::error_code error;
  std::filesystem::path target = path;
  if (std::filesystem::is_symlink(path, error)) {
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
    if (!error) target = resolved;
  }
  const auto status = std::filesystem::status(target, error);
  if (!std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) {
    errno = 0;
    try {
      file_ = std::make_unique<AtomicFileWriter>(target);
    } catch (const Error&) {
      // The temporary file's name means little to the user: the reason is the directory's.
      const int reason = errno;
      if (reason == 0) throw;
      fail("{}: cannot open for writing: {}", path, std::strerror(reason));
    }
    return;
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  TFM_CHECK(fd_ >= 0, "{}: cannot open for writing: {}", path, std::strerror(errno));
  close_fd_ = true;
}

TextOutput::~TextOutput() {
  if (close_fd_) ::close(fd_);
}

void TextOutput::write(std::string_view text) {
  if (file_) {
    file_->write(text);
    return;
  }
  while (!text.empty()) {
    const ssize_t written = ::write(fd_, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    TFM_CHECK(written > 0, "{}: write failed: {}", name_,
              written < 0 ? std::strerror(errno) : "nothing written");
    text.remove_prefix(static_cast<size_t>(written));
  }
}

void TextOutput::commit() {
  if (file_) file_->commit();
}

}  // namespace tfm::internal::cli
