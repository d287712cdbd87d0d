// The port of Moses tokenizer.perl (moses_tokenizer.h) and the ##AT## compound split, case by case,
// and tokenized BLEU on top of them (the paper's score: BleuTokenizer::kMoses in bleu.h). Expected
// strings are traced by hand through the script's rules (named in the comments), and were also
// confirmed by running tokenizer.perl itself (docs/BLEU.md, "The paper's BLEU").
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/eval/bleu.h"
#include "tfm/eval/moses_tokenizer.h"

namespace tfm::internal::eval {
namespace {

std::string en(std::string_view line) {
  return moses_tokenize(line, MosesLanguage::kEn);
}
std::string de(std::string_view line) {
  return moses_tokenize(line, MosesLanguage::kDe);
}
std::string fr(std::string_view line) {
  return moses_tokenize(line, MosesLanguage::kFr);
}

TEST(BleuMosesTokenizer, SeparatesAndEscapesSpecialCharacters) {
  // s/([^\p{IsAlnum}\s\.\'\`\,\-])/ $1 /g puts spaces around " & < > | [ ], then each is escaped,
  // & first.
  EXPECT_EQ(en("He said \"yes\" & <b>|[x]"),
            "He said &quot; yes &quot; &amp; &lt; b &gt; &#124; &#91; x &#93;");
  EXPECT_EQ(en("a&amp;b"), "a &amp; amp ; b");  // an entity in the input is text like any other
  // Hyphens are not split without -a; a sign stays with its number.
  EXPECT_EQ(en("a well-known -5 test"), "a well-known -5 test");
  // Unicode: « » € are neither letters nor digits.
  EXPECT_EQ(fr("«Bonjour» 5€"), "« Bonjour » 5 €");
}

TEST(BleuMosesTokenizer, NonbreakingPrefixesAndFinalPeriods) {
  // "Dr" is in nonbreaking_prefix.en: its period stays, even before a capital.
  EXPECT_EQ(en("Dr. Smith arrived."), "Dr. Smith arrived .");
  EXPECT_EQ(en("I saw the Dr. Then I left."), "I saw the Dr. Then I left .");
  // Not a prefix: split before a capital, kept before a lower-case word.
  EXPECT_EQ(en("I saw the doctor. Then I left."), "I saw the doctor . Then I left .");
  EXPECT_EQ(en("the doctor. and then"), "the doctor. and then");
  // "No #NUMERIC_ONLY#": non-breaking only before a digit.
  EXPECT_EQ(en("No. 5 is here."), "No. 5 is here .");
  EXPECT_EQ(en("Say No. Then go."), "Say No . Then go .");
  // A word with an inner period and a letter is an abbreviation; the last word is always split.
  EXPECT_EQ(en("U.S. troops, e.g. here."), "U.S. troops , e.g. here .");
  EXPECT_EQ(de("z.B. das usw."), "z.B. das usw .");
  // German ordinals: "3" is a German prefix, not an English one.
  EXPECT_EQ(de("am 3. Oktober"), "am 3. Oktober");
  EXPECT_EQ(en("am 3. Oktober"), "am 3 . Oktober");
}

TEST(BleuMosesTokenizer, CommasAndNumbers) {
  // s/([^\p{IsN}])[,]/$1 , /g and s/[,]([^\p{IsN}])/ , $1/g: a comma stays only between numbers.
  EXPECT_EQ(en("It costs 5,300 dollars, or 1,000."), "It costs 5,300 dollars , or 1,000 .");
  EXPECT_EQ(en("A,B,C"), "A , B , C");
  // s/([\p{IsN}])[,]$/$1 ,/g: after a number at the end of the line.
  EXPECT_EQ(en("in 1990,"), "in 1990 ,");
}

TEST(BleuMosesTokenizer, EnglishApostrophesSplitRight) {
  // letter ' letter -> "$1 '$2": the apostrophe goes with what follows.
  EXPECT_EQ(en("I don't know, it's John's."), "I don &apos;t know , it &apos;s John &apos;s .");
  // s/([\p{IsN}])[']([s])/$1 '$2/g
  EXPECT_EQ(en("the 1990's"), "the 1990 &apos;s");
  // Every rule needs a character on both sides: quotes at the ends of the line stay attached.
  EXPECT_EQ(en("'Hello'"), "&apos;Hello&apos;");
  // Matches do not overlap: the first uses up the "b".
  EXPECT_EQ(en("a'b'c"), "a &apos;b&apos;c");
  // s/\.\' ?$/ . ' /: a final .' is split, leaving a trailing space.
  EXPECT_EQ(en("He said 'no.'"), "He said &apos; no . &apos; ");
}

TEST(BleuMosesTokenizer, GermanAndFrenchApostrophes) {
  // German (any language but en, fr, it, ...): s/\'/ \' /g.
  EXPECT_EQ(de("Geht's dir gut?"), "Geht &apos; s dir gut ?");
  // French: letter ' letter -> "$1' $2", the apostrophe goes with what precedes.
  EXPECT_EQ(fr("l'homme d'affaires aujourd'hui"),
            "l&apos; homme d&apos; affaires aujourd&apos; hui");
}

TEST(BleuMosesTokenizer, MultiDotsAndQuotes) {
  // Runs of periods become one token (the DOTMULTI rewriting and its restoration).
  EXPECT_EQ(en("Wait... what?"), "Wait ... what ?");
  EXPECT_EQ(en("Hmm..."), "Hmm ...");
  EXPECT_EQ(en("a....b"), "a .... b");
  EXPECT_EQ(en("\"Hello,\" she said."), "&quot; Hello , &quot; she said .");
}

TEST(BleuMosesTokenizer, WhitespaceAndControlCharacters) {
  // s/\s+/ /g (Unicode whitespace: the no-break space too), s/[\000-\037]//g, then trimmed.
  EXPECT_EQ(en("  a\tb\u00a0c  "), "a b c");
  EXPECT_EQ(en("a\x01"
               "b"),
            "ab");
  // The main loop prints a line of whitespace only as it is.
  EXPECT_EQ(en("  \t"), "  \t");
  EXPECT_EQ(en(""), "");
  // A combining accent is not \p{IsAlnum} (not Alphabetic): it is split off, as Perl does.
  EXPECT_EQ(en("e\u0301t\u00e9"), "e \u0301 t\u00e9");
}

TEST(BleuMosesTokenizer, LanguageNames) {
  for (const char* name : {"en", "de", "fr"})
    EXPECT_EQ(moses_language_name(moses_language_from_name(name)), name);
  EXPECT_THROW(moses_language_from_name("it"), Error);
}

TEST(BleuCompoundSplit, SplitsHyphensBetweenNonSpaces) {
  EXPECT_EQ(split_compounds("rich-text format"), "rich ##AT##-##AT## text format");
  EXPECT_EQ(split_compounds("Anti-Terror-Gesetze"),
            "Anti ##AT##-##AT## Terror ##AT##-##AT## Gesetze");
  EXPECT_EQ(split_compounds("B 33-Fu\u00dfg\u00e4ngerampel"),
            "B 33 ##AT##-##AT## Fu\u00dfg\u00e4ngerampel");
  EXPECT_EQ(split_compounds("\u00e9-\u00fc"), "\u00e9 ##AT##-##AT## \u00fc");
}

TEST(BleuCompoundSplit, MatchesDoNotOverlap) {
  // s{(\S)-(\S)}{...}g uses up the "b" of "a-b", so "b-c" is not seen.
  EXPECT_EQ(split_compounds("a-b-c"), "a ##AT##-##AT## b-c");
  EXPECT_EQ(split_compounds("a-b-c-d"), "a ##AT##-##AT## b-c ##AT##-##AT## d");
  EXPECT_EQ(split_compounds("x--y"), "x ##AT##-##AT## -y");
}

TEST(BleuCompoundSplit, LeavesOtherHyphensAlone) {
  // A hyphen at either end of a token, or a token of its own, has whitespace on one side.
  EXPECT_EQ(split_compounds("-a b- - x"), "-a b- - x");
  EXPECT_EQ(split_compounds("-"), "-");
  EXPECT_EQ(split_compounds(""), "");
}

// The paper's EN-DE recipe on one sentence pair. Moses -l de keeps "1." (a German ordinal) and
// splits the final period; the split turns each compound into three tokens, so reference and
// hypothesis have 11 tokens each, differing in "ab"/"seit": matches 10/11, 8/10, 6/9, 4/8 (the
// n-grams without "seit"), BP = 1, BLEU = 100 (10/11 * 8/10 * 6/9 * 4/8)^(1/4) = 70.1687939...
TEST(BleuMoses, HandComputedScoreWithAndWithoutCompoundSplitting) {
  const std::vector<std::string> hyp = {"Die Anti-Terror-Gesetze gelten seit 1. Mai."};
  const std::vector<std::vector<std::string>> ref = {{"Die Anti-Terror-Gesetze gelten ab 1. Mai."}};
  const BleuOptions split = moses_bleu_options(MosesLanguage::kDe, true);
  EXPECT_EQ(bleu_tokenized_line(ref[0][0], split),
            "Die Anti ##AT##-##AT## Terror ##AT##-##AT## Gesetze gelten ab 1. Mai .");
  const BleuScore s = corpus_bleu(hyp, ref, split);
  EXPECT_NEAR(s.score, 70.16879391277371, 1e-9);
  EXPECT_EQ(s.counts, (std::vector<int64_t>{10, 8, 6, 4}));
  EXPECT_EQ(s.totals, (std::vector<int64_t>{11, 10, 9, 8}));
  EXPECT_EQ(s.format_multi_bleu(true),
            "BLEU|nrefs:1|case:mixed|eff:no|tok:moses-de|split:compounds|smooth:none|"
            "bleu:multi-bleu.perl = 70.17, 90.9/80.0/66.7/50.0 (BP=1.000, ratio=1.000, "
            "hyp_len=11, ref_len=11)");

  // Unsplit, 7 tokens: 6/7, 4/6, 2/5 and no 4-gram match, so 0 (no smoothing, as multi-bleu.perl).
  const BleuScore unsplit = corpus_bleu(hyp, ref, moses_bleu_options(MosesLanguage::kDe, false));
  EXPECT_EQ(unsplit.counts, (std::vector<int64_t>{6, 4, 2, 0}));
  EXPECT_EQ(unsplit.score, 0.0);
  EXPECT_EQ(unsplit.signature,
            "nrefs:1|case:mixed|eff:no|tok:moses-de|split:no|smooth:none|bleu:multi-bleu.perl");
}

TEST(BleuMoses, LowercasingIsMultiBleusAfterTokenizing) {
  // multi-bleu.perl -lc lower-cases the tokenized text, ASCII letters only: the prefix "No" is
  // recognised before (lower-casing first would split "no ."), and "Ä" stays.
  BleuOptions options = moses_bleu_options(MosesLanguage::kEn, false);
  options.lowercase = true;
  EXPECT_EQ(bleu_tokenized_line("\u00c4RGER No. 5", options), "\u00c4rger no. 5");
  EXPECT_EQ(bleu_signature(options, 1),
            "nrefs:1|case:lc|eff:no|tok:moses-en|split:no|smooth:none|bleu:multi-bleu.perl");
}

TEST(BleuMoses, CompoundSplittingOfTextAlreadyTokenized) {
  // fairseq's compound_split_bleu.sh: the split on tokenized text (tokenizer none).
  BleuOptions options = tokenized_bleu_options();
  options.split_compounds = true;
  EXPECT_EQ(bleu_tokenized_line("a-b-c x", options), "a ##AT##-##AT## b-c x");
  EXPECT_EQ(bleu_signature(options, 2),
            "nrefs:2|case:mixed|eff:no|tok:none|split:compounds|smooth:none|bleu:multi-bleu.perl");
}

TEST(BleuMoses, RefusesWhatMultiBleuDoesNotDo) {
  BleuOptions options;  // 13a
  options.split_compounds = true;
  EXPECT_THROW(corpus_bleu({"a-b"}, {{"a-b"}}, options), Error);
  EXPECT_THROW(bleu_tokenized_line("a-b", options), Error);
  options = moses_bleu_options(MosesLanguage::kFr, false);
  options.smoothing = BleuSmoothing::kExp;
  EXPECT_THROW(corpus_bleu({"a"}, {{"a"}}, options), Error);
}

}  // namespace
}  // namespace tfm::internal::eval
