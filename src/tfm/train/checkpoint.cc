#include "tfm/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>

#include "tfm/io/atomic_dir.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/io/text_reader.h"
#include "tfm/model/model_dir.h"

namespace fs = std::filesystem;

namespace tfm::internal {

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
  const std::string digits = match[1].str();
  int64_t step = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  return error == std::errc() && end == digits.data() + digits.size() ? step : -1;  // too large
}

constexpr const char* kStateChecksum = "crc32";

// The CRC-32 of state.json's canonical text (compact, keys sorted: nlohmann's objects are) without
// its own checksum: a flipped bit anywhere in the state changes it.
std::string state_checksum(nlohmann::json j) {
  j.erase(kStateChecksum);
  const std::string text = j.dump();
  return crc32_hex(crc32_of(text.data(), text.size()));
}

nlohmann::json state_to_json(const TrainingState& s) {
  nlohmann::json j = {{"step", s.step},
                      {"epoch", s.epoch},
                      {"batch_in_epoch", s.batch_in_epoch},
                      {"seed", s.seed},
                      {"extra", s.extra.is_null() ? nlohmann::json::object() : s.extra}};
  j[kStateChecksum] = state_checksum(j);
  return j;
}

// The field `key` of `j` as a non-negative integer; `where` names it in the error.
int64_t count_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  TFM_CHECK(j.contains(key), "no '{}'", where + key);
  const nlohmann::json& v = j.at(key);
  TFM_CHECK(v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0) &&
                v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX),
            "'{}' must be a non-negative integer, got {}", where + key, v.dump());
  return v.get<int64_t>();
}

// The trainer's fields (train/run_state.cc writes them), each checked when present: a wrong type
// would otherwise surface later as a JSON exception or a wrong resume.
void check_extra(const nlohmann::json& extra, int64_t step) {
  TFM_CHECK(extra.is_object(), "'extra' must be an object, got {}", extra.dump());
  if (extra.contains("elapsed_s")) {
    const nlohmann::json& v = extra["elapsed_s"];
    TFM_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0,
              "'extra.elapsed_s' must be a non-negative number, got {}", v.dump());
  }
  if (extra.contains("batcher_fingerprint"))
    TFM_CHECK(extra["batcher_fingerprint"].is_number_unsigned(),
              "'extra.batcher_fingerprint' must be an unsigned integer, got {}",
              extra["batcher_fingerprint"].dump());
  for (const char* key : {"max_tokens", "accumulate", "fitted_warmup", "decay_end", "decay_from"})
    if (extra.contains(key))
      TFM_CHECK(count_field(extra, key, "extra.") >= 1, "'extra.{}' must be at least 1, got {}",
                key, extra[key].dump());
  if (extra.contains("decay_from_progress")) {
    const nlohmann::json& v = extra["decay_from_progress"];
    TFM_CHECK(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1,
              "'extra.decay_from_progress' must be a number from 0 to 1, got {}", v.dump());
  }
  if (extra.contains("steps_by_products")) {
    const nlohmann::json& by = extra["steps_by_products"];
    TFM_CHECK(by.is_object(), "'extra.steps_by_products' must be an object, got {}", by.dump());
    int64_t total = 0;
    for (const auto& [products, count] : by.items()) {
      total += count_field(by, products, "extra.steps_by_products.");
      TFM_CHECK(total <= step, "'extra.steps_by_products' counts more updates than 'step' ({})",
                step);
    }
    TFM_CHECK(total == step, "'extra.steps_by_products' counts {} updates, 'step' is {}", total,
              step);
  }
}

TrainingState state_from_json(const nlohmann::json& j) {
  TFM_CHECK(j.is_object(), "not a JSON object");
  if (j.contains(kStateChecksum)) {
    // Written by tfm before state.json had a checksum: loaded unchecked, as safetensors files are.
    const nlohmann::json& stored = j[kStateChecksum];
    const std::string computed = state_checksum(j);
    TFM_CHECK(stored.is_string() && stored.get<std::string>() == computed,
              "fails its checksum (crc32 {}, stored {}): the file is damaged", computed,
              stored.dump());
  }
  TrainingState s;
  s.step = count_field(j, "step", "");
  s.epoch = count_field(j, "epoch", "");
  s.batch_in_epoch = count_field(j, "batch_in_epoch", "");
  TFM_CHECK(j.contains("seed") && j["seed"].is_number_unsigned(),
            "'seed' must be a non-negative integer, got {}",
            j.value("seed", nlohmann::json()).dump());
  s.seed = j["seed"].get<uint64_t>();
  s.extra = j.value("extra", nlohmann::json::object());
  check_extra(s.extra, s.step);
  return s;
}

void remove_or_fail(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  TFM_CHECK(!ec, "{}: cannot remove: {}", path.string(), ec.message());
}

void create_directories_or_fail(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TFM_CHECK(!ec, "{}: cannot create the directory: {}", dir.string(), ec.message());
}

void rename_or_fail(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  TFM_CHECK(!ec, "cannot rename {} to {}: {}", from.string(), to.filename().string(), ec.message());
}

// Through our own writer rather than fs::copy_file, whose kernel copy reports a full disk as an
// I/O error: a full disk must say "No space left on device".
void copy_file_or_fail(const fs::path& from, const fs::path& to) {
  write_file_atomically(to, read_file_bytes(from));
}

// Parses the whole of `text` as a non-negative integer, or fails naming `what`.
int64_t parse_count(const std::string& text, const std::string& what) {
  int64_t value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  TFM_CHECK(error == std::errc() && end == text.data() + text.size() && value >= 0 && !text.empty(),
            "{} is '{}', not a non-negative integer", what, text);
  return value;
}

// A name for moving `dir` aside that is not taken: "step-N.damaged", "step-N.damaged-2"...
fs::path damaged_name(const fs::path& dir) {
  fs::path candidate = dir;
  candidate += ".damaged";
  for (int k = 2; fs::exists(candidate); ++k) {
    candidate = dir;
    candidate += fmt::format(".damaged-{}", k);
  }
  return candidate;
}

}  // namespace

fs::path save_checkpoint(const fs::path& folder, const ModelConfig& config,
                         const nn::NamedTensors& parameters, const Adam& optimizer,
                         const TrainingState& state, const std::vector<fs::path>& extra_files,
                         const nn::NamedTensors& moving_average) {
  const fs::path final_dir = folder / step_name(state.step);
  const fs::path partial =
      folder / (step_name(state.step) + ".partial-" + std::to_string(getpid()));
  remove_or_fail(partial);
  create_directories_or_fail(partial);

  // The vocabulary is the model's: written with it, its checksum recorded in model.safetensors.
  std::optional<std::string> vocabulary;
  std::vector<fs::path> others;
  for (const fs::path& file : extra_files) {
    if (file.filename() == kVocabFileName)
      vocabulary = read_file_bytes(file);
    else
      others.push_back(file);
  }
  write_model_files(partial, config, parameters, vocabulary);
  if (!moving_average.empty()) {
    create_directories_or_fail(partial / kMovingAverageDir);
    write_model_files(partial / kMovingAverageDir, config, moving_average, vocabulary);
    sync_directory(partial / kMovingAverageDir);
  }
  std::vector<std::pair<std::string, Tensor>> moments;
  for (size_t i = 0; i < parameters.size(); ++i) {
    moments.emplace_back("m." + parameters[i].first, optimizer.first_moments().at(i));
    moments.emplace_back("v." + parameters[i].first, optimizer.second_moments().at(i));
  }
  write_safetensors(partial / kOptimizerFile, moments,
                    {{"steps", std::to_string(optimizer.steps())}});
  for (const fs::path& file : others) copy_file_or_fail(file, partial / file.filename());
  write_file_atomically(partial / kStateFile, state_to_json(state).dump(2) + "\n");
  sync_directory(partial);

  // Replacing an existing checkpoint of the same step (a resumed run saving again) keeps the old
  // one until the new one is complete; a kill between the renames leaves step-N.deleting-<pid>,
  // which clean_checkpoint_folder removes.
  replace_directory(partial, final_dir);
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

std::vector<fs::path> newest_checkpoints(const fs::path& folder, int64_t count) {
  TFM_CHECK(count >= 1, "the number of checkpoints must be at least 1, got {}", count);
  TFM_CHECK(fs::is_directory(folder), "{}: no such directory", folder.string());
  std::vector<fs::path> all = list_checkpoints(folder);
  TFM_CHECK(!all.empty(), "{}: no checkpoints", folder.string());
  const size_t take = std::min(all.size(), static_cast<size_t>(count));
  all.erase(all.begin(), all.end() - static_cast<std::ptrdiff_t>(take));
  return all;
}

TrainingState load_training_state(const fs::path& dir) {
  const fs::path state_file = dir / kStateFile;
  std::ifstream in(state_file);
  TFM_CHECK(in.good(), "{}: cannot open: {}", state_file.string(), std::strerror(errno));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  TFM_CHECK(!j.is_discarded(), "{}: not valid JSON", state_file.string());
  TrainingState state;
  try {
    state = state_from_json(j);
  } catch (const Error& e) {
    fail("{}: invalid training state: {}", state_file.string(), e.what());
  }
  // A step-N folder holds the state of update N: another step is an altered or misplaced file.
  const int64_t folder_step = step_of(dir);
  TFM_CHECK(folder_step < 0 || folder_step == state.step,
            "{}: invalid training state: 'step' is {}, but the folder is {}", state_file.string(),
            state.step, dir.filename().string());
  return state;
}

Checkpoint load_checkpoint(const fs::path& dir, bool with_optimizer) {
  Checkpoint c;
  c.dir = dir;
  LoadedModel model = load_model_dir(dir);
  c.config = model.config;
  c.parameters = std::move(model.parameters);
  c.state = load_training_state(dir);
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
    std::vector<std::pair<std::string, Tensor>> moments;
    for (const auto& [name, tensor] : opt.tensors) moments.emplace_back(name, tensor);
    check_finite(opt_file, moments);
    auto steps = opt.metadata.find("steps");
    TFM_CHECK(steps != opt.metadata.end(), "{}: no 'steps' in the metadata", opt_file.string());
    c.adam_steps = parse_count(steps->second, opt_file.string() + ": the metadata's 'steps'");
    if (fs::exists(dir / kMovingAverageDir)) {
      LoadedModel average = load_model_dir(dir / kMovingAverageDir);
      TFM_CHECK(average.config == c.config,
                "{}: the moving average's configuration differs from the model's",
                (dir / kMovingAverageDir).string());
      c.moving_average = std::move(average.parameters);
    }
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
      // Moved aside, so that it neither counts among the checkpoints kept nor is tried again.
      const fs::path aside = damaged_name(*it);
      std::error_code ec;
      fs::rename(*it, aside, ec);
      warn(fmt::format("damaged checkpoint {}: {}; {}", it->string(), e.what(),
                       ec ? "cannot move it aside: " + ec.message()
                          : "moved aside to " + aside.filename().string()));
    }
  }
  return std::nullopt;
}

void clean_checkpoint_folder(const fs::path& folder,
                             const std::function<void(const std::string&)>& warn) {
  if (!fs::is_directory(folder)) return;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    const bool unfinished =
        name.find(".partial-") != std::string::npos || name.find(".deleting-") != std::string::npos;
    // A final step-N folder always holds state.json (it is renamed in complete), so one without
    // it is what a kill during pruning left.
    const bool half_deleted = step_of(entry.path()) >= 0 && entry.is_directory() &&
                              !fs::exists(entry.path() / kStateFile);
    if (unfinished || half_deleted) leftovers.push_back(entry.path());
  }
  for (const fs::path& path : leftovers) {
    warn(fmt::format("removing {}, left by an interrupted run", path.string()));
    remove_or_fail(path);
  }
}

void prune_checkpoints(const fs::path& folder, int keep) {
  if (!fs::is_directory(folder)) return;
  clean_checkpoint_folder(folder, [](const std::string&) {});
  if (keep < 0) return;
  std::vector<fs::path> all = list_checkpoints(folder);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    // Renamed first: a kill during the deletion leaves a folder that is plainly not a checkpoint.
    const fs::path doomed =
        folder / (all[i].filename().string() + ".deleting-" + std::to_string(getpid()));
    rename_or_fail(all[i], doomed);
    remove_or_fail(doomed);
  }
}

namespace {

// The bytes' hash of a model directory's vocab.model, or "" when it has none.
std::string vocabulary_hash(const fs::path& model_dir) {
  const fs::path vocab = model_dir / kVocabFileName;
  if (!fs::exists(vocab)) return "";
  return fmt::format("{}/{}", crc32_hex(crc32_of_file(vocab)), fs::file_size(vocab));
}

}  // namespace

void average_models(const std::vector<fs::path>& inputs, const fs::path& out) {
  TFM_CHECK(!inputs.empty(), "no models to average");
  // Models of one configuration but different vocabularies (BPE and unigram of one size) have the
  // same shapes; their average would be garbage, so the vocabularies must be the same file.
  const std::string vocab_hash = vocabulary_hash(inputs.front());
  for (size_t k = 1; k < inputs.size(); ++k) {
    const std::string other = vocabulary_hash(inputs[k]);
    if (other == vocab_hash) continue;
    if (vocab_hash.empty() || other.empty())
      fail("{} has a {} but {} has none: cannot tell whether their vocabularies agree",
           (vocab_hash.empty() ? inputs[k] : inputs.front()).string(), kVocabFileName,
           (vocab_hash.empty() ? inputs.front() : inputs[k]).string());
    fail("{}/{} differs from {}/{}: models with different vocabularies cannot be averaged",
         inputs[k].string(), kVocabFileName, inputs.front().string(), kVocabFileName);
  }
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
  // All or nothing: a failure (a full disk) leaves `out` as it was.
  const fs::path vocab = inputs.back() / kVocabFileName;
  save_model_dir(
      out, first.config, averaged,
      fs::exists(vocab) ? std::optional<std::string>(read_file_bytes(vocab)) : std::nullopt);
}

}  // namespace tfm::internal
