// The tfm command's OpenMP wait default (core/openmp_wait.h): libgomp, which reads its settings
// when it is loaded, spins 3,000 rounds at a barrier in the commands that compute (tfm starts
// again with it) unless the user set GOMP_SPINCOUNT or OMP_WAIT_POLICY, or binds threads to places.
// Checked through libgomp's own report of its settings (OMP_DISPLAY_ENV).
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "build_paths.h"
#include "data_test_util.h"
#include "temp_dir.h"

namespace tfm::internal {
namespace {

// libgomp's report of its settings at the start of `tfm translate --help`, run with `environment`
// (reported twice when tfm starts again with its default: the last report is the one that counts).
std::string openmp_settings(const std::string& environment) {
  testing::TempDir dir;
  const auto err = dir / "stderr";
  const std::string command = "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose " +
                              environment + " '" + tfm_binary_dir() +
                              "/tfm' translate --help > /dev/null 2> '" + err.string() + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  const std::string report = testing::read_text(err);
  return report.substr(report.rfind("OPENMP DISPLAY ENVIRONMENT BEGIN") == std::string::npos
                           ? 0
                           : report.rfind("OPENMP DISPLAY ENVIRONMENT BEGIN"));
}

// How many times libgomp started (reported its settings) in `command` (after `env` and the
// environment without the two wait settings).
int starts(const std::string& command) {
  testing::TempDir dir;
  const std::string counted = fmt::format(
      "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=true {} 2>&1 >/dev/null | "
      "grep -c 'DISPLAY ENVIRONMENT BEGIN' > '{}'",
      command, (dir / "count").string());
  EXPECT_EQ(std::system(counted.c_str()), 0) << counted;
  return std::stoi(testing::read_text(dir / "count"));
}

TEST(OpenMPWait, TfmSpinsBrieflyUnlessTheUserChose) {
  EXPECT_NE(openmp_settings("").find("GOMP_SPINCOUNT = '3000'"), std::string::npos)
      << openmp_settings("");
  EXPECT_NE(openmp_settings("GOMP_SPINCOUNT=12345").find("GOMP_SPINCOUNT = '12345'"),
            std::string::npos);
  // libgomp's own default for an active wait policy is kept when the user asks for one.
  const std::string active = openmp_settings("OMP_WAIT_POLICY=active");
  EXPECT_NE(active.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << active;
  EXPECT_EQ(active.find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << active;
  // Nor where the user binds threads: the new start would inherit the one place libgomp bound the
  // first start's thread to, and run every thread there.
  for (const char* binding : {"OMP_PROC_BIND=true", "OMP_PLACES=cores", "GOMP_CPU_AFFINITY=0-1"}) {
    const std::string bound = openmp_settings(binding);
    EXPECT_EQ(bound.find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << binding << bound;
    EXPECT_EQ(starts(fmt::format("{} '{}/tfm' translate --help", binding, tfm_binary_dir())), 1)
        << binding;
  }
  // A command that does not compute is not started again.
  EXPECT_EQ(starts(fmt::format("'{}/tfm' bleu --help", tfm_binary_dir())), 1);
  // (And the default does start it again: the check above counts.)
  EXPECT_EQ(starts(fmt::format("'{}/tfm' translate --help", tfm_binary_dir())), 2);
}

}  // namespace
}  // namespace tfm::internal
