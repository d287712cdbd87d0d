// tfm: the command line. Subcommands live in cli/<name>_command.cc; this file only wires them up.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/core/openmp_wait.h"
#include "tfm/dist/communicator.h"
#include "tfm/version.h"

namespace {

// Commands whose work runs on OpenMP threads: they start again with tfm's OpenMP wait default
// (core/openmp_wait.h). The others (bleu, info, vocab, ...) are not worth a second start.
bool computes_on_threads(int argc, char** argv) {
  static const std::set<std::string> kCommands = {"translate", "train",     "serve",  "sweep",
                                                  "parse",     "attention", "average"};
  return argc >= 2 && kCommands.count(argv[1]) > 0;
}

// sacreBLEU spells lower-casing "-lc", which CLI11 would read as the short flags -l and -c; the
// one spelling is translated to --lowercase before parsing.
std::vector<std::string> translate_arguments(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& arg : args)
    if (arg == "-lc") arg = "--lowercase";
  return args;
}

// One rank of a multi-process job that fails ends the whole job at once (MPI_Abort), so that no
// other rank waits for it in a collective; a process alone just returns the code.
int fail_job(int code) {
  if (tfm::internal::dist::launch_info().size > 1) tfm::internal::dist::world().abort(code);
  return code;
}

// "rank 1 of 2: " before an error of a multi-process job's rank (mpirun mixes their outputs).
std::string rank_prefix() {
  const tfm::internal::dist::LaunchInfo launch = tfm::internal::dist::launch_info();
  return launch.size > 1 ? fmt::format("rank {} of {}: ", launch.rank, launch.size) : "";
}

// Every command's results go to standard output: a write that failed there (a full disk, a
// closed descriptor) fails the command instead of ending it with status 0. Flushing both
// std::cout and stdout at the end covers every command in one place. A write that failed before
// (stdio keeps no errno for it) is named by what can still be seen: a closed descriptor.
void check_standard_output() {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && std::cout.good() && std::ferror(stdout) == 0) return;
  std::string reason = "a write failed";
  if (!flushed && error != 0)
    reason = std::strerror(error);
  else if (::fcntl(STDOUT_FILENO, F_GETFD) == -1)
    reason = "it is closed";
  tfm::internal::fail("cannot write the results to standard output: {}", reason);
}

}  // namespace

int main(int argc, char** argv) {
  if (computes_on_threads(argc, argv)) tfm::internal::use_default_openmp_spin(argv);
  std::vector<std::string> arguments = translate_arguments(argc, argv);
  std::vector<char*> translated;
  for (std::string& arg : arguments) translated.push_back(arg.data());
  CLI::App app{"tfm: the Transformer of \"Attention Is All You Need\""};
  app.require_subcommand(1);
  // `tfm --version`: "tfm 0.1.0", the project's version (include/tfm/version.h).
  app.set_version_flag("--version", "tfm " TFM_VERSION);
  // Usage errors are one line on stderr, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "tfm: error: " + std::string(e.what()) + " (see --help)\n";
  });
  tfm::internal::cli::register_commands(app);
  try {
    app.parse(argc, translated.data());
    check_standard_output();
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "tfm: error: %s%s\n", rank_prefix().c_str(), e.what());
    return fail_job(1);
  } catch (const std::filesystem::filesystem_error& e) {
    // A file system failure the code did not word itself still names the path and the reason.
    std::fprintf(stderr, "tfm: error: %s%s: %s\n", rank_prefix().c_str(), e.path1().c_str(),
                 e.code().message().c_str());
    return fail_job(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm: internal error: %s%s\n", rank_prefix().c_str(), e.what());
    return fail_job(2);
  }
  return 0;
}
