// The nonbreaking-prefix files that Moses tokenizer.perl reads (nonbreaking_prefix.en, .de, .fr of
// mosesdecoder's scripts/share/nonbreaking_prefixes), compiled in verbatim.
#pragma once

#include <string_view>

#include "tfm/eval/moses_tokenizer.h"

namespace tfm::internal::eval {

// The text of nonbreaking_prefix.LANG: one prefix a line, '#' comments, "WORD #NUMERIC_ONLY#" for
// a prefix that does not break only before a number.
std::string_view moses_nonbreaking_prefix_file(MosesLanguage language);

}  // namespace tfm::internal::eval
