// An imported model's vocabulary (tfm convert; docs/MODEL_FORMAT.md, "Imported vocabularies"), as
// OPUS-MT and Hugging Face's MarianMT ship it: source.spm splits a source sentence into pieces,
// vocab.json's id table numbers them, target.spm joins the output's pieces into text. A sentence
// may start with a target-language token (">>deu<<", multilingual OPUS-MT), which is one id of the
// table, as Hugging Face's MarianTokenizer and Marian treat it; one the table lacks is an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tfm::internal::data {

class ImportedVocabulary {
 public:
  // Reads dir's source.spm, target.spm and vocab.json ({"source_eos": bool, "pieces": [...]}).
  // Errors name the file.
  explicit ImportedVocabulary(const std::filesystem::path& dir);
  ~ImportedVocabulary();

  // The ids of a source sentence (an unknown piece is <unk>), </s> last when the model's sources
  // end with it. A sentence without pieces has no ids (it is not translated, as with tfm's own
  // vocabularies), not a lone </s>.
  std::vector<int32_t> encode(std::string_view text) const;
  // `ids` of a source already split into pieces, with </s> appended when the model's sources end
  // with it and `ids` is not empty: what encode gives for text.
  std::vector<int32_t> source_ids(std::vector<int32_t> ids) const;
  // The ids of a target sentence (a reference to score): target.spm's pieces numbered by the
  // table, without </s> (the scorer adds eos as for any model).
  std::vector<int32_t> encode_target(std::string_view text) const;
  // The text of output ids: <pad>, <s> and </s> dropped, the pieces joined by target.spm.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::vector<std::string> pieces(std::string_view text) const;
  const std::string& piece(int32_t id) const;
  // The id of a piece, or <unk>'s.
  int32_t id(std::string_view piece) const;
  // The id of a piece, or -1 when the table lacks it.
  int32_t find(std::string_view piece) const;
  int64_t size() const { return static_cast<int64_t>(table_.size()); }
  // FNV-1a of the three files' bytes, 16 hex digits.
  const std::string& hash() const { return hash_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;  // vocab.json
  std::string hash_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> source_, target_;
  std::vector<std::string> table_;
  std::unordered_map<std::string, int32_t> ids_;
  bool source_eos_ = false;
  int32_t unk_ = -1;
};

}  // namespace tfm::internal::data
