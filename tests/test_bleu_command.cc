// `tfm bleu`, run as the built binary on files in a temporary directory: the printed line, the
// options, and the one-line errors (exit status 1) for unequal line counts, invalid UTF-8 and
// missing files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "build_paths.h"
#include "temp_dir.h"

namespace tfm::internal {
namespace {

using testing::TempDir;

struct BleuRun {
  int status;
  std::string out, err;
};

BleuRun run_bleu(const std::string& arguments, const TempDir& dir) {
  const auto out = dir / "stdout", err = dir / "stderr";
  const std::string command = std::string("'") + tfm_binary_dir() + "/tfm' bleu " + arguments +
                              " > '" + out.string() + "' 2> '" + err.string() + "'";
  const int raw = std::system(command.c_str());
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name, std::ios::binary) << text;
  return fmt::format("'{}'", (dir / name).string());
}

// sacreBLEU's README example (its test/test_bleu.py expects 48.530827 with the defaults).
const char* kHyp = "The dog bit the man.\nIt wasn't surprising.\nThe man had just bitten him.\n";
const char* kRef1 = "The dog bit the man.\nIt was not unexpected.\nThe man bit him first.\n";
const char* kRef2 =
    "The dog had bit the man.\nNo one was surprised.\nThe man had bitten the dog.\n";
const char* kReadmeLine =
    "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n";

TEST(BleuCommand, PrintsSacrebleusLine) {
  TempDir dir;
  const std::string hyp = write(dir, "hyp", kHyp), ref1 = write(dir, "ref1", kRef1),
                    ref2 = write(dir, "ref2", kRef2);
  const BleuRun run = run_bleu("-r " + ref1 + " -r " + ref2 + " -i " + hyp, dir);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, kReadmeLine);
  EXPECT_TRUE(run.err.empty()) << run.err;

  // Standard input, and the signature.
  const BleuRun piped = run_bleu("-r " + ref1 + " -r " + ref2 + " --signature < " + hyp, dir);
  // sacreBLEU's text line with its signature, the version field included.
  EXPECT_EQ(piped.out,
            std::string("BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = ") +
                (kReadmeLine + 7));

  // Published: intl 43.91623493, none 49.1919566.
  EXPECT_EQ(run_bleu("-r " + ref1 + " -r " + ref2 + " -i " + hyp + " --tokenize intl", dir)
                .out.substr(0, 12),
            "BLEU = 43.92");
  EXPECT_EQ(run_bleu("-r " + ref1 + " -r " + ref2 + " -i " + hyp + " --tokenize none", dir)
                .out.substr(0, 12),
            "BLEU = 49.19");
}

TEST(BleuCommand, JsonOutput) {
  TempDir dir;
  const std::string hyp = write(dir, "hyp", kHyp), ref1 = write(dir, "ref1", kRef1),
                    ref2 = write(dir, "ref2", kRef2);
  const BleuRun run = run_bleu("-r " + ref1 + " -r " + ref2 + " -i " + hyp + " --json", dir);
  ASSERT_EQ(run.status, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["score"].get<double>(), 48.53);
  EXPECT_NEAR(j["score_exact"].get<double>(), 48.530827, 1e-6);
  EXPECT_EQ(j["counts"], nlohmann::json({14, 7, 5, 3}));
  EXPECT_EQ(j["totals"], nlohmann::json({17, 14, 11, 8}));
  EXPECT_EQ(j["hyp_len"], 17);
  EXPECT_EQ(j["ref_len"], 18);
  EXPECT_EQ(j["signature"], "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

TEST(BleuCommand, LowercaseSmoothingTokenizedAndGzip) {
  TempDir dir;
  const std::string hyp = write(dir, "hyp", "The Cat Sat On The Mat\r\nA B C D\n");
  const std::string ref = write(dir, "ref", "the cat sat on the mat\na b c e\n");
  // Mixed case nothing matches; -lc is sacreBLEU's spelling of --lowercase.
  EXPECT_EQ(run_bleu("-r " + ref + " -i " + hyp, dir).out.substr(0, 11), "BLEU = 0.00");
  const BleuRun lc = run_bleu("-r " + ref + " -i " + hyp + " -lc", dir);
  EXPECT_EQ(lc.status, 0) << lc.err;
  // Lower-cased: unigrams 9/10, bigrams 7/8, trigrams 5/6, 4-grams 3/4 (the "\r" is stripped),
  // BP = 1: (9/10 * 7/8 * 5/6 * 3/4)^(1/4) = 83.759..., the statistics of sacreBLEU's test_scoring.
  EXPECT_EQ(lc.out,
            "BLEU = 83.76 90.0/87.5/83.3/75.0 (BP = 1.000 ratio = 1.000 hyp_len = 10 "
            "ref_len = 10)\n");
  EXPECT_EQ(run_bleu("-r " + ref + " -i " + hyp + " --lowercase", dir).out, lc.out);
  // Tokenized BLEU: multi-bleu.perl's line.
  EXPECT_EQ(run_bleu("-r " + ref + " -i " + hyp + " --tokenized -lc", dir).out,
            "BLEU = 83.76, 90.0/87.5/83.3/75.0 (BP=1.000, ratio=1.000, hyp_len=10, ref_len=10)\n");
  // Smoothing changes nothing when every order has a match.
  EXPECT_EQ(run_bleu("-r " + ref + " -i " + hyp + " -lc --smooth none", dir).out, lc.out);

  // A gzipped reference reads like the plain one.
  const std::string gz = (dir / "ref.gz").string();
  gzFile file = gzopen(gz.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  const std::string text = "the cat sat on the mat\na b c e\n";
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  EXPECT_EQ(run_bleu("-r '" + gz + "' -i " + hyp + " -lc", dir).out, lc.out);
}

TEST(BleuCommand, ThePapersTokenizedBleu) {
  // The sentence pairs of test_bleu_moses.cc (EN-DE) and a French one: Moses -l fr gives
  // "L&apos; homme d&apos; affaires est venu hier soir ." (9 tokens), matches 8/9, 6/8, 4/7, 2/6.
  TempDir dir;
  const std::string ref_de = write(dir, "ref.de", "Die Anti-Terror-Gesetze gelten ab 1. Mai.\n");
  const std::string hyp_de = write(dir, "hyp.de", "Die Anti-Terror-Gesetze gelten seit 1. Mai.\n");
  const std::string ref_fr =
      write(dir, "ref.fr", "L'homme d'affaires est arriv\u00e9 hier soir.\n");
  const std::string hyp_fr = write(dir, "hyp.fr", "L'homme d'affaires est venu hier soir.\n");
  const std::string de = "-r " + ref_de + " -i " + hyp_de + " --tokenize moses --lang de";

  const BleuRun ende = run_bleu(de + " --split-compounds", dir);
  EXPECT_EQ(ende.status, 0) << ende.err;
  EXPECT_EQ(ende.out,
            "BLEU = 70.17, 90.9/80.0/66.7/50.0 (BP=1.000, ratio=1.000, hyp_len=11, ref_len=11)\n");
  EXPECT_EQ(run_bleu(de + " --split-compounds --signature", dir).out,
            "BLEU|nrefs:1|case:mixed|eff:no|tok:moses-de|split:compounds|smooth:none|"
            "bleu:multi-bleu.perl = 70.17, 90.9/80.0/66.7/50.0 (BP=1.000, ratio=1.000, "
            "hyp_len=11, ref_len=11)\n");
  // Without the split no 4-gram matches: 0, as multi-bleu.perl.
  EXPECT_EQ(run_bleu(de, dir).out,
            "BLEU = 0.00, 85.7/66.7/40.0/0.0 (BP=1.000, ratio=1.000, hyp_len=7, ref_len=7)\n");
  const BleuRun enfr =
      run_bleu("-r " + ref_fr + " -i " + hyp_fr + " --tokenize moses --lang fr", dir);
  EXPECT_EQ(enfr.status, 0) << enfr.err;
  EXPECT_EQ(enfr.out,
            "BLEU = 59.69, 88.9/75.0/57.1/33.3 (BP=1.000, ratio=1.000, hyp_len=9, ref_len=9)\n");

  // What is scored, as tokenizer.perl and the split print it.
  EXPECT_EQ(run_bleu(de + " --split-compounds --print-tokenized", dir).out,
            "Die Anti ##AT##-##AT## Terror ##AT##-##AT## Gesetze gelten seit 1. Mai .\n");
  EXPECT_EQ(run_bleu("-i " + hyp_fr + " --tokenize moses --lang fr --print-tokenized", dir).out,
            "L&apos; homme d&apos; affaires est venu hier soir .\n");
  // The split of text already tokenized (fairseq's compound_split_bleu.sh), and JSON.
  const std::string tok = write(dir, "tok", "a-b c\n");
  EXPECT_EQ(run_bleu("-r " + tok + " -i " + tok + " --tokenized --split-compounds", dir).out,
            "BLEU = 100.00, 100.0/100.0/100.0/100.0 (BP=1.000, ratio=1.000, hyp_len=4, "
            "ref_len=4)\n");
  const auto j = nlohmann::json::parse(run_bleu(de + " --split-compounds --json", dir).out);
  EXPECT_EQ(j["tokenized_bleu"], true);
  EXPECT_EQ(j["signature"],
            "nrefs:1|case:mixed|eff:no|tok:moses-de|split:compounds|smooth:none|"
            "bleu:multi-bleu.perl");
}

TEST(BleuCommand, EmptyReferenceLinesAreReferencesOfLengthZero) {
  // As sacreBLEU 2.2 and later (the arithmetic is in test_bleu.cc's
  // AnEmptyReferenceIsAReferenceOfLengthZero): line 2's empty second reference is the closest
  // (r = 0), line 3 is empty in both references (a line of spaces is empty) and is scored.
  TempDir dir;
  const std::string hyp = write(dir, "hyp", "a b c d e f\nx y\np q\n");
  const std::string ref1 = write(dir, "ref1", "a b c d e f\nx y z w v u\n\n");
  const std::string ref2 = write(dir, "ref2", "a b c d e f g h\n\n   \n");
  const BleuRun two = run_bleu("-r " + ref1 + " -r " + ref2 + " -i " + hyp + " --signature", dir);
  EXPECT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(two.out,
            "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 91.00 "
            "80.0/85.7/100.0/100.0 (BP = 1.000 ratio = 1.667 hyp_len = 10 ref_len = 6)\n");

  // One reference with an empty line: scored, r = 4 + 0.
  const std::string hyp1 = write(dir, "hyp1", "a b c d\ne\n");
  const std::string ref = write(dir, "ref", "a b c d\n\n");
  const BleuRun one = run_bleu("-r " + ref + " -i " + hyp1, dir);
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(one.out,
            "BLEU = 94.57 80.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.250 hyp_len = 5 "
            "ref_len = 4)\n");
}

TEST(BleuCommand, RangesAtTheirEdgesAreAccepted) {
  TempDir dir;
  const std::string hyp = write(dir, "hyp", kHyp), ref1 = write(dir, "ref1", kRef1);
  for (const std::string& arguments :
       {std::string(" --max-ngram-order 1"), std::string(" --max-ngram-order 100"),
        std::string(" --smooth floor --smooth-value 0"),
        std::string(" --smooth add-k --smooth-value 2.5")}) {
    SCOPED_TRACE(arguments);
    const BleuRun run = run_bleu("-r " + ref1 + " -i " + hyp + arguments, dir);
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.substr(0, 7), "BLEU = ");
  }
}

TEST(BleuCommand, ErrorsAreOneLineAndExitOne) {
  TempDir dir;
  const std::string hyp = write(dir, "hyp.txt", kHyp), ref1 = write(dir, "ref1.txt", kRef1);
  const std::string short_ref = write(dir, "short.txt", "one\ntwo\n");
  const std::string bad = write(dir, "bad.txt", "fine\nnot \xff fine\nfine\n");

  struct Case {
    std::string arguments;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {"-r " + short_ref + " -i " + hyp, {"hyp.txt", "3 lines", "short.txt", "2 lines"}},
      {"-r " + ref1 + " -i " + bad, {"bad.txt", "line 2", "UTF-8"}},
      {"-r " + bad + " -i " + hyp, {"bad.txt", "line 2", "UTF-8"}},
      {"-r " + ref1 + " -i '" + (dir / "missing.txt").string() + "'",
       {"missing.txt", "cannot open", "No such file"}},
      {"-r '" + (dir / "gone.txt").string() + "' -i " + hyp, {"gone.txt", "cannot open"}},
      // Ranges, in words (not CLI11's 309-digit largest double).
      {"-r " + ref1 + " -i " + hyp + " --max-ngram-order 0",
       {"--max-ngram-order: 0 is not in the allowed range 1 to 100"}},
      {"-r " + ref1 + " -i " + hyp + " --max-ngram-order 101",
       {"--max-ngram-order: 101 is not in the allowed range 1 to 100"}},
      {"-r " + ref1 + " -i " + hyp + " --max-ngram-order 99999999999",
       {"--max-ngram-order: 99999999999 is not in the allowed range 1 to 100"}},
      {"-r " + ref1 + " -i " + hyp + " --smooth floor --smooth-value -1",
       {"--smooth-value: -1 is not allowed (a finite number, 0 or more)"}},
      // A value that exp or none smoothing would ignore.
      {"-r " + ref1 + " -i " + hyp + " --smooth-value 0.5",
       {"--smooth-value is used only by --smooth floor and add-k, not by exp"}},
      // Combinations of the tokenized-BLEU options that make no sense.
      {"-r " + ref1 + " -i " + hyp + " --lang de",
       {"--lang is the language of --tokenize moses", "--tokenize 13a"}},
      {"-r " + ref1 + " -i " + hyp + " --tokenized --lang de", {"--lang", "--tokenized"}},
      {"-r " + ref1 + " -i " + hyp + " --split-compounds",
       {"--split-compounds", "--tokenize moses or --tokenized", "--tokenize 13a"}},
      {"-r " + ref1 + " -i " + hyp + " --tokenize none --split-compounds",
       {"--split-compounds", "--tokenize none"}},
      {"-r " + ref1 + " -i " + hyp + " --tokenize moses --smooth exp",
       {"--smooth", "no smoothing"}},
      {"-i " + hyp, {"--reference is required"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.arguments);
    const BleuRun run = run_bleu(c.arguments, dir);
    EXPECT_EQ(run.status, 1);
    EXPECT_TRUE(run.out.empty()) << run.out;
    ASSERT_FALSE(run.err.empty());
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << "not one line: " << run.err;
    for (const std::string& part : c.parts)
      EXPECT_NE(run.err.find(part), std::string::npos) << run.err << " lacks " << part;
    EXPECT_EQ(run.err.find("0000000000"), std::string::npos) << run.err;
  }

  // Usage errors: also one line, non-zero.
  for (const std::string& arguments :
       {"-r " + ref1 + " -i " + hyp + " --tokenize moses --lang it",
        "-r " + ref1 + " -i " + hyp + " --print-tokenized --json",
        "-r " + ref1 + " -i " + hyp + " --tokenize zh",
        "-r " + ref1 + " -i " + hyp + " --tokenized --tokenize 13a",
        "-r " + ref1 + " -i " + hyp + " --smooth sometimes",
        // Every float option refuses what is not finite.
        "-r " + ref1 + " -i " + hyp + " --smooth add-k --smooth-value inf"}) {
    SCOPED_TRACE(arguments);
    const BleuRun run = run_bleu(arguments, dir);
    EXPECT_NE(run.status, 0);
    EXPECT_EQ(run.err.find('\n'), run.err.size() - 1) << run.err;
    if (arguments.ends_with("inf")) {
      EXPECT_NE(run.err.find("--smooth-value: must be a finite number in range, got 'inf'"),
                std::string::npos)
          << run.err;
    }
  }
}

}  // namespace
}  // namespace tfm::internal
