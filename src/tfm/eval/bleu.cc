#include "tfm/eval/bleu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::eval {

namespace {

// A line after sacreBLEU's _preprocess_segment, its tokens joined by single spaces, with the byte
// offsets of every token so that an n-gram is the substring from the start of its first token to
// the end of its last: two n-grams are equal exactly when their substrings are (tokens contain no
// whitespace), and the order is implied by the number of spaces.
struct TokenizedLine {
  std::string text;
  std::vector<size_t> starts, ends;

  size_t size() const { return starts.size(); }
  std::string_view ngram(size_t first, size_t n) const {
    return std::string_view(text).substr(starts[first], ends[first + n - 1] - starts[first]);
  }
};

using NgramCounts = std::unordered_map<std::string_view, int64_t>;

// multi-bleu.perl -lc: Perl's lc on bytes, which changes A-Z only.
std::string lowercase_ascii(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

// bleu_tokenized_line without checking the options.
std::string tokenized_text(std::string_view line, const BleuOptions& options) {
  std::string text;
  if (options.tokenizer == BleuTokenizer::kMoses) {
    // tokenizer.perl (which strips whitespace itself), the split, then multi-bleu.perl's -lc.
    text = moses_tokenize(line, options.moses_language);
    if (options.split_compounds) text = split_compounds(text);
    return options.lowercase ? lowercase_ascii(std::move(text)) : text;
  }
  // sacreBLEU's _preprocess_segment: lower-case, strip trailing whitespace, tokenize.
  std::string lowered;
  if (options.lowercase) {
    lowered = lowercase_unicode(line);
    line = lowered;
  }
  text = tokenize(rstrip_python_whitespace(line), options.tokenizer);
  return options.split_compounds ? split_compounds(text) : text;
}

TokenizedLine preprocess(std::string_view line, const BleuOptions& options) {
  const std::string tokenized = tokenized_text(line, options);
  TokenizedLine out;
  out.text.reserve(tokenized.size());
  for (std::string_view token : split_python_whitespace(tokenized)) {
    if (!out.text.empty()) out.text += ' ';
    out.starts.push_back(out.text.size());
    out.text += token;
    out.ends.push_back(out.text.size());
  }
  return out;
}

// Every n-gram of orders 1..max_order with its count (sacreBLEU's extract_all_word_ngrams).
NgramCounts count_ngrams(const TokenizedLine& line, int max_order) {
  NgramCounts counts;
  for (size_t n = 1; n <= static_cast<size_t>(max_order); ++n)
    for (size_t first = 0; first + n <= line.size(); ++first) ++counts[line.ngram(first, n)];
  return counts;
}

// sacreBLEU's _get_closest_ref_len: the reference length closest to the hypothesis length, the
// shorter one on a tie.
int64_t closest_reference_length(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t ref_len : ref_lens) {
    const int64_t diff = std::abs(hyp_len - ref_len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

void check_utf8(const std::string& line, std::string_view what, size_t index) {
  if (const auto bad = find_invalid_utf8(line))
    fail("BLEU: {} line {} is not valid UTF-8 (byte 0x{:02x} at offset {})", what, index + 1,
         static_cast<unsigned char>(line[*bad]), *bad);
}

void check_options(const BleuOptions& options) {
  TFM_CHECK(!options.split_compounds || options.tokenizer == BleuTokenizer::kMoses ||
                options.tokenizer == BleuTokenizer::kNone,
            "BLEU: compound splitting is for tokenized text (tokenizer moses or none), not for "
            "tokenizer {}",
            bleu_tokenizer_name(options.tokenizer));
  TFM_CHECK(!is_moses_bleu(options) || options.smoothing == BleuSmoothing::kNone,
            "BLEU: tokenized BLEU with tokenizer {}{} is multi-bleu.perl's, without smoothing "
            "(smoothing none), not smoothing {}",
            bleu_tokenizer_name(options.tokenizer),
            options.split_compounds ? " and compound splitting" : "",
            bleu_smoothing_name(options.smoothing));
  TFM_CHECK(options.max_ngram_order >= kMinBleuNgramOrder &&
                options.max_ngram_order <= kMaxBleuNgramOrder,
            "BLEU: max n-gram order {} is not in the allowed range {} to {}",
            options.max_ngram_order, kMinBleuNgramOrder, kMaxBleuNgramOrder);
  TFM_CHECK(
      !options.smooth_value || (std::isfinite(*options.smooth_value) && *options.smooth_value >= 0),
      "BLEU: smoothing value must be finite and not negative, got {}",
      options.smooth_value.value_or(0));
}

// The smoothing value sacreBLEU uses when none is given (BLEU.SMOOTH_DEFAULTS).
std::optional<double> default_smooth_value(BleuSmoothing smoothing) {
  switch (smoothing) {
    case BleuSmoothing::kFloor:
      return 0.1;
    case BleuSmoothing::kAddK:
      return 1.0;
    case BleuSmoothing::kNone:
    case BleuSmoothing::kExp:
      break;
  }
  return std::nullopt;
}

// sacreBLEU's my_log: log, with log(0) floored to -9999999999 so that a zero precision drives the
// geometric mean to 0 instead of raising.
double floored_log(double x) {
  return x == 0.0 ? -9999999999.0 : std::log(x);
}

std::string joined_precisions(const std::vector<double>& precisions, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < precisions.size(); ++i)
    out += fmt::format("{}{:.1f}", i > 0 ? separator : "", precisions[i]);
  return out;
}

}  // namespace

BleuSmoothing bleu_smoothing_from_name(std::string_view name) {
  if (name == "none") return BleuSmoothing::kNone;
  if (name == "floor") return BleuSmoothing::kFloor;
  if (name == "add-k") return BleuSmoothing::kAddK;
  if (name == "exp") return BleuSmoothing::kExp;
  fail("unknown BLEU smoothing '{}' (expected exp, floor, add-k or none)", name);
}

std::string_view bleu_smoothing_name(BleuSmoothing smoothing) {
  switch (smoothing) {
    case BleuSmoothing::kNone:
      return "none";
    case BleuSmoothing::kFloor:
      return "floor";
    case BleuSmoothing::kAddK:
      return "add-k";
    case BleuSmoothing::kExp:
      return "exp";
  }
  return "?";
}

BleuOptions tokenized_bleu_options() {
  BleuOptions options;
  options.tokenizer = BleuTokenizer::kNone;
  options.smoothing = BleuSmoothing::kNone;
  return options;
}

BleuOptions moses_bleu_options(MosesLanguage language, bool split_compounds) {
  BleuOptions options = tokenized_bleu_options();
  options.tokenizer = BleuTokenizer::kMoses;
  options.moses_language = language;
  options.split_compounds = split_compounds;
  return options;
}

bool is_moses_bleu(const BleuOptions& options) {
  return options.tokenizer == BleuTokenizer::kMoses || options.split_compounds;
}

std::string bleu_tokenized_line(std::string_view line, const BleuOptions& options) {
  check_options(options);
  return tokenized_text(line, options);
}

std::string bleu_signature(const BleuOptions& options, int nrefs) {
  const std::string refs = nrefs < 0 ? std::string("var") : std::to_string(nrefs);
  if (is_moses_bleu(options)) {
    std::string tok(bleu_tokenizer_name(options.tokenizer));
    if (options.tokenizer == BleuTokenizer::kMoses)
      tok += fmt::format("-{}", moses_language_name(options.moses_language));
    return fmt::format(
        "nrefs:{}|case:{}|eff:{}|tok:{}|split:{}|smooth:{}|bleu:multi-bleu.perl", refs,
        options.lowercase ? "lc" : "mixed", options.effective_order ? "yes" : "no", tok,
        options.split_compounds ? "compounds" : "no", bleu_smoothing_name(options.smoothing));
  }
  std::string smooth(bleu_smoothing_name(options.smoothing));
  if (const auto fallback = default_smooth_value(options.smoothing))
    smooth += fmt::format("[{:.2f}]", options.smooth_value.value_or(*fallback));
  // sacreBLEU's Signature.format: its fields in this order, the version always last.
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}", refs,
                     options.lowercase ? "lc" : "mixed", options.effective_order ? "yes" : "no",
                     bleu_tokenizer_name(options.tokenizer), smooth, kSacrebleuVersion);
}

BleuStatistics corpus_bleu_statistics(const std::vector<std::string>& hypotheses,
                                      const std::vector<std::vector<std::string>>& references,
                                      const BleuOptions& options) {
  check_options(options);
  TFM_CHECK(!hypotheses.empty(), "BLEU: no hypotheses");
  TFM_CHECK(!references.empty(), "BLEU: no reference set");
  for (size_t k = 0; k < references.size(); ++k)
    TFM_CHECK(references[k].size() == hypotheses.size(),
              "BLEU: reference set {} has {} lines but there are {} hypotheses", k + 1,
              references[k].size(), hypotheses.size());

  const auto max_order = static_cast<size_t>(options.max_ngram_order);
  BleuStatistics stats;
  stats.counts.assign(max_order, 0);
  stats.totals.assign(max_order, 0);
  // sacreBLEU's signature counts the references of a segment that are not None; a line of a
  // reference file is never None (an empty one is ""), so every segment has all of them.
  stats.nrefs = static_cast<int>(references.size());
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    check_utf8(hypotheses[i], "hypothesis", i);
    // References: the largest count of each n-gram in any one reference clips the matches. An
    // empty reference (sacreBLEU since 2.2) has no n-grams and length 0, which competes for the
    // closest reference length like any other.
    std::vector<TokenizedLine> refs;
    refs.reserve(references.size());
    for (size_t k = 0; k < references.size(); ++k) {
      const std::string& ref = references[k][i];
      check_utf8(ref, fmt::format("reference set {}", k + 1), i);
      refs.push_back(preprocess(ref, options));
    }
    NgramCounts ref_max;
    std::vector<int64_t> ref_lens;
    for (const TokenizedLine& ref : refs) {
      ref_lens.push_back(static_cast<int64_t>(ref.size()));
      for (const auto& [ngram, count] : count_ngrams(ref, options.max_ngram_order)) {
        int64_t& best = ref_max[ngram];
        best = std::max(best, count);
      }
    }

    const TokenizedLine hyp = preprocess(hypotheses[i], options);
    const auto hyp_len = static_cast<int64_t>(hyp.size());
    stats.sys_len += hyp_len;
    stats.ref_len += closest_reference_length(hyp_len, ref_lens);
    for (const auto& [ngram, count] : count_ngrams(hyp, options.max_ngram_order)) {
      const auto order = static_cast<size_t>(std::count(ngram.begin(), ngram.end(), ' '));
      stats.totals[order] += count;
      if (const auto found = ref_max.find(ngram); found != ref_max.end())
        stats.counts[order] += std::min(count, found->second);
    }
  }
  return stats;
}

// sacreBLEU's BLEU.compute_bleu, step for step (including the order of the floating-point
// operations): BLEU = BP * exp(sum_n log(p_n) / N) with p_n in percent, so the score is in
// percent too; BP = exp(1 - r / c) when c < r (0 when c = 0), else 1.
BleuScore compute_bleu(const BleuStatistics& stats, const BleuOptions& options) {
  check_options(options);
  const auto max_order = static_cast<size_t>(options.max_ngram_order);
  TFM_CHECK(stats.counts.size() == max_order && stats.totals.size() == max_order,
            "BLEU: statistics have {} and {} orders but the options ask for {}",
            stats.counts.size(), stats.totals.size(), max_order);
  BleuScore out;
  out.counts = stats.counts;
  out.totals = stats.totals;
  out.sys_len = stats.sys_len;
  out.ref_len = stats.ref_len;
  out.ratio =
      stats.ref_len ? static_cast<double>(stats.sys_len) / static_cast<double>(stats.ref_len) : 0.0;
  out.signature = bleu_signature(options, stats.nrefs);
  if (stats.sys_len < stats.ref_len)
    out.bp = stats.sys_len > 0 ? std::exp(1.0 - static_cast<double>(stats.ref_len) /
                                                    static_cast<double>(stats.sys_len))
                               : 0.0;
  else
    out.bp = 1.0;
  out.precisions.assign(max_order, 0.0);
  // No match at all: 0 whatever the smoothing (sacreBLEU #141).
  if (std::all_of(stats.counts.begin(), stats.counts.end(), [](int64_t c) { return c == 0; }))
    return out;

  const double smooth_value =
      options.smooth_value.value_or(default_smooth_value(options.smoothing).value_or(0.0));
  double smooth_mteval = 1.0;
  size_t effective_order = max_order;
  for (size_t n = 1; n <= max_order; ++n) {
    double correct = static_cast<double>(stats.counts[n - 1]);
    double total = static_cast<double>(stats.totals[n - 1]);
    if (options.smoothing == BleuSmoothing::kAddK && n > 1) {
      correct += smooth_value;
      total += smooth_value;
    }
    // Orders the hypotheses are too short for keep precision 0 (and make the score 0 unless
    // effective_order leaves them out of the mean).
    if (total == 0) break;
    if (options.effective_order) effective_order = n;
    if (correct == 0) {
      if (options.smoothing == BleuSmoothing::kExp) {
        smooth_mteval *= 2;
        out.precisions[n - 1] = 100. / (smooth_mteval * total);
      } else if (options.smoothing == BleuSmoothing::kFloor) {
        out.precisions[n - 1] = 100. * smooth_value / total;
      }
    } else {
      out.precisions[n - 1] = 100. * correct / total;
    }
  }
  double log_sum = 0;
  for (size_t n = 0; n < effective_order; ++n) log_sum += floored_log(out.precisions[n]);
  out.score = out.bp * std::exp(log_sum / static_cast<double>(effective_order));
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options) {
  return compute_bleu(corpus_bleu_statistics(hypotheses, references, options), options);
}

BleuScore sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options) {
  std::vector<std::vector<std::string>> sets;
  for (const std::string& reference : references) sets.push_back({reference});
  return corpus_bleu({hypothesis}, sets, options);
}

namespace {

// sacreBLEU's BLEUScore._verbose: what follows the score on its line.
std::string verbose_part(const BleuScore& s) {
  return fmt::format("{} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})",
                     joined_precisions(s.precisions, "/"), s.bp, s.ratio, s.sys_len, s.ref_len);
}

}  // namespace

std::string BleuScore::format(bool with_signature) const {
  return fmt::format("BLEU{} = {:.2f} {}",
                     with_signature && !signature.empty() ? "|" + signature : "", score,
                     verbose_part(*this));
}

std::string BleuScore::format_multi_bleu(bool with_signature) const {
  return fmt::format("BLEU{} = {:.2f}, {} (BP={:.3f}, ratio={:.3f}, hyp_len={}, ref_len={})",
                     with_signature && !signature.empty() ? "|" + signature : "", score,
                     joined_precisions(precisions, "/"), bp, ratio, sys_len, ref_len);
}

nlohmann::ordered_json BleuScore::to_json() const {
  return {{"name", "BLEU"},
          {"score", std::stod(fmt::format("{:.2f}", score))},
          {"signature", signature},
          {"verbose_score", verbose_part(*this)},
          {"score_exact", score},
          {"precisions", precisions},
          {"counts", counts},
          {"totals", totals},
          {"bp", bp},
          {"ratio", ratio},
          {"hyp_len", sys_len},
          {"ref_len", ref_len}};
}

}  // namespace tfm::internal::eval
