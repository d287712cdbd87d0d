// Standard output that cannot be written (a full disk: /dev/full; a closed descriptor) fails every
// command that writes its results there: a one-line error and status 1, never status 0 with the
// results lost. main.cc checks it once for all commands; bleu, evalb and info stand for them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "build_paths.h"
#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/version.h"

namespace tfm::internal {
namespace {

using testing::quoted;
using testing::read_text;
using testing::TempDir;
using testing::write_text;

struct Outcome {
  int status;
  std::string err;
};

// Runs tfm with `arguments`, its standard output sent where `redirect` says.
Outcome run_with_stdout(const std::string& arguments, const std::string& redirect,
                        const TempDir& dir) {
  const auto err = dir / "stderr";
  const std::string command =
      fmt::format("'{}/tfm' {} {} 2> {}", tfm_binary_dir(), arguments, redirect, quoted(err));
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(err)};
}

void expect_output_error(const Outcome& run, const std::string& what) {
  EXPECT_EQ(run.status, 1) << what << ": " << run.err;
  EXPECT_NE(run.err.find("tfm: error: cannot write the results to standard output"),
            std::string::npos)
      << what << ": " << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << what << ": " << run.err;
}

TEST(CliOutput, AFullOrClosedStandardOutputFailsTheCommand) {
  TempDir dir;
  write_text(dir / "ref", "the cat sat on the mat\n");
  write_text(dir / "hyp", "the cat sat on a mat\n");
  write_text(dir / "trees", "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat))))\n");
  const std::string model = std::string(tfm_source_dir()) + "/tests/fixtures/tiny";
  const std::string commands[] = {
      fmt::format("bleu -r {} -i {}", quoted(dir / "ref"), quoted(dir / "hyp")),
      fmt::format("evalb {} {}", quoted(dir / "trees"), quoted(dir / "trees")),
      fmt::format("info -m '{}'", model),
      "info --preset base --vocab 37000",
  };
  for (const std::string& command : commands) {
    // Each writes its results fine to a file...
    const Outcome fine = run_with_stdout(command, "> " + quoted(dir / "out"), dir);
    EXPECT_EQ(fine.status, 0) << command << ": " << fine.err;
    EXPECT_FALSE(read_text(dir / "out").empty()) << command;
    // ...and fails when they cannot be written.
    expect_output_error(run_with_stdout(command, "> /dev/full", dir), command + " > /dev/full");
    expect_output_error(run_with_stdout(command, ">&-", dir), command + " >&-");
  }
}

// `tfm --version` prints the project's version (include/tfm/version.h), as the packages (the .deb,
// the wheel) report it, with status 0 and no subcommand.
TEST(CliOutput, VersionIsTheProjectsVersion) {
  TempDir dir;
  const Outcome run = run_with_stdout("--version", "> " + quoted(dir / "out"), dir);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(read_text(dir / "out"), "tfm " TFM_VERSION "\n");
}

}  // namespace
}  // namespace tfm::internal
