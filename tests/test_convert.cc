// tfm convert: the fixtures of tools/make_convert_fixtures.py (small random models in Marian's
// .npz layout, two variants, and Hugging Face's MarianMT layout; fairseq and OpenNMT-py
// checkpoints as python/tfm/convert.py stages them) converted and checked against the logits and
// greedy outputs that script computes in float64 with each framework's semantics from its own
// arrays; the export to CTranslate2 against bench/ct2_convert.py; and bad inputs.
#include <gtest/gtest.h>
#include <minizip/zip.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "build_paths.h"
#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/convert/ctranslate2.h"
#include "tfm/convert/huggingface.h"
#include "tfm/convert/marian.h"
#include "tfm/convert/npz.h"
#include "tfm/convert/tfm_names.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/io/checksum.h"
#include "tfm/io/safetensors.h"
#include "tfm/model.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/translator.h"

namespace tfm::internal::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(tfm_source_dir()) / "tests/fixtures/convert";
constexpr int64_t kMarianVocab =
    54;  // the fixtures' id table, the appended <pad> and <s> not counted

const SafeTensors& reference() {
  static const SafeTensors file = read_safetensors(kFixtures / "reference.safetensors");
  return file;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The logits of the converted model on the fixture's batch, [batch, T, V + 1].
Tensor converted_logits(const fs::path& dir, const std::string& name) {
  const LoadedModel loaded = load_model_dir(dir);
  nn::Transformer model(loaded.config);
  model.load(loaded.parameters);
  const Tensor tgt_in = reference().get(name + ".tgt_in");
  // Targets only count the loss's tokens: any non-pad ids (tgt_in starts with pad, the start).
  const Tensor tgt_out = Tensor::from_ints(
      tgt_in.shape(), std::vector<int32_t>(static_cast<size_t>(tgt_in.numel()), 3));
  const nn::Batch batch =
      nn::Batch::from_ids(reference().get(name + ".src"), tgt_in, tgt_out, loaded.config.pad_id);
  auto ctx = nn::ForwardContext::inference();
  return model.forward(batch, ctx);
}

// The converted model's logits against the reference's over the reference's tokens; the
// `appended` tokens after them (Marian's <pad> and <s>, the pieces only an OpenNMT-py model's
// source vocabulary has) are never candidates.
void expect_logits_match(const fs::path& dir, const std::string& name, int64_t appended) {
  const Tensor logits = converted_logits(dir, name);
  const Tensor expected = reference().get(name + ".logits");
  const int64_t vocab = expected.dim(2), width = vocab + appended;
  ASSERT_EQ(logits.dim(0), expected.dim(0));
  ASSERT_EQ(logits.dim(1), expected.dim(1));
  ASSERT_EQ(logits.dim(2), width);
  const std::vector<float> a = logits.to_floats(), e = expected.to_floats();
  double max_diff = 0, scale = 0;
  for (int64_t row = 0; row < logits.dim(0) * logits.dim(1); ++row) {
    for (int64_t v = 0; v < vocab; ++v) {
      const double want = e[static_cast<size_t>(row * vocab + v)];
      max_diff = std::max(max_diff, std::fabs(a[static_cast<size_t>(row * width + v)] - want));
      scale = std::max(scale, std::fabs(want));
    }
    for (int64_t v = vocab; v < width; ++v)
      EXPECT_LT(a[static_cast<size_t>(row * width + v)], -1e8);
  }
  EXPECT_GT(scale, 1.0);
  EXPECT_LE(max_diff / scale, 2e-5) << name;
}

void expect_greedy_match(const fs::path& dir, const std::string& name) {
  const LoadedModel loaded = load_model_dir(dir);
  nn::Transformer model(loaded.config);
  model.load(loaded.parameters);
  const Tensor src = reference().get(name + ".src");
  std::vector<std::vector<int32_t>> sources;
  const std::vector<int32_t> ids = src.to_ints();
  for (int64_t row = 0; row < src.dim(0); ++row) {
    std::vector<int32_t> s;
    for (int64_t t = 0; t < src.dim(1); ++t) {
      const int32_t id = ids[static_cast<size_t>(row * src.dim(1) + t)];
      if (id != loaded.config.pad_id) s.push_back(id);
    }
    sources.push_back(s);
  }
  decode::TranslateOptions options;
  options.beam_size = 1;
  options.max_length = 8;
  const auto results = decode::translate(model, sources, options);
  const Tensor greedy = reference().get(name + ".greedy");
  const std::vector<int32_t> want = greedy.to_ints();
  for (size_t row = 0; row < sources.size(); ++row) {
    std::vector<int32_t> expected;
    bool ended = false;
    for (int64_t t = 0; t < greedy.dim(1); ++t) {
      const int32_t id = want[row * static_cast<size_t>(greedy.dim(1)) + static_cast<size_t>(t)];
      if (id == loaded.config.eos_id) ended = true;
      if (id < 0 || id == loaded.config.eos_id) break;
      expected.push_back(id);
    }
    EXPECT_EQ(results[row].front().tokens, expected) << name << " sentence " << row;
    EXPECT_EQ(results[row].front().ended_by_eos, ended) << name << " sentence " << row;
  }
}

// `model` written as a model directory, its logits and greedy outputs against the reference's for
// `name` (`appended`: as expect_logits_match).
void expect_matches_reference(const convert::ImportedModel& model, const std::string& name,
                              int64_t appended) {
  TempDir tmp;
  convert::write_imported_model(model, tmp / "m", name);
  expect_logits_match(tmp / "m", name, appended);
  expect_greedy_match(tmp / "m", name);
}

// Marian: + <pad> (the decoder start) and <s>.
TEST(ConvertMarian, PostNormSwishTiedMatchesTheReference) {
  expect_matches_reference(convert::import_marian(kFixtures / "marian"), "marian", 2);
}

TEST(ConvertMarian, PreNormReluUntiedMatchesTheReference) {
  const auto model = convert::import_marian(kFixtures / "marian_prenorm");
  EXPECT_EQ(model.config["tie_embeddings"], "none");
  EXPECT_EQ(model.config["norm"], "pre");
  expect_matches_reference(model, "marian_prenorm", 2);
}

// fairseq: the folders python/tfm/convert.py staged from the fixtures' checkpoint.pt (written by
// tools/make_convert_fixtures.py with it), through `--from tfm-names`, against fairseq's semantics.
// The decoder starts from </s>, the eos: no token is appended.
TEST(ConvertFairseq, PostNormReluSharedSinusoidsMatchTheReference) {
  const auto model = convert::import_tfm_names(kFixtures / "fairseq_staged");
  EXPECT_EQ(model.config["decoder_start_id"], 2);
  EXPECT_EQ(model.config["eos_id"], 2);
  EXPECT_TRUE(model.source_eos);
  expect_matches_reference(model, "fairseq", 0);
}

TEST(ConvertFairseq, PreNormGeluUntiedLearnedPositionsMatchTheReference) {
  const auto model = convert::import_tfm_names(kFixtures / "fairseq_prenorm_staged");
  EXPECT_EQ(model.config["positional"], "learned");
  expect_matches_reference(model, "fairseq_prenorm", 0);
}

// OpenNMT-py: the folders python/tfm/convert.py staged from the fixtures' model_step_1000.pt,
// against OpenNMT-py's semantics (pre-norm, sinusoids from position 0, no </s> after the source).
TEST(ConvertOpenNmt, SharedVocabularyAllTiedInterleavedReluMatchesTheReference) {
  const auto model = convert::import_tfm_names(kFixtures / "opennmt_staged");
  EXPECT_EQ(model.config["tie_embeddings"], "all");
  EXPECT_EQ(model.config["norm"], "pre");
  EXPECT_EQ(model.config["sinusoid"], "interleaved");
  EXPECT_EQ(model.config["attention_bias"], false);
  EXPECT_EQ(model.config["pad_id"], 1);  // <blank>
  EXPECT_FALSE(model.source_eos);
  expect_matches_reference(model, "opennmt", 0);
  TempDir tmp;
  convert::write_imported_model(model, tmp / "m", "opennmt");
  const data::Vocabulary vocab = data::Vocabulary::of_model_dir(tmp / "m");
  EXPECT_EQ(vocab.encode("the cat").size(), vocab.pieces("the cat").size())
      << "OpenNMT-py's sources have no </s>";
}

// Separate vocabularies: tfm's table is the target's pieces, then the source-only ones.
constexpr int64_t kOpenNmtSourceOnlyPieces = 16;

TEST(ConvertOpenNmt, SeparateVocabulariesConcatGeluMatchTheReference) {
  const auto model = convert::import_tfm_names(kFixtures / "opennmt_separate_staged");
  EXPECT_EQ(model.config["tie_embeddings"], "decoder");
  EXPECT_EQ(model.config["sinusoid"], "halves_t2t");
  EXPECT_EQ(model.config["activation"], "gelu");
  EXPECT_EQ(model.config["attention_bias"], true);
  expect_matches_reference(model, "opennmt_separate", kOpenNmtSourceOnlyPieces);
}

TEST(ConvertMarian, WritesAModelDirectoryWithChecksumsAndTheVocabularies) {
  TempDir tmp;
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "marian");
  for (const char* file :
       {"config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json"})
    EXPECT_TRUE(fs::exists(tmp / "m" / file)) << file;
  EXPECT_FALSE(fs::exists(tmp / "m" / "vocab.model"));
  const LoadedModel loaded = load_model_dir(tmp / "m");
  EXPECT_TRUE(loaded.checksums_verified);
  EXPECT_EQ(loaded.config.vocab_size, kMarianVocab + 2);  // + <pad> (the start) and <s>
  EXPECT_EQ(loaded.config.pad_id, kMarianVocab);
  EXPECT_EQ(loaded.config.decoder_start(), kMarianVocab);
  EXPECT_EQ(loaded.config.bos_id, kMarianVocab + 1);
  EXPECT_EQ(loaded.config.eos_id, 0);
  EXPECT_EQ(loaded.metadata.at("vocab_crc32:source.spm"),
            crc32_hex(crc32_of_file(kFixtures / "marian/source.spm")));
  // Another model's target.spm in the directory is refused.
  fs::copy_file(tmp / "m/source.spm", tmp / "m/target.spm", fs::copy_options::overwrite_existing);
  EXPECT_NE(error_of([&] { load_model_dir(tmp / "m"); }).find("target.spm"), std::string::npos);
}

TEST(ImportedVocabulary, EncodesWithTheSourceModelAndDecodesWithTheTarget) {
  TempDir tmp;
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "marian");
  const data::Vocabulary vocab = data::Vocabulary::of_model_dir(tmp / "m");
  EXPECT_EQ(vocab.size(), kMarianVocab + 2);
  EXPECT_EQ(vocab.path(), tmp / "m" / "vocab.json");
  const std::vector<int32_t> ids = vocab.encode("the cat sat on the mat");
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(ids.back(), 0);  // </s> ends Marian's sources
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_GT(ids[i], 1) << "no <unk>: the pieces are in the table";
    EXPECT_EQ(vocab.id(vocab.piece(ids[i])), ids[i]);
  }
  // Output pieces are the target model's: its own split of a German sentence, numbered by the
  // table, comes back as the sentence.
  sentencepiece::SentencePieceProcessor target;
  ASSERT_TRUE(target.Load((tmp / "m" / "target.spm").string()).ok());
  std::vector<std::string> pieces;
  ASSERT_TRUE(target.Encode("der hund lief im park", &pieces).ok());
  std::vector<int32_t> output;
  for (const std::string& piece : pieces) output.push_back(vocab.id(piece));
  EXPECT_EQ(std::count(output.begin(), output.end(), 1), 0) << "every target piece is in the table";
  EXPECT_EQ(vocab.decode(output), "der hund lief im park");
  vocab.check_config(load_model_dir(tmp / "m").config, tmp / "m" / "config.json");
  // A piece no model knows is <unk>; the decoder's <pad> start and </s> are not text.
  const std::vector<int32_t> unknown = vocab.encode("q");
  EXPECT_EQ(std::count(unknown.begin(), unknown.end(), 1), 1);
  EXPECT_EQ(vocab.decode({static_cast<int32_t>(kMarianVocab), output[0], 0}),
            vocab.decode({output[0]}));
}

// translate_tokens and Python's token lists: a source given as pieces ends with </s> as its text
// does (vocab.json's "source_eos"), and translates as the text does.
TEST(ImportedVocabulary, PiecesGetTheSourceEndAsTextDoes) {
  TempDir tmp;
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "marian");
  const data::Vocabulary vocab = data::Vocabulary::of_model_dir(tmp / "m");
  const std::string text = "the cat sat on the mat";
  const std::vector<int32_t> ids = vocab.source_ids(vocab.pieces(text));
  EXPECT_EQ(ids, vocab.encode(text));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 0);
  EXPECT_EQ(ids.size(), vocab.pieces(text).size() + 1);
  // An empty source stays empty (not translated), as with vocab.model.
  EXPECT_TRUE(vocab.source_ids({}).empty());
  EXPECT_TRUE(vocab.encode("").empty());

  const auto model = tfm::Model::load(tmp / "m");
  tfm::Translator translator(model, {1});
  tfm::TranslationOptions options;
  options.beam_size = 2;
  options.max_length = 8;
  const std::vector<std::string> sources = {text, "der hund lief im park", ""};
  std::vector<std::vector<std::string>> tokens;
  for (const std::string& source : sources) tokens.push_back(model->tokenize(source));
  const auto from_text = translator.translate(sources, options);
  const auto from_tokens = translator.translate_tokens(tokens, options);
  ASSERT_EQ(from_text.size(), from_tokens.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(from_text[i].hypotheses.size(), from_tokens[i].hypotheses.size()) << i;
    for (size_t k = 0; k < from_text[i].hypotheses.size(); ++k) {
      EXPECT_EQ(from_text[i].hypotheses[k].tokens, from_tokens[i].hypotheses[k].tokens) << i;
      EXPECT_EQ(from_text[i].hypotheses[k].score, from_tokens[i].hypotheses[k].score) << i;
    }
  }
  EXPECT_TRUE(from_tokens.back().hypotheses.empty());
}

TEST(ImportedVocabulary, TargetLanguageTokenIsOneIdOrAnError) {
  TempDir tmp;
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "marian");
  const std::string missing =
      error_of([&] { data::Vocabulary::of_model_dir(tmp / "m").encode(">>deu<< the cat"); });
  EXPECT_EQ(missing, "the target-language token '>>deu<<' is not in the vocabulary " +
                         (tmp / "m" / "vocab.json").string() +
                         " (the model does not translate into that language)");
  auto table = nlohmann::json::parse(read_text(tmp / "m" / "vocab.json"));
  table["pieces"].push_back(">>deu<<");
  std::ofstream(tmp / "m" / "vocab.json") << table.dump();
  const data::Vocabulary vocab = data::Vocabulary::of_model_dir(tmp / "m");
  const std::vector<int32_t> ids = vocab.encode(">>deu<< the cat");
  EXPECT_EQ(ids.front(), kMarianVocab + 2);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), vocab.encode("the cat"));
}

// A reference to score is split by target.spm, without </s> (the scorer appends eos); a source
// given as pieces gets </s> as a text source does (CTranslate2's add_source_eos for such a model).
TEST(ImportedVocabulary, TargetsUseTheTargetModelAndTokenSourcesEndWithEos) {
  TempDir tmp;
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "marian");
  const data::Vocabulary vocab = data::Vocabulary::of_model_dir(tmp / "m");
  sentencepiece::SentencePieceProcessor target;
  ASSERT_TRUE(target.Load((tmp / "m" / "target.spm").string()).ok());
  std::vector<std::string> pieces;
  ASSERT_TRUE(target.Encode("der hund lief im park", &pieces).ok());
  std::vector<int32_t> expected;
  for (const std::string& piece : pieces) expected.push_back(vocab.id(piece));
  EXPECT_EQ(vocab.encode_target("der hund lief im park"), expected);
  EXPECT_EQ(vocab.source_ids(vocab.pieces("the cat sat on the mat")),
            vocab.encode("the cat sat on the mat"));
  EXPECT_TRUE(vocab.source_ids({}).empty());

  // Through the public API: token input translates as text input, and a score covers the
  // target's pieces and one </s>.
  tfm::Translator translator(tfm::Model::load(tmp / "m"), {1});
  tfm::TranslationOptions options;
  options.max_length = 8;
  const auto by_text = translator.translate({"the cat sat on the mat"}, options);
  const auto by_tokens =
      translator.translate_tokens({translator.model().tokenize("the cat sat on the mat")}, options);
  ASSERT_EQ(by_text.size(), 1u);
  ASSERT_EQ(by_tokens.size(), 1u);
  EXPECT_EQ(by_tokens[0].hypotheses.at(0).tokens, by_text[0].hypotheses.at(0).tokens);
  EXPECT_EQ(by_tokens[0].hypotheses.at(0).score, by_text[0].hypotheses.at(0).score);
  const auto scored = translator.score({"the cat sat on the mat"}, {"der hund lief im park"});
  std::vector<std::string> tokens = pieces;
  tokens.push_back("</s>");
  ASSERT_EQ(scored.size(), 1u);
  EXPECT_EQ(scored[0].tokens, tokens);
  EXPECT_EQ(scored[0].token_log_probs.size(), tokens.size());
}

TEST(ConvertMarian, ReadsTheVocabularyYamlQuoting) {
  TempDir tmp;
  std::ofstream(tmp / "v.yml") << "</s>: 0\n<unk>: 1\n\"\\\"\": 3\n'it''s': 2\n\":\": 4\n";
  EXPECT_EQ(convert::read_marian_vocab(tmp / "v.yml"),
            (std::vector<std::string>{"</s>", "<unk>", "it's", "\"", ":"}));
  std::ofstream(tmp / "bad.yml") << "</s>: 0\nno id here\n";
  EXPECT_EQ(error_of([&] { convert::read_marian_vocab(tmp / "bad.yml"); }),
            (tmp / "bad.yml").string() + ":2: not a 'piece: id' line: no id here");
}

TEST(ConvertHuggingFace, SameParametersAsTheMarianOriginal) {
  TempDir tmp;
  convert::write_imported_model(convert::import_huggingface(kFixtures / "huggingface"), tmp / "hf",
                                "hf");
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "m", "m");
  const LoadedModel hf = load_model_dir(tmp / "hf"), marian = load_model_dir(tmp / "m");
  ModelConfig expected = marian.config;
  expected.layer_norm_eps = 1e-5;  // torch.nn.LayerNorm's, where Marian's transformer has 1e-6
  expected.sinusoid = "halves";    // modeling_marian.py's own table, not Marian's
  expected.max_positions = 512;    // max_position_embeddings
  EXPECT_EQ(config_to_json(hf.config).dump(), config_to_json(expected).dump());
  ASSERT_EQ(hf.parameters.size(), marian.parameters.size());
  for (size_t i = 0; i < hf.parameters.size(); ++i) {
    EXPECT_EQ(hf.parameters[i].first, marian.parameters[i].first);
    EXPECT_EQ(hf.parameters[i].second.to_floats(), marian.parameters[i].second.to_floats())
        << hf.parameters[i].first;
  }
  for (const char* file : {"source.spm", "target.spm", "vocab.json"})
    EXPECT_EQ(read_text(tmp / "hf" / file), read_text(tmp / "m" / file)) << file;
}

// Bad inputs: a copy of a fixture with one thing wrong, and the one-line error it gets.

std::string npy(const convert::NpyArray& a) {
  std::string shape;
  for (int64_t d : a.shape) shape += std::to_string(d) + ", ";
  std::string header =
      "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  const auto length = static_cast<uint16_t>(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(length & 0xff) +
         static_cast<char>(length >> 8) + header + a.bytes;
}

// numpy.savez's layout: one stored (uncompressed) member <name>.npy per array.
void write_npz(const fs::path& path, const std::map<std::string, convert::NpyArray>& arrays) {
  zipFile zip = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(zip, nullptr);
  for (const auto& [name, array] : arrays) {
    const std::string bytes = npy(array);
    ASSERT_EQ(zipOpenNewFileInZip64(zip, (name + ".npy").c_str(), nullptr, nullptr, 0, nullptr, 0,
                                    nullptr, 0, 0, 0),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(zip, bytes.data(), static_cast<unsigned>(bytes.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(zip), ZIP_OK);
  }
  ASSERT_EQ(zipClose(zip, nullptr), ZIP_OK);
}

// The error of converting marian/ after `edit` changed its arrays.
std::string marian_error(
    const TempDir& tmp,
    const std::function<void(std::map<std::string, convert::NpyArray>&)>& edit) {
  fs::copy(kFixtures / "marian", tmp / "in", fs::copy_options::recursive);
  const fs::path npz = tmp / "in" / "opus.spm.transformer.npz";
  auto arrays = convert::read_npz(npz);
  edit(arrays);
  fs::remove(npz);
  write_npz(npz, arrays);
  return error_of([&] { convert::import_marian(tmp / "in"); });
}

TEST(ConvertMarian, RoundTripOfTheTestsNpzWriterIsAccepted) {
  TempDir tmp;
  EXPECT_EQ(marian_error(tmp, [](auto&) {}), "(no error)");
}

TEST(ConvertMarian, MissingArrayIsAnErrorNamingFileAndArray) {
  TempDir tmp;
  EXPECT_EQ(marian_error(tmp, [](auto& a) { a.erase("decoder_l1_context_Wk"); }),
            (tmp / "in/opus.spm.transformer.npz").string() +
                ": array 'decoder_l1_context_Wk' is missing");
}

TEST(ConvertMarian, WrongShapeIsAnErrorNamingFileAndArray) {
  TempDir tmp;
  EXPECT_EQ(marian_error(tmp,
                         [](auto& a) {
                           auto& w = a.at("encoder_l2_ffn_W1");
                           w.shape = {16, 31};
                           w.bytes.resize(16 * 31 * 4);
                         }),
            (tmp / "in/opus.spm.transformer.npz").string() +
                ": array 'encoder_l2_ffn_W1' has shape [16, 31], expected [16, 32]");
}

TEST(ConvertMarian, UnsupportedVariantsAreErrors) {
  TempDir a, b, c;
  const std::string tanh = marian_error(a, [](auto& arrays) {
    std::string& yml = arrays.at("special:model.yml").bytes;
    const size_t at = yml.find("transformer-ffn-activation: swish");
    yml.replace(at, 33, "transformer-ffn-activation: tanh");
    arrays.at("special:model.yml").shape = {static_cast<int64_t>(yml.size())};
  });
  EXPECT_EQ(tanh, (a / "in/opus.spm.transformer.npz").string() +
                      ": --transformer-ffn-activation tanh (swish, relu, gelu) is not supported");
  // An array tfm would not read (here --transformer-postprocess-emb n's embedding LayerNorm).
  const std::string extra = marian_error(b, [](auto& arrays) {
    arrays["encoder_emb_ln_scale_pre"] = arrays.at("encoder_l1_self_bq");
  });
  EXPECT_EQ(extra, (b / "in/opus.spm.transformer.npz").string() +
                       ": array 'encoder_emb_ln_scale_pre' is not read by tfm (an unsupported "
                       "variant)");
  const std::string depth = marian_error(c, [](auto& arrays) {
    std::string& yml = arrays.at("special:model.yml").bytes;
    yml.replace(yml.find("dec-depth: 2"), 12, "dec-depth: 0");
  });
  EXPECT_EQ(depth, (c / "in/opus.spm.transformer.npz").string() +
                       ": enc-depth 2 with dec-depth 0 (each at least 1) is not supported");
}

// A deep encoder over a shallow decoder (OPUS-MT's students: enc-depth 6, dec-depth 2): the
// fixture with dec-depth 1 and its second decoder layer's arrays left out converts to the same
// parameters as the whole model less decoder.layers.1, and Hugging Face's layout of the same
// model (decoder_layers 1) to the same again.
TEST(ConvertMarian, ShallowerDecoderKeepsTheEncodersLayers) {
  TempDir tmp;
  fs::copy(kFixtures / "marian", tmp / "marian", fs::copy_options::recursive);
  const fs::path npz = tmp / "marian" / "opus.spm.transformer.npz";
  auto arrays = convert::read_npz(npz);
  std::string& yml = arrays.at("special:model.yml").bytes;
  yml.replace(yml.find("dec-depth: 2"), 12, "dec-depth: 1");
  std::erase_if(arrays, [](const auto& a) { return a.first.starts_with("decoder_l2_"); });
  fs::remove(npz);
  write_npz(npz, arrays);
  convert::write_imported_model(convert::import_marian(tmp / "marian"), tmp / "shallow", "m");
  convert::write_imported_model(convert::import_marian(kFixtures / "marian"), tmp / "whole", "m");
  const LoadedModel shallow = load_model_dir(tmp / "shallow"),
                    whole = load_model_dir(tmp / "whole");
  EXPECT_EQ(shallow.config.layers, 2);
  EXPECT_EQ(shallow.config.decoder_layers, 1);
  EXPECT_EQ(shallow.config.decoder_depth(), 1);
  std::vector<std::pair<std::string, std::vector<float>>> expected;
  for (const auto& [name, tensor] : whole.parameters)
    if (!name.starts_with("decoder.layers.1.")) expected.emplace_back(name, tensor.to_floats());
  ASSERT_EQ(shallow.parameters.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(shallow.parameters[i].first, expected[i].first);
    EXPECT_EQ(shallow.parameters[i].second.to_floats(), expected[i].second) << expected[i].first;
  }

  fs::copy(kFixtures / "huggingface", tmp / "hf", fs::copy_options::recursive);
  std::string config = read_text(tmp / "hf" / "config.json");
  config.replace(config.find("\"decoder_layers\": 2"), 19, "\"decoder_layers\": 1");
  std::ofstream(tmp / "hf" / "config.json") << config;
  SafeTensors st = read_safetensors(tmp / "hf" / "model.safetensors");
  std::erase_if(st.tensors,
                [](const auto& t) { return t.first.starts_with("model.decoder.layers.1."); });
  write_safetensors(tmp / "hf" / "model.safetensors", std::vector<std::pair<std::string, Tensor>>(
                                                          st.tensors.begin(), st.tensors.end()));
  convert::write_imported_model(convert::import_huggingface(tmp / "hf"), tmp / "hf_out", "hf");
  const LoadedModel hf = load_model_dir(tmp / "hf_out");
  EXPECT_EQ(hf.config.decoder_layers, 1);
  ASSERT_EQ(hf.parameters.size(), shallow.parameters.size());
  for (size_t i = 0; i < hf.parameters.size(); ++i) {
    EXPECT_EQ(hf.parameters[i].first, shallow.parameters[i].first);
    EXPECT_EQ(hf.parameters[i].second.to_floats(), shallow.parameters[i].second.to_floats())
        << hf.parameters[i].first;
  }

  // Exported to CTranslate2, each stack keeps its own depth.
  convert::export_ctranslate2(tmp / "shallow", tmp / "ct2", false);
  const std::string bin = read_text(tmp / "ct2" / "model.bin");
  EXPECT_NE(bin.find("encoder/layer_1/ffn/linear_0/weight"), std::string::npos);
  EXPECT_NE(bin.find("decoder/layer_0/ffn/linear_0/weight"), std::string::npos);
  EXPECT_EQ(bin.find("decoder/layer_1/"), std::string::npos);
}

TEST(ConvertMarian, TruncatedNpzIsAnErrorNamingTheFile) {
  TempDir tmp;
  fs::copy(kFixtures / "marian", tmp / "in", fs::copy_options::recursive);
  const fs::path npz = tmp / "in" / "opus.spm.transformer.npz";
  fs::resize_file(npz, fs::file_size(npz) / 2);
  EXPECT_EQ(error_of([&] { convert::import_marian(tmp / "in"); }),
            npz.string() + ": not a zip archive (.npz), or truncated");
}

TEST(ConvertMarian, MissingSentencePieceModelIsAnError) {
  TempDir tmp;
  fs::copy(kFixtures / "marian", tmp / "in", fs::copy_options::recursive);
  fs::remove(tmp / "in" / "target.spm");
  EXPECT_EQ(error_of([&] { convert::import_marian(tmp / "in"); }),
            (tmp / "in/target.spm").string() + ": cannot be read (missing?)");
}

// The error of converting huggingface/ after `edit` changed its tensors.
std::string huggingface_error(const TempDir& tmp,
                              const std::function<void(std::map<std::string, Tensor>&)>& edit) {
  fs::copy(kFixtures / "huggingface", tmp / "in", fs::copy_options::recursive);
  const fs::path file = tmp / "in" / "model.safetensors";
  SafeTensors st = read_safetensors(file);
  edit(st.tensors);
  std::vector<std::pair<std::string, Tensor>> tensors(st.tensors.begin(), st.tensors.end());
  write_safetensors(file, tensors);
  return error_of([&] { convert::import_huggingface(tmp / "in"); });
}

TEST(ConvertHuggingFace, BadTensorsAreErrorsNamingFileAndTensor) {
  TempDir a, b;
  EXPECT_EQ(huggingface_error(a, [](auto& t) { t.erase("model.decoder.layers.1.fc2.bias"); }),
            (a / "in/model.safetensors").string() +
                ": tensor 'model.decoder.layers.1.fc2.bias' is missing");
  EXPECT_EQ(huggingface_error(
                b,
                [](auto& t) {
                  t["model.encoder.layers.0.self_attn.k_proj.weight"] = Tensor::zeros({16, 8});
                }),
            (b / "in/model.safetensors").string() +
                ": tensor 'model.encoder.layers.0.self_attn.k_proj.weight' has shape [16, 8], "
                "expected [16, 16]");
}

TEST(ConvertHuggingFace, UnsupportedConfigurationIsAnError) {
  TempDir tmp;
  fs::copy(kFixtures / "huggingface", tmp / "in", fs::copy_options::recursive);
  std::string config = read_text(tmp / "in" / "config.json");
  config.replace(config.find("\"marian\""), 8, "\"bart\"");
  std::ofstream(tmp / "in" / "config.json") << config;
  EXPECT_EQ(
      error_of([&] { convert::import_huggingface(tmp / "in"); }),
      (tmp / "in/config.json").string() + ": model_type 'bart' (only marian) is not supported");
}

TEST(ConvertCommand, ConvertsAndRefusesWithOneLine) {
  TempDir tmp;
  const CommandResult ok = run_tfm_command(
      "convert --from marian -i " + quoted(kFixtures / "marian") + " -o " + quoted(tmp / "m"), tmp);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_TRUE(fs::exists(tmp / "m" / "model.safetensors"));
  const CommandResult bad = run_tfm_command(
      "convert --from huggingface -i " + quoted(kFixtures / "marian") + " -o " + quoted(tmp / "x"),
      tmp);
  EXPECT_NE(bad.status, 0);
  EXPECT_EQ(lines_of(bad.err).size(), 1u) << bad.err;
  EXPECT_NE(bad.err.find("marian/config.json"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp / "x"));
}

// The export writes what bench/ct2_convert.py writes for a tfm model of the paper's architecture:
// the CRC-32s of its model.bin for tests/fixtures/tiny, from
//   /usr/bin/python3 bench/ct2_convert.py --model tests/fixtures/tiny --out OUT --positions 64
//       [--quantization int8]
TEST(ConvertCTranslate2, ModelBinIsTheBenchScriptsByteForByte) {
  TempDir tmp;
  fs::copy(fs::path(tfm_source_dir()) / "tests/fixtures/tiny", tmp / "tiny",
           fs::copy_options::recursive);
  std::vector<std::string> pieces = {"<pad>", "<unk>", "<s>", "</s>"};
  for (int i = 4; i < 60; ++i) pieces.push_back(fmt::format("w{}", i));
  std::ofstream(tmp / "tiny" / "vocab.json") << nlohmann::json({{"pieces", pieces}}).dump();
  convert::export_ctranslate2(tmp / "tiny", tmp / "f32", false);
  convert::export_ctranslate2(tmp / "tiny", tmp / "int8", true);
  EXPECT_EQ(crc32_hex(crc32_of_file(tmp / "f32" / "model.bin")), "6cdc2c97");
  EXPECT_EQ(crc32_hex(crc32_of_file(tmp / "int8" / "model.bin")), "de0ad44d");
  EXPECT_EQ(fs::file_size(tmp / "int8" / "model.bin"), 77294u);
  EXPECT_EQ(nlohmann::json::parse(read_text(tmp / "f32" / "shared_vocabulary.json")), pieces);
}

}  // namespace
}  // namespace tfm::internal::testing
