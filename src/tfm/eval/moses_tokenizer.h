// Moses tokenizer.perl (scripts/tokenizer/tokenizer.perl of moses-smt/mosesdecoder) with its
// default options (no -a aggressive hyphen splitting, escaping on, no protected patterns) for
// English, German and French, reimplemented so that its output is byte for byte the Perl script's;
// and the ##AT## compound splitting of tensor2tensor's get_ende_bleu.sh. With multi-bleu.perl on
// top (BleuTokenizer::kMoses in bleu.h) they give the tokenized BLEU the paper reports;
// docs/BLEU.md says which Moses revision and how it was checked. Input must be valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace tfm::internal::eval {

// tokenizer.perl -l: the language picks the nonbreaking prefixes (nonbreaking_prefix.LANG of
// scripts/share/nonbreaking_prefixes, compiled in) and the apostrophe rules (English splits
// "don't" as "don 't", French "l'homme" as "l' homme", German every apostrophe off).
enum class MosesLanguage { kEn, kDe, kFr };

// "en", "de", "fr"; throws tfm::Error listing them for anything else.
MosesLanguage moses_language_from_name(std::string_view name);
std::string_view moses_language_name(MosesLanguage language);

// One line (without its '\n') as `tokenizer.perl -l LANG` prints it (without the '\n'): tokens
// separated by single spaces, & | < > ' " [ ] escaped as &amp; &#124; &lt; &gt; &apos; &quot;
// &#91; &#93;. Like the script, a line of whitespace only comes back unchanged, and a line ending
// in .' ends in ". &apos; " (with a space).
std::string moses_tokenize(std::string_view line, MosesLanguage language);

// perl -ple 's{(\S)-(\S)}{$1 ##AT##-##AT## $2}g': a hyphen between two non-whitespace characters
// becomes the token "##AT##-##AT##". Matches do not overlap, so "a-b-c" becomes
// "a ##AT##-##AT## b-c"; a hyphen at either end of a token, or alone, stays.
std::string split_compounds(std::string_view text);

}  // namespace tfm::internal::eval
