// tfm translate --mbr through the built binary: each output line is one of its sentence's n-best
// list, the model's best as the temperature falls to 0, empty lines stay empty, and the flags that
// cannot work together are one-line errors. The model is copy_model_test_util.h's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "copy_model_test_util.h"
#include "data_test_util.h"

namespace tfm::internal {
namespace {

using testing::CommandResult;
using testing::lines_of;
using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;
using testing::train_copying_model;

struct Translated {
  TempDir dir;
  std::filesystem::path model, input;
  std::vector<std::string> sources;

  Translated() : model(train_copying_model(dir)), input(dir / "in.txt") {
    sources = testing::generated_sentences(12, false, 21);
    sources.insert(sources.begin() + 3, "");  // an empty line translates to an empty line
    testing::write_text(input, testing::joined_lines(sources));
  }
  CommandResult translate(const std::string& options) const {
    return run_tfm_command(fmt::format("translate -m {} -i {} --max-length-offset 8 {}",
                                       quoted(model), quoted(input), options),
                           dir);
  }
};

TEST(CliTranslateMbr, EachLineIsOneOfItsNBestAndTheBestAsTheTemperatureFalls) {
  const Translated t;
  const CommandResult nbest = t.translate("-b 6 --n-best 6 --n-best-output");
  ASSERT_EQ(nbest.status, 0) << nbest.err;
  std::map<size_t, std::set<std::string>> candidates;
  for (const std::string& line : lines_of(nbest.out)) {
    const size_t bar = line.find(" ||| "), last = line.rfind(" ||| ");
    ASSERT_NE(bar, last) << line;
    candidates[std::stoul(line.substr(0, bar))].insert(line.substr(bar + 5, last - bar - 5));
  }
  const CommandResult best = t.translate("-b 6");
  const CommandResult mbr = t.translate("-b 6 --n-best 6 --mbr");
  const CommandResult cold = t.translate("-b 6 --n-best 6 --mbr --mbr-temperature 0.0001");
  for (const CommandResult* run : {&best, &mbr, &cold}) ASSERT_EQ(run->status, 0) << run->err;
  const std::vector<std::string> chosen = lines_of(mbr.out), beam = lines_of(best.out);
  ASSERT_EQ(chosen.size(), t.sources.size()) << mbr.out;
  ASSERT_EQ(beam.size(), t.sources.size()) << best.out;
  size_t differing = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (t.sources[i].empty()) {
      EXPECT_EQ(chosen[i], "") << i;
      continue;
    }
    ASSERT_TRUE(candidates.contains(i)) << i;
    EXPECT_TRUE(candidates[i].contains(chosen[i])) << i << ": " << chosen[i];
    differing += chosen[i] != beam[i];
  }
  // At a temperature near 0 only the best-scored hypothesis has weight: beam search's choice.
  EXPECT_EQ(cold.out, best.out);
  // At T = 1 the list's agreement outweighs the model's best for some sentences: --mbr is used.
  EXPECT_GT(differing, 0u) << mbr.out;
}

TEST(CliTranslateMbr, FlagsThatCannotWorkTogetherAreOneLineErrors) {
  const Translated t;
  struct Case {
    std::string options, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--mbr",
            "tfm: error: --mbr chooses from the --n-best list: give it at least 2 "
            "hypotheses (e.g. -b 16 --n-best 16), not 1"},
           {"-b 4 --n-best 4 --mbr --n-best-output", "--n-best-output excludes --mbr"},
           {"-b 4 --n-best 4 --mbr --mbr-temperature 0", "--mbr-temperature"},
           {"-b 4 --n-best 4 --mbr-temperature 2", "--mbr-temperature requires --mbr"}}) {
    const CommandResult run = t.translate(c.options);
    EXPECT_NE(run.status, 0) << c.options;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.options << ": " << run.err;
    EXPECT_EQ(lines_of(run.err).size(), 1u) << c.options << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << c.options << ": " << run.out;
  }
}

}  // namespace
}  // namespace tfm::internal
