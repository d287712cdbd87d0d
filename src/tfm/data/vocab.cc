#include "tfm/data/vocab.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <chrono>
#include <exception>
#include <thread>
#include <unordered_map>

#include "tfm/core/error.h"
#include "tfm/data/imported_vocab.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/progress_meter.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::data {

namespace {

std::string hex64(uint64_t value) {
  return fmt::format("{:016x}", value);
}

// Feeds SentencePiece the lines of every input in turn, so gzipped files need no temporary copy.
// SentencePiece's C++ code is not ours to unwind through, so a failure (unreadable file, invalid
// UTF-8, an over-long line) ends the iteration with an error status and is rethrown afterwards.
class FileSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  FileSentenceIterator(const std::vector<std::filesystem::path>& inputs,
                       const std::function<void(const std::string&)>& progress)
      : inputs_(inputs), progress_(progress) {
    Next();
  }

  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (!error_) return {};
    return {sentencepiece::util::StatusCode::kInternal, "reading the input failed"};
  }
  void Next() override {
    try {
      advance();
    } catch (...) {
      error_ = std::current_exception();
      done_ = true;
    }
  }

  std::exception_ptr error() const { return error_; }
  int64_t sentences() const { return sentences_; }

 private:
  void advance() {
    for (;;) {
      if (!reader_) {
        if (next_input_ == inputs_.size()) {
          done_ = true;
          if (progress_)
            progress_(fmt::format(
                "{} sentences read; learning the vocabulary (SentencePiece reports nothing until "
                "it is done)",
                sentences_));
          return;
        }
        reader_ = std::make_unique<LineReader>(inputs_[next_input_]);
        meter_ = std::make_unique<ProgressMeter>(
            progress_, "reading " + inputs_[next_input_].filename().string(), "lines");
        ++next_input_;
      }
      if (reader_->next(line_)) {
        if (auto bad = find_invalid_utf8(line_))
          fail("{}:{}: invalid UTF-8 at byte {}", reader_->path().string(), reader_->line_number(),
               *bad + 1);
        ++sentences_;
        if (sentences_ % 4096 == 0)
          meter_->update(reader_->line_number(), reader_->read_fraction());
        return;
      }
      if (progress_)
        progress_(
            fmt::format("read {}: {} lines", reader_->path().string(), reader_->line_number()));
      reader_.reset();
    }
  }

  const std::vector<std::filesystem::path>& inputs_;
  const std::function<void(const std::string&)>& progress_;
  size_t next_input_ = 0;
  std::unique_ptr<LineReader> reader_;
  std::unique_ptr<ProgressMeter> meter_;
  std::string line_;
  bool done_ = false;
  int64_t sentences_ = 0;
  std::exception_ptr error_;
};

void check_options(const VocabTrainOptions& o) {
  TFM_CHECK(!o.inputs.empty(), "vocabulary training needs at least one input file");
  TFM_CHECK(!o.output_prefix.empty(), "vocabulary training needs an output prefix");
  TFM_CHECK(o.model_type == "bpe" || o.model_type == "unigram" || o.model_type == "word",
            "vocabulary type must be 'bpe', 'unigram' or 'word', got '{}'", o.model_type);
  TFM_CHECK(o.vocab_size > 4, "vocabulary size must be above 4 (the special symbols), got {}",
            o.vocab_size);
  TFM_CHECK(o.character_coverage > 0 && o.character_coverage <= 1,
            "character coverage must be in (0, 1], got {}", o.character_coverage);
  TFM_CHECK(o.input_sentence_size >= 0, "input sentence size must be >= 0 (0: all), got {}",
            o.input_sentence_size);
  // SentencePiece reserves this seed for "seed from std::random_device".
  TFM_CHECK(o.seed != 0xFFFFFFFFu, "seed 4294967295 is reserved, choose another");
  for (const auto& input : o.inputs) {
    std::error_code ec;
    TFM_CHECK(std::filesystem::is_regular_file(input, ec), "input file '{}' does not exist",
              input.string());
  }
}

std::filesystem::path with_suffix(const std::filesystem::path& prefix, const char* suffix) {
  std::filesystem::path path = prefix;
  path += suffix;
  return path;
}

}  // namespace

VocabTrainReport train_vocabulary(const VocabTrainOptions& options,
                                  const std::function<void(const std::string&)>& progress) {
  check_options(options);
  const auto started = std::chrono::steady_clock::now();
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::unordered_map<std::string, std::string> spec = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", fmt::format("{}", options.character_coverage)},
      {"num_threads", std::to_string(threads)},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"pad_piece", std::string(kPadPiece)},
      {"unk_piece", std::string(kUnkPiece)},
      {"bos_piece", std::string(kBosPiece)},
      {"eos_piece", std::string(kEosPiece)},
      // 0 = INFO, 2 = ERROR: SentencePiece logs every step of training at INFO.
      {"minloglevel", options.verbose ? "0" : "2"},
  };
  // A word vocabulary holds at most vocab_size words: fewer when the text has fewer.
  if (options.model_type == "word") spec["hard_vocab_limit"] = "false";
  if (options.input_sentence_size > 0) {
    spec["input_sentence_size"] = std::to_string(options.input_sentence_size);
    spec["shuffle_input_sentence"] = "true";
  }
  sentencepiece::SetRandomGeneratorSeed(options.seed);

  if (progress)
    progress(fmt::format("training a {} vocabulary of {} pieces on {} file(s)", options.model_type,
                         options.vocab_size, options.inputs.size()));
  FileSentenceIterator sentences(options.inputs, progress);
  std::string serialized;
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(spec, &sentences, &serialized);
  if (sentences.error()) std::rethrow_exception(sentences.error());
  if (!status.ok()) fail("SentencePiece training failed: {}", status.message());

  std::error_code ec;
  const std::filesystem::path parent = options.output_prefix.parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  VocabTrainReport report;
  report.model_path = with_suffix(options.output_prefix, ".model");
  report.vocab_path = with_suffix(options.output_prefix, ".vocab");
  write_file_atomically(report.model_path, serialized);

  // The .vocab listing (piece, score) as SentencePiece's own trainer writes it; for reading only.
  sentencepiece::SentencePieceProcessor processor;
  const auto loaded = processor.LoadFromSerializedProto(serialized);
  TFM_CHECK(loaded.ok(), "SentencePiece cannot read the model it trained: {}", loaded.message());
  std::string listing;
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    listing += fmt::format("{}\t{}\n", processor.IdToPiece(id), processor.GetScore(id));
  write_file_atomically(report.vocab_path, listing);

  report.sentences = sentences.sentences();
  report.vocab_size = Vocabulary(report.model_path).size();
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

Vocabulary::Vocabulary(const std::filesystem::path& model_path)
    : path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code ec;
  TFM_CHECK(std::filesystem::is_regular_file(path_, ec), "vocabulary '{}' does not exist",
            path_.string());
  load(read_file_bytes(path_));
}

Vocabulary::Vocabulary(std::string_view serialized_model, const std::filesystem::path& name)
    : path_(name), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  load(serialized_model);
}

Vocabulary Vocabulary::of_model_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "vocab.json", ec)) return Vocabulary(dir / "vocab.model");
  Vocabulary vocab;
  vocab.imported_ = std::make_unique<ImportedVocabulary>(dir);
  vocab.path_ = vocab.imported_->path();
  vocab.hash_ = vocab.imported_->hash();
  return vocab;
}

namespace {

// A BPE model scores its pieces by merge order: 0, -1, -2, ... (control and unknown pieces aside).
bool scored_by_merge_order(const sentencepiece::SentencePieceProcessor& processor) {
  int64_t rank = 0;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    if (processor.IsControl(id) || processor.IsUnknown(id)) continue;
    if (processor.GetScore(id) != static_cast<float>(-rank)) return false;
    ++rank;
  }
  return rank > 0;
}

}  // namespace

void Vocabulary::load(std::string_view bytes) {
  hash_ = hex64(fnv1a64(bytes));
  const auto status = processor_->LoadFromSerializedProto(bytes);
  TFM_CHECK(status.ok(), "vocabulary '{}' is not a SentencePiece model: {}", path_.string(),
            status.message());
  const struct {
    const char* role;
    int actual;
    int32_t expected;
    std::string_view piece;
  } specials[] = {{"pad", processor_->pad_id(), kPadId, kPadPiece},
                  {"unk", processor_->unk_id(), kUnkId, kUnkPiece},
                  {"bos", processor_->bos_id(), kBosId, kBosPiece},
                  {"eos", processor_->eos_id(), kEosId, kEosPiece}};
  for (const auto& s : specials) {
    TFM_CHECK(s.actual == s.expected,
              "vocabulary '{}': {} id is {}, expected {} (train it with `tfm vocab`)",
              path_.string(), s.role, s.actual, s.expected);
    TFM_CHECK(processor_->IdToPiece(s.expected) == s.piece,
              "vocabulary '{}': piece {} is '{}', expected '{}'", path_.string(), s.expected,
              processor_->IdToPiece(s.expected), s.piece);
  }
  bpe_ = scored_by_merge_order(*processor_);
}

Vocabulary::~Vocabulary() = default;
Vocabulary::Vocabulary(Vocabulary&&) noexcept = default;
Vocabulary& Vocabulary::operator=(Vocabulary&&) noexcept = default;

std::vector<int32_t> Vocabulary::encode(std::string_view text) const {
  if (imported_) return imported_->encode(text);
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  TFM_CHECK(status.ok(), "vocabulary '{}': cannot encode: {}", path_.string(), status.message());
  return {ids.begin(), ids.end()};
}

std::vector<int32_t> Vocabulary::sample_encode(std::string_view text, double dropout) const {
  TFM_CHECK(is_bpe(), "vocabulary '{}' is not a BPE model: BPE-dropout needs one", path_.string());
  TFM_CHECK(dropout >= 0 && dropout < 1, "BPE-dropout must be in [0, 1), got {}", dropout);
  std::vector<int> ids;
  // For a BPE model nbest_size is unused and alpha is the probability of skipping a merge.
  const auto status = processor_->SampleEncode(text, -1, static_cast<float>(dropout), &ids);
  TFM_CHECK(status.ok(), "vocabulary '{}': cannot encode: {}", path_.string(), status.message());
  return {ids.begin(), ids.end()};
}

bool Vocabulary::is_bpe() const {
  return bpe_;
}

std::vector<int32_t> Vocabulary::encode_target(std::string_view text) const {
  return imported_ ? imported_->encode_target(text) : encode(text);
}

std::string Vocabulary::decode(const std::vector<int32_t>& ids) const {
  if (imported_) return imported_->decode(ids);
  const int64_t n = size();
  for (int32_t id : ids)
    TFM_CHECK(id >= 0 && id < n, "vocabulary '{}': id {} out of range [0, {})", path_.string(), id,
              n);
  std::string text;
  const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  TFM_CHECK(status.ok(), "vocabulary '{}': cannot decode: {}", path_.string(), status.message());
  return text;
}

std::vector<std::string> Vocabulary::pieces(std::string_view text) const {
  if (imported_) return imported_->pieces(text);
  std::vector<std::string> out;
  const auto status = processor_->Encode(text, &out);
  TFM_CHECK(status.ok(), "vocabulary '{}': cannot encode: {}", path_.string(), status.message());
  return out;
}

std::string Vocabulary::piece(int32_t id) const {
  if (imported_) return imported_->piece(id);
  TFM_CHECK(id >= 0 && id < size(), "vocabulary '{}': id {} out of range [0, {})", path_.string(),
            id, size());
  return processor_->IdToPiece(id);
}

std::vector<int32_t> Vocabulary::source_ids(const std::vector<std::string>& pieces) const {
  std::vector<int32_t> ids;
  ids.reserve(pieces.size() + 1);
  for (const std::string& piece : pieces) ids.push_back(id(piece));
  return imported_ ? imported_->source_ids(std::move(ids)) : ids;
}

int32_t Vocabulary::id(std::string_view piece) const {
  if (imported_) return imported_->id(piece);
  return processor_->PieceToId(piece);
}

int64_t Vocabulary::size() const {
  if (imported_) return imported_->size();
  return processor_->GetPieceSize();
}

void Vocabulary::check_config(const ModelConfig& config,
                              const std::filesystem::path& config_path) const {
  if (imported_) return check_imported_config(config, config_path);
  TFM_CHECK(config.vocab_size == size(), "{}: vocab_size {} but {} has {} pieces",
            config_path.string(), config.vocab_size, path_.string(), size());
  // The constructor checked that this vocabulary's special ids are the fixed ones.
  const struct {
    const char* key;
    int32_t configured;
    int32_t id;
    std::string_view piece;
  } specials[] = {{"pad_id", config.pad_id, kPadId, kPadPiece},
                  {"unk_id", config.unk_id, kUnkId, kUnkPiece},
                  {"bos_id", config.bos_id, kBosId, kBosPiece},
                  {"eos_id", config.eos_id, kEosId, kEosPiece}};
  for (const auto& s : specials)
    TFM_CHECK(s.configured == s.id, "{}: {} {} but {} has {} id {} ({})", config_path.string(),
              s.key, s.configured, path_.string(), std::string_view(s.key).substr(0, 3), s.id,
              s.piece);
}

}  // namespace tfm::internal::data

namespace tfm::internal::data {

// An imported table names its specials: <unk> and </s> always, <pad> and <s> when the model has
// them (Marian's tables have no <s>: its models start the decoder from <pad>'s zero embedding).
void Vocabulary::check_imported_config(const ModelConfig& config,
                                       const std::filesystem::path& config_path) const {
  TFM_CHECK(config.vocab_size == size(), "{}: vocab_size {} but {} has {} pieces",
            config_path.string(), config.vocab_size, path_.string(), size());
  const struct {
    const char* key;
    int32_t configured;
    std::string_view piece;
  } specials[] = {{"pad_id", config.pad_id, kPadPiece},
                  {"unk_id", config.unk_id, kUnkPiece},
                  {"bos_id", config.bos_id, kBosPiece},
                  {"eos_id", config.eos_id, kEosPiece}};
  for (const auto& s : specials) {
    const int32_t id = imported_->find(s.piece);
    TFM_CHECK(id < 0 || id == s.configured, "{}: {} {} but {} has {} at id {}",
              config_path.string(), s.key, s.configured, path_.string(), s.piece, id);
  }
}

}  // namespace tfm::internal::data
