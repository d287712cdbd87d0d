// Runs the built `tfm` with a file-size limit, as a full disk behaves for the files it writes: a
// forked child sets RLIMIT_FSIZE and ignores SIGXFSZ, so that a write past the limit fails with
// EFBIG ("File too large") instead of killing the process.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "build_paths.h"
#include "data_test_util.h"

namespace tfm::internal::testing {

// `tfm arguments...` with files limited to `limit_bytes` (standard output and error go to
// dir/stdout and dir/stderr, opened before the limit: they stay small); stdout_path, when given,
// replaces dir/stdout (e.g. /dev/full).
inline CommandResult run_tfm_with_file_limit(const std::vector<std::string>& arguments,
                                             rlim_t limit_bytes, const TempDir& dir,
                                             const std::string& stdout_path = "") {
  const std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  const std::string binary = std::string(tfm_binary_dir()) + "/tfm";
  std::vector<std::string> argv_storage{binary};
  argv_storage.insert(argv_storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_path = stdout_path.empty() ? out.string() : stdout_path;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out_fd < 0 || err_fd < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(126);
    const rlimit limit{limit_bytes, limit_bytes};
    ::signal(SIGXFSZ, SIG_IGN);
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(125);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  int raw = 0;
  ::waitpid(pid, &raw, 0);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1,
          stdout_path.empty() ? read_text(out) : std::string(), read_text(err)};
}

}  // namespace tfm::internal::testing
