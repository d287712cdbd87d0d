#include "tfm/model/model_dir.h"

#include "tfm/core/error.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/parameters.h"

namespace tfm {

namespace {

std::string more(size_t extra, const char* what) {
  return extra == 0 ? "" : fmt::format(" (and {} more {})", extra, what);
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

void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters) {
  const std::filesystem::path weights = dir / kWeightsFileName;
  std::vector<std::pair<std::string, Tensor>> ordered;
  try {
    ordered = check_parameters(config, parameters);
  } catch (const Error& e) {
    fail("{}: refusing to save: {}", weights.string(), e.what());
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TFM_CHECK(!ec, "cannot create the model directory '{}': {}", dir.string(), ec.message());
  write_safetensors(weights, ordered, {{"producer", "tfm"}});
  save_config(dir / kConfigFileName, config);
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
  model.metadata = std::move(file.metadata);
  model.checksums_verified = file.checksums_verified;
  return model;
}

}  // namespace tfm
