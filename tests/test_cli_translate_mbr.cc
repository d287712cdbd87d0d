// tfm translate --mbr through the built binary: each output line is one of its sentence's n-best
// list, the model's best as the temperature falls to 0, empty lines stay empty, and the flags that
// cannot work together are one-line errors. The same for --sampling's lists, which its --seed
// repeats. The model is copy_model_test_util.h's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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
           {"-b 4 --n-best 4 --mbr-temperature 2", "--mbr-temperature requires --mbr"},
           {"--sampling 1 --mbr",
            "tfm: error: --mbr chooses among the --sampling samples: draw at least 2, not 1"},
           {"--sampling 4 -b 8", "--beam-size excludes --sampling"},
           {"--sampling 4 --n-best 2", "--n-best excludes --sampling"},
           {"--sampling 4 --mbr --mbr-temperature 2", "--mbr-temperature excludes --sampling"},
           {"--sampling 4 --sampling-epsilon 1", "--sampling-epsilon"},
           {"--sampling 4 --sampling-temperature 0", "--sampling-temperature"},
           {"--seed 3", "--seed requires --sampling"},
           {"--sampling 4 --alignment", "sampling keeps no attention weights"}}) {
    const CommandResult run = t.translate(c.options);
    EXPECT_NE(run.status, 0) << c.options;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.options << ": " << run.err;
    EXPECT_EQ(lines_of(run.err).size(), 1u) << c.options << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << c.options << ": " << run.out;
  }
}

// Each sentence's --n-best-output lines under --sampling: its samples, best score first.
std::map<size_t, std::vector<std::string>> samples_of(const std::string& out) {
  std::map<size_t, std::vector<std::string>> samples;
  for (const std::string& line : lines_of(out)) {
    const size_t bar = line.find(" ||| "), last = line.rfind(" ||| ");
    EXPECT_NE(bar, last) << line;
    samples[std::stoul(line.substr(0, bar))].push_back(line.substr(bar + 5, last - bar - 5));
  }
  return samples;
}

TEST(CliTranslateSampling, TheSeedRepeatsTheSamplesAndMbrChoosesAmongThem) {
  const Translated t;
  const CommandResult first =
      t.translate("--sampling 6 --sampling-epsilon 0 --seed 1 --n-best-output");
  const CommandResult again =
      t.translate("--sampling 6 --sampling-epsilon 0 --seed 1 --n-best-output");
  const CommandResult other =
      t.translate("--sampling 6 --sampling-epsilon 0 --seed 2 --n-best-output");
  const CommandResult mbr = t.translate("--sampling 6 --sampling-epsilon 0 --seed 1 --mbr");
  for (const CommandResult* run : {&first, &again, &other, &mbr})
    ASSERT_EQ(run->status, 0) << run->err;
  EXPECT_EQ(first.out, again.out);
  EXPECT_NE(first.out, other.out);
  const auto samples = samples_of(first.out);
  const std::vector<std::string> chosen = lines_of(mbr.out);
  ASSERT_EQ(chosen.size(), t.sources.size()) << mbr.out;
  size_t varied = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (t.sources[i].empty()) {
      EXPECT_EQ(chosen[i], "") << i;
      EXPECT_FALSE(samples.contains(i)) << i;
      continue;
    }
    ASSERT_TRUE(samples.contains(i)) << i;
    const std::vector<std::string>& list = samples.at(i);
    EXPECT_EQ(list.size(), 6u) << i;
    EXPECT_NE(std::find(list.begin(), list.end(), chosen[i]), list.end()) << i << ": " << chosen[i];
    varied += std::set<std::string>(list.begin(), list.end()).size() > 1;
  }
  // The copy model is not certain of every sentence: some lists hold different samples.
  EXPECT_GT(varied, 0u) << first.out;
}

}  // namespace
}  // namespace tfm::internal
