#include "tfm/model/model_dir.h"

#include "tfm/core/error.h"
#include "tfm/io/atomic_dir.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/parameters.h"

namespace tfm::internal {

namespace {

// vocab.model's checksum key is "vocab_crc32" (as before the imported vocabularies); the other
// vocabulary files' are "vocab_crc32:<file>".
std::string vocabulary_checksum_key(const std::string& file) {
  return file == kVocabFileName ? std::string(kVocabChecksumKey)
                                : std::string(kVocabChecksumKey) + ":" + file;
}

bool is_vocabulary_file(const std::string& name) {
  return name == kVocabFileName || name == kSourceSpmFileName || name == kTargetSpmFileName ||
         name == kVocabTableFileName;
}

VocabularyFiles as_files(const std::optional<std::string>& vocabulary) {
  if (!vocabulary) return {};
  return {{kVocabFileName, *vocabulary}};
}

std::string more(size_t extra, const char* what) {
  return extra == 0 ? "" : fmt::format(" (and {} more {})", extra, what);
}

// The vocabulary must be the one the weights were written with (another model's vocab.model of
// the same size would translate garbage). Models written before the checksum load unchecked.
void check_vocabulary(const std::filesystem::path& dir,
                      const std::map<std::string, std::string>& metadata) {
  for (const char* file :
       {kVocabFileName, kSourceSpmFileName, kTargetSpmFileName, kVocabTableFileName}) {
    const auto recorded = metadata.find(vocabulary_checksum_key(file));
    const std::filesystem::path vocab = dir / file;
    std::error_code ec;
    if (recorded == metadata.end() || !std::filesystem::exists(vocab, ec)) continue;
    const std::string actual = crc32_hex(crc32_of_file(vocab));
    TFM_CHECK(actual == recorded->second,
              "{} (crc32 {}) is not the vocabulary that {} was written with (crc32 {}): the "
              "directory mixes two models' files",
              vocab.string(), actual, (dir / kWeightsFileName).string(), recorded->second);
  }
}

}  // namespace

void check_finite(const std::filesystem::path& file,
                  const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, tensor] : tensors) {
    const int64_t at = first_non_finite(tensor);
    if (at >= 0)
      fail("{}: tensor '{}' holds a non-finite value ({}) at element {}: the model is unusable",
           file.string(), name, tensor.to_floats()[static_cast<size_t>(at)], at);
  }
}

const Tensor& LoadedModel::parameter(const std::string& name) const {
  for (const auto& [n, t] : parameters)
    if (n == name) return t;
  fail("the model has no parameter named '{}'", name);
}

std::vector<std::pair<std::string, Tensor>> check_parameters(
    const ModelConfig& config, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, tensor] : tensors)
    TFM_CHECK(by_name.emplace(name, tensor).second, "tensor '{}' given twice", name);

  const std::vector<ParameterSpec> specs = parameter_specs(config);
  std::vector<std::string> missing;
  for (const ParameterSpec& spec : specs)
    if (!by_name.count(spec.name)) missing.push_back(spec.name);
  if (!missing.empty())
    fail("tensor '{}' is missing{}", missing.front(), more(missing.size() - 1, "missing"));

  std::vector<std::pair<std::string, Tensor>> ordered;
  for (const ParameterSpec& spec : specs) {
    Tensor& tensor = by_name.at(spec.name);
    TFM_CHECK(tensor.defined(), "tensor '{}' is undefined", spec.name);
    TFM_CHECK(tensor.shape() == spec.shape, "tensor '{}' has shape {}, expected {}", spec.name,
              tensor.shape().str(), spec.shape.str());
    TFM_CHECK(tensor.dtype() == DType::f32, "tensor '{}' has dtype {}, expected F32", spec.name,
              safetensors_dtype_name(tensor.dtype()));
    ordered.emplace_back(spec.name, tensor);
    by_name.erase(spec.name);
  }
  if (!by_name.empty())
    fail("unexpected tensor '{}': not a parameter of this configuration{}", by_name.begin()->first,
         more(by_name.size() - 1, "unexpected"));
  return ordered;
}

namespace {

std::vector<std::pair<std::string, Tensor>> checked_for_saving(
    const std::filesystem::path& dir, const ModelConfig& config,
    const std::vector<std::pair<std::string, Tensor>>& parameters) {
  try {
    return check_parameters(config, parameters);
  } catch (const Error& e) {
    fail("{}: refusing to save: {}", (dir / kWeightsFileName).string(), e.what());
  }
}

// Refuses to replace `target` (shown as `dir`) unless it is missing or a directory of model files
// only: replacing deletes what the old directory held.
void check_replaceable(const std::filesystem::path& dir, const std::filesystem::path& target) {
  std::error_code ec;
  if (!std::filesystem::exists(target, ec)) return;
  TFM_CHECK(std::filesystem::is_directory(target, ec),
            "cannot save a model to '{}': it exists and is not a directory", dir.string());
  for (const auto& entry : std::filesystem::directory_iterator(target, ec)) {
    const std::string name = entry.path().filename().string();
    bool ours = false;
    for (const char* file : {kConfigFileName, kWeightsFileName, kVocabFileName, kSourceSpmFileName,
                             kTargetSpmFileName, kVocabTableFileName})
      ours = ours || name == file || name.starts_with(std::string(file) + ".tmp.");
    TFM_CHECK(ours,
              "cannot save a model to '{}': it holds '{}', which is not a model file, and saving "
              "replaces the whole directory (remove it, or save elsewhere)",
              dir.string(), name);
  }
  TFM_CHECK(!ec, "cannot save a model to '{}': cannot list it: {}", dir.string(), ec.message());
}

}  // namespace

void write_model_files(const std::filesystem::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, Tensor>>& parameters,
                       const std::optional<std::string>& vocabulary) {
  write_model_files(dir, config, parameters, as_files(vocabulary));
}

void write_model_files(const std::filesystem::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, Tensor>>& parameters,
                       const VocabularyFiles& vocabulary) {
  const std::vector<std::pair<std::string, Tensor>> ordered =
      checked_for_saving(dir, config, parameters);
  std::map<std::string, std::string> metadata = {{"producer", "tfm"}};
  for (const auto& [file, bytes] : vocabulary) {
    TFM_CHECK(is_vocabulary_file(file), "{}: not a vocabulary file of a model directory",
              (dir / file).string());
    write_file_atomically(dir / file, bytes);
    metadata[vocabulary_checksum_key(file)] = crc32_hex(crc32_of(bytes.data(), bytes.size()));
  }
  write_safetensors(dir / kWeightsFileName, ordered, metadata);
  save_config(dir / kConfigFileName, config);
}

void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters,
                    const std::optional<std::string>& vocabulary) {
  save_model_dir(dir, config, parameters, as_files(vocabulary));
}

void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters,
                    const VocabularyFiles& vocabulary) {
  checked_for_saving(dir, config, parameters);
  std::error_code ec;
  // Absolute, links resolved ("out/", "model/.", a link to a directory): the renames below act
  // on the directory itself.
  std::filesystem::path target = std::filesystem::absolute(dir, ec);
  if (std::filesystem::path resolved = std::filesystem::weakly_canonical(target, ec); !ec)
    target = resolved;
  if (!target.has_filename()) target = target.parent_path();
  check_replaceable(dir, target);
  std::filesystem::create_directories(target.parent_path(), ec);
  TFM_CHECK(!ec, "cannot create the model directory '{}': {}", dir.string(), ec.message());
  const std::filesystem::path built = sibling_path(target, "partial");
  std::filesystem::remove_all(built, ec);
  std::filesystem::create_directory(built, ec);
  TFM_CHECK(!ec, "cannot create the model directory '{}': {}", built.string(), ec.message());
  try {
    write_model_files(built, config, parameters, vocabulary);
    sync_directory(built);
    replace_directory(built, target);
  } catch (...) {
    std::filesystem::remove_all(built, ec);  // the old directory stays as it was
    throw;
  }
}

LoadedModel load_model_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  TFM_CHECK(std::filesystem::exists(dir, ec), "model directory '{}' does not exist", dir.string());
  TFM_CHECK(std::filesystem::is_directory(dir, ec), "'{}' is not a model directory", dir.string());
  LoadedModel model;
  model.config = load_config(dir / kConfigFileName);
  const std::filesystem::path weights = dir / kWeightsFileName;
  SafeTensors file = read_safetensors(weights);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : file.names) tensors.emplace_back(name, file.tensors.at(name));
  try {
    model.parameters = check_parameters(model.config, tensors);
  } catch (const Error& e) {
    fail("{}: {}", weights.string(), e.what());
  }
  check_finite(weights, model.parameters);
  check_vocabulary(dir, file.metadata);
  model.metadata = std::move(file.metadata);
  model.checksums_verified = file.checksums_verified;
  return model;
}

}  // namespace tfm::internal
