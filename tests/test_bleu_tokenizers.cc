// The BLEU tokenizers and Python string semantics, case by case. Expected strings follow from the
// rules of sacreBLEU 2.x's tokenizer_13a.py / tokenizer_re.py / tokenizer_intl.py, traced by hand
// in the comments (re.sub scans left to right and its matches never overlap).
#include <gtest/gtest.h>

#include <string>

#include "tfm/core/error.h"
#include "tfm/eval/bleu_tokenizers.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::eval {
namespace {

TEST(Tokenizer13a, SeparatesAsciiPunctuationAndSymbols) {
  // Rule 1 puts spaces around space ! " # $ % & ( ) * + / : ; < = > ? @ [ \ ] ^ _ ` { | } ~.
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("50% of #tags @user (really?)"), "50 % of # tags @ user ( really ? )");
  EXPECT_EQ(tokenize_13a("x+y=z; a/b: [c]{d}|e~f^g_h`i\\j"),
            "x + y = z ; a / b : [ c ] { d } | e ~ f ^ g _ h ` i \\ j");
  EXPECT_EQ(tokenize_13a("  many   spaces\tand\ttabs  "), "many spaces and tabs");
  EXPECT_EQ(tokenize_13a(""), "");
}

TEST(Tokenizer13a, KeepsApostrophesAndHyphensInWords) {
  // ' and - are outside rule 1's class; only rule 4 splits a dash, and only after a digit.
  EXPECT_EQ(tokenize_13a("don't rock 'n' roll, the students' well-known books"),
            "don't rock 'n' roll , the students' well-known books");
  EXPECT_EQ(tokenize_13a("pages 10-20 and -5 and 3-D"), "pages 10 - 20 and -5 and 3 - D");
  EXPECT_EQ(tokenize_13a("a-1"), "a-1");  // the dash follows a letter: kept
}

TEST(Tokenizer13a, PeriodsAndCommasUnlessBetweenDigits) {
  // Rule 2 splits [.,] after a non-digit, rule 3 splits [.,] before a non-digit: only a period or
  // comma with a digit on both sides survives.
  EXPECT_EQ(tokenize_13a("It costs $3.50, or 1,000,000 yen."),
            "It costs $ 3.50 , or 1,000,000 yen .");
  // "e." "g." "U." "S." "A." all match rule 2.
  EXPECT_EQ(tokenize_13a("e.g. the U.S.A. and 3.14"), "e . g . the U . S . A . and 3.14");
  // After a letter (rule 2), before a letter (rule 3); a year before a sentence-final period is
  // split too because 13a pads the line with spaces (unlike intl, below).
  EXPECT_EQ(tokenize_13a("v.2 and 5.x in 2019."), "v . 2 and 5 . x in 2019 .");
  EXPECT_EQ(tokenize_13a("wait... ok"), "wait . . . ok");
  // A leading ".5" is split: the padding space before it is a non-digit for rule 2.
  EXPECT_EQ(tokenize_13a(".5 and 5."), ". 5 and 5 .");
}

TEST(Tokenizer13a, UnescapesQuotAmpLtGtInOrder) {
  EXPECT_EQ(tokenize_13a("He said &quot;hi&quot; &amp; left"), "He said \" hi \" & left");
  EXPECT_EQ(tokenize_13a("&lt;b&gt;bold&lt;/b&gt;"), "< b > bold < / b >");
  // &quot; is replaced before &amp;, so "&amp;quot;" becomes "&quot;" and stays: '&' and ';' are
  // then separated by rule 1.
  EXPECT_EQ(tokenize_13a("&amp;quot;"), "& quot ;");
  // Other entities are not unescaped (sacreBLEU does not, e.g. &apos;).
  EXPECT_EQ(tokenize_13a("it&apos;s"), "it & apos ; s");
}

TEST(Tokenizer13a, SkippedTagAndLineBreaks) {
  // Only the literal "<skipped>" is dropped; other tags are tokenized like any text.
  EXPECT_EQ(tokenize_13a("a <skipped> b"), "a b");
  EXPECT_EQ(tokenize_13a("a<skipped>b"), "ab");
  EXPECT_EQ(tokenize_13a("<SKIPPED> <b>x</b>"), "< SKIPPED > < b > x < / b >");
  // "-\n" joins a hyphenated line break; any other newline is a space.
  EXPECT_EQ(tokenize_13a("inter-\nnational\nday"), "international day");
}

TEST(Tokenizer13a, LeavesNonAsciiAloneAndSplitsOnUnicodeWhitespace) {
  // U+2026 (ellipsis) and U+00AB/U+00BB (guillemets) are outside the ASCII rules.
  EXPECT_EQ(tokenize_13a("Grüße, café… «oui»"), "Grüße , café… «oui»");
  EXPECT_EQ(tokenize_13a("x.é café."), "x . é café .");
  // Python's str.split() splits at U+00A0 and U+3000, not at U+200B (zero width space).
  EXPECT_EQ(tokenize_13a("a\u00a0b\u3000c\u200bd"), "a b c\u200bd");
}

TEST(TokenizerIntl, SeparatesUnicodePunctuationUnlessNextToANumber) {
  EXPECT_EQ(tokenize_intl("Hello, world!"), "Hello , world !");
  // « and » are \p{P} (Pi, Pf): "r»" matches (\P{N})(\p{P}), "«B" matches (\p{P})(\P{N}).
  EXPECT_EQ(tokenize_intl("«Bonjour»"), "« Bonjour »");
  // U+FF0C (fullwidth comma) and U+3002 (ideographic full stop) are Po.
  EXPECT_EQ(tokenize_intl("你好，世界。"), "你好 ， 世界 。");
  EXPECT_EQ(tokenize_intl("well—known"), "well — known");  // U+2014, Pd
  // The ASCII apostrophe is punctuation here, unlike in 13a.
  EXPECT_EQ(tokenize_intl("don't"), "don ' t");
}

TEST(TokenizerIntl, KeepsPunctuationBesideNumbers) {
  EXPECT_EQ(tokenize_intl("1,000.50 and 10-20"), "1,000.50 and 10-20");
  // \p{N} is any Unicode number: fullwidth digits (Nd) protect the fullwidth comma.
  EXPECT_EQ(tokenize_intl("１，０００"), "１，０００");
  // mteval-v14's quirk, kept by sacreBLEU: a number before the final period keeps it (nothing
  // follows the period for (\p{P})(\P{N}) to match), unlike 13a.
  EXPECT_EQ(tokenize_intl("in 2019."), "in 2019.");
  EXPECT_EQ(tokenize_intl("in 2019. Then"), "in 2019 . Then");
}

TEST(TokenizerIntl, SeparatesEverySymbol) {
  // € $ (Sc), × + (Sm), © (So), ^ (Sk) become tokens even between digits.
  EXPECT_EQ(tokenize_intl("5€ and $5, 3×4+1 ©x a^b"), "5 € and $ 5 , 3 × 4 + 1 © x a ^ b");
  // ² is a number (No), not a symbol.
  EXPECT_EQ(tokenize_intl("x² y"), "x² y");
}

TEST(TokenizerNone, ReturnsTheLine) {
  EXPECT_EQ(tokenize("a,b  c.", BleuTokenizer::kNone), "a,b  c.");
  EXPECT_EQ(tokenize("a,b", BleuTokenizer::k13a), "a , b");
  EXPECT_EQ(tokenize("a,b", BleuTokenizer::kIntl), "a , b");
  EXPECT_EQ(tokenize("a,b's", BleuTokenizer::kMoses), "a , b &apos;s");
  EXPECT_EQ(tokenize("a,b's", BleuTokenizer::kMoses, MosesLanguage::kDe), "a , b &apos; s");
}

TEST(BleuTokenizerNames, RoundTripAndRejectUnknown) {
  for (const char* name : {"13a", "intl", "none", "moses"})
    EXPECT_EQ(bleu_tokenizer_name(bleu_tokenizer_from_name(name)), name);
  EXPECT_THROW(bleu_tokenizer_from_name("zh"), Error);
}

TEST(PythonStrings, WhitespaceSplitAndRstrip) {
  const auto tokens = split_python_whitespace(
      " a\tb\x1c"
      "c\u0085d\u2028e\u202f f  ");
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens[0], "a");
  EXPECT_EQ(tokens[5], "f");
  EXPECT_EQ(rstrip_python_whitespace("x y \r\n\u00a0\u3000"), "x y");
  EXPECT_EQ(rstrip_python_whitespace("  "), "");
  EXPECT_FALSE(is_python_whitespace(U'\u200b'));
  EXPECT_FALSE(is_python_whitespace(U'\u180e'));  // not whitespace since Unicode 6.3
}

TEST(PythonStrings, LowercaseIsFullUnicodeLowercasing) {
  EXPECT_EQ(lowercase_unicode("The CAT"), "the cat");
  EXPECT_EQ(lowercase_unicode("ÀÉÎ ÖDÖN"), "àéî ödön");
  // Final sigma, and U+0130 -> "i" + U+0307 as Python's str.lower() gives.
  EXPECT_EQ(lowercase_unicode("ΟΔΟΣ ΣΑΣ"), "οδος σας");
  EXPECT_EQ(lowercase_unicode("İ"), "i\u0307");
  EXPECT_EQ(lowercase_unicode("ẞ"), "ß");
}

TEST(Utf8, FindsTheFirstInvalidByte) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii, Grüße, 你好, 😀").has_value());
  EXPECT_EQ(find_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(find_invalid_utf8("a\xc3"), 1u);                        // truncated
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);                     // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xe0\x80\xaf"), 1u);                // overlong, three bytes
  EXPECT_EQ(find_invalid_utf8("\xed\xa0\x80"), 0u);                 // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);             // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xe2\x82"), 0u);                     // truncated euro sign
  EXPECT_FALSE(find_invalid_utf8("\xf4\x8f\xbf\xbf").has_value());  // U+10FFFF itself
}

}  // namespace
}  // namespace tfm::internal::eval
