#include "tfm/eval/evalb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "tfm/core/error.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::eval {

namespace {

// The parameter files' settings (comments left out): COLLINS.prm of the EVALB distribution, and
// nk.prm of nikitakit/self-attentive-parser, which adds S1, '?' and '!' to the deleted labels,
// the quote labels that repair length mismatches, and a MAX_ERROR of 10000.
constexpr std::string_view kCollinsPrm = R"(DEBUG 0
MAX_ERROR 10
CUTOFF_LEN 40
LABELED 1
DELETE_LABEL TOP
DELETE_LABEL -NONE-
DELETE_LABEL ,
DELETE_LABEL :
DELETE_LABEL ``
DELETE_LABEL ''
DELETE_LABEL .
DELETE_LABEL_FOR_LENGTH -NONE-
EQ_LABEL ADVP PRT
)";

constexpr std::string_view kNkPrm = R"(DEBUG 0
MAX_ERROR 10000
CUTOFF_LEN 40
LABELED 1
DELETE_LABEL TOP
DELETE_LABEL S1
DELETE_LABEL -NONE-
DELETE_LABEL ,
DELETE_LABEL :
DELETE_LABEL ``
DELETE_LABEL ''
DELETE_LABEL .
DELETE_LABEL ?
DELETE_LABEL !
DELETE_LABEL_FOR_LENGTH -NONE-
QUOTE_LABEL ``
QUOTE_LABEL ''
QUOTE_LABEL POS
QUOTE_LABEL NN
QUOTE_LABEL CD
QUOTE_LABEL VBZ
QUOTE_LABEL :
EQ_LABEL ADVP PRT
)";

bool is_c_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_c_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_c_space(text[i])) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

int parse_int(std::string_view value, std::string_view key, std::string_view where) {
  int number = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  TFM_CHECK(ec == std::errc() && end == value.data() + value.size(),
            "{}: {} needs a whole number, not '{}'", where, key, one_line(std::string(value)));
  return number;
}

// --- the sentence as evalb reads it --------------------------------------------------------------

struct Terminal {
  std::string word, label;
};

struct Bracket {
  int start = 0, end = 0;
  std::string label;
  int result = 0;  // 0 unmatched, 1 matched, 5 deleted
};

struct QuoteTerm {
  Terminal term;
  int index = 0;          // where the word is (or would be) among the kept terminals
  int bracket = 0;        // brackets opened before it
  std::vector<int> ends;  // the brackets open around it
};

struct Sentence {
  std::vector<Terminal> terminals;
  std::vector<Bracket> brackets;
  std::vector<QuoteTerm> quotes;
  int length = 0;  // preterminals not in DELETE_LABEL_FOR_LENGTH
};

bool contains(const std::vector<std::string>& labels, const std::string& label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

bool equivalent(const std::vector<std::pair<std::string, std::string>>& pairs, const std::string& a,
                const std::string& b) {
  if (a == b) return true;
  for (const auto& [x, y] : pairs)
    if ((a == x && b == y) || (a == y && b == x)) return true;
  return false;
}

class SentenceReader {
 public:
  SentenceReader(const EvalbParams& params, Sentence& out) : params_(params), out_(out) {}

  // evalb's read_line over a tree: every constituent that is not a preterminal opens a bracket
  // (the unlabeled root too, as a bracket labelled ""); a preterminal is a word unless its label
  // is deleted.
  void read(const data::Tree& node) {
    if (node.is_leaf()) return;
    if (node.is_preterminal()) {
      const std::string& word = node.children[0].word;
      if (!contains(params_.delete_labels_for_length, node.label)) ++out_.length;
      if (contains(params_.quote_labels, node.label) &&
          (word == "'" || word == "\"" || word == "/"))
        out_.quotes.push_back({{word, node.label},
                               static_cast<int>(out_.terminals.size()),
                               static_cast<int>(out_.brackets.size()),
                               stack_});
      if (!contains(params_.delete_labels, node.label))
        out_.terminals.push_back({word, node.label});
      return;
    }
    const int id = static_cast<int>(out_.brackets.size());
    out_.brackets.push_back({static_cast<int>(out_.terminals.size()), 0, node.label, 0});
    stack_.push_back(id);
    for (const data::Tree& child : node.children) read(child);
    stack_.pop_back();
    out_.brackets[static_cast<size_t>(id)].end = static_cast<int>(out_.terminals.size());
  }

 private:
  const EvalbParams& params_;
  Sentence& out_;
  std::vector<int> stack_;
};

Sentence read_sentence(const data::Tree& tree, const EvalbParams& params) {
  Sentence sentence;
  if (tree.empty()) return sentence;
  SentenceReader(params, sentence).read(tree);
  return sentence;
}

// evalb's reinsert_term: the deleted quote word goes back at its place, and the brackets after
// it and around it grow by one.
void reinsert(const QuoteTerm& quote, Sentence& sentence) {
  sentence.terminals.insert(sentence.terminals.begin() + quote.index, quote.term);
  for (size_t k = 0; k < sentence.brackets.size(); ++k) {
    if (static_cast<int>(k) >= quote.bracket) {
      ++sentence.brackets[k].start;
      ++sentence.brackets[k].end;
    }
  }
  for (const int open : quote.ends) ++sentence.brackets[static_cast<size_t>(open)].end;
}

// evalb's fix_quote: where one side deleted a quote word (say '' for ') that the other side
// tagged with a kept label (say POS), the deleted one is put back.
void fix_quote(Sentence& gold, Sentence& test, const EvalbParams& params) {
  for (size_t i = 0; i < test.quotes.size(); ++i) {
    const int index = test.quotes[i].index;
    for (size_t j = 0; j < gold.quotes.size(); ++j) {
      if (gold.quotes[j].index != index || gold.quotes[j].term.label == test.quotes[i].term.label)
        continue;
      const bool gold_deleted = contains(params.delete_labels, gold.quotes[j].term.label);
      const bool test_deleted = contains(params.delete_labels, test.quotes[i].term.label);
      if (gold_deleted && !test_deleted) {
        reinsert(gold.quotes[j], gold);
        for (size_t k = j; k < gold.quotes.size(); ++k) ++gold.quotes[k].index;
      } else if (test_deleted && !gold_deleted) {
        reinsert(test.quotes[i], test);
        for (size_t k = i; k < test.quotes.size(); ++k) ++test.quotes[k].index;
      }
    }
  }
}

// evalb's massage_data for one side: empty brackets and deleted labels are set aside; the label
// loses everything from its first '-' or '='. Returns the brackets left.
int massage(Sentence& sentence, const EvalbParams& params) {
  int kept = 0;
  for (Bracket& bracket : sentence.brackets) {
    bracket.result = 0;
    if (bracket.start == bracket.end) {
      bracket.result = 5;
      continue;
    }
    bracket.label = bracket.label.substr(0, bracket.label.find_first_of("-="));
    for (const std::string& deleted : params.delete_labels)
      if (equivalent(params.eq_labels, bracket.label, deleted)) bracket.result = 5;
    if (bracket.result != 5) ++kept;
  }
  return kept;
}

void add(EvalbTotals& totals, const EvalbSentence& row) {
  ++totals.sentences;
  if (row.status == 1) {
    ++totals.error_sentences;
  } else if (row.status == 2) {
    ++totals.skip_sentences;
  } else {
    totals.gold_brackets += row.gold_brackets;
    totals.test_brackets += row.test_brackets;
    totals.matched += row.matched;
    if (row.gold_brackets == row.test_brackets && row.test_brackets == row.matched)
      ++totals.complete_match;
    totals.words += row.words;
    totals.crossing += row.crossing;
    if (row.crossing == 0) ++totals.no_crossing;
    if (row.crossing <= 2) ++totals.two_or_less_crossing;
    totals.correct_tags += row.correct_tags;
  }
}

// evalb's calc_result for one sentence.
EvalbSentence score(int id, const data::Tree& gold_tree, const data::Tree& test_tree,
                    const EvalbParams& params) {
  Sentence gold = read_sentence(gold_tree, params);
  Sentence test = read_sentence(test_tree, params);
  EvalbSentence row;
  row.id = id;
  row.length = gold.length;
  if (test.terminals.empty()) {
    row.status = 2;
    return row;
  }
  if (gold.terminals.size() != test.terminals.size()) {
    fix_quote(gold, test, params);
    if (gold.terminals.size() != test.terminals.size()) {
      row.status = 1;
      row.error =
          fmt::format("Length unmatch ({}|{})", gold.terminals.size(), test.terminals.size());
      return row;
    }
  }
  for (size_t i = 0; i < gold.terminals.size(); ++i) {
    if (!equivalent(params.eq_words, gold.terminals[i].word, test.terminals[i].word)) {
      row.status = 1;
      row.error =
          fmt::format("Words unmatch ({}|{})", gold.terminals[i].word, test.terminals[i].word);
      return row;
    }
  }

  row.gold_brackets = massage(gold, params);
  row.test_brackets = massage(test, params);
  for (Bracket& g : gold.brackets) {
    if (g.result == 5) continue;
    for (Bracket& t : test.brackets) {
      if (t.result != 0 || g.start != t.start || g.end != t.end) continue;
      if (!params.labeled || equivalent(params.eq_labels, g.label, t.label)) {
        g.result = t.result = 1;
        ++row.matched;
        break;
      }
    }
  }
  // Crossing brackets are counted on the test side: a test bracket that crosses any gold one.
  for (const Bracket& t : test.brackets) {
    if (t.result == 5) continue;
    for (const Bracket& g : gold.brackets) {
      if (g.result == 5) continue;
      if ((g.start < t.start && g.end > t.start && g.end < t.end) ||
          (g.start > t.start && g.start < t.end && g.end > t.end)) {
        ++row.crossing;
        break;
      }
    }
  }
  row.words = static_cast<int>(gold.terminals.size());
  for (size_t i = 0; i < gold.terminals.size(); ++i)
    if (equivalent(params.eq_labels, gold.terminals[i].label, test.terminals[i].label))
      ++row.correct_tags;
  return row;
}

double percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// printf's "%6.2f", NaN as glibc prints the x86 default NaN (0.0 / 0.0 has its sign bit set).
std::string f62(double value) {
  if (std::isnan(value)) return "  -nan";
  return fmt::format("{:6.2f}", value);
}

void append_summary(std::string& out, const EvalbTotals& totals) {
  const int valid = totals.valid_sentences();
  out += fmt::format("Number of sentence        = {:6d}\n", totals.sentences);
  out += fmt::format("Number of Error sentence  = {:6d}\n", totals.error_sentences);
  out += fmt::format("Number of Skip  sentence  = {:6d}\n", totals.skip_sentences);
  out += fmt::format("Number of Valid sentence  = {:6d}\n", valid);
  out += fmt::format("Bracketing Recall         = {}\n", f62(totals.recall()));
  out += fmt::format("Bracketing Precision      = {}\n", f62(totals.precision()));
  out += fmt::format("Bracketing FMeasure       = {}\n", f62(totals.f1()));
  out +=
      fmt::format("Complete match            = {}\n", f62(percent(totals.complete_match, valid)));
  out += fmt::format("Average crossing          = {}\n",
                     f62(valid > 0 ? static_cast<double>(totals.crossing) / valid : 0.0));
  out += fmt::format("No crossing               = {}\n", f62(percent(totals.no_crossing, valid)));
  out += fmt::format("2 or less crossing        = {}\n",
                     f62(percent(totals.two_or_less_crossing, valid)));
  out += fmt::format("Tagging accuracy          = {}\n",
                     f62(percent(totals.correct_tags, totals.words)));
}

}  // namespace

EvalbParams parse_evalb_params(std::string_view text, std::string_view name) {
  EvalbParams params;
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    while (!line.empty() && is_c_space(line.back())) line.remove_suffix(1);
    if (line.starts_with('#') || line.size() < 3) continue;
    const std::string where = fmt::format("{}:{}", name, line_number);
    size_t i = 0;
    while (i < line.size() && !is_c_space(line[i])) ++i;
    const std::string_view key = line.substr(0, i);
    while (i < line.size() && is_c_space(line[i])) ++i;
    const std::string value(line.substr(i));
    TFM_CHECK(!value.empty(), "{}: {} has no value", where, one_line(std::string(key)));
    if (key == "DEBUG") {
      parse_int(value, key, where);  // evalb's debugging output is not reproduced
    } else if (key == "MAX_ERROR") {
      params.max_error = parse_int(value, key, where);
    } else if (key == "CUTOFF_LEN") {
      params.cutoff_len = parse_int(value, key, where);
    } else if (key == "LABELED") {
      params.labeled = parse_int(value, key, where) != 0;
    } else if (key == "DELETE_LABEL") {
      params.delete_labels.push_back(value);
    } else if (key == "DELETE_LABEL_FOR_LENGTH") {
      params.delete_labels_for_length.push_back(value);
    } else if (key == "QUOTE_LABEL") {
      params.quote_labels.push_back(value);
    } else if (key == "EQ_LABEL" || key == "EQ_WORD") {
      const std::vector<std::string> pair = split_words(value);
      TFM_CHECK(pair.size() == 2, "{}: {} needs two values, not '{}'", where, key, one_line(value));
      (key == "EQ_LABEL" ? params.eq_labels : params.eq_words).emplace_back(pair[0], pair[1]);
    } else {
      fail(
          "{}: unknown key '{}' (DEBUG, MAX_ERROR, CUTOFF_LEN, LABELED, DELETE_LABEL, "
          "DELETE_LABEL_FOR_LENGTH, QUOTE_LABEL, EQ_LABEL, EQ_WORD)",
          where, one_line(std::string(key)));
    }
  }
  return params;
}

EvalbParams evalb_params(const std::string& name_or_path) {
  if (name_or_path == "collins") return parse_evalb_params(kCollinsPrm, "COLLINS.prm");
  if (name_or_path == "nk") return parse_evalb_params(kNkPrm, "nk.prm");
  return parse_evalb_params(read_file_bytes(name_or_path), name_or_path);
}

double EvalbTotals::recall() const {
  return percent(matched, gold_brackets);
}
double EvalbTotals::precision() const {
  return percent(matched, test_brackets);
}
double EvalbTotals::f1() const {
  const double r = recall(), p = precision();
  if (p + r == 0) return std::numeric_limits<double>::quiet_NaN();
  return 2 * p * r / (p + r);
}

EvalbResult evalb(const std::vector<data::Tree>& gold, const std::vector<data::Tree>& test,
                  const EvalbParams& params) {
  TFM_CHECK(gold.size() == test.size(), "evalb: {} gold trees but {} test trees", gold.size(),
            test.size());
  EvalbResult result;
  result.cutoff_len = params.cutoff_len;
  int errors = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    EvalbSentence row = score(static_cast<int>(i) + 1, gold[i], test[i], params);
    // evalb exits (printing no summary) at the error that finds more than MAX_ERROR before it.
    if (row.status == 1 && errors++ > params.max_error) {
      result.stopped = true;
      result.sentences.push_back(std::move(row));
      break;
    }
    add(result.all, row);
    if (row.length <= params.cutoff_len) add(result.cut, row);
    result.sentences.push_back(std::move(row));
  }
  return result;
}

std::string format_evalb(const EvalbResult& result) {
  std::string out =
      "  Sent.                        Matched  Bracket   Cross        Correct Tag\n"
      " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy\n"
      "============================================================================\n";
  for (const EvalbSentence& row : result.sentences) {
    if (result.stopped && &row == &result.sentences.back()) break;  // evalb exited before it
    out += fmt::format("{:4d}  {:3d}    {}  ", row.id, row.length, row.status);
    out += fmt::format("{} {}   {:3d}    {:3d}  {:3d}    {:3d}",
                       f62(percent(row.matched, row.gold_brackets)),
                       f62(percent(row.matched, row.test_brackets)), row.matched, row.gold_brackets,
                       row.test_brackets, row.crossing);
    out += fmt::format("   {:4d}  {:4d}   {}\n", row.words, row.correct_tags,
                       f62(percent(row.correct_tags, row.words)));
  }
  if (result.stopped) return out;
  const EvalbTotals& all = result.all;
  out += "============================================================================\n";
  if (all.gold_brackets > 0 && all.test_brackets > 0)
    out += fmt::format("                {} {} {:6d} {:5d} {:5d}  {:5d}", f62(all.recall()),
                       f62(all.precision()), all.matched, all.gold_brackets, all.test_brackets,
                       all.crossing);
  out += fmt::format("  {:5d} {:5d}   {}\n", all.words, all.correct_tags,
                     f62(percent(all.correct_tags, all.words)));
  out += "=== Summary ===\n";
  out += "\n-- All --\n";
  append_summary(out, result.all);
  out += fmt::format("\n-- len<={} --\n", result.cutoff_len);
  append_summary(out, result.cut);
  return out;
}

std::string format_evalb_errors(const EvalbResult& result) {
  std::string out;
  for (const EvalbSentence& row : result.sentences)
    if (row.status == 1) out += fmt::format("{} : {}\n", row.id, row.error);
  return out;
}

}  // namespace tfm::internal::eval
