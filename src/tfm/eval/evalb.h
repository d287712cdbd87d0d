// EVALB (Sekine and Collins, 1997): labelled bracketing precision and recall of parser output
// against gold trees, computed as the standard `evalb` program computes it (the version that
// nikitakit/self-attentive-parser ships, with its quote-term repair of length mismatches), and its
// report printed to the character. Parameters come from .prm files (COLLINS.prm, nk.prm are built
// in). docs/PARSING.md says what is deleted, matched and counted.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/data/trees.h"

namespace tfm::internal::eval {

// The settings of a .prm file. The defaults are evalb's without -p (nothing deleted).
struct EvalbParams {
  int max_error = 10;   // MAX_ERROR: evalb stops once more than this many errors accumulated
  int cutoff_len = 40;  // CUTOFF_LEN: the second summary is for sentences up to this length
  bool labeled = true;  // LABELED: 0 compares spans only
  std::vector<std::string> delete_labels;                      // DELETE_LABEL
  std::vector<std::string> delete_labels_for_length;           // DELETE_LABEL_FOR_LENGTH
  std::vector<std::string> quote_labels;                       // QUOTE_LABEL (nk.prm only)
  std::vector<std::pair<std::string, std::string>> eq_labels;  // EQ_LABEL a b
  std::vector<std::pair<std::string, std::string>> eq_words;   // EQ_WORD a b
};

// .prm text: "KEY value" lines, '#' comments, lines shorter than 3 characters ignored (as evalb
// reads them). DEBUG is accepted and ignored. Unlike evalb, which warns and goes on, an unknown
// key, an empty or non-numeric value, or an EQ_LABEL without two values is an error naming
// `name`:line.
EvalbParams parse_evalb_params(std::string_view text, std::string_view name);
// "collins" (COLLINS.prm), "nk" (nk.prm) or the path of a .prm file.
EvalbParams evalb_params(const std::string& name_or_path);

// One sentence's row of the table. status: 0 valid, 1 error (length or word mismatch), 2 skipped
// (the test tree has no words after deletion).
struct EvalbSentence {
  int id = 0;
  int length = 0;  // gold words without DELETE_LABEL_FOR_LENGTH preterminals (the cutoff length)
  int status = 0;
  int gold_brackets = 0, test_brackets = 0, matched = 0, crossing = 0;
  int words = 0, correct_tags = 0;  // words after deletion
  std::string error;                // evalb's message for an error sentence
};

struct EvalbTotals {
  int sentences = 0, error_sentences = 0, skip_sentences = 0, complete_match = 0;
  int64_t gold_brackets = 0, test_brackets = 0, matched = 0, crossing = 0;
  int no_crossing = 0, two_or_less_crossing = 0;
  int64_t words = 0, correct_tags = 0;

  int valid_sentences() const { return sentences - error_sentences - skip_sentences; }
  double recall() const;     // percent
  double precision() const;  // percent
  double f1() const;         // percent; NaN when recall and precision are both 0, as in evalb
};

struct EvalbResult {
  std::vector<EvalbSentence> sentences;
  EvalbTotals all, cut;  // all lengths; length <= cutoff_len
  int cutoff_len = 40;
  // evalb gave up (more than MAX_ERROR errors): `sentences` ends before the sentence that made
  // it stop, and evalb prints no summary.
  bool stopped = false;
};

// Scores test trees against gold trees (equal counts), sentence by sentence.
EvalbResult evalb(const std::vector<data::Tree>& gold, const std::vector<data::Tree>& test,
                  const EvalbParams& params);

// evalb's standard output: the table header, one row per sentence, and (unless it stopped) the
// totals line and the "-- All --" and "-- len<=N --" summaries.
std::string format_evalb(const EvalbResult& result);
// What evalb writes to standard error: "ID : message" for every error sentence.
std::string format_evalb_errors(const EvalbResult& result);

}  // namespace tfm::internal::eval
