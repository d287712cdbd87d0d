// The text processing of sacreBLEU 2.x's BLEU, reimplemented so that scores agree with it: its
// tokenizers ("13a", "intl", "none"), Python's notion of whitespace (str.split / str.rstrip) and
// Python's str.lower(); and Moses tokenizer.perl ("moses", moses_tokenizer.h) for tokenized BLEU.
// Every function takes and returns UTF-8; input must be valid UTF-8 (check with
// tfm::internal::find_invalid_utf8 of io/text_reader.h), except where noted.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/eval/moses_tokenizer.h"

namespace tfm::internal::eval {

enum class BleuTokenizer {
  k13a,    // mteval-v13a.pl, sacreBLEU's default
  kIntl,   // mteval-v14.pl --international-tokenization (Unicode punctuation and symbols)
  kNone,   // the text as it is: split on whitespace only
  kMoses,  // Moses tokenizer.perl -l LANG (tfm's, not sacreBLEU's: tokenized BLEU only)
};

// "13a", "intl", "none", "moses"; throws tfm::Error listing the valid names for anything else.
BleuTokenizer bleu_tokenizer_from_name(std::string_view name);
std::string_view bleu_tokenizer_name(BleuTokenizer tokenizer);

// sacreBLEU's Tokenizer13a: drops "<skipped>", joins "-\n" line continuations, turns other
// newlines into spaces, unescapes &quot; &amp; &lt; &gt; (in that order), then TokenizerRegexp on
// " line ": ASCII punctuation and symbols except ' , - . become tokens; '.' and ',' are split off
// unless they sit between digits on the side in question; '-' is split off after a digit.
// Returns the tokens joined by single spaces.
std::string tokenize_13a(std::string_view line);

// sacreBLEU's TokenizerV14International: Unicode punctuation (\p{P}) is split off unless it has a
// number (\p{N}) on the side in question, every symbol (\p{S}) becomes a token. Unicode
// properties come from ICU. Returns the tokens joined by single spaces.
std::string tokenize_intl(std::string_view line);

// `line` tokenized by `tokenizer`; `language` is that of kMoses (moses_tokenize), unused by the
// others.
std::string tokenize(std::string_view line, BleuTokenizer tokenizer,
                     MosesLanguage language = MosesLanguage::kEn);

// Python's str.isspace() for one code point: the characters str.split() and str.rstrip() treat as
// whitespace (ASCII \t\n\v\f\r and space, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000).
bool is_python_whitespace(char32_t code_point);

// Python's line.split(): the maximal runs of non-whitespace, as views into `line`.
std::vector<std::string_view> split_python_whitespace(std::string_view line);

// Python's line.rstrip(): `line` without its trailing whitespace.
std::string_view rstrip_python_whitespace(std::string_view line);

// Python's str.lower(): full Unicode lower-casing, locale independent (ICU's root locale, which
// like Python maps U+0130 to "i\u0307" and a word-final capital sigma to final sigma).
std::string lowercase_unicode(std::string_view line);

}  // namespace tfm::internal::eval
