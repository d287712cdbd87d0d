#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "build_paths.h"
#include "temp_dir.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::TempDir;

std::filesystem::path write(const TempDir& tmp, const std::string& text) {
  auto path = tmp / "recipe.yaml";
  std::ofstream(path) << text;
  return path;
}

TEST(Recipe, ReadsSectionsModelOverridesAndEnvironment) {
  TempDir tmp;
  ::setenv("TFM_TEST_DATA", "/data/m30k", 1);
  auto path = write(tmp,
                    "model:\n  preset: base\n  layers: 3\n  d_model: 256\n  d_k: 32\n  d_v: 32\n"
                    "  dropout: 0.3\n  positional: learned\n"
                    "data:\n  train_source: ${TFM_TEST_DATA}/train.en.gz\n"
                    "  train_target: ${TFM_TEST_DATA}/train.de.gz\n  max_tokens: 6000\n"
                    "optimizer:\n  warmup: 800\n  lr_scale: 2\n"
                    "training:\n  max_minutes: 60\n  seed: 7\n"
                    "checkpoints:\n  keep: 3\n"
                    "validation:\n  bleu: false\n");
  TrainRecipe r = load_recipe(path);
  EXPECT_EQ(r.train_source, "/data/m30k/train.en.gz");
  EXPECT_EQ(r.max_tokens, 6000);
  EXPECT_EQ(r.warmup, 800);
  EXPECT_DOUBLE_EQ(r.lr_scale, 2.0);
  EXPECT_DOUBLE_EQ(r.max_minutes, 60.0);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.keep_checkpoints, 3);
  EXPECT_FALSE(r.validate_bleu);
  ModelConfig c = r.model_config(1000);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.d_model, 256);
  EXPECT_EQ(c.d_ff, 2048);  // from the preset
  EXPECT_DOUBLE_EQ(c.dropout, 0.3);
  EXPECT_TRUE(c.learned_positions());
  EXPECT_EQ(c.vocab_size, 1000);
  validate(r);

  apply_override(r, "training.max_steps=123");
  apply_override(r, "model.heads=4");
  EXPECT_EQ(r.max_steps, 123);
  EXPECT_EQ(r.model_config(1000).heads, 4);
}

// The recipe's model section and config.json share one table of configuration keys: every key
// of config.json but those the vocabulary decides is a recipe option, and reaches the model.
TEST(Recipe, ModelSectionTakesEveryConfigurationKey) {
  const std::vector<std::string> options = recipe_keys();
  for (std::string_view key_view : config_keys()) {
    const std::string key(key_view);
    const bool decided_by_vocabulary = key == "vocab_size" || key.ends_with("_id");
    EXPECT_EQ(std::count(options.begin(), options.end(), "model." + key),
              decided_by_vocabulary ? 0 : 1)
        << key;
  }
  TrainRecipe r;
  apply_override(r, "model.layer_norm_eps=1e-6");
  apply_override(r, "model.attention_bias=true");
  EXPECT_DOUBLE_EQ(r.model_config(100).layer_norm_eps, 1e-6);
  EXPECT_TRUE(r.model_config(100).attention_bias);
  expect_error([&] { apply_override(r, "model.vocab_size=5"); },
               {"unknown option 'model.vocab_size'"});
  expect_error([&] { apply_override(r, "model.layerz=5"); },
               {"unknown option 'model.layerz'", "did you mean 'model.layers'"});
}

TEST(Recipe, TyposAndBadValuesAreOneLineErrorsWithFileAndLine) {
  TempDir tmp;
  expect_error(
      [&] { load_recipe(write(tmp, "data:\n  max_tokns: 100\n")); },
      {"recipe.yaml:2", "unknown option 'data.max_tokns'", "did you mean 'data.max_tokens'"});
  expect_error([&] { load_recipe(write(tmp, "data:\n  max_tokens: lots\n")); },
               {"recipe.yaml:2", "'data.max_tokens' must be a positive integer or auto", "lots"});
  expect_error([&] { load_recipe(write(tmp, "data: [1, 2\n")); }, {"recipe.yaml", "invalid YAML"});
  expect_error([&] { load_recipe(write(tmp, "validation:\n  bleu: maybe\n")); },
               {"recipe.yaml:2", "true or false"});
  expect_error(
      [&] { load_recipe(write(tmp, "data:\n  vocab: ${TFM_UNSET_VARIABLE_X}/v.model\n")); },
      {"recipe.yaml:2", "TFM_UNSET_VARIABLE_X", "not set"});
  expect_error([&] { load_recipe(tmp / "missing.yaml"); }, {"missing.yaml", "no such recipe"});
  // A directory was "no such recipe file" too.
  expect_error([&] { load_recipe(tmp.path()); }, {tmp.path().string(), ": is a directory"});
  TrainRecipe r;
  expect_error([&] { apply_override(r, "training.max_stepz=5"); },
               {"training.max_stepz", "did you mean 'training.max_steps'"});
  expect_error([&] { apply_override(r, "no_equals_sign"); }, {"section.key=value"});
  expect_error([&] { validate(r); }, {"data.train_source"});
  apply_override(r, "data.train_source=a.en");
  apply_override(r, "data.train_target=a.de");
  apply_override(r, "model.dropout=1.5");
  expect_error([&] { validate(r); }, {"dropout"});
  // Empty and out-of-range numbers are errors naming the key, not crashes.
  TrainRecipe empty_value;
  apply_override(empty_value, "model.layers=");
  expect_error([&] { empty_value.model_config(100); }, {"layers"});
  TrainRecipe huge_value;
  apply_override(huge_value, "model.layers=99999999999999999999");
  expect_error([&] { huge_value.model_config(100); }, {"layers"});
  // Precision is f32 or bf16.
  TrainRecipe precision;
  apply_override(precision, "data.train_source=a.en");
  apply_override(precision, "data.train_target=a.de");
  apply_override(precision, "training.precision=bf16");
  validate(precision);
  apply_override(precision, "training.precision=auto");
  validate(precision);
  for (const char* bad : {"optimizer.warmup_fraction=1.5", "checkpoints.every_fraction=-0.1"}) {
    TrainRecipe fraction = precision;
    apply_override(fraction, bad);
    expect_error([&] { validate(fraction); }, {"must be in [0, 1]"});
  }
  // The device is cpu or cuda (whether a GPU is there is checked when training starts).
  TrainRecipe device = precision;
  apply_override(device, "training.device=cuda");
  validate(device);
  apply_override(device, "training.device=gpu0");
  expect_error([&] { validate(device); }, {"training.device", "cpu, cuda or auto", "gpu0"});
  apply_override(precision, "training.precision=fp16");
  expect_error([&] { validate(precision); }, {"training.precision", "f32, bf16 or auto", "fp16"});
}

TEST(Recipe, RangeErrorsNameTheFileLineAndValue) {
  // Issue 43 D19: validate()'s errors named neither the file and line nor (beta1, beta2) the value.
  TempDir tmp;
  const std::string data = "data:\n  train_source: a.en\n  train_target: a.de\n";
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"optimizer:\n  lr_scale: -1\n", {"recipe.yaml:5: ", "optimizer.lr_scale", "-1"}},
      {"checkpoints:\n  keep: 0\n", {"recipe.yaml:5: ", "checkpoints.keep", "got 0"}},
      {"optimizer:\n  beta1: 0.9\n  beta2: 1.5\n",
       {"recipe.yaml:6: ", "optimizer.beta2 must be in [0, 1), got 1.5"}},
      {"training:\n  max_steps: -2\n", {"recipe.yaml:5: ", "training.max_steps", "-2"}},
      {"training:\n  max_minutes: 2e7\n",
       {"recipe.yaml:5: ", "training.max_minutes", "got 20000000"}},
      {"model:\n  layers: 0\n", {"recipe.yaml:5: ", "'layers' must be positive, got 0"}},
      {"validation:\n  every_steps: -1\n", {"recipe.yaml:5: ", "validation.every_steps", "-1"}},
  };
  for (const auto& [section, parts] : cases) {
    TrainRecipe r = load_recipe(write(tmp, data + section));
    try {
      validate(r);
      ADD_FAILURE() << section << " was accepted";
    } catch (const Error& e) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " / " << e.what();
    }
  }
  // data.accumulate is bounded (a million batches held for one update ignored every signal).
  TrainRecipe r = load_recipe(write(tmp,
                                    "data:\n  train_source: a.en\n  train_target: a.de\n"
                                    "  accumulate: 1000000\n"));
  expect_error([&] { validate(r); },
               {"recipe.yaml:4: ", "data.accumulate must be in [1, 1024] or auto, got 1000000"});
  // BPE-dropout is a probability, and needs a BPE vocabulary.
  TrainRecipe dropout = load_recipe(write(tmp, data + "  bpe_dropout: 1\n"));
  expect_error([&] { validate(dropout); },
               {"recipe.yaml:4: ", "data.bpe_dropout must be in [0, 1) (0: off), got 1"});
  dropout = load_recipe(write(tmp, data + "  vocab_type: unigram\n  bpe_dropout: 0.1\n"));
  expect_error([&] { validate(dropout); },
               {"data.bpe_dropout needs a BPE vocabulary, but data.vocab_type is unigram"});
  dropout = load_recipe(write(tmp, data + "  bpe_dropout: 0.1\n  bpe_dropout_sides: target\n"));
  expect_error([&] { validate(dropout); },
               {"recipe.yaml:5: ", "data.bpe_dropout_sides must be both or source, got 'target'"});
  // Word dropout is a probability, on the sources or both sides.
  TrainRecipe words = load_recipe(write(tmp, data + "  word_dropout: -0.1\n"));
  expect_error([&] { validate(words); },
               {"recipe.yaml:4: ", "data.word_dropout must be in [0, 1) (0: off), got -0.1"});
  words = load_recipe(write(tmp, data + "  word_dropout: 0.1\n  word_dropout_sides: target\n"));
  expect_error([&] { validate(words); },
               {"recipe.yaml:5: ", "data.word_dropout_sides must be source or both, got 'target'"});
  // R-Drop's weight is >= 0, runs on the CPU and needs the fused output loss (no output bias).
  const std::string training = data + "training:\n";
  TrainRecipe rdrop = load_recipe(write(tmp, training + "  rdrop_alpha: -1\n"));
  expect_error([&] { validate(rdrop); },
               {"recipe.yaml:5: ", "training.rdrop_alpha must be >= 0 (0: off), got -1"});
  rdrop = load_recipe(write(tmp, training + "  rdrop_alpha: 5\n  device: cuda\n"));
  expect_error([&] { validate(rdrop); },
               {"recipe.yaml:5: ", "training.rdrop_alpha needs training.device cpu"});
  rdrop =
      load_recipe(write(tmp, "model:\n  output_bias: true\n" + training + "  rdrop_alpha: 5\n"));
  expect_error([&] { validate(rdrop); },
               {"recipe.yaml:7: ", "training.rdrop_alpha needs a model without output_bias"});
  rdrop = load_recipe(write(tmp, training + "  rdrop_alpha: 5\n"));
  EXPECT_NO_THROW(validate(rdrop));
  EXPECT_EQ(rdrop.rdrop_alpha, 5.0);
  // A value given with --set says so.
  apply_override(r, "data.accumulate=2");
  validate(r);
  apply_override(r, "optimizer.eps=0");
  expect_error([&] { validate(r); }, {"--set optimizer.eps=0: ", "optimizer.eps", "got 0"});
}

TEST(Recipe, DuplicateKeysAndSectionsAreErrors) {
  TempDir tmp;
  expect_error([&] { load_recipe(write(tmp, "data:\n  max_tokens: 100\n  max_tokens: 200\n")); },
               {"recipe.yaml:3", "'data.max_tokens' given twice", "first at line 2"});
  expect_error(
      [&] {
        load_recipe(
            write(tmp, "data:\n  max_tokens: 100\ntraining:\n  seed: 2\ndata:\n  accumulate: 2\n"));
      },
      {"recipe.yaml:5", "section 'data' given twice", "first at line 1"});
}

TEST(Recipe, AnUnterminatedQuoteOrAMultiLineValueIsAnError) {
  TempDir tmp;
  // A double-quoted scalar may span lines in YAML: here run_dir would swallow the checkpoints
  // section, up to the next '"', and the file would still parse.
  expect_error(
      [&] {
        load_recipe(write(tmp,
                          "training:\n  run_dir: \"runs/a\ncheckpoints:\n  keep: 3\"\n"
                          "validation:\n  bleu: false\n"));
      },
      {"recipe.yaml:2", "'training.run_dir'", "runs on to line 3", "unterminated quote"});
  // At the end of the file.
  expect_error([&] { load_recipe(write(tmp, "training:\n  run_dir: \"runs/a\n  seed: 3\n")); },
               {"recipe.yaml:2"});
  // Plain and block scalars over several lines.
  expect_error(
      [&] { load_recipe(write(tmp, "training:\n  run_dir: runs/a\n    more\n  seed: 3\n")); },
      {"recipe.yaml:2", "'training.run_dir'", "runs on to line 3"});
  expect_error([&] { load_recipe(write(tmp, "training:\n  run_dir: |\n    runs/a\n")); },
               {"recipe.yaml:2", "'training.run_dir'"});
  // Comments, blank lines and a value on the line after its key are fine.
  TrainRecipe r = load_recipe(
      write(tmp, "training:\n  run_dir: \"runs/a\"  # here\n\n  # a comment\n  seed:\n    5\n"));
  EXPECT_EQ(r.run_dir, "runs/a");
  EXPECT_EQ(r.seed, 5u);
}

std::filesystem::path write_file(const TempDir& tmp, const std::string& name,
                                 const std::string& text) {
  auto path = tmp / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(Recipe, ExtendsStartsFromAnotherRecipeAndOverridesItsKeys) {
  TempDir tmp;
  write_file(tmp, "configs/base.yaml",
             "model:\n  layers: 4\n  d_model: 128\ndata:\n  max_tokens: 2048\n"
             "training:\n  seed: 7\n  run_dir: runs/base\n");
  // The path is relative to the extending file's folder, and `extends` may stand anywhere.
  const auto path = write_file(tmp, "configs/larger.yaml",
                               "model:\n  d_model: 256\nextends: base.yaml\n"
                               "training:\n  run_dir: runs/larger\n");
  TrainRecipe r = load_recipe(path);
  ModelConfig c = r.model_config(1000);
  EXPECT_EQ(c.d_model, 256);  // overridden
  EXPECT_EQ(c.layers, 4);     // from the base
  EXPECT_EQ(r.max_tokens, 2048);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.run_dir, "runs/larger");
  // Each key's origin is the file that set it last.
  EXPECT_EQ(r.origins.at("training.seed"), (tmp / "configs/base.yaml").string() + ":7");
  EXPECT_EQ(r.origins.at("model.d_model"), path.string() + ":2");
  // A chain: a recipe extending one that extends another.
  const auto top =
      write_file(tmp, "top.yaml", "extends: configs/larger.yaml\ntraining:\n  seed: 9\n");
  r = load_recipe(top);
  EXPECT_EQ(r.model_config(1000).d_model, 256);
  EXPECT_EQ(r.max_tokens, 2048);
  EXPECT_EQ(r.seed, 9u);
}

TEST(Recipe, ExtendsErrorsNameTheFileAndLine) {
  TempDir tmp;
  expect_error(
      [&] { load_recipe(write_file(tmp, "a.yaml", "training:\n  seed: 2\nextends: gone.yaml\n")); },
      {"a.yaml:3: extends", "gone.yaml", "no such recipe file"});
  // An error inside the base names the base's own line.
  write_file(tmp, "bad.yaml", "data:\n  max_tokns: 100\n");
  expect_error([&] { load_recipe(write_file(tmp, "b.yaml", "extends: bad.yaml\n")); },
               {"b.yaml:1: extends", "bad.yaml:2", "max_tokns"});
  // A cycle, of one file or of two.
  expect_error([&] { load_recipe(write_file(tmp, "self.yaml", "extends: self.yaml\n")); },
               {"self.yaml:1", "cycle"});
  write_file(tmp, "x.yaml", "extends: y.yaml\n");
  write_file(tmp, "y.yaml", "training:\n  seed: 1\nextends: x.yaml\n");
  expect_error([&] { load_recipe(tmp / "x.yaml"); }, {"y.yaml:3", "cycle", "x.yaml -> "});
  // Not a file name, or given twice.
  expect_error([&] { load_recipe(write_file(tmp, "c.yaml", "extends:\n  model: base.yaml\n")); },
               {"c.yaml:1", "'extends' must be one recipe file"});
  expect_error(
      [&] { load_recipe(write_file(tmp, "d.yaml", "extends: x.yaml\nextends: y.yaml\n")); },
      {"d.yaml:2", "'extends' given twice"});
}

// A recipe of configs/. They name their data through ${TFM_DATA_DIR}: any value will do for reading
// them.
TrainRecipe shipped_recipe(const std::string& file) {
  const char* data = std::getenv("TFM_DATA_DIR");
  const std::string saved = data ? data : "";
  ::setenv("TFM_DATA_DIR", "/data", 1);
  const TrainRecipe recipe =
      load_recipe(std::filesystem::path(tfm_source_dir()) / "configs" / file);
  if (data)
    ::setenv("TFM_DATA_DIR", saved.c_str(), 1);
  else
    ::unsetenv("TFM_DATA_DIR");
  return recipe;
}

// The Multi30k recipe with the larger model is the main job's recipe with its model changed.
TEST(Recipe, TheLargerMulti30kRecipeExtendsTheMainJobs) {
  const TrainRecipe main_job = shipped_recipe("multi30k-en-de.yaml");
  const TrainRecipe larger = shipped_recipe("multi30k-en-de-d256.yaml");
  const ModelConfig c = larger.model_config(8000);
  EXPECT_EQ(c.d_model, 256);
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.d_ff, 1024);
  EXPECT_EQ(c.d_k, 64);
  EXPECT_EQ(larger.run_dir, "runs/multi30k-en-de-d256");
  EXPECT_EQ(larger.max_tokens, main_job.max_tokens);
  EXPECT_EQ(larger.vocab_size, main_job.vocab_size);
  EXPECT_EQ(larger.schedule, main_job.schedule);
  EXPECT_EQ(larger.warmup_fraction, main_job.warmup_fraction);
  EXPECT_EQ(larger.train_source, main_job.train_source);
  EXPECT_EQ(main_job.model_config(8000).d_model, 128);
}

// The GPU recipe is the main job's with larger batches on the GPU, sparser validation and 3
// minutes.
TEST(Recipe, TheGpuMulti30kRecipeExtendsTheMainJobs) {
  const TrainRecipe main_job = shipped_recipe("multi30k-en-de.yaml");
  const TrainRecipe gpu = shipped_recipe("multi30k-en-de-gpu.yaml");
  EXPECT_EQ(gpu.device, "cuda");
  EXPECT_EQ(gpu.max_minutes, 3);
  EXPECT_EQ(gpu.max_tokens, 8192);
  EXPECT_EQ(gpu.validate_every_steps, 1000);
  EXPECT_EQ(gpu.run_dir, "runs/multi30k-en-de-gpu");
  EXPECT_EQ(gpu.model_config(8000), main_job.model_config(8000));
  EXPECT_EQ(gpu.schedule, main_job.schedule);
  EXPECT_EQ(gpu.warmup_fraction, main_job.warmup_fraction);
  EXPECT_EQ(gpu.precision, main_job.precision);
}

// The hour's recipe is the main job's model and schedule with the hour's batches, label smoothing,
// fixed dropout and weight decay (docs/RESULTS.md), for 60 minutes.
TEST(Recipe, TheHourMulti30kRecipeExtendsTheMainJobs) {
  const TrainRecipe main_job = shipped_recipe("multi30k-en-de.yaml");
  const TrainRecipe hour = shipped_recipe("multi30k-en-de-hour.yaml");
  const ModelConfig c = hour.model_config(8000), main_config = main_job.model_config(8000);
  EXPECT_FALSE(hour.dropout_auto());
  EXPECT_TRUE(main_job.dropout_auto());
  EXPECT_DOUBLE_EQ(c.dropout, 0.3);
  EXPECT_DOUBLE_EQ(c.label_smoothing, 0.2);
  EXPECT_DOUBLE_EQ(main_config.label_smoothing, 0.1);
  EXPECT_EQ(hour.max_tokens, 4096);
  EXPECT_EQ(main_job.max_tokens, 2048);
  EXPECT_DOUBLE_EQ(hour.weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(main_job.weight_decay, 0.0);
  EXPECT_EQ(hour.max_minutes, 60);
  EXPECT_EQ(hour.run_dir, "runs/multi30k-en-de-hour");
  // Everything else as the main job's: the model's shape, the vocabulary, the schedule, the seed.
  EXPECT_EQ(c.d_model, main_config.d_model);
  EXPECT_EQ(c.layers, main_config.layers);
  EXPECT_EQ(c.d_ff, main_config.d_ff);
  EXPECT_EQ(c.heads, main_config.heads);
  EXPECT_EQ(hour.vocab_size, main_job.vocab_size);
  EXPECT_EQ(hour.schedule, main_job.schedule);
  EXPECT_EQ(hour.warmup, main_job.warmup);
  EXPECT_EQ(hour.warmup_fraction, main_job.warmup_fraction);
  EXPECT_EQ(hour.seed, main_job.seed);
  EXPECT_EQ(hour.precision, main_job.precision);
}

// A second YAML document was lost to YAML::Load and then reported as "(an unterminated quote?)";
// it is named as what it is. A "---" that starts the only document is fine.
TEST(Recipe, ASecondYamlDocumentIsAnErrorAtItsMarker) {
  TempDir tmp;
  const std::string message = error_of(
      [&] { load_recipe(write(tmp, "training:\n  seed: 3\n---\ntraining:\n  seed: 4\n")); });
  EXPECT_NE(message.find("recipe.yaml:3: a second YAML document starts here; a recipe is one "
                         "document"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("unterminated"), std::string::npos) << message;
  expect_error(
      [&] { load_recipe(write(tmp, "# c\ntraining:\n  seed: 3\n...\ndata:\n  vocab_size: 9\n")); },
      {"recipe.yaml:4", "a second YAML document"});
  // A "---" that starts the document, and a "..." that ends it, are fine.
  EXPECT_EQ(load_recipe(write(tmp, "# c\n--- # start\ntraining:\n  seed: 3\n...\n")).seed, 3u);
}

// "0x1" read as the number 1.0 (strtod takes hexadecimal), and the message said "got number
// 1.0": the value is named as written.
TEST(Recipe, AHexadecimalModelValueIsNamedAsWritten) {
  TempDir tmp;
  TrainRecipe r = load_recipe(write(tmp, "model:\n  layers: 0x1\n"));
  expect_error([&] { r.model_config(100); },
               {"configuration key 'layers' must be an integer, got string \"0x1\""});
}

// Found by fuzz/fuzz_recipe (fuzz/findings): keys that are not text, and control characters in
// quoted keys or in yaml-cpp's own messages, are one-line errors with file:line.
TEST(Recipe, OddKeysAndControlCharactersAreOneLineErrors) {
  TempDir tmp;
  expect_error([&] { load_recipe(write(tmp, "model:\n  [a, b]: 1\n")); },
               {"recipe.yaml:2", "invalid recipe"});
  expect_error([&] { load_recipe(write(tmp, "data:\n  \"max\\ntokens\": 1\n")); },
               {"recipe.yaml:2", "unknown option 'data.max\\ntokens'"});
  expect_error([&] { load_recipe(write(tmp, "data:\n  vocab: \"a\\\rb\"\n")); },
               {"recipe.yaml:2", "invalid YAML", "\\r"});
  // A model value that is not UTF-8 (one byte 0xd3) reaches config.json's checks: an error with
  // the key, not nlohmann's type_error from printing it.
  TrainRecipe invalid_utf8 = load_recipe(write(tmp, "model:\n  layers: M\xd3S\n"));
  expect_error([&] { invalid_utf8.model_config(100); }, {"'layers' must be an integer"});
}

TEST(Recipe, NumbersMustBeFinite) {
  TempDir tmp;
  for (const char* bad : {"inf", ".inf", "-inf", "nan", ".nan", "1e400", "infinity"}) {
    expect_error([&] { load_recipe(write(tmp, fmt::format("optimizer:\n  lr_scale: {}\n", bad))); },
                 {"recipe.yaml:2", "optimizer.lr_scale", bad});
    expect_error([&] { load_recipe(write(tmp, fmt::format("model:\n  dropout: {}\n", bad))); },
                 {"recipe.yaml:2", "model.dropout"});
    TrainRecipe r;
    expect_error([&] { apply_override(r, fmt::format("training.max_minutes={}", bad)); },
                 {"training.max_minutes", bad});
    expect_error([&] { apply_override(r, fmt::format("model.layer_norm_eps={}", bad)); },
                 {"model.layer_norm_eps"});
  }
  // Finite but absurd, or set past the parser (command-line shortcuts).
  TrainRecipe r;
  apply_override(r, "data.train_source=a.en");
  apply_override(r, "data.train_target=a.de");
  validate(r);
  for (const char* bad :
       {"training.max_minutes=1e300", "checkpoints.every_minutes=1e20", "training.threads=-3"}) {
    TrainRecipe absurd = r;
    try {
      apply_override(absurd, bad);
    } catch (const Error&) {
      continue;  // rejected already
    }
    expect_error([&] { validate(absurd); }, {"must be"});
  }
  expect_error([&] { apply_override(r, "training.threads=-3"); }, {"training.threads", "-3"});
  TrainRecipe infinite = r;
  infinite.max_minutes = std::numeric_limits<double>::infinity();
  expect_error([&] { validate(infinite); }, {"training.max_minutes", "finite"});
  TrainRecipe not_a_number = r;
  not_a_number.clip_norm = std::nan("");
  expect_error([&] { validate(not_a_number); }, {"optimizer.clip_norm", "finite"});
}

// optimizer.weight_decay: AdamW's decay (train/adam.h), in [0, 1), 0 by default.
TEST(Recipe, WeightDecayIsInZeroToOne) {
  TempDir tmp;
  TrainRecipe r = load_recipe(write(tmp, "optimizer:\n  weight_decay: 0.01\n"));
  EXPECT_DOUBLE_EQ(r.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(TrainRecipe{}.weight_decay, 0.0);
  apply_override(r, "data.train_source=a.en");
  apply_override(r, "data.train_target=a.de");
  validate(r);
  for (const char* bad : {"-0.1", "1", "2.5"}) {
    TrainRecipe wrong = r;
    apply_override(wrong, fmt::format("optimizer.weight_decay={}", bad));
    expect_error([&] { validate(wrong); }, {"optimizer.weight_decay", "[0, 1)", bad});
  }
  expect_error([&] { load_recipe(write(tmp, "optimizer:\n  weight_decay: nan\n")); },
               {"recipe.yaml:2", "optimizer.weight_decay"});
}

// data.max_tokens and data.accumulate take `auto` (the batch size from the device's memory,
// train/batch_size.h); data.update_tokens says how many tokens an update holds.
TEST(Recipe, BatchSizeAutoAndUpdateTokens) {
  TempDir tmp;
  TrainRecipe r = load_recipe(write(tmp,
                                    "data:\n  train_source: a.en\n  train_target: a.de\n"
                                    "  max_tokens: auto\n  accumulate: auto\n"
                                    "  update_tokens: 50000\n"));
  EXPECT_EQ(r.max_tokens, kAutoBatch);
  EXPECT_EQ(r.accumulate, kAutoBatch);
  EXPECT_EQ(r.update_tokens, 50000);
  validate(r);
  // Defaults: the old behaviour.
  const TrainRecipe defaults;
  EXPECT_EQ(defaults.max_tokens, 4096);
  EXPECT_EQ(defaults.accumulate, 1);
  EXPECT_EQ(defaults.update_tokens, 0);
  EXPECT_DOUBLE_EQ(defaults.memory_fraction, 0.8);
  // A number again, from the command line.
  apply_override(r, "data.max_tokens=8192");
  EXPECT_EQ(r.max_tokens, 8192);
  validate(r);
  // update_tokens and a given accumulate both size the update.
  TrainRecipe both = r;
  apply_override(both, "data.accumulate=4");
  expect_error([&] { validate(both); }, {"data.update_tokens", "data.accumulate", "auto"});
  apply_override(both, "data.update_tokens=0");
  validate(both);
  for (const char* bad : {"data.max_tokens=0", "data.max_tokens=-1", "data.accumulate=0",
                          "data.accumulate=automatic", "data.max_tokens="}) {
    const std::string key(bad, std::string_view(bad).find('='));
    expect_error([&] { apply_override(r, bad); },
                 {"'" + key + "' must be a positive integer or auto"});
  }
  expect_error([&] { load_recipe(write(tmp, "data:\n  max_tokens: -1\n")); },
               {"recipe.yaml:2", "'data.max_tokens' must be a positive integer or auto"});
  TrainRecipe negative = r;
  apply_override(negative, "data.update_tokens=-3");
  expect_error([&] { validate(negative); }, {"data.update_tokens", ">= 0"});
  TrainRecipe fraction = r;
  apply_override(fraction, "data.memory_fraction=0.5");
  EXPECT_DOUBLE_EQ(fraction.memory_fraction, 0.5);
  validate(fraction);
  for (const char* bad : {"data.memory_fraction=0", "data.memory_fraction=1.5"}) {
    TrainRecipe wrong = r;
    apply_override(wrong, bad);
    expect_error([&] { validate(wrong); }, {"data.memory_fraction must be in (0, 1]"});
  }
  const std::vector<std::string> keys = recipe_keys();
  for (const char* key : {"data.update_tokens", "data.memory_fraction"})
    EXPECT_EQ(std::count(keys.begin(), keys.end(), key), 1) << key;
}

// data.vocab_sample: sentences sampled to learn the vocabulary (0: all).
TEST(Recipe, VocabularySample) {
  TempDir tmp;
  TrainRecipe r = load_recipe(
      write(tmp, "data:\n  train_source: a.en\n  train_target: a.de\n  vocab_sample: 10000000\n"));
  EXPECT_EQ(r.vocab_sample, 10000000);
  validate(r);
  EXPECT_EQ(TrainRecipe{}.vocab_sample, 0);
  apply_override(r, "data.vocab_sample=-1");
  expect_error([&] { validate(r); }, {"data.vocab_sample must be >= 0"});
  const std::vector<std::string> keys = recipe_keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "data.vocab_sample"), 1);
}

// optimizer.schedule: noam (the default, equation 3), or linear / cosine decay to zero at the run's
// end, which needs a length in updates.
TEST(Recipe, ScheduleNamesAndTheBudgetADecayNeeds) {
  TempDir tmp;
  const std::string data = "data:\n  train_source: a.en\n  train_target: a.de\n";
  TrainRecipe r = load_recipe(write(tmp, data));
  EXPECT_EQ(r.schedule, "noam");
  validate(r);  // no budget needed
  r = load_recipe(write(tmp, data + "optimizer:\n  warmup: 100\n  schedule: cosine\ntraining:\n  "
                                    "max_minutes: 5\n"));
  EXPECT_EQ(r.schedule, "cosine");
  validate(r);
  apply_override(r, "optimizer.schedule=linear");
  EXPECT_EQ(r.schedule, "linear");
  validate(r);

  // An unknown name names the file, the line, the key and the names.
  r = load_recipe(write(tmp, data + "optimizer:\n  schedule: inverse_sqrt\n"));
  expect_error([&] { validate(r); }, {"recipe.yaml:5: ",
                                      "optimizer.schedule must be noam, linear or cosine, got "
                                      "'inverse_sqrt'"});
  // A decay without any length: no max_steps, max_epochs or max_minutes.
  r = load_recipe(write(tmp, data + "optimizer:\n  schedule: linear\n"));
  expect_error([&] { validate(r); },
               {"recipe.yaml:5: ",
                "optimizer.schedule linear decays to zero at the end of the run: "
                "it needs training.max_steps, max_epochs or max_minutes"});
  // Epochs are a length (in updates once the corpus is batched).
  apply_override(r, "training.max_epochs=3");
  validate(r);
  // A step budget alone no longer than the warmup leaves nothing to decay over.
  apply_override(r, "training.max_epochs=0");
  apply_override(r, "training.max_steps=4000");
  expect_error([&] { validate(r); }, {"recipe.yaml:5: ",
                                      "optimizer.schedule linear decays after optimizer.warmup "
                                      "(4000) to zero at training.max_steps (4000)"});
  apply_override(r, "training.max_steps=4001");
  validate(r);
  apply_override(r, "training.max_steps=100");
  apply_override(r, "optimizer.warmup_fraction=0.1");  // the warmup is fitted to the steps
  validate(r);
  const std::vector<std::string> keys = recipe_keys();
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "optimizer.schedule"), 1);
}

// model.dropout auto: 0 in the configuration until the run chooses it from its budget's epochs,
// which it must have.
TEST(Recipe, DropoutAutoNeedsABudgetAndStartsAtZero) {
  TempDir tmp;
  const std::string data = "data:\n  train_source: a.en\n  train_target: a.de\n";
  TrainRecipe r = load_recipe(write(
      tmp, "model:\n  preset: base\n  dropout: auto\n" + data + "training:\n  max_minutes: 5\n"));
  EXPECT_TRUE(r.dropout_auto());
  validate(r);
  EXPECT_EQ(r.model_config(100).dropout, 0.0);  // base's own is 0.1
  apply_override(r, "model.dropout=0.2");
  EXPECT_FALSE(r.dropout_auto());
  EXPECT_EQ(r.model_config(100).dropout, 0.2);

  r = load_recipe(write(tmp, "model:\n  dropout: auto\n" + data));
  expect_error([&] { validate(r); },
               {"recipe.yaml:2: ",
                "model.dropout auto is chosen from the epochs the budget allows: it needs "
                "training.max_steps, max_epochs or max_minutes"});
  apply_override(r, "training.max_epochs=3");
  validate(r);
  apply_override(r, "training.max_epochs=0");
  apply_override(r, "training.max_steps=50");
  validate(r);
  // Any other text is still an error of the model's configuration.
  r = load_recipe(write(tmp, "model:\n  dropout: automatic\n" + data));
  expect_error([&] { validate(r); }, {"recipe.yaml:2: ", "dropout"});
}

}  // namespace
}  // namespace tfm::internal
