// Corpus BLEU (Papineni et al., 2002) computed as sacreBLEU computes it (kSacrebleuVersion), so
// that scores agree with `sacrebleu` to every printed digit: the same tokenizers, clipping of
// n-gram counts by the largest count in any reference, brevity penalty from the closest reference
// length (ties go to the shorter), and the same smoothing methods. Also "tokenized BLEU", the
// multi-bleu.perl score the paper reports, of text that is already tokenized or that Moses
// tokenizer.perl tokenizes here (tokenizer kMoses), with or without ##AT## compound splitting.
// docs/BLEU.md describes what is computed and where it matches sacreBLEU and the Perl scripts.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/eval/bleu_tokenizers.h"
#include "tfm/eval/moses_tokenizer.h"

namespace tfm::internal::eval {

// The sacreBLEU release whose BLEU tfm follows, as the signature's `version:` field names it. The
// semantics are those of sacreBLEU since 2.2 (an empty reference line is a reference of length 0);
// docs/BLEU.md says why this release.
inline constexpr std::string_view kSacrebleuVersion = "2.6.0";

// The allowed n-gram orders: longer n-grams than any line only make the score 0, and the bound
// keeps the statistics (one count per order) small.
inline constexpr int kMinBleuNgramOrder = 1;
inline constexpr int kMaxBleuNgramOrder = 100;

// Chen and Cherry (2014)'s names, as sacreBLEU's smooth_method.
enum class BleuSmoothing {
  kNone,   // a zero precision makes the score 0
  kFloor,  // a zero match count counts as `smooth_value` (default 0.1)
  kAddK,   // add `smooth_value` (default 1) to the matches and totals of orders 2 and above
  kExp,    // mteval-v13a's: the k-th zero-match order gets precision 1 / (2^k * total); default
};

// "none", "floor", "add-k", "exp"; throws tfm::Error listing the valid names otherwise.
BleuSmoothing bleu_smoothing_from_name(std::string_view name);
std::string_view bleu_smoothing_name(BleuSmoothing smoothing);

struct BleuOptions {
  BleuTokenizer tokenizer = BleuTokenizer::k13a;
  // kMoses only: tokenizer.perl's -l (nonbreaking prefixes and apostrophe rules).
  MosesLanguage moses_language = MosesLanguage::kEn;
  // Hyphenated compounds split after tokenizing (split_compounds() of moses_tokenizer.h), as the
  // paper's EN-DE score has it; tokenizers moses and none only.
  bool split_compounds = false;
  // Lower-case (as Python's str.lower(), before tokenizing; with kMoses, as multi-bleu.perl -lc:
  // ASCII letters of the tokenized text).
  bool lowercase = false;
  BleuSmoothing smoothing = BleuSmoothing::kExp;
  std::optional<double> smooth_value;  // floor: 0.1, add-k: 1 when unset; unused by none and exp
  int max_ngram_order = 4;             // kMinBleuNgramOrder..kMaxBleuNgramOrder
  // Average only over the orders up to the largest with any hypothesis n-gram (for sentence BLEU
  // of short sentences); off for corpus BLEU, as in sacreBLEU.
  bool effective_order = false;
};

// The options of tokenized BLEU, the score the paper reports and multi-bleu.perl prints: text that
// is already tokenized is split on whitespace only (tokenizer none), and no smoothing (an order
// without any match makes the score 0). Lower-casing stays off (multi-bleu.perl's -lc turns it on).
BleuOptions tokenized_bleu_options();

// Tokenized BLEU of raw text as the paper's scripts compute it: Moses tokenizer.perl -l `language`,
// then, if `split_compounds`, the ##AT## split (EN-DE: de and true; EN-FR: fr and false), then
// multi-bleu.perl (no smoothing).
BleuOptions moses_bleu_options(MosesLanguage language, bool split_compounds);

// Whether `options` ask for one of tfm's own tokenized-BLEU modes, which sacreBLEU lacks
// (tokenizer moses, or compound splitting): these have tfm's signature, not sacreBLEU's, and need
// smoothing none.
bool is_moses_bleu(const BleuOptions& options);

// A line as BLEU sees it: lower-cased, tokenized and compound-split as `options` say, its tokens
// separated by whitespace (with kMoses exactly tokenizer.perl's output line, without its '\n').
std::string bleu_tokenized_line(std::string_view line, const BleuOptions& options);

// The sufficient statistics of BLEU, summed over segments.
struct BleuStatistics {
  int64_t sys_len = 0;          // hypothesis tokens
  int64_t ref_len = 0;          // per segment the closest reference length, ties to the shorter
  std::vector<int64_t> counts;  // clipped matching n-grams, order 1..max
  std::vector<int64_t> totals;  // hypothesis n-grams, order 1..max
  int nrefs = 0;  // references per segment (the number of reference sets), for the signature
};

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<double> precisions;  // percent, order 1..max (smoothed, as sacreBLEU reports them)
  std::vector<int64_t> counts;     // matches (before add-k smoothing)
  std::vector<int64_t> totals;     // hypothesis n-grams (before add-k smoothing)
  double bp = 0;                   // brevity penalty
  double ratio = 0;                // sys_len / ref_len (0 when ref_len is 0)
  int64_t sys_len = 0;
  int64_t ref_len = 0;
  // sacreBLEU's, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  std::string signature;

  // sacreBLEU's line, "BLEU = 34.56 67.8/45.6/33.2/24.5 (BP = 1.000 ratio = 1.012 hyp_len = 1234
  // ref_len = 1219)", with "BLEU|<signature> = ..." when `with_signature`.
  std::string format(bool with_signature = false) const;
  // multi-bleu.perl's line, "BLEU = 34.56, 67.8/45.6/33.2/24.5 (BP=1.000, ratio=1.012,
  // hyp_len=1234, ref_len=1219)", with "BLEU|<signature> = ..." when `with_signature`.
  std::string format_multi_bleu(bool with_signature = false) const;
  // Every field, with "score" rounded to two decimals as sacreBLEU's JSON has it and the exact
  // value in "score_exact".
  nlohmann::ordered_json to_json() const;
};

// Corpus BLEU of `hypotheses` against one or more reference sets, each as long as `hypotheses`
// (references[k][i] is the k-th reference of hypothesis i). As sacreBLEU does: each line is
// lower-cased if asked, stripped of trailing whitespace and tokenized. An empty reference line is
// a reference of length 0 (sacreBLEU since 2.2): it has no n-grams but takes part in the closest
// reference length, also when every reference of a line is empty. Throws tfm::Error for unequal
// lengths, no hypotheses, invalid UTF-8 or options out of range.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options = {});

// BLEU of one sentence: the corpus BLEU of a one-line corpus (as sacreBLEU's sentence_score; for
// sentence BLEU sacreBLEU's command line turns effective_order on, which `options` must do here).
BleuScore sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options = {});

// The statistics of a corpus, and the score from statistics (sacreBLEU's compute_bleu); for
// summing statistics over shards before scoring.
BleuStatistics corpus_bleu_statistics(const std::vector<std::string>& hypotheses,
                                      const std::vector<std::vector<std::string>>& references,
                                      const BleuOptions& options = {});
BleuScore compute_bleu(const BleuStatistics& statistics, const BleuOptions& options = {});

// sacreBLEU's signature, "nrefs:N|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0" (N = -1
// writes "nrefs:var", sacreBLEU's spelling for a number of references that varies per segment,
// which its API allows and tfm's inputs, one line per reference set and segment, cannot have).
// For is_moses_bleu options tfm's own, which names the Moses language and the compound split and
// ends in "bleu:multi-bleu.perl" instead of a sacreBLEU version:
// "nrefs:1|case:mixed|eff:no|tok:moses-de|split:compounds|smooth:none|bleu:multi-bleu.perl".
std::string bleu_signature(const BleuOptions& options, int nrefs);

}  // namespace tfm::internal::eval
