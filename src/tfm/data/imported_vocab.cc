#include "tfm/data/imported_vocab.h"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::data {

namespace fs = std::filesystem;

namespace {

std::unique_ptr<sentencepiece::SentencePieceProcessor> load_spm(const fs::path& path,
                                                                std::string& bytes) {
  std::error_code ec;
  TFM_CHECK(fs::is_regular_file(path, ec), "{}: missing (an imported model's vocabulary)",
            path.string());
  bytes = read_file_bytes(path);
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(bytes);
  TFM_CHECK(status.ok(), "{}: not a SentencePiece model: {}", path.string(), status.message());
  return processor;
}

}  // namespace

ImportedVocabulary::ImportedVocabulary(const fs::path& dir) : path_(dir / "vocab.json") {
  std::string source_bytes, target_bytes;
  source_ = load_spm(dir / "source.spm", source_bytes);
  target_ = load_spm(dir / "target.spm", target_bytes);
  std::error_code ec;
  TFM_CHECK(fs::is_regular_file(path_, ec), "{}: missing", path_.string());
  const std::string table_bytes = read_file_bytes(path_);
  const nlohmann::json table = nlohmann::json::parse(table_bytes, nullptr, false);
  TFM_CHECK(table.is_object() && table.contains("pieces") && table["pieces"].is_array(),
            "{}: not an id table (an object with \"pieces\": [...])", path_.string());
  for (const nlohmann::json& piece : table["pieces"]) {
    TFM_CHECK(piece.is_string(), "{}: piece {} is not a string", path_.string(), table_.size());
    const auto id = static_cast<int32_t>(table_.size());
    TFM_CHECK(ids_.emplace(piece.get<std::string>(), id).second, "{}: piece '{}' given twice",
              path_.string(), one_line(piece.get<std::string>()));
    table_.push_back(piece.get<std::string>());
  }
  source_eos_ = table.value("source_eos", false);
  unk_ = find("<unk>");
  TFM_CHECK(unk_ >= 0 && find("</s>") >= 0, "{}: the table needs <unk> and </s>", path_.string());
  hash_ =
      fmt::format("{:016x}", fnv1a64(table_bytes, fnv1a64(target_bytes, fnv1a64(source_bytes))));
}

ImportedVocabulary::~ImportedVocabulary() = default;

std::vector<int32_t> ImportedVocabulary::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  // ">>deu<<" first: a token of the table, not pieces (multilingual OPUS-MT).
  static const std::regex language("^\\s*(>>[^<>\\s]+<<)\\s*");
  std::match_results<std::string_view::const_iterator> match;
  if (std::regex_search(text.begin(), text.end(), match, language)) {
    const std::string token = match[1].str();
    const int32_t id = find(token);
    TFM_CHECK(id >= 0,
              "the target-language token '{}' is not in the vocabulary {} (the model "
              "does not translate into that language)",
              one_line(token), path_.string());
    ids.push_back(id);
    text.remove_prefix(static_cast<size_t>(match.length(0)));
  }
  for (const std::string& piece : pieces(text)) ids.push_back(id(piece));
  return source_ids(std::move(ids));
}

std::vector<int32_t> ImportedVocabulary::source_ids(std::vector<int32_t> ids) const {
  if (source_eos_ && !ids.empty()) ids.push_back(find("</s>"));
  return ids;
}

std::vector<int32_t> ImportedVocabulary::encode_target(std::string_view text) const {
  std::vector<std::string> out;
  const auto status = target_->Encode(text, &out);
  TFM_CHECK(status.ok(), "{}: cannot encode: {}", path_.string(), status.message());
  std::vector<int32_t> ids;
  for (const std::string& piece : out) ids.push_back(id(piece));
  return ids;
}

std::string ImportedVocabulary::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    const std::string& p = piece(id);
    if (p != "<pad>" && p != "<s>" && p != "</s>") out.push_back(p);
  }
  std::string text;
  const auto status = target_->Decode(out, &text);
  TFM_CHECK(status.ok(), "{}: cannot decode: {}", path_.string(), status.message());
  return text;
}

std::vector<std::string> ImportedVocabulary::pieces(std::string_view text) const {
  std::vector<std::string> out;
  const auto status = source_->Encode(text, &out);
  TFM_CHECK(status.ok(), "{}: cannot encode: {}", path_.string(), status.message());
  return out;
}

const std::string& ImportedVocabulary::piece(int32_t id) const {
  TFM_CHECK(id >= 0 && id < size(), "{}: id {} out of range [0, {})", path_.string(), id, size());
  return table_[static_cast<size_t>(id)];
}

int32_t ImportedVocabulary::id(std::string_view piece) const {
  const int32_t found = find(piece);
  return found < 0 ? unk_ : found;
}

int32_t ImportedVocabulary::find(std::string_view piece) const {
  const auto it = ids_.find(std::string(piece));
  return it == ids_.end() ? -1 : it->second;
}

}  // namespace tfm::internal::data
