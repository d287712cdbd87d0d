#include "tfm/train/recipe.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/io/key_table.h"
#include "tfm/io/text_reader.h"
#include "tfm/ops/autocast.h"
#include "tfm/train/schedule.h"

namespace tfm::internal {

namespace {

constexpr double kMaxMinutes = 1e7;
constexpr int kMaxThreads = 4096;

int64_t parse_int(const std::string& key, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  TFM_CHECK(!text.empty() && *end == '\0' && errno == 0, "'{}' must be an integer, got '{}'", key,
            text);
  return v;
}

double parse_double(const std::string& key, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  TFM_CHECK(!text.empty() && *end == '\0', "'{}' must be a number, got '{}'", key, text);
  // strtod reads "inf" and "nan", and gives ERANGE for 1e400 (and for 1e-400, which underflows).
  TFM_CHECK(errno == 0 && std::isfinite(v), "'{}' must be a finite number in range, got '{}'", key,
            text);
  return v;
}

// A model key's value becomes a JSON number when it reads as one: it must be finite (YAML's
// spellings .inf and .nan included).
void check_model_value(const std::string& key, const std::string& text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  TFM_CHECK(lower != ".inf" && lower != "+.inf" && lower != "-.inf" && lower != ".nan",
            "'{}' must be a finite number in range, got '{}'", key, text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == '\0')
    TFM_CHECK(errno == 0 && std::isfinite(v), "'{}' must be a finite number in range, got '{}'",
              key, text);
}

bool parse_bool(const std::string& key, const std::string& text) {
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  fail("'{}' must be true or false, got '{}'", key, text);
}

// Replaces ${VAR} with the environment variable's value.
std::string expand_environment(const std::string& key, const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = text.find("${", i);
    if (start == std::string::npos) {
      out += text.substr(i);
      break;
    }
    size_t end = text.find('}', start);
    TFM_CHECK(end != std::string::npos, "'{}': unterminated ${{ in '{}'", key, text);
    std::string name = text.substr(start + 2, end - start - 2);
    const char* value = std::getenv(name.c_str());
    TFM_CHECK(value != nullptr, "'{}' uses ${{{}}}, which is not set in the environment", key,
              name);
    out += text.substr(i, start - i) + value;
    i = end + 1;
  }
  return out;
}

using RecipeRow = KeyRow<TrainRecipe, std::string>;
using Setter = decltype(RecipeRow::set);

template <typename Member>
Setter integer(Member member) {
  return [member](TrainRecipe& r, const std::string& k, const std::string& v) {
    r.*member = parse_int(k, v);
  };
}
// A positive integer, or `auto` (kAutoBatch): data.max_tokens, data.accumulate.
template <typename Member>
Setter integer_or_auto(Member member) {
  return [member](TrainRecipe& r, const std::string& k, const std::string& v) {
    if (v == "auto") {
      r.*member = kAutoBatch;
      return;
    }
    char* end = nullptr;
    errno = 0;
    const long long value = std::strtoll(v.c_str(), &end, 10);
    TFM_CHECK(!v.empty() && *end == '\0' && errno == 0 && value >= 1,
              "'{}' must be a positive integer or auto, got '{}'", k, v);
    r.*member = value;
  };
}
template <typename Member>
Setter number(Member member) {
  return [member](TrainRecipe& r, const std::string& k, const std::string& v) {
    r.*member = parse_double(k, v);
  };
}
template <typename Member>
Setter boolean(Member member) {
  return [member](TrainRecipe& r, const std::string& k, const std::string& v) {
    r.*member = parse_bool(k, v);
  };
}
template <typename Member>
Setter text(Member member) {
  return [member](TrainRecipe& r, const std::string& k, const std::string& v) {
    r.*member = expand_environment(k, v);
  };
}

// The model section takes every configuration key (the rows of config.json's table) but those the
// vocabulary decides; each value is kept as text and typed by TrainRecipe::model_config.
std::vector<RecipeRow> model_rows() {
  std::vector<RecipeRow> rows;
  for (std::string_view key : config_keys()) {
    if (key == "vocab_size" || key.ends_with("_id")) continue;
    rows.push_back(
        {"model." + std::string(key),
         [field = std::string(key)](TrainRecipe& r, const std::string& k, const std::string& v) {
           check_model_value(k, v);
           r.model_overrides[field] = v;
         },
         {}});
  }
  return rows;
}

// Every "section.key" of a recipe (docs/TRAINING.md), in documentation order.
const KeyTable<TrainRecipe, std::string>& recipe_table() {
  static const KeyTable<TrainRecipe, std::string> table = [] {
    std::vector<RecipeRow> rows = {
        {"model.preset", text(&TrainRecipe::preset), {}},
        {"data.train_source", text(&TrainRecipe::train_source), {}},
        {"data.train_target", text(&TrainRecipe::train_target), {}},
        {"data.valid_source", text(&TrainRecipe::valid_source), {}},
        {"data.valid_target", text(&TrainRecipe::valid_target), {}},
        {"data.vocab", text(&TrainRecipe::vocab), {}},
        {"data.vocab_size", integer(&TrainRecipe::vocab_size), {}},
        {"data.vocab_type", text(&TrainRecipe::vocab_type), {}},
        {"data.vocab_sample", integer(&TrainRecipe::vocab_sample), {}},
        {"data.max_length", integer(&TrainRecipe::max_length), {}},
        {"data.max_tokens", integer_or_auto(&TrainRecipe::max_tokens), {}},
        {"data.accumulate", integer_or_auto(&TrainRecipe::accumulate), {}},
        {"data.update_tokens", integer(&TrainRecipe::update_tokens), {}},
        {"data.memory_fraction", number(&TrainRecipe::memory_fraction), {}},
        {"data.shuffle_window", integer(&TrainRecipe::shuffle_window), {}},
        {"data.bpe_dropout", number(&TrainRecipe::bpe_dropout), {}},
        {"data.bpe_dropout_sides", text(&TrainRecipe::bpe_dropout_sides), {}},
        {"data.word_dropout", number(&TrainRecipe::word_dropout), {}},
        {"data.word_dropout_sides", text(&TrainRecipe::word_dropout_sides), {}},
        {"data.skip_empty_lines", boolean(&TrainRecipe::skip_empty_lines), {}},
        {"data.skip_invalid_lines", boolean(&TrainRecipe::skip_invalid_lines), {}},
        {"optimizer.lr_scale", number(&TrainRecipe::lr_scale), {}},
        {"optimizer.warmup", integer(&TrainRecipe::warmup), {}},
        {"optimizer.warmup_fraction", number(&TrainRecipe::warmup_fraction), {}},
        {"optimizer.schedule", text(&TrainRecipe::schedule), {}},
        {"optimizer.beta1", number(&TrainRecipe::beta1), {}},
        {"optimizer.beta2", number(&TrainRecipe::beta2), {}},
        {"optimizer.eps", number(&TrainRecipe::eps), {}},
        {"optimizer.clip_norm", number(&TrainRecipe::clip_norm), {}},
        {"optimizer.weight_decay", number(&TrainRecipe::weight_decay), {}},
        {"training.max_steps", integer(&TrainRecipe::max_steps), {}},
        {"training.max_epochs", integer(&TrainRecipe::max_epochs), {}},
        {"training.max_minutes", number(&TrainRecipe::max_minutes), {}},
        {"training.ema_decay", number(&TrainRecipe::ema_decay), {}},
        {"training.rdrop_alpha", number(&TrainRecipe::rdrop_alpha), {}},
        {"training.seed",
         [](TrainRecipe& r, const std::string& k, const std::string& v) {
           int64_t s = parse_int(k, v);
           TFM_CHECK(s >= 0, "'{}' must be >= 0, got {}", k, s);
           r.seed = static_cast<uint64_t>(s);
         },
         {}},
        {"training.threads",
         [](TrainRecipe& r, const std::string& k, const std::string& v) {
           const int64_t threads = parse_int(k, v);
           TFM_CHECK(threads >= 0 && threads <= kMaxThreads,
                     "'{}' must be in [0, {}] (0: all cores), got {}", k, kMaxThreads, threads);
           r.threads = static_cast<int>(threads);
         },
         {}},
        {"training.precision", text(&TrainRecipe::precision), {}},
        {"training.device", text(&TrainRecipe::device), {}},
        {"training.allreduce_bucket_mb", number(&TrainRecipe::allreduce_bucket_mb), {}},
        {"training.log_every", integer(&TrainRecipe::log_every), {}},
        {"training.run_dir", text(&TrainRecipe::run_dir), {}},
        {"checkpoints.every_steps", integer(&TrainRecipe::checkpoint_every_steps), {}},
        {"checkpoints.every_minutes", number(&TrainRecipe::checkpoint_every_minutes), {}},
        {"checkpoints.keep", integer(&TrainRecipe::keep_checkpoints), {}},
        {"checkpoints.every_fraction", number(&TrainRecipe::checkpoint_every_fraction), {}},
        {"validation.every_steps", integer(&TrainRecipe::validate_every_steps), {}},
        {"validation.bleu", boolean(&TrainRecipe::validate_bleu), {}},
        {"validation.max_sentences", integer(&TrainRecipe::valid_max_sentences), {}},
    };
    for (RecipeRow& row : model_rows()) rows.push_back(std::move(row));
    return KeyTable<TrainRecipe, std::string>(std::move(rows));
  }();
  return table;
}

void set_key(TrainRecipe& recipe, const std::string& key, const std::string& value) {
  if (recipe_table().set(recipe, key, value)) return;
  if (auto best = nearest_name(recipe_table().names(), key, 4))
    fail("unknown option '{}' (did you mean '{}'?)", key, *best);
  fail("unknown option '{}' (docs/TRAINING.md lists every option)", key);
}

}  // namespace

std::vector<std::string> recipe_keys() {
  return recipe_table().names();
}

ModelConfig TrainRecipe::model_config(int64_t vocab_size_) const {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, value] : model_overrides) {
    if (key == "dropout" && value == "auto") {  // chosen by the run, once it knows its epochs
      json[key] = 0.0;
      continue;
    }
    // YAML scalars arrive as text: give each its JSON type (out-of-range numbers stay text, and
    // the configuration's own check names the key).
    char* end = nullptr;
    errno = 0;
    const long long integer_value = std::strtoll(value.c_str(), &end, 10);
    const bool is_integer = !value.empty() && *end == '\0' && errno == 0;
    errno = 0;
    const double number_value = std::strtod(value.c_str(), &end);
    // strtod reads hexadecimal too ("0x1" is 1.0): such a value stays text, named as written.
    const bool is_number = !value.empty() && *end == '\0' && errno == 0 &&
                           value.find_first_of("xX") == std::string::npos;
    if (value == "true" || value == "false") {
      json[key] = value == "true";
    } else if (is_integer) {
      json[key] = integer_value;
    } else if (is_number) {
      json[key] = number_value;
    } else {
      json[key] = value;
    }
  }
  ModelConfig base = tfm::internal::preset(preset);
  base.vocab_size = vocab_size_;
  return config_from_json(json, base);  // validates
}

bool TrainRecipe::dropout_auto() const {
  const auto it = model_overrides.find("dropout");
  return it != model_overrides.end() && it->second == "auto";
}

void apply_override(TrainRecipe& recipe, const std::string& assignment) {
  size_t eq = assignment.find('=');
  TFM_CHECK(eq != std::string::npos && eq > 0, "--set expects section.key=value, got '{}'",
            assignment);
  set_key(recipe, assignment.substr(0, eq), assignment.substr(eq + 1));
  recipe.origins[assignment.substr(0, eq)] = "--set " + assignment;
}

namespace {

// Whether a line is the YAML document marker `marker` ("---" or "..."), alone or before a space.
bool is_document_marker(std::string_view row, std::string_view marker) {
  return row.starts_with(marker) &&
         (row.size() == 3 || std::isspace(static_cast<unsigned char>(row[3])));
}

// Per line of the file (0-based): whether it holds YAML content (is neither blank, nor a comment,
// nor a document marker).
std::vector<bool> content_lines(const std::string& text) {
  std::vector<bool> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const size_t first = text.find_first_not_of(" \t\r", begin);
    const std::string_view row = std::string_view(text).substr(begin, end - begin);
    lines.push_back(first < end && text[first] != '#' && !is_document_marker(row, "---") &&
                    !is_document_marker(row, "..."));
    begin = end + 1;
  }
  return lines;
}

// The 1-based line where a second YAML document starts: a "---" after content, or a "..." (the
// first document's end) that more content follows. A "---" before any content starts the first
// document, and a "..." at the end closes it: both are fine.
std::optional<int> second_document_line(const std::string& text) {
  const std::vector<bool> content = content_lines(text);
  bool seen_content = false;
  std::optional<int> ended;  // the line of a "..." after content
  size_t begin = 0;
  for (size_t line = 0; line < content.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view row = std::string_view(text).substr(begin, end - begin);
    begin = end + 1;
    const int number = static_cast<int>(line) + 1;
    if (is_document_marker(row, "---")) {
      if (seen_content) return number;
    } else if (is_document_marker(row, "...")) {
      if (seen_content && !ended) ended = number;
    } else if (content[line]) {
      if (ended) return ended;
      seen_content = true;
    }
  }
  return std::nullopt;
}

// A chain of `extends` longer than this is an error rather than a deep recursion.
constexpr size_t kMaxExtends = 16;

TrainRecipe load_recipe_chain(const std::filesystem::path& path,
                              std::vector<std::filesystem::path>& chain);

// The recipe that `file` extends (`extends: VALUE` at its `line`): VALUE is a path relative to the
// folder of `file` (or absolute, `${VAR}` expanded), loaded with everything it extends in turn.
TrainRecipe load_base_recipe(const std::filesystem::path& file, int line, const std::string& value,
                             std::vector<std::filesystem::path>& chain) {
  const std::string name = file.string();
  std::filesystem::path base;
  try {
    base = expand_environment("extends", value);
  } catch (const Error& error) {
    fail("{}:{}: {}", name, line, error.what());
  }
  TFM_CHECK(!base.empty(), "{}:{}: 'extends' needs the recipe file it extends", name, line);
  if (base.is_relative()) base = file.parent_path() / base;
  std::error_code ec;
  const std::filesystem::path key = std::filesystem::weakly_canonical(base, ec);
  for (const std::filesystem::path& seen : chain) {
    if (!ec && seen == key) {
      std::string cycle;
      for (const std::filesystem::path& p : chain) cycle += p.string() + " -> ";
      fail("{}:{}: extends {}, which makes a cycle: {}{}", name, line, base.string(), cycle,
           key.string());
    }
  }
  TFM_CHECK(chain.size() < kMaxExtends, "{}:{}: more than {} recipes extend one another", name,
            line, kMaxExtends);
  try {
    return load_recipe_chain(base, chain);
  } catch (const Error& error) {
    fail("{}:{}: extends: {}", name, line, error.what());
  }
}

TrainRecipe load_recipe_chain(const std::filesystem::path& path,
                              std::vector<std::filesystem::path>& chain) {
  const std::string file = path.string();
  if (const std::optional<std::string> problem = file_type_problem(path)) {
    std::error_code ec;
    const bool missing = !std::filesystem::exists(path, ec) && !ec;  // a loop of links sets ec
    fail("{}: {}", file, missing ? "no such recipe file" : *problem);
  }
  const std::string text = read_file_bytes(path);
  // YAML::Load reads the first document only: what follows a second one's "---" would be lost.
  if (const std::optional<int> line = second_document_line(text))
    fail("{}:{}: a second YAML document starts here; a recipe is one document", file, *line);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}:{}: invalid YAML: {}", file, e.mark.line + 1, e.msg);
  }
  TrainRecipe recipe;
  if (root.IsNull()) return recipe;
  TFM_CHECK(root.IsMap(), "{}: a recipe is a map of sections", file);
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  chain.push_back(ec ? path : canonical);
  // Keys are unique: YAML requires it, but yaml-cpp keeps both and the last would win.
  struct Entry {
    std::string key;
    int key_line;    // 1-based
    int value_line;  // 0-based
    std::string value;
  };
  std::vector<Entry> entries;
  std::vector<int> key_lines;             // 0-based lines of every key
  std::map<std::string, int> first_line;  // key (or section) -> 1-based line
  try {
    for (const auto& section : root) {
      const std::string name = section.first.as<std::string>();
      const int line = section.first.Mark().line + 1;
      const auto [seen, fresh] = first_line.emplace(name, line);
      TFM_CHECK(fresh, "{}:{}: section '{}' given twice (first at line {})", file, line, name,
                seen->second);
      key_lines.push_back(line - 1);
      if (name == "extends") {
        // The one key outside a section: the recipe this one starts from (load_base_recipe).
        TFM_CHECK(section.second.IsScalar(), "{}:{}: 'extends' must be one recipe file", file,
                  line);
        entries.push_back({name, line, section.second.Mark().line, section.second.Scalar()});
        continue;
      }
      TFM_CHECK(section.second.IsMap() || section.second.IsNull(),
                "{}:{}: section '{}' must be a map of keys", file, line, name);
      for (const auto& entry : section.second) {
        const std::string key = name + "." + entry.first.as<std::string>();
        const int key_line = entry.first.Mark().line + 1;
        const auto [previous, unique] = first_line.emplace(key, key_line);
        TFM_CHECK(unique, "{}:{}: '{}' given twice (first at line {})", file, key_line, key,
                  previous->second);
        key_lines.push_back(key_line - 1);
        TFM_CHECK(entry.second.IsScalar(), "{}:{}: '{}' must be a single value", file, key_line,
                  key);
        entries.push_back({key, key_line, entry.second.Mark().line, entry.second.Scalar()});
      }
    }
  } catch (const YAML::Exception& e) {
    fail("{}:{}: invalid recipe: {}", file, e.mark.line + 1, e.msg);
  }
  // Every value is one line: YAML lets a quoted (or plain) scalar run over several lines, so an
  // unterminated quote would swallow the keys after it. The lines between a value's start and the
  // next key must hold nothing but blanks and comments.
  const std::vector<bool> content = content_lines(text);
  std::sort(key_lines.begin(), key_lines.end());
  for (const Entry& e : entries) {
    auto next = std::upper_bound(key_lines.begin(), key_lines.end(), e.value_line);
    const int stop = next == key_lines.end() ? static_cast<int>(content.size()) : *next;
    for (int l = e.value_line + 1; l < stop; ++l)
      TFM_CHECK(!content[static_cast<size_t>(l)],
                "{}:{}: the value of '{}' runs on to line {} (an unterminated quote?); recipe "
                "values are one line",
                file, e.key_line, e.key, l + 1);
  }
  // The recipe extended comes first, wherever `extends` stands: this file's keys override its.
  for (const Entry& e : entries)
    if (e.key == "extends") recipe = load_base_recipe(path, e.key_line, e.value, chain);
  for (const Entry& e : entries) {
    if (e.key == "extends") continue;
    try {
      set_key(recipe, e.key, e.value);
      recipe.origins[e.key] = fmt::format("{}:{}", file, e.key_line);
    } catch (const Error& error) {
      fail("{}:{}: {}", file, e.key_line, error.what());
    }
  }
  chain.pop_back();
  return recipe;
}

}  // namespace

TrainRecipe load_recipe(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> chain;
  return load_recipe_chain(path, chain);
}

namespace {

// "recipe.yaml:12: " (or "--set k=v: ") for the first of `keys` that was set; "" when none was.
std::string origin(const TrainRecipe& r, std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (auto it = r.origins.find(key); it != r.origins.end()) return it->second + ": ";
  return "";
}

// The model section's values are checked by the configuration (config.h), whose errors name the
// key but not the recipe: say where the recipe set it.
void validate_model(const TrainRecipe& r) {
  try {
    r.model_config(r.vocab_size);
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& [key, where] : r.origins)
      if (key.starts_with("model.") && message.find("'" + key.substr(6) + "'") != std::string::npos)
        fail("{}: {}", where, message);
    if (auto it = r.origins.find("model.preset"); it != r.origins.end())
      fail("{}: {}", it->second, message);
    throw;
  }
  TFM_CHECK(r.rdrop_alpha == 0 || !r.model_config(r.vocab_size).output_bias,
            "{}training.rdrop_alpha needs a model without output_bias (R-Drop's loss is fused "
            "with the output projection, which then has no bias)",
            origin(r, {"training.rdrop_alpha"}));
}

// The floating-point options are finite numbers, the budgets in range, the threads counted.
void validate_numbers(const TrainRecipe& r) {
  // Command-line shortcuts (--max-minutes) bypass parse_double: every number is checked here too.
  const std::pair<const char*, double> numbers[] = {
      {"data.memory_fraction", r.memory_fraction},
      {"optimizer.lr_scale", r.lr_scale},
      {"optimizer.warmup_fraction", r.warmup_fraction},
      {"optimizer.beta1", r.beta1},
      {"optimizer.beta2", r.beta2},
      {"optimizer.eps", r.eps},
      {"optimizer.clip_norm", r.clip_norm},
      {"optimizer.weight_decay", r.weight_decay},
      {"training.max_minutes", r.max_minutes},
      {"training.ema_decay", r.ema_decay},
      {"training.rdrop_alpha", r.rdrop_alpha},
      {"checkpoints.every_minutes", r.checkpoint_every_minutes},
      {"checkpoints.every_fraction", r.checkpoint_every_fraction},
      {"training.allreduce_bucket_mb", r.allreduce_bucket_mb}};
  for (const auto& [key, value] : numbers)
    TFM_CHECK(std::isfinite(value), "{}{} must be a finite number, got {}", origin(r, {key}), key,
              value);
  // Beyond these the run is meaningless and products like minutes * 60 could overflow. A huge
  // (finite) lr_scale is left to the training loop, which skips non-finite updates and stops.
  TFM_CHECK(r.max_minutes <= kMaxMinutes,
            "{}training.max_minutes must be at most {} (about 19 years), got {}",
            origin(r, {"training.max_minutes"}), kMaxMinutes, r.max_minutes);
  TFM_CHECK(r.checkpoint_every_minutes <= kMaxMinutes,
            "{}checkpoints.every_minutes must be at most {} (about 19 years), got {}",
            origin(r, {"checkpoints.every_minutes"}), kMaxMinutes, r.checkpoint_every_minutes);
  TFM_CHECK(r.threads >= 0 && r.threads <= kMaxThreads,
            "{}training.threads must be in [0, {}] (0: all cores), got {}",
            origin(r, {"training.threads"}), kMaxThreads, r.threads);
}

// The data section (files, vocabulary, lengths, batches) and the size of an all-reduce bucket.
void validate_data(const TrainRecipe& r) {
  TFM_CHECK(!r.train_source.empty() && !r.train_target.empty(),
            "{}data.train_source and data.train_target are required",
            origin(r, {"data.train_source", "data.train_target"}));
  TFM_CHECK(r.valid_source.empty() == r.valid_target.empty(),
            "{}give both data.valid_source and data.valid_target, or neither",
            origin(r, {"data.valid_source", "data.valid_target"}));
  TFM_CHECK(r.vocab_type == "bpe" || r.vocab_type == "unigram" || r.vocab_type == "word",
            "{}data.vocab_type must be bpe, unigram or word, got '{}'",
            origin(r, {"data.vocab_type"}), r.vocab_type);
  TFM_CHECK(r.vocab_size >= 8, "{}data.vocab_size must be at least 8, got {}",
            origin(r, {"data.vocab_size"}), r.vocab_size);
  TFM_CHECK(r.max_length >= 2, "{}data.max_length must be at least 2, got {}",
            origin(r, {"data.max_length"}), r.max_length);
  TFM_CHECK(r.vocab_sample >= 0, "{}data.vocab_sample must be >= 0 (0: every sentence), got {}",
            origin(r, {"data.vocab_sample"}), r.vocab_sample);
  TFM_CHECK(r.max_tokens == kAutoBatch || r.max_tokens >= 2 * r.max_length,
            "{}data.max_tokens ({}) must hold one pair of max_length ({}) tokens on each side",
            origin(r, {"data.max_tokens", "data.max_length"}), r.max_tokens, r.max_length);
  // Each accumulated batch is held until the update (its normaliser is the whole update's tokens):
  // beyond this an update takes hours and the memory of thousands of batches.
  TFM_CHECK(r.accumulate == kAutoBatch || (r.accumulate >= 1 && r.accumulate <= kMaxAccumulate),
            "{}data.accumulate must be in [1, {}] or auto, got {}", origin(r, {"data.accumulate"}),
            kMaxAccumulate, r.accumulate);
  TFM_CHECK(r.update_tokens >= 0, "{}data.update_tokens must be >= 0 (0: off), got {}",
            origin(r, {"data.update_tokens"}), r.update_tokens);
  TFM_CHECK(r.memory_fraction > 0 && r.memory_fraction <= 1,
            "{}data.memory_fraction must be in (0, 1], got {}", origin(r, {"data.memory_fraction"}),
            r.memory_fraction);
  TFM_CHECK(r.update_tokens == 0 || r.accumulate == kAutoBatch,
            "{}data.update_tokens ({}) and data.accumulate ({}) both set the size of an update: "
            "give data.accumulate: auto, or data.update_tokens: 0",
            origin(r, {"data.accumulate", "data.update_tokens"}), r.update_tokens, r.accumulate);
  TFM_CHECK(r.allreduce_bucket_mb > 0 && r.allreduce_bucket_mb <= 1024,
            "{}training.allreduce_bucket_mb must be in (0, 1024], got {}",
            origin(r, {"training.allreduce_bucket_mb"}), r.allreduce_bucket_mb);
  TFM_CHECK(r.shuffle_window >= 1, "{}data.shuffle_window must be at least 1, got {}",
            origin(r, {"data.shuffle_window"}), r.shuffle_window);
  TFM_CHECK(r.bpe_dropout >= 0 && r.bpe_dropout < 1,
            "{}data.bpe_dropout must be in [0, 1) (0: off), got {}",
            origin(r, {"data.bpe_dropout"}), r.bpe_dropout);
  TFM_CHECK(r.bpe_dropout_sides == "both" || r.bpe_dropout_sides == "source",
            "{}data.bpe_dropout_sides must be both or source, got '{}'",
            origin(r, {"data.bpe_dropout_sides"}), r.bpe_dropout_sides);
  TFM_CHECK(r.word_dropout >= 0 && r.word_dropout < 1,
            "{}data.word_dropout must be in [0, 1) (0: off), got {}",
            origin(r, {"data.word_dropout"}), r.word_dropout);
  TFM_CHECK(r.word_dropout_sides == "source" || r.word_dropout_sides == "both",
            "{}data.word_dropout_sides must be source or both, got '{}'",
            origin(r, {"data.word_dropout_sides"}), r.word_dropout_sides);
  TFM_CHECK(r.bpe_dropout == 0 || !r.vocab.empty() || r.vocab_type == "bpe",
            "{}data.bpe_dropout needs a BPE vocabulary, but data.vocab_type is {}",
            origin(r, {"data.bpe_dropout", "data.vocab_type"}), r.vocab_type);
}

// optimizer.schedule: a known name; a decay to zero needs the run's length in updates.
void validate_schedule(const TrainRecipe& r) {
  ScheduleShape shape = ScheduleShape::noam;
  try {
    shape = parse_schedule_shape(r.schedule, "optimizer.schedule");
  } catch (const Error& e) {
    fail("{}{}", origin(r, {"optimizer.schedule"}), e.what());
  }
  if (shape == ScheduleShape::noam) return;
  TFM_CHECK(r.max_steps > 0 || r.max_epochs > 0 || r.max_minutes > 0,
            "{}optimizer.schedule {} decays to zero at the end of the run: it needs "
            "training.max_steps, max_epochs or max_minutes",
            origin(r, {"optimizer.schedule"}), r.schedule);
  // With a step budget alone the decay's start and end are known now (an epoch's updates are
  // known once the corpus is batched: a warmup longer than the epochs is said then).
  TFM_CHECK(
      r.max_minutes > 0 || r.max_epochs > 0 || r.warmup_fraction > 0 || r.warmup < r.max_steps,
      "{}optimizer.schedule {} decays after optimizer.warmup ({}) to zero at "
      "training.max_steps ({}): give a shorter warmup or optimizer.warmup_fraction",
      origin(r, {"optimizer.schedule", "optimizer.warmup", "training.max_steps"}), r.schedule,
      r.warmup, r.max_steps);
}

// The optimizer, precision, device, schedule, limits, checkpoints and validation.
void validate_training(const TrainRecipe& r) {
  TFM_CHECK(r.lr_scale > 0, "{}optimizer.lr_scale must be positive, got {}",
            origin(r, {"optimizer.lr_scale"}), r.lr_scale);
  TFM_CHECK(r.warmup >= 1, "{}optimizer.warmup must be at least 1, got {}",
            origin(r, {"optimizer.warmup"}), r.warmup);
  TFM_CHECK(r.beta1 >= 0 && r.beta1 < 1, "{}optimizer.beta1 must be in [0, 1), got {}",
            origin(r, {"optimizer.beta1"}), r.beta1);
  TFM_CHECK(r.beta2 >= 0 && r.beta2 < 1, "{}optimizer.beta2 must be in [0, 1), got {}",
            origin(r, {"optimizer.beta2"}), r.beta2);
  TFM_CHECK(r.eps > 0, "{}optimizer.eps must be positive, got {}", origin(r, {"optimizer.eps"}),
            r.eps);
  TFM_CHECK(r.clip_norm >= 0, "{}optimizer.clip_norm must be >= 0, got {}",
            origin(r, {"optimizer.clip_norm"}), r.clip_norm);
  // Below 1, so that 1 - lr weight_decay stays positive at any learning rate up to 1.
  TFM_CHECK(r.weight_decay >= 0 && r.weight_decay < 1,
            "{}optimizer.weight_decay must be in [0, 1) (0: off), got {}",
            origin(r, {"optimizer.weight_decay"}), r.weight_decay);
  TFM_CHECK(r.ema_decay >= 0 && r.ema_decay < 1,
            "{}training.ema_decay must be in [0, 1) (0: no moving average), got {}",
            origin(r, {"training.ema_decay"}), r.ema_decay);
  TFM_CHECK(r.rdrop_alpha >= 0, "{}training.rdrop_alpha must be >= 0 (0: off), got {}",
            origin(r, {"training.rdrop_alpha"}), r.rdrop_alpha);
  TFM_CHECK(r.rdrop_alpha == 0 || r.device == "cpu",
            "{}training.rdrop_alpha needs training.device cpu: R-Drop's loss has no GPU kernel yet",
            origin(r, {"training.rdrop_alpha", "training.device"}));
  try {
    ops::parse_precision(r.precision, "training.precision");  // the one parser of precision names
  } catch (const Error& e) {
    fail("{}{}", origin(r, {"training.precision"}), e.what());
  }
  TFM_CHECK(r.device == "cpu" || r.device == "cuda" || r.device == "auto",
            "{}training.device must be cpu, cuda or auto, got '{}'", origin(r, {"training.device"}),
            r.device);
  TFM_CHECK(r.warmup_fraction >= 0 && r.warmup_fraction <= 1,
            "{}optimizer.warmup_fraction must be in [0, 1], got {}",
            origin(r, {"optimizer.warmup_fraction"}), r.warmup_fraction);
  validate_schedule(r);
  TFM_CHECK(r.checkpoint_every_fraction >= 0 && r.checkpoint_every_fraction <= 1,
            "{}checkpoints.every_fraction must be in [0, 1], got {}",
            origin(r, {"checkpoints.every_fraction"}), r.checkpoint_every_fraction);
  TFM_CHECK(r.max_steps >= 0, "{}training.max_steps must be >= 0 (0: no limit), got {}",
            origin(r, {"training.max_steps"}), r.max_steps);
  TFM_CHECK(r.max_epochs >= 0, "{}training.max_epochs must be >= 0 (0: no limit), got {}",
            origin(r, {"training.max_epochs"}), r.max_epochs);
  TFM_CHECK(r.max_minutes >= 0, "{}training.max_minutes must be >= 0 (0: no limit), got {}",
            origin(r, {"training.max_minutes"}), r.max_minutes);
  TFM_CHECK(r.log_every >= 1, "{}training.log_every must be at least 1, got {}",
            origin(r, {"training.log_every"}), r.log_every);
  TFM_CHECK(r.keep_checkpoints >= 1, "{}checkpoints.keep must be at least 1, got {}",
            origin(r, {"checkpoints.keep"}), r.keep_checkpoints);
  TFM_CHECK(r.checkpoint_every_steps >= 0, "{}checkpoints.every_steps must be >= 0, got {}",
            origin(r, {"checkpoints.every_steps"}), r.checkpoint_every_steps);
  TFM_CHECK(r.checkpoint_every_minutes >= 0, "{}checkpoints.every_minutes must be >= 0, got {}",
            origin(r, {"checkpoints.every_minutes"}), r.checkpoint_every_minutes);
  TFM_CHECK(r.validate_every_steps >= 0, "{}validation.every_steps must be >= 0, got {}",
            origin(r, {"validation.every_steps"}), r.validate_every_steps);
  TFM_CHECK(r.valid_max_sentences >= 0, "{}validation.max_sentences must be >= 0 (0: all), got {}",
            origin(r, {"validation.max_sentences"}), r.valid_max_sentences);
  TFM_CHECK(!r.run_dir.empty(), "{}training.run_dir must not be empty",
            origin(r, {"training.run_dir"}));
}

}  // namespace

// model.dropout auto is chosen from the epochs the budget allows: it needs that budget.
void validate_dropout_auto(const TrainRecipe& r) {
  if (!r.dropout_auto()) return;
  TFM_CHECK(r.max_steps > 0 || r.max_epochs > 0 || r.max_minutes > 0,
            "{}model.dropout auto is chosen from the epochs the budget allows: it needs "
            "training.max_steps, max_epochs or max_minutes",
            origin(r, {"model.dropout"}));
}

void validate(const TrainRecipe& r) {
  validate_numbers(r);
  validate_dropout_auto(r);
  validate_data(r);
  validate_training(r);
  validate_model(r);  // the model section's keys and values
}

}  // namespace tfm::internal
