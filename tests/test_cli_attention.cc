// tfm attention and tfm translate --alignment through the built binary, with a tiny random model
// and its vocabulary: the page's embedded weights are the model's (decode::attention_maps, to
// 1e-6), --words merges them as documented, the SVG figure is written alone, alignments are in
// the Pharaoh format; bad input is a one-line error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "data_test_util.h"
#include "text_model_test_util.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/alignment.h"
#include "tfm/decode/attention_maps.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal {
namespace {

using testing::CommandResult;
using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;

const char* kSource = "Two young girls are playing with a ball in the park.";
const char* kTarget = "Zwei junge Mädchen spielen mit einem Ball im Park.";

struct Fixture {
  TempDir dir;
  std::filesystem::path model = testing::write_tiny_text_model(dir);
  CommandResult run(const std::string& arguments) const {
    return run_tfm_command(fmt::format("attention -m {} {}", quoted(model), arguments), dir);
  }
  void expect_failure(const std::string& arguments, const std::string& part) const {
    const CommandResult r = run(arguments);
    EXPECT_NE(r.status, 0) << arguments;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << arguments << ": " << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << arguments << ": " << r.err;
  }
};

nlohmann::json page_json(const std::string& html) {
  const std::string open = R"(<script type="application/json" id="tfm-data">)";
  const size_t begin = html.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

const nlohmann::json& kind_of(const nlohmann::json& data, const std::string& name) {
  for (const auto& kind : data["kinds"])
    if (kind["name"] == name) return kind;
  throw std::runtime_error("no kind " + name);
}

TEST(CliAttention, ThePagesWeightsAreTheModels) {
  Fixture f;
  const CommandResult r = f.run(
      fmt::format("-i '{}' --target '{}' -o {}", kSource, kTarget, quoted(f.dir / "page.html")));
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json data = page_json(testing::read_text(f.dir / "page.html"));

  const auto model = decode::load_inference_model(f.model, {});
  const data::Vocabulary vocab(f.model / kVocabFileName);
  const auto source = vocab.encode(kSource), target = vocab.encode(kTarget);
  const decode::AttentionMaps maps = decode::attention_maps(*model, source, target);
  std::vector<std::string> source_pieces;
  for (int32_t id : source) source_pieces.push_back(vocab.piece(id));
  EXPECT_EQ(kind_of(data, "encoder")["queries"].get<std::vector<std::string>>(), source_pieces);
  EXPECT_EQ(kind_of(data, "cross")["queries"].back(), "</s>");
  EXPECT_EQ(kind_of(data, "decoder")["queries"].front(), "<s>");
  for (const auto& [name, tensor] :
       {std::pair{"encoder", &maps.encoder}, std::pair{"decoder", &maps.decoder},
        std::pair{"cross", &maps.cross}}) {
    const nlohmann::json& w = kind_of(data, name)["weights"];
    const int64_t L = tensor->dim(0), H = tensor->dim(1), Q = tensor->dim(2), K = tensor->dim(3);
    ASSERT_EQ(static_cast<int64_t>(w.size()), L) << name;
    double diff = 0, largest = 0;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t q = 0; q < Q; ++q) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double page = w[l][h][q][k].get<double>();
            const float mine = tensor->data<float>()[((l * H + h) * Q + q) * K + k];
            diff = std::max(diff, std::fabs(page - mine));
            largest = std::max(largest, page);
            sum += page;
            if (std::string(name) == "decoder" && k > q) {
              EXPECT_EQ(page, 0.0) << "decoder query " << q << " sees the future key " << k;
            }
          }
          EXPECT_NEAR(sum, 1.0, 1e-5) << name << " row " << q;
        }
    EXPECT_LE(diff, 1e-6) << name;
    EXPECT_GT(largest, 0.1) << name;
  }
}

TEST(CliAttention, WordsMergePiecesAsDocumented) {
  Fixture f;
  ASSERT_EQ(f.run(fmt::format("-i '{}' --target '{}' --words -o {}", kSource, kTarget,
                              quoted(f.dir / "words.html")))
                .status,
            0);
  ASSERT_EQ(f.run(fmt::format("-i '{}' --target '{}' -o {}", kSource, kTarget,
                              quoted(f.dir / "pieces.html")))
                .status,
            0);
  const nlohmann::json words = page_json(testing::read_text(f.dir / "words.html"));
  const nlohmann::json pieces = page_json(testing::read_text(f.dir / "pieces.html"));
  EXPECT_TRUE(words["merged_words"].get<bool>());
  const auto& wc = kind_of(words, "cross");
  const auto& pc = kind_of(pieces, "cross");
  // The source words are the sentence's words (the vocabulary splits some into pieces).
  EXPECT_EQ(wc["keys"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"Two", "young", "girls", "are", "playing", "with", "a",
                                      "ball", "in", "the", "park."}));
  ASSERT_LT(wc["keys"].size(), pc["keys"].size()) << "the fixture's vocabulary splits no word";
  const auto query_words = decode::word_of_pieces(pc["queries"].get<std::vector<std::string>>());
  const auto key_words = decode::word_of_pieces(pc["keys"].get<std::vector<std::string>>());
  // Layer 1, head 0, recomputed from the pieces' weights: to a word summed, from a word averaged.
  const auto& pw = pc["weights"][1][0];
  const auto& ww = wc["weights"][1][0];
  for (size_t qw = 0; qw < ww.size(); ++qw)
    for (size_t kw = 0; kw < ww[qw].size(); ++kw) {
      double sum = 0;
      int rows = 0;
      for (size_t q = 0; q < query_words.size(); ++q) {
        if (query_words[q] != static_cast<int64_t>(qw)) continue;
        ++rows;
        for (size_t k = 0; k < key_words.size(); ++k)
          if (key_words[k] == static_cast<int64_t>(kw)) sum += pw[q][k].get<double>();
      }
      EXPECT_NEAR(ww[qw][kw].get<double>(), sum / rows, 3e-6) << qw << " " << kw;
    }
}

TEST(CliAttention, TranslatesWhenNoTargetIsGivenAndWritesAnSvgFigure) {
  Fixture f;
  const CommandResult r =
      f.run(fmt::format("-i '{}' -b 2 -o {} --figure-layer 1 --figure-heads 1 --figure-token 2",
                        kSource, quoted(f.dir / "figure.svg")));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string svg = testing::read_text(f.dir / "figure.svg");
  EXPECT_EQ(svg.find("<html"), std::string::npos);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  // One head, one query token: a line to each of the source's pieces.
  const auto model = decode::load_inference_model(f.model, {});
  const data::Vocabulary vocab(f.model / kVocabFileName);
  const auto pieces = vocab.encode(kSource).size();
  const std::regex line("<line[^>]*class=\"attention-line\"");
  const auto count =
      std::distance(std::sregex_iterator(svg.begin(), svg.end(), line), std::sregex_iterator());
  EXPECT_EQ(static_cast<size_t>(count), pieces);
}

TEST(CliAttention, BadInputIsAOneLineError) {
  Fixture f;
  const std::string out = quoted(f.dir / "p.html");
  f.expect_failure("-i '' -o " + out, "the source sentence is empty");
  // (std::system's sh is dash: printf's octal escapes make the bytes.)
  f.expect_failure("-i \"$(printf 'caf\\377')\" -o " + out, "-i: invalid UTF-8 at byte 3");
  f.expect_failure(fmt::format("-i '{}' --target \"$(printf '\\303')\" -o {}", kSource, out),
                   "--target: invalid UTF-8 at byte 0");
  std::string long_sentence;
  for (int i = 0; i < 70; ++i) long_sentence += "park ";
  f.expect_failure(fmt::format("-i '{}' -o {}", long_sentence, out),
                   "more than the model's maximum input length 64");
  f.expect_failure(fmt::format("-i '{}' -o {}", kSource, quoted(f.dir / "p.png")),
                   "expected a .html (the page) or .svg (the figure) file name");
  f.expect_failure(fmt::format("-i '{}' --figure-layer 2 -o {}", kSource, out), "--figure-layer");
  f.expect_failure(fmt::format("-i '{}' --figure-heads 0,x -o {}", kSource, out),
                   "--figure-heads '0,x'");
  f.expect_failure(fmt::format("-i '{}' --figure-token giraffe -o {}", kSource, out),
                   "--figure-token 'giraffe' is not one of the encoder tokens");
  f.expect_failure(fmt::format("-i '{}' --figure-token 99999999999999999999 -o {}", kSource, out),
                   "--figure-token 99999999999999999999 is far beyond the query tokens");
  f.expect_failure(fmt::format("-i '{}' --target x --translate -o {}", kSource, out),
                   "--translate");
  EXPECT_FALSE(std::filesystem::exists(f.dir / "p.html"));
}

// --- tfm translate --alignment ---

TEST(CliAlignment, PrintsPharaohPairsAfterEachTranslation) {
  Fixture f;
  testing::write_text(f.dir / "in.txt", fmt::format("{}\n\nA dog runs.\n", kSource));
  const CommandResult r =
      run_tfm_command(fmt::format("translate -m {} -b 2 --max-length-offset 5 -i {} --alignment",
                                  quoted(f.model), quoted(f.dir / "in.txt")),
                      f.dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = testing::lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u);
  const std::regex format(R"(^(.*) \|\|\| ((\d+-\d+)( \d+-\d+)*)?$)");
  const std::vector<size_t> source_words{11, 0, 3};
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, format)) << lines[i];
    const std::string pairs = m[2];
    // Hard alignment: one pair per target word, in target order, every index in range.
    size_t expected_target = 0;
    const std::regex pair(R"((\d+)-(\d+))");
    for (auto it = std::sregex_iterator(pairs.begin(), pairs.end(), pair);
         it != std::sregex_iterator(); ++it, ++expected_target) {
      EXPECT_LT(std::stoul((*it)[1]), source_words[i]) << lines[i];
      EXPECT_EQ(std::stoul((*it)[2]), expected_target) << lines[i];
    }
    if (i == 1) {
      EXPECT_EQ(lines[i], " ||| ");
    }
  }
}

TEST(CliAlignment, BadFlagsAreErrors) {
  Fixture f;
  testing::write_text(f.dir / "in.txt", "A dog runs.\n");
  const std::string base =
      fmt::format("translate -m {} -i {} ", quoted(f.model), quoted(f.dir / "in.txt"));
  CommandResult r = run_tfm_command(base + "--alignment --alignment-layer 7", f.dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--alignment-layer '7': expected a decoder layer 0..1 or 'all'"),
            std::string::npos)
      << r.err;
  r = run_tfm_command(base + "--alignment-threshold 0.3", f.dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--alignment"), std::string::npos) << r.err;
  // The default layer is the last one.
  const CommandResult by_default = run_tfm_command(base + "--alignment", f.dir);
  const CommandResult last = run_tfm_command(base + "--alignment --alignment-layer 1", f.dir);
  EXPECT_EQ(by_default.status, 0) << by_default.err;
  EXPECT_NE(by_default.out.find(" ||| "), std::string::npos);
  EXPECT_EQ(by_default.out, last.out);
  r = run_tfm_command(base + "--alignment --alignment-layer all --alignment-threshold 0.2", f.dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" ||| "), std::string::npos);
}

}  // namespace
}  // namespace tfm::internal
