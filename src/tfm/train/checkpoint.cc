#include "tfm/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "tfm/io/atomic_file.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"

namespace fs = std::filesystem;

namespace tfm {

namespace {

constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "state.json";

std::string step_name(int64_t step) {
  return fmt::format("step-{:09d}", step);
}

// The step of a complete checkpoint folder name, or -1.
int64_t step_of(const fs::path& dir) {
  static const std::regex pattern("step-([0-9]{9,})");
  std::smatch match;
  std::string name = dir.filename().string();
  if (!std::regex_match(name, match, pattern)) return -1;
  return std::stoll(match[1].str());
}

nlohmann::json state_to_json(const TrainingState& s) {
  return {{"step", s.step},
          {"epoch", s.epoch},
          {"batch_in_epoch", s.batch_in_epoch},
          {"seed", s.seed},
          {"extra", s.extra}};
}

TrainingState state_from_json(const nlohmann::json& j, const fs::path& file) {
  try {
    TrainingState s;
    s.step = j.at("step").get<int64_t>();
    s.epoch = j.at("epoch").get<int64_t>();
    s.batch_in_epoch = j.at("batch_in_epoch").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.extra = j.value("extra", nlohmann::json::object());
    return s;
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid training state: {}", file.string(), e.what());
  }
}

void fsync_directory(const fs::path& dir) {
  std::FILE* f = std::fopen(dir.c_str(), "r");
  if (f != nullptr) {
    ::fsync(fileno(f));
    std::fclose(f);
  }
}

}  // namespace

fs::path save_checkpoint(const fs::path& folder, const ModelConfig& config,
                         const nn::NamedTensors& parameters, const Adam& optimizer,
                         const TrainingState& state, const std::vector<fs::path>& extra_files) {
  fs::create_directories(folder);
  const fs::path final_dir = folder / step_name(state.step);
  const fs::path partial =
      folder / (step_name(state.step) + ".partial-" + std::to_string(getpid()));
  fs::remove_all(partial);
  fs::create_directories(partial);

  save_model_dir(partial, config, parameters);
  std::vector<std::pair<std::string, Tensor>> moments;
  for (size_t i = 0; i < parameters.size(); ++i) {
    moments.emplace_back("m." + parameters[i].first, optimizer.first_moments().at(i));
    moments.emplace_back("v." + parameters[i].first, optimizer.second_moments().at(i));
  }
  write_safetensors(partial / kOptimizerFile, moments,
                    {{"steps", std::to_string(optimizer.steps())}});
  for (const fs::path& file : extra_files) fs::copy_file(file, partial / file.filename());
  write_file_atomically(partial / kStateFile, state_to_json(state).dump(2) + "\n");
  fsync_directory(partial);

  // Replacing an existing checkpoint of the same step (a resumed run saving again) keeps the old
  // one until the new one is complete.
  if (fs::exists(final_dir)) fs::remove_all(final_dir);
  fs::rename(partial, final_dir);
  fsync_directory(folder);
  return final_dir;
}

std::vector<fs::path> list_checkpoints(const fs::path& folder) {
  std::vector<std::pair<int64_t, fs::path>> found;
  if (!fs::is_directory(folder)) return {};
  for (const auto& entry : fs::directory_iterator(folder)) {
    int64_t step = step_of(entry.path());
    if (step >= 0 && entry.is_directory() && fs::exists(entry.path() / kStateFile))
      found.emplace_back(step, entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : found) out.push_back(path);
  return out;
}

Checkpoint load_checkpoint(const fs::path& dir, bool with_optimizer) {
  Checkpoint c;
  c.dir = dir;
  LoadedModel model = load_model_dir(dir);
  c.config = model.config;
  c.parameters = std::move(model.parameters);
  const fs::path state_file = dir / kStateFile;
  std::ifstream in(state_file);
  TFM_CHECK(in.good(), "{}: cannot open", state_file.string());
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  TFM_CHECK(!j.is_discarded(), "{}: not valid JSON", state_file.string());
  c.state = state_from_json(j, state_file);
  if (with_optimizer) {
    const fs::path opt_file = dir / kOptimizerFile;
    SafeTensors opt = read_safetensors(opt_file);
    for (const auto& [name, tensor] : c.parameters) {
      const Tensor& m = opt.get("m." + name);
      const Tensor& v = opt.get("v." + name);
      TFM_CHECK(m.shape() == tensor.shape() && v.shape() == tensor.shape(),
                "{}: moments of '{}' have shape {}, expected {}", opt_file.string(), name,
                m.shape().str(), tensor.shape().str());
      c.adam_m.push_back(m);
      c.adam_v.push_back(v);
    }
    auto steps = opt.metadata.find("steps");
    TFM_CHECK(steps != opt.metadata.end(), "{}: no 'steps' in the metadata", opt_file.string());
    c.adam_steps = std::stoll(steps->second);
  }
  return c;
}

std::optional<Checkpoint> load_latest_checkpoint(
    const fs::path& folder, const std::function<void(const std::string&)>& warn) {
  std::vector<fs::path> all = list_checkpoints(folder);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return load_checkpoint(*it);
    } catch (const Error& e) {
      warn(fmt::format("skipping damaged checkpoint {}: {}", it->string(), e.what()));
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const fs::path& folder, int keep) {
  if (!fs::is_directory(folder)) return;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().filename().string().find(".partial-") != std::string::npos)
      fs::remove_all(entry.path());
  std::vector<fs::path> all = list_checkpoints(folder);
  for (size_t i = 0; keep >= 0 && i + static_cast<size_t>(keep) < all.size(); ++i)
    fs::remove_all(all[i]);
}

void average_models(const std::vector<fs::path>& inputs, const fs::path& out) {
  TFM_CHECK(!inputs.empty(), "no models to average");
  LoadedModel first = load_model_dir(inputs.front());
  // Sum in double so that averaging many checkpoints loses nothing to f32 rounding.
  std::vector<std::vector<double>> sums;
  for (const auto& [name, tensor] : first.parameters) {
    std::vector<float> values = tensor.to_floats();
    sums.emplace_back(values.begin(), values.end());
  }
  for (size_t k = 1; k < inputs.size(); ++k) {
    LoadedModel other = load_model_dir(inputs[k]);
    TFM_CHECK(other.config == first.config, "{}: configuration differs from {}", inputs[k].string(),
              inputs.front().string());
    for (size_t i = 0; i < sums.size(); ++i) {
      const float* p = other.parameters[i].second.data<float>();
      for (size_t j = 0; j < sums[i].size(); ++j) sums[i][j] += p[j];
    }
  }
  nn::NamedTensors averaged;
  const double n = static_cast<double>(inputs.size());
  for (size_t i = 0; i < sums.size(); ++i) {
    Tensor t = Tensor::empty(first.parameters[i].second.shape());
    float* p = t.data<float>();
    for (size_t j = 0; j < sums[i].size(); ++j) p[j] = static_cast<float>(sums[i][j] / n);
    averaged.emplace_back(first.parameters[i].first, t);
  }
  save_model_dir(out, first.config, averaged);
  const fs::path vocab = inputs.back() / kVocabFileName;
  if (fs::exists(vocab))
    fs::copy_file(vocab, out / kVocabFileName, fs::copy_options::overwrite_existing);
}

}  // namespace tfm
