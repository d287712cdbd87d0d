#include "tfm/train/run_vocab.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tfm/io/atomic_file.h"
#include "tfm/io/checksum.h"
#include "tfm/model/model_dir.h"

namespace fs = std::filesystem;

namespace tfm::internal {

namespace {

constexpr const char* kRecordFileName = "vocab.recipe.json";

// JSON text that never throws on invalid UTF-8 (a path given as raw bytes).
std::string shown(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json file_record(const std::string& path, bool with_contents) {
  std::error_code ec;
  const auto bytes = fs::file_size(path, ec);
  TFM_CHECK(!ec, "{}: cannot read the training file: {}", path, ec.message());
  nlohmann::json record = {{"path", path}, {"bytes", bytes}};
  if (with_contents) record["crc32"] = crc32_hex(crc32_of_file(path));
  return record;
}

// What the vocabulary is learned from. Without `with_contents` (a resumed run, whose data the
// batcher's fingerprint already guards) the training files are not read.
nlohmann::json vocabulary_record(const TrainRecipe& recipe, bool with_contents) {
  return {{"vocab_type", recipe.vocab_type},
          {"vocab_size", recipe.vocab_size},
          {"vocab_sample", recipe.vocab_sample},
          {"seed", recipe.seed},
          {"train_source", file_record(recipe.train_source, with_contents)},
          {"train_target", file_record(recipe.train_target, with_contents)}};
}

// The differences between the recorded and the wanted record, as "data.vocab_size 8000 -> 10000,
// data.train_source's contents"; empty when they agree.
std::string differences(const nlohmann::json& recorded, const nlohmann::json& wanted,
                        bool with_contents) {
  std::vector<std::string> changed;
  for (const char* key : {"vocab_type", "vocab_size", "vocab_sample", "seed"}) {
    // A record written before data.vocab_sample existed learned from every sentence.
    const nlohmann::json absent =
        std::string(key) == "vocab_sample" ? nlohmann::json(0) : nlohmann::json();
    const nlohmann::json old_value = recorded.value(key, absent);
    if (old_value != wanted[key])
      changed.push_back(fmt::format(
          "{} {} -> {}", std::string(key) == "seed" ? "seed" : std::string("data.") + key,
          shown(old_value), shown(wanted[key])));
  }
  for (const char* key : {"train_source", "train_target"}) {
    const nlohmann::json old_file = recorded.value(key, nlohmann::json::object());
    const nlohmann::json& new_file = wanted[key];
    if (old_file.value("path", "") != new_file["path"])
      changed.push_back(fmt::format("data.{} {} -> {}", key, old_file.value("path", "?"),
                                    new_file["path"].get<std::string>()));
    else if (old_file.value("bytes", -1) != new_file["bytes"] ||
             (with_contents && old_file.value("crc32", "") != new_file["crc32"]))
      changed.push_back(fmt::format("the contents of {}", new_file["path"].get<std::string>()));
  }
  std::string text;
  for (const std::string& c : changed) text += (text.empty() ? "" : ", ") + c;
  return text;
}

void learn(const TrainRecipe& recipe, const fs::path& run_dir, const nlohmann::json& record,
           const std::function<void(const std::string&)>& say) {
  // The record goes first and comes back last: a vocabulary cut short by a kill has none.
  std::error_code ignored;
  fs::remove(run_dir / kRecordFileName, ignored);
  data::VocabTrainOptions options;
  options.inputs = {recipe.train_source, recipe.train_target};
  options.output_prefix = run_dir / "vocab";
  options.model_type = recipe.vocab_type;
  options.vocab_size = recipe.vocab_size;
  options.seed = static_cast<uint32_t>(recipe.seed);
  options.input_sentence_size = recipe.vocab_sample;
  say(fmt::format("learning a {} vocabulary of {} from {}{} and {}", recipe.vocab_type,
                  recipe.vocab_size,
                  recipe.vocab_sample > 0
                      ? fmt::format("at most {} sentences sampled from ", recipe.vocab_sample)
                      : std::string(),
                  recipe.train_source, recipe.train_target));
  data::train_vocabulary(options, say);
  write_file_atomically(
      run_dir / kRecordFileName,
      record.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

data::Vocabulary prepare_run_vocabulary(const TrainRecipe& recipe, const fs::path& run_dir,
                                        bool has_checkpoints,
                                        const std::function<void(const std::string&)>& say) {
  if (!recipe.vocab.empty()) {
    TFM_CHECK(fs::exists(recipe.vocab), "{}: no such vocabulary (data.vocab)", recipe.vocab);
    return data::Vocabulary(recipe.vocab);
  }
  const fs::path path = run_dir / kVocabFileName;
  const fs::path record_path = run_dir / kRecordFileName;
  const bool with_contents = !has_checkpoints;
  const nlohmann::json wanted = vocabulary_record(recipe, with_contents);
  if (!fs::exists(path)) {
    learn(recipe, run_dir, with_contents ? wanted : vocabulary_record(recipe, true), say);
    return data::Vocabulary(path);
  }
  std::string changed;
  std::ifstream in(record_path);
  const nlohmann::json recorded =
      in.is_open() ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  if (recorded.is_object()) {
    changed = differences(recorded, wanted, with_contents);
  } else if (has_checkpoints) {
    // A run of an older tfm: check_checkpoint_vocabulary still ties it to its checkpoints.
    return data::Vocabulary(path);
  } else {
    changed = fmt::format("no readable record of what it was learned from in {}",
                          record_path.filename().string());
  }
  if (changed.empty()) return data::Vocabulary(path);
  TFM_CHECK(!has_checkpoints,
            "{}: the run's vocabulary does not match the recipe ({}), and its checkpoints were "
            "trained with it: restore the recipe, or start a new run_dir",
            path.string(), changed);
  say(fmt::format("{} is stale ({}): learning it again", path.string(), changed));
  learn(recipe, run_dir, wanted, say);
  return data::Vocabulary(path);
}

void check_checkpoint_vocabulary(const data::Vocabulary& vocab, const fs::path& checkpoint_dir) {
  const fs::path theirs = checkpoint_dir / kVocabFileName;
  if (!fs::exists(theirs)) return;  // a checkpoint written without one (tests, other tools)
  TFM_CHECK(data::Vocabulary(theirs).hash() == vocab.hash(),
            "{} differs from {}, the vocabulary this checkpoint was trained with: resume needs the "
            "same vocabulary",
            vocab.path().string(), theirs.string());
}

}  // namespace tfm::internal
