// The SentencePiece vocabulary: training (BPE and unigram, plain and gzipped input), the special
// ids, encode/decode round trips, and the errors of bad input and foreign models.
#include <sentencepiece_trainer.h>

#include <set>

#include "data_test_util.h"
#include "tfm/data/vocab.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::testing {
namespace {

using data::Vocabulary;

TEST(Vocabulary, TrainedModelHasTheSpecialIdsAndRoundTrips) {
  TempDir dir;
  const auto model = train_tiny_vocab(dir);
  EXPECT_TRUE(std::filesystem::exists(dir / "vocab_bpe.vocab"));
  const Vocabulary vocab(model);
  EXPECT_EQ(vocab.size(), 120);
  EXPECT_EQ(vocab.piece(0), "<pad>");
  EXPECT_EQ(vocab.piece(1), "<unk>");
  EXPECT_EQ(vocab.piece(2), "<s>");
  EXPECT_EQ(vocab.piece(3), "</s>");
  EXPECT_EQ(vocab.hash().size(), 16u);

  // Training sentences and unseen sentences of the same words, both languages.
  std::vector<std::string> sentences = generated_sentences(40, false, 99);
  for (const auto& s : generated_sentences(40, true, 98)) sentences.push_back(s);
  std::set<int32_t> seen;
  for (const std::string& sentence : sentences) {
    const std::vector<int32_t> ids = vocab.encode(sentence);
    ASSERT_FALSE(ids.empty());
    for (int32_t id : ids) {
      // Characters all occur in training: no unknowns, and never a special id inside a sentence.
      EXPECT_GE(id, 4) << sentence;
      EXPECT_LT(id, vocab.size());
      seen.insert(id);
    }
    EXPECT_LT(ids.size(), sentence.size()) << "BPE merged nothing in: " << sentence;
    EXPECT_EQ(vocab.decode(ids), sentence);
    // bos/eos/pad around the ids decode to nothing.
    std::vector<int32_t> framed = {data::kBosId};
    framed.insert(framed.end(), ids.begin(), ids.end());
    framed.insert(framed.end(), {data::kEosId, data::kPadId, data::kPadId});
    EXPECT_EQ(vocab.decode(framed), sentence);
  }
  EXPECT_GT(seen.size(), 60u);  // the sentences use much of the vocabulary
  // A character never seen in training is unknown.
  const auto unknown = vocab.encode("Ω");
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), data::kUnkId), unknown.end());
  expect_error([&] { vocab.decode({5, 120}); }, {"id 120 out of range"});
}

TEST(Vocabulary, GzippedInputTrainsTheSameModel) {
  TempDir dir;
  const auto plain = train_tiny_vocab(dir);
  write_gzip(dir / "en.txt.gz", read_text(dir / "en.txt"));
  data::VocabTrainOptions options;
  options.inputs = {dir / "en.txt.gz", dir / "de.txt"};
  options.output_prefix = dir / "sub" / "from_gz";  // the directory is created
  options.vocab_size = 120;
  options.num_threads = 1;
  std::vector<std::string> progress;
  const auto report =
      data::train_vocabulary(options, [&](const std::string& line) { progress.push_back(line); });
  EXPECT_EQ(report.sentences, 600);
  EXPECT_EQ(report.vocab_size, 120);
  EXPECT_EQ(read_text(report.model_path), read_text(plain));  // training is deterministic
  ASSERT_GE(progress.size(), 3u);
  EXPECT_NE(progress[1].find("en.txt.gz: 300 lines"), std::string::npos) << progress[1];
}

TEST(Vocabulary, UnigramAndSampledTraining) {
  TempDir dir;
  const Vocabulary unigram(train_tiny_vocab(dir, 100, "unigram"));
  EXPECT_EQ(unigram.size(), 100);
  const std::string sentence = generated_sentences(1, true, 5)[0];
  EXPECT_EQ(unigram.decode(unigram.encode(sentence)), sentence);

  // A sample of 200 of the 600 sentences, drawn with the seed: the same seed, the same model.
  data::VocabTrainOptions options;
  options.inputs = {dir / "en.txt", dir / "de.txt"};
  options.vocab_size = 80;
  options.input_sentence_size = 200;
  options.num_threads = 1;
  options.seed = 7;
  options.output_prefix = dir / "a";
  data::train_vocabulary(options);
  options.output_prefix = dir / "b";
  data::train_vocabulary(options);
  EXPECT_EQ(read_text(dir / "a.model"), read_text(dir / "b.model"));
}

TEST(Vocabulary, TrainingErrors) {
  TempDir dir;
  write_text(dir / "en.txt", joined_lines(generated_sentences(50, false, 1)));
  data::VocabTrainOptions options;
  options.inputs = {dir / "en.txt"};
  options.output_prefix = dir / "v";
  options.num_threads = 1;

  options.vocab_size = 5000;  // far more than 50 sentences allow
  expect_error([&] { data::train_vocabulary(options); }, {"Vocabulary size too high"});
  options.vocab_size = 60;
  options.model_type = "char";
  expect_error([&] { data::train_vocabulary(options); }, {"'bpe', 'unigram' or 'word'", "char"});
  options.model_type = "bpe";
  options.inputs = {dir / "en.txt", dir / "missing.txt"};
  expect_error([&] { data::train_vocabulary(options); }, {"missing.txt", "does not exist"});

  std::string bad = joined_lines(generated_sentences(30, false, 2));
  bad += "caf\xe9 au lait\n";  // Latin-1, not UTF-8, on line 31
  write_text(dir / "latin1.txt", bad);
  options.inputs = {dir / "en.txt", dir / "latin1.txt"};
  expect_error([&] { data::train_vocabulary(options); },
               {"latin1.txt:31:", "invalid UTF-8 at byte 4"});
  EXPECT_FALSE(std::filesystem::exists(dir / "v.model"));
}

TEST(Vocabulary, RefusesForeignModels) {
  TempDir dir;
  expect_error([&] { Vocabulary(dir / "none.model"); }, {"none.model", "does not exist"});
  write_text(dir / "junk.model", "not a model");
  expect_error([&] { Vocabulary(dir / "junk.model"); },
               {"junk.model", "is not a SentencePiece model"});

  // SentencePiece's defaults: unk 0, bos 1, eos 2, no pad.
  write_text(dir / "en.txt", joined_lines(generated_sentences(200, false, 3)));
  const auto status =
      sentencepiece::SentencePieceTrainer::Train({{"input", (dir / "en.txt").string()},
                                                  {"model_prefix", (dir / "default").string()},
                                                  {"vocab_size", "60"},
                                                  {"minloglevel", "2"}});
  ASSERT_TRUE(status.ok()) << status.message();
  expect_error([&] { Vocabulary(dir / "default.model"); },
               {"default.model", "pad id is -1, expected 0"});
}

TEST(Vocabulary, CommandLine) {
  TempDir dir;
  write_text(dir / "en.txt", joined_lines(generated_sentences(300, false, 11)));
  write_gzip(dir / "de.txt.gz", joined_lines(generated_sentences(300, true, 12)));
  const std::string prefix = (dir / "spm").string();
  const CommandResult run = run_tfm_command("vocab -i '" + (dir / "en.txt").string() + "' '" +
                                                (dir / "de.txt.gz").string() + "' -o '" + prefix +
                                                "' --size 100 --threads 1",
                                            dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(run.err.empty()) << "SentencePiece's log leaked: " << run.err.substr(0, 300);
  EXPECT_NE(run.out.find("100 pieces (bpe"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("from 600 sentences"), std::string::npos) << run.out;
  EXPECT_EQ(Vocabulary(prefix + ".model").size(), 100);
  // Piece listing: one line per piece.
  const std::string listing = read_text(prefix + ".vocab");
  EXPECT_EQ(std::count(listing.begin(), listing.end(), '\n'), 100);
  EXPECT_EQ(listing.rfind("<pad>\t", 0), 0u);

  const CommandResult missing =
      run_tfm_command("vocab -i '" + (dir / "nope.txt").string() + "' -o x", dir);
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.err,
            "tfm: error: input file '" + (dir / "nope.txt").string() + "' does not exist\n");
  const CommandResult bad_type = run_tfm_command("vocab -i a -o b --type char", dir);
  EXPECT_NE(bad_type.status, 0);
  EXPECT_EQ(std::count(bad_type.err.begin(), bad_type.err.end(), '\n'), 1) << bad_type.err;
}

}  // namespace
}  // namespace tfm::internal::testing
