#include "tfm/eval/bleu_tokenizers.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "tfm/core/error.h"

namespace tfm::internal::eval {

namespace {

// One code point of valid UTF-8 starting at text[pos]; `length` receives its byte count. Invalid
// input (which callers are told not to pass) never reads past the end: a stray or truncated byte
// decodes as U+FFFD of length 1.
char32_t decode_utf8(std::string_view text, size_t pos, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    length = 1;
    return lead;
  }
  const size_t needed = lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 0;
  if (needed == 0 || pos + needed > text.size()) {
    length = 1;
    return 0xFFFD;
  }
  if (lead < 0xE0) {
    length = 2;
    return (char32_t{lead} & 0x1F) << 6 | (byte(1) & 0x3F);
  }
  if (lead < 0xF0) {
    length = 3;
    return (char32_t{lead} & 0x0F) << 12 | (char32_t{byte(1)} & 0x3F) << 6 | (byte(2) & 0x3F);
  }
  length = 4;
  return (char32_t{lead} & 0x07) << 18 | (char32_t{byte(1)} & 0x3F) << 12 |
         (char32_t{byte(2)} & 0x3F) << 6 | (byte(3) & 0x3F);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t found; (found = text.find(from, start)) != std::string::npos;
       start = found + from.size()) {
    out.append(text, start, found - start);
    out += to;
  }
  if (start == 0) return text;
  out.append(text, start, std::string::npos);
  return out;
}

// Python's ' '.join(text.split()).
std::string join_python_tokens(std::string_view text) {
  std::string out;
  for (std::string_view token : split_python_whitespace(text)) {
    if (!out.empty()) out += ' ';
    out += token;
  }
  return out;
}

bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of TokenizerRegexp's first rule: ASCII 0x20-0x26,
// 0x28-0x2B, 0x2F, 0x3A-0x40, 0x5B-0x60, 0x7B-0x7E, i.e. every printable ASCII character that is
// neither a letter nor a digit, except ' , - .
bool is_13a_separated(char c) {
  return (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') || c == '/' || (c >= ':' && c <= '@') ||
         (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

// re.sub with a two-character pattern: scan left to right; where `matches(a, b)` holds for the
// characters at i and i + 1, emit `replace(a, b)` and resume after both (matches never overlap),
// otherwise copy one character. Working on UTF-8 bytes gives the same result as on code points
// here because every 13a pattern needs an ASCII character on at least one side and [^0-9]
// matches any byte of a multi-byte character, as it matches the character.
template <typename Matches, typename Replace>
std::string substitute_pairs(std::string_view text, Matches matches, Replace replace) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && matches(text[i], text[i + 1])) {
      replace(out, text[i], text[i + 1]);
      i += 2;
    } else {
      out += text[i++];
    }
  }
  return out;
}

// The same scanning on code points, for the intl rules, whose classes are Unicode properties.
template <typename Matches>
std::u32string substitute_pairs(const std::u32string& text, Matches matches, bool space_before) {
  std::u32string out;
  out.reserve(text.size() + text.size() / 2);
  size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && matches(text[i], text[i + 1])) {
      // (\P{N})(\p{P}) -> "\1 \2 "; (\p{P})(\P{N}) -> " \1 \2"
      if (space_before) out += U' ';
      out += text[i];
      out += U' ';
      out += text[i + 1];
      if (!space_before) out += U' ';
      i += 2;
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool is_punctuation(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}
bool is_symbol(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_S_MASK) != 0;
}
bool is_number(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0;
}

}  // namespace

BleuTokenizer bleu_tokenizer_from_name(std::string_view name) {
  if (name == "13a") return BleuTokenizer::k13a;
  if (name == "intl") return BleuTokenizer::kIntl;
  if (name == "none") return BleuTokenizer::kNone;
  if (name == "moses") return BleuTokenizer::kMoses;
  fail("unknown BLEU tokenizer '{}' (expected 13a, intl, none or moses)", name);
}

std::string_view bleu_tokenizer_name(BleuTokenizer tokenizer) {
  switch (tokenizer) {
    case BleuTokenizer::k13a:
      return "13a";
    case BleuTokenizer::kIntl:
      return "intl";
    case BleuTokenizer::kNone:
      return "none";
    case BleuTokenizer::kMoses:
      return "moses";
  }
  return "?";
}

std::string tokenize_13a(std::string_view line) {
  // The language-independent part, as Tokenizer13a does it: plain replacements, in this order
  // (so "&amp;quot;" becomes "&quot;", not '"').
  std::string text(line);
  text = replace_all(std::move(text), "<skipped>", "");
  text = replace_all(std::move(text), "-\n", "");
  text = replace_all(std::move(text), "\n", " ");
  text = replace_all(std::move(text), "&quot;", "\"");
  text = replace_all(std::move(text), "&amp;", "&");
  text = replace_all(std::move(text), "&lt;", "<");
  text = replace_all(std::move(text), "&gt;", ">");
  text = " " + text + " ";

  // Rule 1: ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 ".
  std::string spaced;
  spaced.reserve(text.size() * 2);
  for (char c : text) {
    if (is_13a_separated(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  // Rule 2: ([^0-9])([\.,]) -> "\1 \2 ": a period or comma not preceded by a digit.
  spaced = substitute_pairs(
      spaced, [](char a, char b) { return !is_ascii_digit(a) && (b == '.' || b == ','); },
      [](std::string& out, char a, char b) {
        out += a;
        out += ' ';
        out += b;
        out += ' ';
      });
  // Rule 3: ([\.,])([^0-9]) -> " \1 \2": a period or comma not followed by a digit.
  spaced = substitute_pairs(
      spaced, [](char a, char b) { return (a == '.' || a == ',') && !is_ascii_digit(b); },
      [](std::string& out, char a, char b) {
        out += ' ';
        out += a;
        out += ' ';
        out += b;
      });
  // Rule 4: ([0-9])(-) -> "\1 \2 ": a dash preceded by a digit.
  spaced = substitute_pairs(
      spaced, [](char a, char b) { return is_ascii_digit(a) && b == '-'; },
      [](std::string& out, char a, char b) {
        out += a;
        out += ' ';
        out += b;
        out += ' ';
      });
  return join_python_tokens(spaced);
}

std::string tokenize_intl(std::string_view line) {
  std::u32string text;
  text.reserve(line.size());
  for (size_t pos = 0, length = 0; pos < line.size(); pos += length)
    text += decode_utf8(line, pos, length);

  // (\P{N})(\p{P}) -> "\1 \2 ": punctuation not preceded by a number.
  text = substitute_pairs(
      text, [](char32_t a, char32_t b) { return !is_number(a) && is_punctuation(b); }, false);
  // (\p{P})(\P{N}) -> " \1 \2": punctuation not followed by a number.
  text = substitute_pairs(
      text, [](char32_t a, char32_t b) { return is_punctuation(a) && !is_number(b); }, true);
  // (\p{S}) -> " \1 ": every symbol.
  std::string out;
  out.reserve(line.size() * 2);
  for (char32_t c : text) {
    if (is_symbol(c)) {
      out += ' ';
      append_utf8(out, c);
      out += ' ';
    } else {
      append_utf8(out, c);
    }
  }
  return join_python_tokens(out);
}

std::string tokenize(std::string_view line, BleuTokenizer tokenizer, MosesLanguage language) {
  switch (tokenizer) {
    case BleuTokenizer::k13a:
      return tokenize_13a(line);
    case BleuTokenizer::kIntl:
      return tokenize_intl(line);
    case BleuTokenizer::kMoses:
      return moses_tokenize(line, language);
    case BleuTokenizer::kNone:
      break;
  }
  return std::string(line);
}

bool is_python_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::vector<std::string_view> split_python_whitespace(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t token_start = std::string_view::npos;
  for (size_t pos = 0, length = 0; pos < line.size(); pos += length) {
    const char32_t c = decode_utf8(line, pos, length);
    if (is_python_whitespace(c)) {
      if (token_start != std::string_view::npos) {
        tokens.push_back(line.substr(token_start, pos - token_start));
        token_start = std::string_view::npos;
      }
    } else if (token_start == std::string_view::npos) {
      token_start = pos;
    }
  }
  if (token_start != std::string_view::npos) tokens.push_back(line.substr(token_start));
  return tokens;
}

std::string_view rstrip_python_whitespace(std::string_view line) {
  size_t end = 0;  // one past the last non-whitespace code point
  for (size_t pos = 0, length = 0; pos < line.size(); pos += length)
    if (!is_python_whitespace(decode_utf8(line, pos, length))) end = pos + length;
  return line.substr(0, end);
}

std::string lowercase_unicode(std::string_view line) {
  bool ascii = true;
  for (char c : line) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out(line);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  icu::UnicodeString text = icu::UnicodeString::fromUTF8(
      icu::StringPiece(line.data(), static_cast<int32_t>(line.size())));
  std::string out;
  text.toLower(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

}  // namespace tfm::internal::eval
