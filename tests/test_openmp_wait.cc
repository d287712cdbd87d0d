// The tfm command's OpenMP wait default (core/openmp_wait.h): libgomp, which reads its settings
// when it is loaded, spins 3,000 rounds at a barrier in the commands that compute (tfm starts
// again with it) unless the user set GOMP_SPINCOUNT or OMP_WAIT_POLICY. Checked through libgomp's
// own report of its settings (OMP_DISPLAY_ENV).
#include <gtest/gtest.h>

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

TEST(OpenMPWait, TfmSpinsBrieflyUnlessTheUserChose) {
  EXPECT_NE(openmp_settings("").find("GOMP_SPINCOUNT = '3000'"), std::string::npos)
      << openmp_settings("");
  EXPECT_NE(openmp_settings("GOMP_SPINCOUNT=12345").find("GOMP_SPINCOUNT = '12345'"),
            std::string::npos);
  // libgomp's own default for an active wait policy is kept when the user asks for one.
  const std::string active = openmp_settings("OMP_WAIT_POLICY=active");
  EXPECT_NE(active.find("OMP_WAIT_POLICY = 'ACTIVE'"), std::string::npos) << active;
  EXPECT_EQ(active.find("GOMP_SPINCOUNT = '3000'"), std::string::npos) << active;
  // A command that does not compute is not started again.
  testing::TempDir dir;
  const std::string bleu =
      "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose '" +
      std::string(tfm_binary_dir()) +
      "/tfm' bleu --help 2>&1 >/dev/null | grep -c 'DISPLAY ENVIRONMENT BEGIN' > '" +
      (dir / "count").string() + "'";
  EXPECT_EQ(std::system(bleu.c_str()), 0);
  EXPECT_EQ(testing::read_text(dir / "count"), "1\n");
}

}  // namespace
}  // namespace tfm::internal
