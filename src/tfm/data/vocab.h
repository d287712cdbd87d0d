// The subword vocabulary: a SentencePiece model shared by source and target, with the special ids
// the model expects (pad 0 "<pad>", unk 1 "<unk>", bos 2 "<s>", eos 3 "</s>").
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/model/config.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tfm::internal::data {

class ImportedVocabulary;

inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;
inline constexpr std::string_view kPadPiece = "<pad>";
inline constexpr std::string_view kUnkPiece = "<unk>";
inline constexpr std::string_view kBosPiece = "<s>";
inline constexpr std::string_view kEosPiece = "</s>";

struct VocabTrainOptions {
  std::vector<std::filesystem::path> inputs;  // plain or gzipped text, one sentence a line
  std::filesystem::path output_prefix;        // writes <prefix>.model and <prefix>.vocab
  std::string model_type = "bpe";             // "bpe" (the paper's) or "unigram"
  int64_t vocab_size = 37000;                 // the paper's shared English-German vocabulary
  double character_coverage = 1.0;
  // Sentences sampled (uniformly, with `seed`) from the inputs for training; 0: all of them.
  int64_t input_sentence_size = 0;
  uint32_t seed = 1;
  int num_threads = 0;   // 0: the number of cores
  bool verbose = false;  // SentencePiece's own log on stderr
};

struct VocabTrainReport {
  int64_t sentences = 0;  // lines read from the inputs (SentencePiece skips empty ones)
  int64_t vocab_size = 0;
  double seconds = 0;
  std::filesystem::path model_path;
  std::filesystem::path vocab_path;
};

// Trains a SentencePiece model on the inputs and writes <prefix>.model and <prefix>.vocab
// atomically. `progress` (optional) receives a few one-line messages. Throws tfm::Error on bad
// options, unreadable input and SentencePiece's own failures (e.g. a vocabulary larger than the
// text allows).
VocabTrainReport train_vocabulary(const VocabTrainOptions& options,
                                  const std::function<void(const std::string&)>& progress = {});

class Vocabulary {
 public:
  // Loads a .model file; throws when it cannot be read or its special ids differ from the above.
  explicit Vocabulary(const std::filesystem::path& model_path);
  // The same from a .model file's bytes (a serialized SentencePiece model); `name` is what errors
  // and path() call it.
  Vocabulary(std::string_view serialized_model, const std::filesystem::path& name);
  // A model directory's vocabulary: vocab.model, or an imported model's source.spm, target.spm and
  // vocab.json (data/imported_vocab.h) when the directory holds vocab.json.
  static Vocabulary of_model_dir(const std::filesystem::path& dir);
  ~Vocabulary();
  Vocabulary(Vocabulary&&) noexcept;
  Vocabulary& operator=(Vocabulary&&) noexcept;

  // Subword ids of a sentence, without bos/eos (an imported model's sources end with </s> when
  // its vocab.json says "source_eos").
  std::vector<int32_t> encode(std::string_view text) const;
  // The ids of a sentence segmented with BPE-dropout: each merge is skipped with probability
  // `dropout` (SentencePiece's SampleEncode; 0 gives encode()'s ids). The draws come from
  // SentencePiece's per-thread generator, which a thread seeds at its first draw from the
  // process-wide sentencepiece::SetRandomGeneratorSeed (data/subword_dropout.h makes batches
  // repeatable so). Throws for an imported vocabulary or one that is not BPE (is_bpe()).
  std::vector<int32_t> sample_encode(std::string_view text, double dropout) const;
  // Whether this is a SentencePiece BPE model: its pieces are scored by merge order (0, -1, -2,
  // ...), where a unigram or word model's scores are log probabilities.
  bool is_bpe() const;
  // Subword ids of a target sentence (a reference to score or to show), without bos/eos: an
  // imported model's target.spm pieces numbered by its table; otherwise encode()'s.
  std::vector<int32_t> encode_target(std::string_view text) const;
  // The ids of a source given as pieces (translate_tokens): each piece's id (<unk>'s for one the
  // vocabulary lacks), and the </s> that encode appends for an imported model with "source_eos",
  // so that pieces and text translate alike.
  std::vector<int32_t> source_ids(const std::vector<std::string>& pieces) const;
  // The sentence of a sequence of ids; pad, bos and eos are dropped, unk reads " ⁇ ".
  std::string decode(const std::vector<int32_t>& ids) const;
  std::vector<std::string> pieces(std::string_view text) const;
  std::string piece(int32_t id) const;
  // The id of a piece; unk's for a piece the vocabulary lacks.
  int32_t id(std::string_view piece) const;

  int64_t size() const;
  // Checks that a model configuration (read from `config_path`) fits this vocabulary: the same
  // size and the same pad/unk/bos/eos ids. Throws naming both files, e.g. "model/config.json:
  // eos_id 2 but model/vocab.model has eos id 3 (</s>)".
  void check_config(const ModelConfig& config, const std::filesystem::path& config_path) const;
  // FNV-1a hash of the .model file's bytes, as 16 hex digits: identifies the vocabulary in cache
  // keys.
  const std::string& hash() const { return hash_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  Vocabulary() = default;
  void load(std::string_view bytes);
  void check_imported_config(const ModelConfig& config,
                             const std::filesystem::path& config_path) const;

  std::filesystem::path path_;
  std::string hash_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::unique_ptr<ImportedVocabulary> imported_;  // set for an imported model's vocabulary
  bool bpe_ = false;                              // is_bpe()
};

}  // namespace tfm::internal::data
