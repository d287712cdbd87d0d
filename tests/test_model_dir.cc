// Model directories (config.json + model.safetensors) and the `tfm info` command.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "build_paths.h"
#include "temp_dir.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/model/parameters.h"

namespace tfm::internal {
namespace {

using testing::expect_error;
using testing::TempDir;

// Every optional tensor present: learned positions, attention biases, pre-norm final norms.
ModelConfig small_config() {
  ModelConfig c;
  c.layers = 2, c.d_model = 8, c.d_ff = 12, c.heads = 2, c.d_k = 3, c.d_v = 5, c.vocab_size = 19;
  c.max_positions = 10, c.positional = "learned", c.norm = "pre", c.attention_bias = true;
  return c;
}

std::vector<std::pair<std::string, Tensor>> random_parameters(const ModelConfig& c, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<std::pair<std::string, Tensor>> params;
  for (const ParameterSpec& spec : parameter_specs(c)) {
    std::vector<float> values(static_cast<size_t>(spec.shape.numel()));
    for (float& v : values) v = normal(rng);
    params.emplace_back(spec.name, Tensor::from_floats(spec.shape, values));
  }
  return params;
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Saves a valid model, then replaces its model.safetensors with `tensors`.
std::filesystem::path model_with_tensors(
    const TempDir& dir, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const auto model = dir / "model";
  save_model_dir(model, small_config(), random_parameters(small_config(), 1));
  write_safetensors(model / kWeightsFileName, tensors);
  return model;
}

TEST(ModelDir, SaveAndLoadRoundTrip) {
  const ModelConfig config = small_config();
  auto params = random_parameters(config, 5);
  std::vector<std::pair<std::string, Tensor>> shuffled(params.rbegin(), params.rend());
  TempDir dir;
  const auto model = dir / "nested" / "model";
  save_model_dir(model, config, shuffled);  // any order in, canonical order out

  const LoadedModel loaded = load_model_dir(model);
  EXPECT_EQ(loaded.config, config);
  ASSERT_EQ(loaded.parameters.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(loaded.parameters[i].first, params[i].first);
    const Tensor& a = loaded.parameters[i].second;
    const Tensor& b = params[i].second;
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << params[i].first;
  }
  EXPECT_EQ(loaded.metadata.at("producer"), "tfm");
  EXPECT_EQ(loaded.parameter("decoder.final_norm.bias").shape(), (Shape{8}));
  expect_error([&] { loaded.parameter("nope"); }, {"no parameter named 'nope'"});

  // The files themselves: a readable config.json and a safetensors file in canonical order.
  EXPECT_EQ(load_config(model / kConfigFileName), config);
  EXPECT_EQ(read_safetensors(model / kWeightsFileName).names.front(), "embedding.weight");
  EXPECT_EQ(read_safetensors(model / kWeightsFileName).names[1], "encoder.positions.weight");
}

TEST(ModelDir, SaveRefusesInconsistentParametersAndWritesNothing) {
  const ModelConfig config = small_config();
  auto params = random_parameters(config, 2);
  params.pop_back();
  TempDir dir;
  expect_error(
      [&] { save_model_dir(dir / "m", config, params); },
      {"model.safetensors", "refusing to save", "tensor 'decoder.final_norm.bias' is missing"});
  EXPECT_FALSE(std::filesystem::exists(dir / "m"));
  auto twice = random_parameters(config, 2);
  twice.push_back(twice.front());
  expect_error([&] { save_model_dir(dir / "m", config, twice); },
               {"tensor 'embedding.weight' given twice"});
}

TEST(ModelDir, TheVocabularyMustBeTheOneTheWeightsWereSavedWith) {
  const ModelConfig config = small_config();
  TempDir dir;
  const auto model = dir / "m";
  save_model_dir(model, config, random_parameters(config, 3), std::string("vocabulary A"));
  EXPECT_EQ(file_text(model / kVocabFileName), "vocabulary A");
  const LoadedModel loaded = load_model_dir(model);
  EXPECT_EQ(loaded.metadata.at(kVocabChecksumKey), crc32_hex(crc32_of("vocabulary A", 12)));
  // Another model's vocabulary (or one half-replaced by a failed write) is an error naming both.
  std::ofstream(model / kVocabFileName, std::ios::binary) << "vocabulary B";
  expect_error([&] { load_model_dir(model); },
               {(model / kVocabFileName).string() + " (crc32 " +
                    crc32_hex(crc32_of("vocabulary B", 12)) + ")",
                "is not the vocabulary that " + (model / kWeightsFileName).string() +
                    " was written with (crc32 " + crc32_hex(crc32_of("vocabulary A", 12)) + ")",
                "mixes two models' files"});
  // Without vocab.model the weights load (the commands that need a vocabulary say it is missing).
  std::filesystem::remove(model / kVocabFileName);
  EXPECT_NO_THROW(load_model_dir(model));
  // A model saved without a vocabulary (or by tfm before the checksum) records none: any loads.
  save_model_dir(dir / "old", config, random_parameters(config, 3));
  EXPECT_EQ(load_model_dir(dir / "old").metadata.count(kVocabChecksumKey), 0u);
  std::ofstream(dir / "old" / kVocabFileName, std::ios::binary) << "anything";
  EXPECT_NO_THROW(load_model_dir(dir / "old"));
}

// The names in `dir`, sorted.
std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Files written by this process stop at `bytes` (write() then fails with EFBIG, "File too large",
// as on a full disk) while the guard lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_signal_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limit = previous_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_signal_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_signal_)(int) = nullptr;
};

TEST(ModelDir, SavingReplacesTheWholeDirectoryOrNothing) {
  const ModelConfig config = small_config();
  const auto first = random_parameters(config, 1), second = random_parameters(config, 2);
  TempDir dir;
  const auto model = dir / "m";
  save_model_dir(model, config, first, std::string("vocabulary A"));
  // A write that fails half-way (the weights hit a full disk after vocab.model was written) leaves
  // the old directory whole: its weights, its vocabulary, nothing beside it.
  {
    FileSizeLimit limit(1024);
    expect_error([&] { save_model_dir(model, config, second, std::string("vocabulary B")); },
                 {"model.safetensors", "File too large"});
  }
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"m"});
  EXPECT_EQ(file_text(model / kVocabFileName), "vocabulary A");
  const LoadedModel kept = load_model_dir(model);
  EXPECT_EQ(
      std::memcmp(kept.parameters[0].second.raw(), first[0].second.raw(), first[0].second.nbytes()),
      0);
  // A complete save replaces every file: the old vocab.model does not stay with new weights.
  save_model_dir(dir / "m/", config, second);
  EXPECT_EQ(names_in(model), (std::vector<std::string>{kConfigFileName, kWeightsFileName}));
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"m"});
  EXPECT_EQ(std::memcmp(load_model_dir(model).parameters[0].second.raw(), second[0].second.raw(),
                        second[0].second.nbytes()),
            0);
  // A directory holding anything else is not deleted to make room for a model.
  std::filesystem::create_directory(dir / "notes");
  std::ofstream(dir / "notes" / "todo.txt") << "keep me";
  expect_error([&] { save_model_dir(dir / "notes", config, first); },
               {"cannot save a model to", "notes", "holds 'todo.txt', which is not a model file"});
  EXPECT_EQ(names_in(dir / "notes"), std::vector<std::string>{"todo.txt"});
  std::ofstream(dir / "plain") << "x";
  expect_error([&] { save_model_dir(dir / "plain", config, first); },
               {"plain", "exists and is not a directory"});
}

TEST(ModelDir, MissingTensor) {
  auto tensors = random_parameters(small_config(), 3);
  tensors.erase(tensors.begin() + 5);
  const std::string removed = random_parameters(small_config(), 3)[5].first;
  TempDir dir;
  const auto model = model_with_tensors(dir, tensors);
  expect_error([&] { load_model_dir(model); },
               {(model / kWeightsFileName).string(), "tensor '" + removed + "' is missing"});
}

TEST(ModelDir, ExtraTensors) {
  auto tensors = random_parameters(small_config(), 3);
  tensors.emplace_back("decoder.extra.weight", Tensor::full({2}, 0.5f));
  tensors.emplace_back("zzz", Tensor::full({1}, 0.5f));
  TempDir dir;
  const auto model = model_with_tensors(dir, tensors);
  expect_error([&] { load_model_dir(model); },
               {"model.safetensors", "unexpected tensor 'decoder.extra.weight'", "and 1 more"});
}

TEST(ModelDir, WrongShape) {
  auto tensors = random_parameters(small_config(), 3);
  for (auto& [name, t] : tensors)
    if (name == "encoder.layers.0.ffn.fc1.weight") t = Tensor::full({8, 12}, 0.25f);
  TempDir dir;
  const auto model = model_with_tensors(dir, tensors);
  expect_error(
      [&] { load_model_dir(model); },
      {"model.safetensors: tensor 'encoder.layers.0.ffn.fc1.weight' has shape [8, 12], expected "
       "[12, 8]"});
}

TEST(ModelDir, WrongDtype) {
  auto tensors = random_parameters(small_config(), 3);
  Tensor& last = tensors.back().second;
  Tensor half = Tensor::empty(last.shape(), DType::bf16);
  for (int64_t i = 0; i < half.numel(); ++i) half.data<bf16>()[i] = float_to_bf16(0.5f * i);
  last = half;
  TempDir dir;
  const auto model = model_with_tensors(dir, tensors);
  expect_error(
      [&] { load_model_dir(model); },
      {"model.safetensors", "tensor 'decoder.final_norm.bias' has dtype BF16, expected F32"});
}

TEST(ModelDir, ConfigDisagreesWithWeights) {
  TempDir dir;
  const auto model = dir / "m";
  save_model_dir(model, small_config(), random_parameters(small_config(), 4));
  ModelConfig deeper = small_config();
  deeper.layers = 3;
  save_config(model / kConfigFileName, deeper);
  expect_error(
      [&] { load_model_dir(model); },
      {"model.safetensors", "tensor 'encoder.layers.2.self_attn.q_proj.weight' is missing"});
  ModelConfig wider = small_config();
  wider.vocab_size = 25;
  save_config(model / kConfigFileName, wider);
  expect_error([&] { load_model_dir(model); },
               {"tensor 'embedding.weight' has shape [19, 8], expected [25, 8]"});
}

TEST(ModelDir, MissingFiles) {
  TempDir dir;
  expect_error([&] { load_model_dir(dir / "absent"); }, {"absent", "does not exist"});
  const auto model = dir / "m";
  save_model_dir(model, small_config(), random_parameters(small_config(), 4));
  std::filesystem::remove(model / kWeightsFileName);
  expect_error([&] { load_model_dir(model); }, {"model.safetensors", "No such file or directory"});
  std::filesystem::remove(model / kConfigFileName);
  expect_error([&] { load_model_dir(model); }, {"config.json", "cannot open"});
  std::ofstream(dir / "file") << "x";
  expect_error([&] { load_model_dir(dir / "file"); }, {"is not a model directory"});
}

// A model file that is not a regular file was "no such file" (config.json a directory: "not valid
// JSON"); each is named for what it is, and a FIFO is not opened (it would block).
TEST(ModelDir, FilesThatAreNotRegularFilesAreNamedForWhatTheyAre) {
  TempDir dir;
  const auto model = dir / "m";
  save_model_dir(model, small_config(), random_parameters(small_config(), 4));
  const auto weights = model / kWeightsFileName;
  auto weights_error = [&] { return testing::error_of([&] { load_model_dir(model); }); };
  std::filesystem::remove(weights);
  std::filesystem::create_directory(weights);
  EXPECT_EQ(weights_error(), weights.string() + ": is a directory");
  std::filesystem::remove(weights);
  ASSERT_EQ(::mkfifo(weights.c_str(), 0600), 0);
  EXPECT_EQ(weights_error(), weights.string() + ": is a FIFO (a named pipe), not a regular file");
  std::filesystem::remove(weights);
  std::filesystem::create_symlink("/dev/zero", weights);
  EXPECT_EQ(weights_error(), weights.string() + ": is a device, not a regular file");
  std::filesystem::remove(weights);
  std::filesystem::create_symlink(kWeightsFileName, weights);  // a link to itself
  EXPECT_EQ(weights_error(), weights.string() + ": Too many levels of symbolic links");

  const auto config = model / kConfigFileName;
  std::filesystem::remove(config);
  std::filesystem::create_directory(config);
  EXPECT_EQ(testing::error_of([&] { load_model_dir(model); }),
            config.string() + ": cannot open the model configuration: is a directory");
}

// Runs the built tfm binary; returns its exit status, stdout and stderr.
struct CommandResult {
  int status;
  std::string out, err;
};
CommandResult run_tfm(const std::string& arguments, const TempDir& dir) {
  const auto out = dir / "stdout", err = dir / "stderr";
  const std::string command = std::string("'") + tfm_binary_dir() + "/tfm' " + arguments + " > '" +
                              out.string() + "' 2> '" + err.string() + "'";
  const int raw = std::system(command.c_str());
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

int64_t count_lines(const std::string& text) {
  return std::count(text.begin(), text.end(), '\n');
}

TEST(InfoCommand, PrintsTheCountOfAPreset) {
  TempDir dir;
  const CommandResult run = run_tfm("info --preset base --vocab 37000", dir);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("63,045,632"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("63.05 M"), std::string::npos) << run.out;
  EXPECT_TRUE(run.err.empty()) << run.err;

  const CommandResult json = run_tfm("info --preset big --attention-bias --json --length 30", dir);
  ASSERT_EQ(json.status, 0) << json.err;
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["parameters"]["total"], 214'245'376);
  EXPECT_EQ(parsed["config"]["d_model"], 1024);
  ModelConfig big = preset("big");
  big.attention_bias = true;
  EXPECT_DOUBLE_EQ(parsed["flops"]["per_token"].get<double>(),
                   forward_flops_per_token(big, 30, 30));

  const CommandResult all = run_tfm("info --all-presets --vocab 37000", dir);
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(all.out.find("214,171,648"), std::string::npos);
  EXPECT_EQ(count_lines(all.out), 2 + static_cast<int64_t>(preset_names().size()));
}

TEST(InfoCommand, ReadsAModelDirectory) {
  TempDir dir;
  save_model_dir(dir / "m", small_config(), random_parameters(small_config(), 9));
  const CommandResult run = run_tfm("info --json -m '" + (dir / "m").string() + "'", dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["parameters"]["total"], parameter_count(small_config()));
}

TEST(InfoCommand, ErrorsAreOneLineAndNonZero) {
  TempDir dir;
  for (const std::string& arguments :
       {std::string("info --preset nope"), std::string("info -m '") + (dir / "none").string() + "'",
        std::string("info --vocab abc"), std::string("info --length 0"),
        std::string("info --preset base -m x"), std::string("info --frobnicate")}) {
    SCOPED_TRACE(arguments);
    const CommandResult run = run_tfm(arguments, dir);
    EXPECT_NE(run.status, 0);
    EXPECT_EQ(count_lines(run.err), 1) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
  const CommandResult bad = run_tfm("info --preset nope", dir);
  EXPECT_NE(bad.err.find("unknown preset 'nope'"), std::string::npos) << bad.err;
}

// An invalid configuration is reported once, as one line naming the key, wherever it comes from:
// a preset edited by --vocab (the special ids no longer fit) or a config.json.
TEST(InfoCommand, AnInvalidConfigurationIsOneErrorNamingTheKey) {
  TempDir dir;
  const CommandResult edited = run_tfm("info --preset base --vocab 3", dir);
  EXPECT_EQ(edited.status, 1);
  EXPECT_EQ(count_lines(edited.err), 1) << edited.err;
  EXPECT_NE(edited.err.find("tfm: error: configuration key 'eos_id'"), std::string::npos)
      << edited.err;
  { std::ofstream(dir / "config.json") << R"({"layers": 2, "heads": 0})"; }
  const CommandResult run = run_tfm("info -c '" + (dir / "config.json").string() + "'", dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(count_lines(run.err), 1) << run.err;
  EXPECT_NE(run.err.find("config.json: configuration key 'heads' must be positive"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace tfm::internal
