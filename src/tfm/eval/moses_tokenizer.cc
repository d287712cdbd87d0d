// tokenizer.perl's `tokenize` step by step, on code points (the script reads UTF-8 with the :utf8
// layer, so its regular expressions see characters and Perl's Unicode rules apply). Each step's
// comment is the Perl it implements. Perl's s///g scans left to right and its matches never
// overlap: `substitute` below does the same, and so keeps the script's quirks (in English "a'b'c"
// becomes "a 'b'c": the first match uses up the "b").
#include "tfm/eval/moses_tokenizer.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/eval/moses_nonbreaking_prefixes.h"

namespace tfm::internal::eval {

namespace {

using Text = std::u32string;

Text decode(std::string_view utf8) {
  Text out;
  out.reserve(utf8.size());
  const auto* s = reinterpret_cast<const uint8_t*>(utf8.data());
  const auto length = static_cast<int32_t>(utf8.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(s, i, length, c);
    out += c < 0 ? U'\uFFFD' : static_cast<char32_t>(c);
  }
  return out;
}

std::string encode(const Text& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char32_t c : text) {
    uint8_t bytes[U8_MAX_LENGTH];
    int32_t n = 0;
    U8_APPEND_UNSAFE(bytes, n, static_cast<UChar32>(c));
    out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
  }
  return out;
}

// Perl's Unicode classes. \s: White_Space (Perl's XPosixSpace, \cK included).
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}
// \p{IsAlpha}: Alphabetic.
bool is_alpha(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC);
}
// \p{IsAlnum}: Alphabetic or Decimal_Number (UTS #18 alnum, as Perl's XPosixAlnum).
bool is_alnum(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_POSIX_ALNUM);
}
// \p{IsN}: General_Category Number (Nd, Nl, No).
bool is_number(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0;
}
// \p{IsLower}: Lowercase.
bool is_lower(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_LOWERCASE);
}

bool at(const Text& text, size_t pos, std::u32string_view literal) {
  return text.compare(pos, literal.size(), literal) == 0;
}
bool contains(const Text& text, std::u32string_view literal) {
  return text.find(literal) != Text::npos;
}

// s/PATTERN/REPLACEMENT/g: at each position, `rule(text, pos, out)` either appends the
// replacement of a match starting there and returns its length, or returns 0 (the character is
// copied and the scan moves on by one).
template <typename Rule>
Text substitute(const Text& text, Rule rule) {
  Text out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t pos = 0; pos < text.size();) {
    if (const size_t length = rule(text, pos, out); length > 0) {
      pos += length;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// s/LITERAL/REPLACEMENT/g.
Text replace_all(const Text& text, std::u32string_view from, std::u32string_view to) {
  return substitute(text, [&](const Text& t, size_t pos, Text& out) -> size_t {
    if (!at(t, pos, from)) return 0;
    out += to;
    return from.size();
  });
}

// s/ +/ /g; s/^ //g; s/ $//g;
Text squeeze_spaces(const Text& text) {
  Text out;
  for (char32_t c : text)
    if (c != U' ' || (!out.empty() && out.back() != U' ')) out += c;
  if (!out.empty() && out.back() == U' ') out.pop_back();
  return out;
}

// s/([A])[']([B])/$1MIDDLE$2/g: an apostrophe between a character of class A and one of class B.
template <typename A, typename B>
Text split_apostrophes(const Text& text, A first, B second, std::u32string_view middle) {
  return substitute(text, [&](const Text& t, size_t pos, Text& out) -> size_t {
    if (pos + 2 >= t.size() || t[pos + 1] != U'\'' || !first(t[pos]) || !second(t[pos + 2]))
      return 0;
    out += t[pos];
    out += middle;
    out += t[pos + 2];
    return 3;
  });
}

// The apostrophe rules of `if ($language eq "en") ... else ...`.
Text apostrophes(const Text& text, MosesLanguage language) {
  const auto alpha = [](char32_t c) { return is_alpha(c); };
  const auto not_alpha = [](char32_t c) { return !is_alpha(c); };
  Text t = text;
  switch (language) {
    case MosesLanguage::kEn:
      // split contractions right
      // s/([^\p{IsAlpha}])[']([^\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(t, not_alpha, not_alpha, U" ' ");
      // s/([^\p{IsAlpha}\p{IsN}])[']([\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(
          t, [](char32_t c) { return !is_alpha(c) && !is_number(c); }, alpha, U" ' ");
      // s/([\p{IsAlpha}])[']([^\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(t, alpha, not_alpha, U" ' ");
      // s/([\p{IsAlpha}])[']([\p{IsAlpha}])/$1 '$2/g;
      t = split_apostrophes(t, alpha, alpha, U" '");
      // special case for "1990's": s/([\p{IsN}])[']([s])/$1 '$2/g;
      return split_apostrophes(
          t, [](char32_t c) { return is_number(c); }, [](char32_t c) { return c == U's'; }, U" '");
    case MosesLanguage::kFr:
      // split contractions left
      // s/([^\p{IsAlpha}])[']([^\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(t, not_alpha, not_alpha, U" ' ");
      // s/([^\p{IsAlpha}])[']([\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(t, not_alpha, alpha, U" ' ");
      // s/([\p{IsAlpha}])[']([^\p{IsAlpha}])/$1 ' $2/g;
      t = split_apostrophes(t, alpha, not_alpha, U" ' ");
      // s/([\p{IsAlpha}])[']([\p{IsAlpha}])/$1' $2/g;
      return split_apostrophes(t, alpha, alpha, U"' ");
    case MosesLanguage::kDe:
      break;
  }
  // s/\'/ \' /g;
  return replace_all(t, U"'", U" ' ");
}

// load_prefixes: 1 for a prefix, 2 for "WORD #NUMERIC_ONLY#" (non-breaking before a number only).
using Prefixes = std::unordered_map<Text, int>;

Prefixes load_prefixes(MosesLanguage language) {
  Prefixes prefixes;
  const std::string_view file = moses_nonbreaking_prefix_file(language);
  for (size_t start = 0; start < file.size();) {
    size_t end = file.find('\n', start);
    if (end == std::string_view::npos) end = file.size();
    const Text item = decode(file.substr(start, end - start));  // chomp($item)
    start = end + 1;
    // if (($item) && (substr($item,0,1) ne "#")): not empty, not "0", not a comment
    if (item.empty() || item == U"0" || item[0] == U'#') continue;
    // if ($item =~ /(.*)[\s]+(\#NUMERIC_ONLY\#)/) { $PREFIX_REF->{$1} = 2; }: the greedy (.*)
    // takes everything before the last "#NUMERIC_ONLY#" that follows whitespace, but one
    // whitespace character.
    size_t tag = item.rfind(U"#NUMERIC_ONLY#");
    while (tag != Text::npos && tag > 0 && !is_space(item[tag - 1]))
      tag = item.rfind(U"#NUMERIC_ONLY#", tag - 1);
    if (tag != Text::npos && tag > 0) {
      prefixes[item.substr(0, tag - 1)] = 2;
    } else {
      prefixes[item] = 1;
    }
  }
  return prefixes;
}

const Prefixes& nonbreaking_prefixes(MosesLanguage language) {
  static const Prefixes en = load_prefixes(MosesLanguage::kEn);
  static const Prefixes de = load_prefixes(MosesLanguage::kDe);
  static const Prefixes fr = load_prefixes(MosesLanguage::kFr);
  switch (language) {
    case MosesLanguage::kEn:
      return en;
    case MosesLanguage::kDe:
      return de;
    case MosesLanguage::kFr:
      break;
  }
  return fr;
}

// split(/\s/, $text): fields between single whitespace characters; leading empty fields stay,
// trailing ones are dropped.
std::vector<Text> perl_split(const Text& text) {
  std::vector<Text> words(1);
  for (char32_t c : text) {
    if (is_space(c)) {
      words.emplace_back();
    } else {
      words.back() += c;
    }
  }
  while (!words.empty() && words.back().empty()) words.pop_back();
  return words;
}

// The "word token method": a word ending in a period gets it split off unless it is a
// nonbreaking prefix (or looks like an abbreviation, or the next word starts in lower case).
Text split_final_periods(const Text& text, MosesLanguage language) {
  const Prefixes& prefixes = nonbreaking_prefixes(language);
  const std::vector<Text> words = perl_split(text);
  Text out;
  for (size_t i = 0; i < words.size(); ++i) {
    Text word = words[i];
    // if ( $word =~ /^(\S+)\.$/) { my $pre = $1;
    if (word.size() >= 2 && word.back() == U'.') {
      const Text pre = word.substr(0, word.size() - 1);
      const auto found = prefixes.find(pre);
      const int prefix = found == prefixes.end() ? 0 : found->second;
      bool keep = false;
      if (i + 1 == words.size()) {
        // split last words independently as they are unlikely to be non-breaking prefixes
        keep = false;
      } else if ((contains(pre, U".") && std::any_of(pre.begin(), pre.end(), is_alpha)) ||
                 prefix == 1 || (!words[i + 1].empty() && is_lower(words[i + 1][0]))) {
        // ($pre =~ /\./ && $pre =~ /\p{IsAlpha}/) || $NONBREAKING_PREFIX{$pre}==1 ||
        // $words[$i+1] =~ /^[\p{IsLower}]/: no change
        keep = true;
      } else if (prefix == 2 && !words[i + 1].empty() && words[i + 1][0] >= U'0' &&
                 words[i + 1][0] <= U'9') {
        // $NONBREAKING_PREFIX{$pre}==2 && $words[$i+1] =~ /^[0-9]+/: no change
        keep = true;
      }
      if (!keep) word = pre + U" .";
    }
    out += word;  // $text .= $word." ";
    out += U' ';
  }
  return out;
}

}  // namespace

MosesLanguage moses_language_from_name(std::string_view name) {
  if (name == "en") return MosesLanguage::kEn;
  if (name == "de") return MosesLanguage::kDe;
  if (name == "fr") return MosesLanguage::kFr;
  fail("unknown Moses tokenizer language '{}' (expected en, de or fr)", name);
}

std::string_view moses_language_name(MosesLanguage language) {
  switch (language) {
    case MosesLanguage::kEn:
      return "en";
    case MosesLanguage::kDe:
      return "de";
    case MosesLanguage::kFr:
      return "fr";
  }
  return "?";
}

std::string moses_tokenize(std::string_view line, MosesLanguage language) {
  Text text = decode(line);
  // The main loop prints a line matching /^\s*$/ as it is.
  if (std::all_of(text.begin(), text.end(), is_space)) return std::string(line);

  // $text = " $text "; s/\s+/ /g; s/[\000-\037]//g;
  text = substitute(U" " + text + U" ", [](const Text& t, size_t pos, Text& out) -> size_t {
    size_t end = pos;
    while (end < t.size() && is_space(t[end])) ++end;
    if (end > pos) out += U' ';
    return end - pos;
  });
  std::erase_if(text, [](char32_t c) { return c < 0x20; });
  // (protected patterns: none) s/ +/ /g; s/^ //g; s/ $//g;
  text = squeeze_spaces(text);

  // separate out all "other" special characters: s/([^\p{IsAlnum}\s\.\'\`\,\-])/ $1 /g;
  text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
    const char32_t c = t[pos];
    if (is_alnum(c) || is_space(c) || c == U'.' || c == U'\'' || c == U'`' || c == U',' ||
        c == U'-')
      return 0;
    out += U' ';
    out += c;
    out += U' ';
    return 1;
  });

  // multi-dots stay together: s/\.([\.]+)/ DOTMULTI$1/g;
  text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
    if (!at(t, pos, U"..")) return 0;
    size_t end = pos + 2;
    while (end < t.size() && t[end] == U'.') ++end;
    out += U" DOTMULTI";
    out.append(t, pos + 1, end - pos - 1);
    return end - pos;
  });
  // while($text =~ /DOTMULTI\./)
  while (contains(text, U"DOTMULTI.")) {
    // s/DOTMULTI\.([^\.])/DOTDOTMULTI $1/g;
    text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
      constexpr std::u32string_view dot_multi = U"DOTMULTI.";
      if (!at(t, pos, dot_multi) || pos + dot_multi.size() >= t.size() ||
          t[pos + dot_multi.size()] == U'.')
        return 0;
      out += U"DOTDOTMULTI ";
      out += t[pos + dot_multi.size()];
      return dot_multi.size() + 1;
    });
    // s/DOTMULTI\./DOTDOTMULTI/g;
    text = replace_all(text, U"DOTMULTI.", U"DOTDOTMULTI");
  }

  // separate out "," except if within numbers (5,300)
  // s/([^\p{IsN}])[,]/$1 , /g;
  text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
    if (pos + 1 >= t.size() || t[pos + 1] != U',' || is_number(t[pos])) return 0;
    out += t[pos];
    out += U" , ";
    return 2;
  });
  // s/[,]([^\p{IsN}])/ , $1/g;
  text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
    if (pos + 1 >= t.size() || t[pos] != U',' || is_number(t[pos + 1])) return 0;
    out += U" , ";
    out += t[pos + 1];
    return 2;
  });
  // separate "," after a number if it's the end of a sentence: s/([\p{IsN}])[,]$/$1 ,/g;
  if (text.size() >= 2 && text.back() == U',' && is_number(text[text.size() - 2])) {
    text.back() = U' ';
    text += U',';
  }

  text = apostrophes(text, language);
  text = split_final_periods(text, language);

  // clean up extraneous spaces: s/ +/ /g; s/^ //g; s/ $//g;
  text = squeeze_spaces(text);
  // .' at end of sentence is missed: s/\.\' ?$/ . ' /;
  for (std::u32string_view end : {U".'", U".' "}) {
    if (text.size() >= end.size() && at(text, text.size() - end.size(), end)) {
      text.replace(text.size() - end.size(), end.size(), U" . ' ");
      break;
    }
  }

  // restore multi-dots: while (/DOTDOTMULTI/) { s/DOTDOTMULTI/DOTMULTI./g; } s/DOTMULTI/./g;
  while (contains(text, U"DOTDOTMULTI")) text = replace_all(text, U"DOTDOTMULTI", U"DOTMULTI.");
  text = replace_all(text, U"DOTMULTI", U".");

  // escape special chars: s/\&/\&amp;/g; s/\|/\&#124;/g; s/\</\&lt;/g; s/\>/\&gt;/g;
  // s/\'/\&apos;/g; s/\"/\&quot;/g; s/\[/\&#91;/g; s/\]/\&#93;/g; (& first, and no escape contains
  // another of these characters, so one pass gives the same)
  static constexpr std::pair<char32_t, std::u32string_view> kEscapes[] = {
      {U'&', U"&amp;"},   {U'|', U"&#124;"}, {U'<', U"&lt;"},  {U'>', U"&gt;"},
      {U'\'', U"&apos;"}, {U'"', U"&quot;"}, {U'[', U"&#91;"}, {U']', U"&#93;"}};
  text = substitute(text, [](const Text& t, size_t pos, Text& out) -> size_t {
    for (const auto& [c, escaped] : kEscapes) {
      if (t[pos] != c) continue;
      out += escaped;
      return 1;
    }
    return 0;
  });
  return encode(text);
}

std::string split_compounds(std::string_view text) {
  // perl -p reads bytes: \S is any byte but ASCII whitespace, and a multi-byte character next to
  // the hyphen is kept whole because only its byte next to the hyphen takes part.
  const auto is_ascii_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t pos = 0; pos < text.size();) {
    if (pos + 2 < text.size() && text[pos + 1] == '-' && !is_ascii_space(text[pos]) &&
        !is_ascii_space(text[pos + 2])) {
      out += text[pos];
      out += " ##AT##-##AT## ";
      out += text[pos + 2];
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

}  // namespace tfm::internal::eval
