// The paper's WMT 2014 recipes (configs/wmt14-*.yaml) hold the paper's settings (sections 5 and 6,
// Table 3): each is read as `tfm train` reads it, with WMT14_DIR set, and every value is checked.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "build_paths.h"
#include "temp_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {
namespace {

using testing::TempDir;

struct PaperRecipe {
  std::string file;
  std::string target;  // "de" or "fr"
  std::string preset;
  int64_t d_model, d_ff, heads;
  double dropout;
  std::string vocab_type;
  int64_t vocab_size;
  int64_t steps;
  int64_t keep;
  int paper_params_millions;  // Table 3
};

class RecipeWmt14 : public ::testing::TestWithParam<PaperRecipe> {};

TEST_P(RecipeWmt14, HoldsThePapersSettings) {
  const PaperRecipe& paper = GetParam();
  TempDir dir;
  const std::string data = dir.path().string();
  ::setenv("WMT14_DIR", data.c_str(), 1);
  const TrainRecipe r =
      load_recipe(std::filesystem::path(tfm_source_dir()) / "configs" / paper.file);
  ::unsetenv("WMT14_DIR");

  // The model (Table 3; dropout and label smoothing: section 5.4, 6.1).
  EXPECT_EQ(r.preset, paper.preset);
  const ModelConfig c = r.model_config(r.vocab_size);
  EXPECT_EQ(c.layers, 6);
  EXPECT_EQ(c.d_model, paper.d_model);
  EXPECT_EQ(c.d_ff, paper.d_ff);
  EXPECT_EQ(c.heads, paper.heads);
  EXPECT_EQ(c.d_k, 64);
  EXPECT_EQ(c.d_v, 64);
  EXPECT_DOUBLE_EQ(c.dropout, paper.dropout);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.label_smoothing, 0.1);
  EXPECT_EQ(c.norm, "post");
  EXPECT_EQ(c.positional, "sinusoidal");
  EXPECT_FALSE(c.attention_bias);
  EXPECT_GE(c.max_positions, r.max_length);
  // Within 4% of Table 3's count (the paper's exact vocabulary is unknown).
  EXPECT_NEAR(static_cast<double>(parameter_count(c)) / 1e6, paper.paper_params_millions,
              0.04 * paper.paper_params_millions);

  // Data (section 5.1): the files scripts/fetch_wmt14.sh writes, newstest2013 to validate on.
  EXPECT_EQ(r.train_source, data + "/train.en");
  EXPECT_EQ(r.train_target, data + "/train." + paper.target);
  EXPECT_EQ(r.valid_source, data + "/newstest2013.en");
  EXPECT_EQ(r.valid_target, data + "/newstest2013." + paper.target);
  EXPECT_EQ(r.vocab, "");  // learned into the run, shared by source and target
  EXPECT_EQ(r.vocab_type, paper.vocab_type);
  EXPECT_EQ(r.vocab_size, paper.vocab_size);
  EXPECT_EQ(r.vocab_sample, 10000000);
  EXPECT_EQ(r.max_length, 256);
  // The raw WMT14 text has empty and, in crawled parts, broken lines: skipped and counted.
  EXPECT_TRUE(r.skip_empty_lines);
  EXPECT_TRUE(r.skip_invalid_lines);
  // ~25000 source + 25000 target tokens an update, batches from the device's memory.
  EXPECT_EQ(r.update_tokens, 50000);
  EXPECT_EQ(r.max_tokens, kAutoBatch);
  EXPECT_EQ(r.accumulate, kAutoBatch);

  // Adam and equation 3 (section 5.3).
  EXPECT_DOUBLE_EQ(r.beta1, 0.9);
  EXPECT_DOUBLE_EQ(r.beta2, 0.98);
  EXPECT_DOUBLE_EQ(r.eps, 1e-9);
  EXPECT_EQ(r.warmup, 4000);
  EXPECT_DOUBLE_EQ(r.lr_scale, 1.0);
  EXPECT_DOUBLE_EQ(r.warmup_fraction, 0.0);
  EXPECT_DOUBLE_EQ(r.clip_norm, 0.0);

  // Steps (section 5.2) and nothing else stopping the run.
  EXPECT_EQ(r.max_steps, paper.steps);
  EXPECT_EQ(r.max_epochs, 0);
  EXPECT_DOUBLE_EQ(r.max_minutes, 0.0);
  EXPECT_EQ(r.precision, "auto");

  // Checkpoints every 10 minutes, the last 5 (base) or 20 (big) averaged (section 6.1).
  EXPECT_DOUBLE_EQ(r.checkpoint_every_minutes, 10.0);
  EXPECT_EQ(r.checkpoint_every_steps, 0);
  EXPECT_DOUBLE_EQ(r.checkpoint_every_fraction, 0.0);
  EXPECT_EQ(r.keep_checkpoints, paper.keep);

  // Validation: BLEU on a few hundred sentences of newstest2013, every N updates.
  EXPECT_TRUE(r.validate_bleu);
  EXPECT_GT(r.validate_every_steps, 0);
  EXPECT_GE(r.valid_max_sentences, 100);
  EXPECT_LE(r.valid_max_sentences, 1000);
  EXPECT_NE(r.run_dir.find(paper.file.substr(0, paper.file.size() - 5)), std::string::npos);
  validate(r);
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, RecipeWmt14,
    ::testing::Values(PaperRecipe{"wmt14-en-de-base.yaml", "de", "base", 512, 2048, 8, 0.1, "bpe",
                                  37000, 100000, 5, 65},
                      PaperRecipe{"wmt14-en-de-big.yaml", "de", "big", 1024, 4096, 16, 0.3, "bpe",
                                  37000, 300000, 20, 213},
                      PaperRecipe{"wmt14-en-fr-big.yaml", "fr", "big", 1024, 4096, 16, 0.1,
                                  "unigram", 32000, 300000, 20, 213}),
    [](const ::testing::TestParamInfo<PaperRecipe>& param) {
      std::string name = param.param.file.substr(0, param.param.file.size() - 5);
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace tfm::internal
