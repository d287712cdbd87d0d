// The documentation as a reference (docs/journal/README.md): every page of docs/ is listed in the
// README, a reference page has no dated section (dated entries belong in docs/journal/), every
// journal entry is in the journal's index, every relative Markdown link reaches its file and
// heading, and bench/results/SUMMARY.md is what bench/results/summarise.py makes of the results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "build_paths.h"

namespace tfm::internal::testing {
namespace {

namespace fs = std::filesystem;

const fs::path& root() {
  static const fs::path path(tfm_source_dir());
  return path;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The *.md files directly in `dir`, sorted.
std::vector<fs::path> markdown_in(const fs::path& dir) {
  std::vector<fs::path> pages;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".md") pages.push_back(entry.path());
  std::sort(pages.begin(), pages.end());
  return pages;
}

// Whether `text` holds a date written YYYY-MM-DD.
bool has_date(const std::string& text) {
  auto digits = [&](size_t at, size_t n) {
    for (size_t i = at; i < at + n; ++i)
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    return true;
  };
  for (size_t i = 0; i + 10 <= text.size(); ++i)
    if (digits(i, 4) && text[i + 4] == '-' && digits(i + 5, 2) && text[i + 7] == '-' &&
        digits(i + 8, 2))
      return true;
  return false;
}

// The headings of a Markdown file (lines starting with '#', outside ``` blocks), without the #s.
std::vector<std::string> headings(const fs::path& path) {
  std::vector<std::string> found;
  bool fenced = false;
  for (const std::string& line : lines_of(path)) {
    if (line.starts_with("```")) fenced = !fenced;
    if (fenced || !line.starts_with("#")) continue;
    const size_t text = line.find_first_not_of('#');
    if (text != std::string::npos && line[text] == ' ') found.push_back(line.substr(text + 1));
  }
  return found;
}

// GitHub's anchor of a heading: lower case, spaces to '-', other punctuation dropped.
std::string anchor_of(const std::string& heading) {
  std::string anchor;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80)
      anchor += static_cast<char>(std::tolower(c));
    else if (c == ' ')
      anchor += '-';
  }
  return anchor;
}

// The targets of the inline links "[text](target)" of a Markdown file, outside ``` blocks.
std::vector<std::string> link_targets(const fs::path& path) {
  std::vector<std::string> targets;
  bool fenced = false;
  for (const std::string& line : lines_of(path)) {
    if (line.starts_with("```")) fenced = !fenced;
    if (fenced) continue;
    for (size_t at = line.find("]("); at != std::string::npos; at = line.find("](", at + 2)) {
      const size_t end = line.find(')', at + 2);
      if (end != std::string::npos) targets.push_back(line.substr(at + 2, end - at - 2));
    }
  }
  return targets;
}

// "" when `target`, a link in `page`, reaches a file (and its heading, after '#'); else why not.
std::string broken_link(const fs::path& page, const std::string& target) {
  if (target.starts_with("http://") || target.starts_with("https://") ||
      target.starts_with("mailto:"))
    return "";
  const size_t hash = target.find('#');
  const std::string file = target.substr(0, hash);
  const fs::path linked = file.empty() ? page : page.parent_path() / file;
  if (!fs::exists(linked)) return "no file " + file;
  if (hash == std::string::npos) return "";
  const std::string anchor = target.substr(hash + 1);
  for (const std::string& heading : headings(linked))
    if (anchor_of(heading) == anchor) return "";
  return "no heading #" + anchor + " in " + linked.filename().string();
}

TEST(Docs, EveryPageIsListedInTheReadme) {
  const std::string readme = file_text(root() / "README.md");
  for (const fs::path& page : markdown_in(root() / "docs")) {
    const std::string name = "`docs/" + page.filename().string() + "`";
    EXPECT_NE(readme.find(name), std::string::npos) << "README.md's list lacks " << name;
  }
  EXPECT_NE(readme.find("`docs/journal/README.md`"), std::string::npos);
}

TEST(Docs, ReferencePagesHaveNoDatedSections) {
  std::vector<fs::path> pages = markdown_in(root() / "docs");
  pages.push_back(root() / "README.md");
  for (const fs::path& page : pages)
    for (const std::string& heading : headings(page))
      EXPECT_FALSE(has_date(heading))
          << page.filename() << ": \"" << heading << "\" is dated: move it to docs/journal/";
}

TEST(Docs, EveryJournalEntryIsInTheIndex) {
  const fs::path journal = root() / "docs/journal";
  const std::string index = file_text(journal / "README.md");
  for (const fs::path& entry : markdown_in(journal)) {
    const std::string name = entry.filename().string();
    if (name == "README.md") continue;
    EXPECT_TRUE(has_date(name.substr(0, 10))) << name << ": a journal entry is YYYY-MM-DD-topic.md";
    EXPECT_NE(index.find("(" + name + ")"), std::string::npos) << "the index lacks " << name;
  }
}

TEST(Docs, RelativeLinksReachTheirFilesAndHeadings) {
  std::vector<fs::path> pages = markdown_in(root() / "docs");
  for (const char* dir : {"docs/journal", "bench/results"})
    for (const fs::path& page : markdown_in(root() / dir)) pages.push_back(page);
  pages.push_back(root() / "README.md");
  for (const fs::path& page : pages)
    for (const std::string& target : link_targets(page)) {
      const std::string why = broken_link(page, target);
      EXPECT_EQ(why, "") << page.lexically_relative(root()) << ": link (" << target << ")";
    }
}

TEST(Docs, BenchResultsSummaryIsCurrent) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string command =
      "python3 '" + (root() / "bench/results/summarise.py").string() + "' --check";
  EXPECT_EQ(std::system(command.c_str()), 0)
      << "bench/results/SUMMARY.md is stale: run python3 bench/results/summarise.py";
}

}  // namespace
}  // namespace tfm::internal::testing
