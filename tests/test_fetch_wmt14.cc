// scripts/fetch_wmt14.sh against a folder of small fake archives with the real names and inner
// layout (wmt13/, wmt14/, wmt10/ as on statmt.org), served through WMT14_BASE_URL=file://...: the
// training corpora concatenated in the documented order, the test sets converted from SGM as
// sacreBLEU converts them, the manifest, reruns that download nothing, and the failures (a missing
// archive, a truncated one, a missing member, unequal line counts, usage) each a one-line error
// that leaves no train.* behind. No network; each run takes a few tens of milliseconds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "build_paths.h"
#include "data_test_util.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::lines_of;
using testing::quoted;
using testing::read_text;
using testing::TempDir;
using testing::write_gzip;
using testing::write_text;

const fs::path kScript = fs::path(tfm_source_dir()) / "scripts" / "fetch_wmt14.sh";

// The script's last line on stderr: its one-line error when it fails.
std::string last_line(const std::string& text) {
  const std::vector<std::string> lines = lines_of(text);
  return lines.empty() ? "" : lines.back();
}

struct Member {
  std::string name, text;
};

// Training text: raw, so the no-break space and the double space stay; an empty line stays
// (Europarl has them); Common Crawl's German side has no final newline, which must not join its
// last line to News Commentary's first.
const std::string kEuroparlEn = "Resumption of the session\n\nI declare  resumed the session.\n";
const std::string kEuroparlDe =
    "Wiederaufnahme der Sitzungsperiode\n\nIch erkl\u00e4re sie f\u00fcr "
    "wiederaufgenommen.\n";
const std::string kEuroparlFrEn = "Resumption (fr-en)\n";
const std::string kEuroparlFr = "Reprise de la session\n";
const std::string kCrawlEn = "Common crawl\u00a0line\n";
const std::string kCrawlDe = "Eine Zeile ohne Zeilenende";
const std::string kCrawlFrEn = "Crawl (fr-en)\n";
const std::string kCrawlFr = "Une ligne\n";
const std::string kNewsEn = "News one\nNews two\n";
const std::string kNewsDe = "Nachricht eins\nNachricht zwei\n";
const std::string kNewsFrEn = "News (fr-en)\n";
const std::string kNewsFr = "Nouvelles\n";
const std::string kUnEn = "UN one\nUN two\n";
const std::string kUnFr = "ONU un\nONU deux\n";
const std::string kGigaEn = "Giga one\nGiga two\nGiga three\n";
const std::string kGigaFr = "Giga un\nGiga deux\nGiga trois\n";

// newstest2013's plain text (dev.tgz) gets sacreBLEU's whitespace normalisation.
const std::string kDev13En = "  A\u2009thin space \nTab\tand  spaces\n";
const std::string kDev13De = "Ein\u00a0Satz\nZweiter \u3000 Satz\t\n";
const std::string kDev13Fr = "Une phrase\u00a0!\nDeuxi\u00e8me\n";

// An SGM file as WMT14's test-full has them; `segs` are the raw insides of <seg ...>...</seg>.
std::string sgm(const std::string& lang, const std::vector<std::string>& segs) {
  std::string text = fmt::format(
      "<srcset setid=\"newstest2014\" srclang=\"any\">\n<doc docid=\"1-{}\" "
      "genre=\"news\" origlang=\"en\">\n",
      lang);
  for (size_t i = 0; i < segs.size(); ++i)
    text += fmt::format("<seg id=\"{}\">{}</seg>\n", i + 1, segs[i]);
  return text + "</doc>\n</srcset>\n";
}

// The tricky cases of sacreBLEU's conversion (checked against its code, sacrebleu/dataset/
// fake_sgml.py and base.py): leading, trailing and inner runs of whitespace (tab, U+00A0, U+2009,
// U+3000) become one space or go; U+200B is no whitespace; entities are not unescaped; a \r before
// the newline is whitespace; an empty segment is an empty line; text after </seg> is kept.
const std::vector<std::string> kTestEnSegs = {
    "  Gutach:\tIncreased  safety ", "Standard &amp; Poor's &quot;rating&quot;\u00a0!",
    "thin\u2009space,\u3000wide\u200bzero-width", " ", "a <b>tag</b>"};
const std::string kTestEnText =
    "Gutach: Increased safety\nStandard &amp; Poor's &quot;rating&quot; !\n"
    "thin space, wide\u200bzero-width\n\na <b>tag</b> after\n";

std::string test_en_sgm() {
  std::string text = sgm("en", kTestEnSegs);
  // A carriage return before one newline, and text after one </seg>.
  text.replace(text.find("zero-width</seg>\n"), 17, "zero-width</seg>\r\n");
  text.replace(text.find("</b></seg>\n"), 11, "</b></seg> after\n");
  return text;
}

class FakeWmt14 {
 public:
  TempDir dir;
  fs::path base = dir / "base", stage = dir / "stage", out = dir / "out";

  FakeWmt14() {
    archive("wmt13/training-parallel-europarl-v7.tgz",
            {{"training/europarl-v7.de-en.en", kEuroparlEn},
             {"training/europarl-v7.de-en.de", kEuroparlDe},
             {"training/europarl-v7.fr-en.en", kEuroparlFrEn},
             {"training/europarl-v7.fr-en.fr", kEuroparlFr}});
    archive("wmt13/training-parallel-commoncrawl.tgz",
            {{"commoncrawl.de-en.annotation", "annotation\n"},
             {"commoncrawl.de-en.en", kCrawlEn},
             {"commoncrawl.de-en.de", kCrawlDe},
             {"commoncrawl.fr-en.en", kCrawlFrEn},
             {"commoncrawl.fr-en.fr", kCrawlFr}});
    archive("wmt14/training-parallel-nc-v9.tgz",
            {{"training/news-commentary-v9.de-en.en", kNewsEn},
             {"training/news-commentary-v9.de-en.de", kNewsDe},
             {"training/news-commentary-v9.fr-en.en", kNewsFrEn},
             {"training/news-commentary-v9.fr-en.fr", kNewsFr}});
    archive("wmt13/training-parallel-un.tgz", {{"un/undoc.2000.es-en.en", "Spanish pair\n"},
                                               {"un/undoc.2000.fr-en.en", kUnEn},
                                               {"un/undoc.2000.fr-en.fr", kUnFr}});
    // An uncompressed tar holding gzipped text.
    fs::create_directories(stage / "giga");
    write_gzip(stage / "giga" / "giga-fren.release2.fixed.en.gz", kGigaEn);
    write_gzip(stage / "giga" / "giga-fren.release2.fixed.fr.gz", kGigaFr);
    tar("wmt10/training-giga-fren.tar", "giga",
        {"giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz"});
    archive("wmt14/dev.tgz", {{"dev/newstest2013.en", kDev13En},
                              {"dev/newstest2013.de", kDev13De},
                              {"dev/newstest2013.fr", kDev13Fr},
                              {"dev/newstest2013-src.en.sgm", sgm("en", {"not this file"})}});
    archive("wmt14/test-full.tgz",
            {{"test-full/newstest2014-deen-src.en.sgm", test_en_sgm()},
             {"test-full/newstest2014-deen-src.de.sgm", sgm("de", {"not", "this", "file"})},
             {"test-full/newstest2014-deen-ref.de.sgm",
              sgm("de", {"Gutach: Mehr Sicherheit", "S&amp;P\u00a0sagt", "drei", "", "f\u00fcnf"})},
             {"test-full/newstest2014-fren-src.en.sgm", sgm("en", {" One ", "Two"})},
             {"test-full/newstest2014-fren-ref.fr.sgm", sgm("fr", {"Un\u00a0:", "Deux\u202f!"})}});
  }

  // Writes `members` under stage/ and packs them, by name, into base/`path` (a .tgz).
  void archive(const std::string& path, const std::vector<Member>& members) {
    const std::string folder = fs::path(path).filename().string() + ".d";
    std::vector<std::string> names;
    for (const Member& m : members) {
      fs::create_directories((stage / folder / m.name).parent_path());
      write_text(stage / folder / m.name, m.text);
      names.push_back(m.name);
    }
    tar(path, folder, names);
  }

  void tar(const std::string& path, const std::string& folder,
           const std::vector<std::string>& names) {
    fs::create_directories((base / path).parent_path());
    std::string command = fmt::format("tar -c{}f {} -C {}", path.ends_with(".tgz") ? "z" : "",
                                      quoted(base / path), quoted(stage / folder));
    for (const std::string& name : names) command += fmt::format(" {}", quoted(fs::path(name)));
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  // Runs the script with the base at file://base; `arguments` are already quoted.
  CommandResult run(const std::string& arguments) const {
    const std::string command =
        fmt::format("WMT14_BASE_URL='file://{}' {} {} > {} 2> {}", base.string(), quoted(kScript),
                    arguments, quoted(dir / "stdout"), quoted(dir / "stderr"));
    const int raw = std::system(command.c_str());
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(dir / "stdout"),
            read_text(dir / "stderr")};
  }
  CommandResult fetch(const std::string& pair) const { return run(pair + " " + quoted(out)); }

  // The files the script wrote into out/, archives/ aside.
  std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    if (!fs::exists(out)) return names;
    for (const auto& entry : fs::directory_iterator(out))
      if (entry.path().filename() != "archives") names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

// A failed run: exit 1, a one-line error on stderr's last line holding every one of `parts`, and
// no train.*, newstest* or manifest written.
void expect_failure(const FakeWmt14& f, const CommandResult& run,
                    const std::vector<std::string>& parts) {
  EXPECT_EQ(run.status, 1) << run.err;
  const std::string error = last_line(run.err);
  EXPECT_TRUE(error.starts_with("fetch_wmt14.sh: error: ")) << run.err;
  for (const std::string& part : parts)
    EXPECT_NE(error.find(part), std::string::npos)
        << "\"" << error << "\" lacks \"" << part << "\"";
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(f.outputs(), std::vector<std::string>{}) << run.err;
}

TEST(FetchWmt14, EnDeConcatenatesTheCorporaInOrderAndConvertsTheTestSets) {
  FakeWmt14 f;
  const CommandResult run = f.fetch("en-de");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, f.out.string() + "\n");
  EXPECT_EQ(f.outputs(), (std::vector<std::string>{"manifest.tsv", "newstest2013.de",
                                                   "newstest2013.en", "newstest2014.de",
                                                   "newstest2014.en", "train.de", "train.en"}));
  // Europarl v7, Common Crawl, News Commentary v9, byte for byte.
  EXPECT_EQ(read_text(f.out / "train.en"), kEuroparlEn + kCrawlEn + kNewsEn);
  EXPECT_EQ(read_text(f.out / "train.de"), kEuroparlDe + kCrawlDe + "\n" + kNewsDe);
  EXPECT_EQ(read_text(f.out / "newstest2013.en"), "A thin space\nTab and spaces\n");
  EXPECT_EQ(read_text(f.out / "newstest2013.de"), "Ein Satz\nZweiter Satz\n");
  EXPECT_EQ(read_text(f.out / "newstest2014.en"), kTestEnText);
  EXPECT_EQ(read_text(f.out / "newstest2014.de"),
            "Gutach: Mehr Sicherheit\nS&amp;P sagt\ndrei\n\nf\u00fcnf\n");
  const std::vector<std::string> manifest = lines_of(read_text(f.out / "manifest.tsv"));
  ASSERT_EQ(manifest.size(), 8u) << read_text(f.out / "manifest.tsv");
  EXPECT_EQ(manifest[0], fmt::format("# fetch_wmt14.sh en-de from file://{}", f.base.string()));
  EXPECT_EQ(manifest[1], "corpus\tpairs\tarchive\ten\tde");
  EXPECT_EQ(manifest[2],
            "europarl-v7\t3\twmt13/training-parallel-europarl-v7.tgz\t"
            "training/europarl-v7.de-en.en\ttraining/europarl-v7.de-en.de");
  EXPECT_TRUE(manifest[3].starts_with("commoncrawl\t1\t")) << manifest[3];
  EXPECT_TRUE(manifest[4].starts_with("news-commentary-v9\t2\t")) << manifest[4];
  EXPECT_EQ(manifest[5], "train\t6\t-\ttrain.en\ttrain.de");
  EXPECT_EQ(manifest[6],
            "newstest2013\t2\twmt14/dev.tgz\tdev/newstest2013.en\tdev/newstest2013.de");
  EXPECT_EQ(manifest[7],
            "newstest2014\t5\twmt14/test-full.tgz\ttest-full/newstest2014-deen-src.en.sgm\t"
            "test-full/newstest2014-deen-ref.de.sgm");
  // The tiny corpora are only a warning against the real release's counts.
  EXPECT_NE(run.err.find("warning: europarl-v7 has 3 pairs; the WMT14 release has 1920209"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("warning: train has 6 pairs; the WMT14 en-de release has 4520620"),
            std::string::npos)
      << run.err;

  // A rerun does nothing but report, even with the server gone.
  fs::remove_all(f.base);
  const CommandResult again = f.fetch("en-de");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.out, run.out);
  EXPECT_NE(again.err.find("already holds WMT14 en-de (6 training pairs"), std::string::npos)
      << again.err;
  EXPECT_EQ(again.err.find("extracting"), std::string::npos) << again.err;

  // Without the manifest it extracts again, from the archives it already has.
  fs::remove(f.out / "manifest.tsv");
  fs::remove(f.out / "train.de");
  const CommandResult redo = f.fetch("en-de");
  ASSERT_EQ(redo.status, 0) << redo.err;
  EXPECT_EQ(redo.err.find("downloading"), std::string::npos) << redo.err;
  EXPECT_NE(redo.err.find("have " + (f.out / "archives" / "dev.tgz").string()), std::string::npos)
      << redo.err;
  EXPECT_EQ(read_text(f.out / "train.de"), kEuroparlDe + kCrawlDe + "\n" + kNewsDe);

  // The folder holds en-de: en-fr there is refused.
  const CommandResult other = f.fetch("en-fr");
  EXPECT_EQ(other.status, 1) << other.err;
  EXPECT_NE(last_line(other.err).find("manifest.tsv is of WMT14 en-de, not en-fr"),
            std::string::npos)
      << other.err;
}

TEST(FetchWmt14, EnFrAddsUnAndTheGzippedGigaFrenFromItsTar) {
  FakeWmt14 f;
  const CommandResult run = f.fetch("en-fr");
  ASSERT_EQ(run.status, 0) << run.err;
  // Europarl v7, Common Crawl, UN, News Commentary v9, 10^9 French-English (fairseq's order).
  EXPECT_EQ(read_text(f.out / "train.en"),
            kEuroparlFrEn + kCrawlFrEn + kUnEn + kNewsFrEn + kGigaEn);
  EXPECT_EQ(read_text(f.out / "train.fr"), kEuroparlFr + kCrawlFr + kUnFr + kNewsFr + kGigaFr);
  EXPECT_EQ(read_text(f.out / "newstest2013.en"), "A thin space\nTab and spaces\n");
  EXPECT_EQ(read_text(f.out / "newstest2013.fr"), "Une phrase !\nDeuxi\u00e8me\n");
  EXPECT_EQ(read_text(f.out / "newstest2014.en"), "One\nTwo\n");
  EXPECT_EQ(read_text(f.out / "newstest2014.fr"), "Un :\nDeux !\n");
  const std::string manifest = read_text(f.out / "manifest.tsv");
  EXPECT_NE(manifest.find("giga-fren\t3\twmt10/training-giga-fren.tar\t"
                          "giga-fren.release2.fixed.en.gz\tgiga-fren.release2.fixed.fr.gz\n"),
            std::string::npos)
      << manifest;
  EXPECT_NE(manifest.find("un\t2\twmt13/training-parallel-un.tgz\tun/undoc.2000.fr-en.en\t"
                          "un/undoc.2000.fr-en.fr\n"),
            std::string::npos)
      << manifest;
  EXPECT_NE(manifest.find("train\t8\t-\ttrain.en\ttrain.fr\n"), std::string::npos) << manifest;
}

TEST(FetchWmt14, AMissingArchiveFailsNamingItsUrl) {
  FakeWmt14 f;
  fs::remove(f.base / "wmt14" / "training-parallel-nc-v9.tgz");
  expect_failure(
      f, f.fetch("en-de"),
      {"cannot download", "file://" + f.base.string() + "/wmt14/training-parallel-nc-v9.tgz"});
  EXPECT_FALSE(fs::exists(f.out / "archives" / "training-parallel-nc-v9.tgz.part"));
  // The archives that came are kept.
  EXPECT_TRUE(fs::exists(f.out / "archives" / "training-parallel-europarl-v7.tgz"));
}

TEST(FetchWmt14, ATruncatedArchiveFailsNamingIt) {
  FakeWmt14 f;
  const fs::path path = f.base / "wmt13" / "training-parallel-commoncrawl.tgz";
  const std::string bytes = read_text(path);
  write_text(path, bytes.substr(0, bytes.size() / 2));
  expect_failure(f, f.fetch("en-de"),
                 {"cannot extract commoncrawl.de-en.en",
                  (f.out / "archives" / "training-parallel-commoncrawl.tgz").string()});
}

TEST(FetchWmt14, ATruncatedGigaFrenMemberFailsNamingIt) {
  FakeWmt14 f;
  const fs::path gz = f.stage / "giga" / "giga-fren.release2.fixed.fr.gz";
  const std::string bytes = read_text(gz);
  write_text(gz, bytes.substr(0, bytes.size() - 12));
  f.tar("wmt10/training-giga-fren.tar", "giga",
        {"giga-fren.release2.fixed.en.gz", "giga-fren.release2.fixed.fr.gz"});
  expect_failure(
      f, f.fetch("en-fr"),
      {"cannot extract giga-fren.release2.fixed.fr.gz", "training-giga-fren.tar", "gzip"});
}

TEST(FetchWmt14, AMissingMemberFailsNamingIt) {
  FakeWmt14 f;
  f.archive("wmt13/training-parallel-europarl-v7.tgz",
            {{"training/europarl-v7.de-en.en", kEuroparlEn}});
  expect_failure(f, f.fetch("en-de"),
                 {"cannot extract training/europarl-v7.de-en.de",
                  "training-parallel-europarl-v7.tgz", "Not found in archive"});
}

TEST(FetchWmt14, UnequalLineCountsFailNamingBothFilesAndCounts) {
  FakeWmt14 f;
  f.archive("wmt14/training-parallel-nc-v9.tgz",
            {{"training/news-commentary-v9.de-en.en", kNewsEn},
             {"training/news-commentary-v9.de-en.de", kNewsDe + "one more\n"}});
  expect_failure(f, f.fetch("en-de"),
                 {"training/news-commentary-v9.de-en.en has 2 lines",
                  "training/news-commentary-v9.de-en.de has 3", "training-parallel-nc-v9.tgz"});

  // The same check holds for the test sets.
  FakeWmt14 g;
  g.archive("wmt14/test-full.tgz",
            {{"test-full/newstest2014-deen-src.en.sgm", sgm("en", {"one", "two"})},
             {"test-full/newstest2014-deen-ref.de.sgm", sgm("de", {"eins"})}});
  expect_failure(g, g.fetch("en-de"),
                 {"test-full/newstest2014-deen-src.en.sgm has 2 lines",
                  "test-full/newstest2014-deen-ref.de.sgm has 1"});
}

TEST(FetchWmt14, UsageErrorsExitWithTwo) {
  FakeWmt14 f;
  for (const std::string& arguments :
       {std::string(""), std::string("en-de"), "en-xx " + quoted(f.out), "de-en " + quoted(f.out),
        "en-de " + quoted(f.out) + " extra", std::string("en-de ''")}) {
    const CommandResult run = f.run(arguments);
    EXPECT_EQ(run.status, 2) << arguments;
    EXPECT_EQ(run.err, "usage: scripts/fetch_wmt14.sh en-de|en-fr DIR\n") << arguments;
    EXPECT_FALSE(fs::exists(f.out)) << arguments;
  }
}

}  // namespace
}  // namespace tfm::internal
