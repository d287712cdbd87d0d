// Corpus BLEU: hand-derived small cases (the arithmetic in the comments) and the expectations
// published in sacreBLEU 2.x's own tests (test/test_bleu.py and test/test_sentence_bleu.py of
// github.com/mjpost/sacrebleu), which our scores must reproduce.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tfm/eval/bleu.h"

namespace tfm::internal::eval {
namespace {

using Lines = std::vector<std::string>;

BleuOptions with_smoothing(BleuSmoothing smoothing, std::optional<double> value = std::nullopt) {
  BleuOptions options;
  options.smoothing = smoothing;
  options.smooth_value = value;
  return options;
}

// sacreBLEU's raw_corpus_bleu: no tokenization, floor smoothing, effective order.
BleuOptions raw_options(std::optional<double> floor_value) {
  BleuOptions options;
  options.tokenizer = BleuTokenizer::kNone;
  options.smoothing = BleuSmoothing::kFloor;
  options.smooth_value = floor_value;
  options.effective_order = true;
  return options;
}

TEST(Bleu, PerfectMatchIs100) {
  const BleuScore s = corpus_bleu({"The cat sat on the mat.", "It was happy ."},
                                  {{"The cat sat on the mat.", "It was happy ."}});
  EXPECT_DOUBLE_EQ(s.score, 100.0);
  EXPECT_EQ(s.precisions, std::vector<double>(4, 100.0));
  EXPECT_EQ(s.bp, 1.0);
  // 13a splits the final periods: 7 + 4 tokens.
  EXPECT_EQ(s.sys_len, 11);
  EXPECT_EQ(s.ref_len, 11);
  EXPECT_EQ(s.totals, (std::vector<int64_t>{11, 9, 7, 5}));
  EXPECT_EQ(s.format(),
            "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 "
            "hyp_len = 11 ref_len = 11)");
}

TEST(Bleu, NoMatchIsZeroWhateverTheSmoothing) {
  for (BleuSmoothing smoothing :
       {BleuSmoothing::kExp, BleuSmoothing::kFloor, BleuSmoothing::kAddK, BleuSmoothing::kNone}) {
    const BleuScore s = corpus_bleu({"a b c d e"}, {{"v w x y z"}}, with_smoothing(smoothing));
    EXPECT_EQ(s.score, 0.0);
    EXPECT_EQ(s.counts, (std::vector<int64_t>{0, 0, 0, 0}));
    EXPECT_EQ(s.totals, (std::vector<int64_t>{5, 4, 3, 2}));
    EXPECT_EQ(s.precisions, std::vector<double>(4, 0.0));
  }
}

TEST(Bleu, BrevityPenalty) {
  // c = 4 hypothesis tokens, r = 6; every n-gram matches (4/4, 3/3, 2/2, 1/1), so
  // BLEU = 100 * exp(1 - r / c) = 100 * exp(-0.5) = 60.653065971...
  const BleuScore short_hyp = corpus_bleu({"the cat sat on"}, {{"the cat sat on the mat"}});
  EXPECT_NEAR(short_hyp.bp, std::exp(-0.5), 1e-15);
  EXPECT_NEAR(short_hyp.score, 60.653065971263345, 1e-9);
  EXPECT_NEAR(short_hyp.ratio, 4.0 / 6.0, 1e-15);
  // A hypothesis longer than its reference is not penalised: c = 6, r = 4, BP = 1; precisions
  // 4/6, 3/5, 2/4, 1/3: BLEU = 100 * (4/6 * 3/5 * 2/4 * 1/3)^(1/4) = 100 * (1/15)^(1/4).
  const BleuScore long_hyp = corpus_bleu({"the cat sat on the mat"}, {{"the cat sat on"}});
  EXPECT_EQ(long_hyp.bp, 1.0);
  EXPECT_NEAR(long_hyp.score, 100 * std::pow(1.0 / 15, 0.25), 1e-9);
  // No hypothesis tokens at all: BP = 0 (sacreBLEU's published case: empty hypotheses are kept
  // and score 0).
  const BleuScore empty = corpus_bleu({"", ""}, {{"a b", "c"}});
  EXPECT_EQ(empty.bp, 0.0);
  EXPECT_EQ(empty.score, 0.0);
  EXPECT_EQ(empty.ref_len, 3);
}

TEST(Bleu, MultipleReferencesClipByTheLargestCount) {
  // Papineni et al.'s example: "the" x 7 against references with "the" twice and once. The
  // clipped unigram count is max(2, 1) = 2 of 7; "the the" never occurs in a reference.
  // Reference lengths 6 and 7: the closest to c = 7 is 7, so BP = 1.
  const Lines hyp = {"the the the the the the the"};
  const std::vector<Lines> refs = {{"the cat is on the mat"}, {"there is a cat on the mat"}};
  const BleuScore none = corpus_bleu(hyp, refs, with_smoothing(BleuSmoothing::kNone));
  EXPECT_EQ(none.counts, (std::vector<int64_t>{2, 0, 0, 0}));
  EXPECT_EQ(none.totals, (std::vector<int64_t>{7, 6, 5, 4}));
  EXPECT_EQ(none.ref_len, 7);
  EXPECT_EQ(none.score, 0.0);  // p2 = 0 and no smoothing
  // exp smoothing: the k-th zero-match order gets 100 / (2^k * total): p2 = 100 / 12,
  // p3 = 100 / 20, p4 = 100 / 32; p1 = 200 / 7. BLEU = (200/7 * 100/12 * 5 * 100/32)^(1/4).
  const BleuScore exp = corpus_bleu(hyp, refs);
  EXPECT_NEAR(exp.precisions[1], 100.0 / 12, 1e-12);
  EXPECT_NEAR(exp.score, 7.809849842300637, 1e-9);
}

TEST(Bleu, ClosestReferenceLengthTiesGoToTheShorter) {
  // c = 5; references of 4 and 6 tokens are both 1 away: sacreBLEU takes 4, so BP = 1. Every
  // hypothesis n-gram is in the second reference: BLEU = 100. (Taking 6 would give
  // 100 * exp(1 - 6/5) = 81.87.)
  const BleuScore tie = corpus_bleu({"a b c d e"}, {{"a b c d"}, {"a b c d e f"}});
  EXPECT_EQ(tie.ref_len, 4);
  EXPECT_DOUBLE_EQ(tie.score, 100.0);
  // References of 3 and 6 tokens: 6 is closer (1 < 2): BLEU = 100 * exp(1 - 6/5).
  const BleuScore closer = corpus_bleu({"a b c d e"}, {{"a b c"}, {"a b c d e f"}});
  EXPECT_EQ(closer.ref_len, 6);
  EXPECT_NEAR(closer.score, 81.87307530779819, 1e-9);
  // Corpus level: r is the sum of the per-segment choices, 4 + 6 = 10.
  const BleuScore both = corpus_bleu({"a b c d e", "a b c d e"},
                                     {{"a b c d", "a b c"}, {"a b c d e f", "a b c d e f"}});
  EXPECT_EQ(both.ref_len, 10);
  EXPECT_EQ(both.sys_len, 10);
}

TEST(Bleu, SmoothingOfAZeroHigherOrderMatch) {
  // hyp "the cat the dog", ref "the dog the cat": unigrams 4/4; bigrams "the cat", "the dog"
  // match of 3; trigrams 0/2; 4-grams 0/1.
  const Lines hyp = {"the cat the dog"};
  const std::vector<Lines> ref = {{"the dog the cat"}};
  // exp: p3 = 100 / (2 * 2) = 25, p4 = 100 / (4 * 1) = 25:
  // (100 * 200/3 * 25 * 25)^(1/4) = 45.180100...
  const BleuScore exp = corpus_bleu(hyp, ref);
  EXPECT_EQ(exp.counts, (std::vector<int64_t>{4, 2, 0, 0}));
  EXPECT_NEAR(exp.score, 45.18010018049227, 1e-9);
  // floor 0.1: p3 = 100 * 0.1 / 2 = 5, p4 = 100 * 0.1 / 1 = 10: (100 * 200/3 * 5 * 10)^(1/4).
  EXPECT_NEAR(corpus_bleu(hyp, ref, with_smoothing(BleuSmoothing::kFloor)).score,
              24.028114141347555, 1e-9);
  // add-k 1 on orders 2..4: p2 = 3/4, p3 = 1/3, p4 = 1/2: (100 * 75 * 100/3 * 50)^(1/4).
  const BleuScore add_k = corpus_bleu(hyp, ref, with_smoothing(BleuSmoothing::kAddK));
  EXPECT_NEAR(add_k.score, 59.460355750136046, 1e-9);
  EXPECT_EQ(add_k.counts, (std::vector<int64_t>{4, 2, 0, 0}));  // reported before smoothing
  // none: p3 = 0, the score is 0.
  EXPECT_EQ(corpus_bleu(hyp, ref, with_smoothing(BleuSmoothing::kNone)).score, 0.0);
}

TEST(Bleu, Lowercase) {
  const Lines hyp = {"The Cat Sat On The Mat"};
  const std::vector<Lines> ref = {{"the cat sat on the mat"}};
  EXPECT_EQ(corpus_bleu(hyp, ref).score, 0.0);
  BleuOptions lc;
  lc.lowercase = true;
  EXPECT_DOUBLE_EQ(corpus_bleu(hyp, ref, lc).score, 100.0);
  EXPECT_DOUBLE_EQ(corpus_bleu({"ÉCOLE D'ÉTÉ À ΟΔΟΣ"}, {{"école d'été à οδος"}}, lc).score, 100.0);
  EXPECT_EQ(corpus_bleu(hyp, ref, lc).signature,
            "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

TEST(Bleu, AnEmptyReferenceIsAReferenceOfLengthZero) {
  // sacreBLEU since 2.2: an empty reference line stays a reference, with no n-grams and length 0.
  // Line 1: c = 6, references of 6 and 8 tokens: r = 6. Line 2: c = 2, references of 6 and 0
  // tokens: 0 is closer (2 < 4), r = 0. Line 3: c = 2, every reference empty: r = 0.
  // Unigrams 6 + 2 + 0 of 6 + 2 + 2, bigrams 5 + 1 + 0 of 5 + 1 + 1, trigrams 4/4, 4-grams 3/3;
  // c = 10 > r = 6 so BP = 1: BLEU = 100 * (8/10 * 6/7 * 1 * 1)^(1/4) = 90.998828...
  const Lines hyp = {"a b c d e f", "x y", "p q"};
  const std::vector<Lines> refs = {{"a b c d e f", "x y z w v u", ""}, {"a b c d e f g h", "", ""}};
  const BleuScore s = corpus_bleu(hyp, refs);
  EXPECT_EQ(s.sys_len, 10);
  EXPECT_EQ(s.ref_len, 6);
  EXPECT_EQ(s.counts, (std::vector<int64_t>{8, 6, 4, 3}));
  EXPECT_EQ(s.totals, (std::vector<int64_t>{10, 7, 4, 3}));
  EXPECT_NEAR(s.score, 90.99882808096076, 1e-9);
  // Every segment has both references, empty or not.
  EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");

  // Lines 1 and 2 alone: r = 6 + 0 = 6 = c, BP = 1 and every n-gram matches: 100. sacreBLEU
  // 2.0/2.1 left the empty reference out (r = 6 + 6 = 12, BLEU = 100 * exp(1 - 12/8) = 60.65).
  EXPECT_DOUBLE_EQ(
      corpus_bleu({hyp[0], hyp[1]}, {{refs[0][0], refs[0][1]}, {refs[1][0], refs[1][1]}}).score,
      100.0);

  // A single reference with an empty line: c = 4 + 1, r = 4 + 0, BP = 1; unigrams 4/5, then
  // 3/3, 2/2, 1/1: BLEU = 100 * (4/5)^(1/4) = 94.574160...
  const BleuScore single = corpus_bleu({"a b c d", "e"}, {{"a b c d", ""}});
  EXPECT_EQ(single.ref_len, 4);
  EXPECT_NEAR(single.score, 94.57416090031758, 1e-9);
  EXPECT_EQ(single.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  // A reference of spaces is empty too (trailing whitespace is stripped before tokenizing).
  EXPECT_EQ(corpus_bleu({"a b c d", "e"}, {{"a b c d", "  \t"}}).score, single.score);
  // Empty hypotheses against empty references: no n-grams, c = r = 0, BP = 1, BLEU 0.
  const BleuScore nothing = corpus_bleu({"", ""}, {{"", ""}});
  EXPECT_EQ(nothing.score, 0.0);
  EXPECT_EQ(nothing.bp, 1.0);
  EXPECT_EQ(nothing.ratio, 0.0);
}

// Corpus BLEU written out plainly (tokenizer none: tokens are the space-separated words; exp
// smoothing), to check corpus_bleu against on a larger corpus. `drop_empty` is sacreBLEU 2.0/2.1's
// rule, which left an empty reference out of its segment.
struct PlainBleu {
  int64_t sys_len = 0, ref_len = 0;
  std::vector<int64_t> counts = std::vector<int64_t>(4), totals = std::vector<int64_t>(4);
  double score = 0;
};

PlainBleu plain_bleu(const Lines& hyps, const std::vector<Lines>& refs, bool drop_empty) {
  using Ngrams = std::map<std::vector<std::string>, int64_t>;
  auto words = [](const std::string& line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  auto ngrams = [](const std::vector<std::string>& w) {
    Ngrams out;
    for (size_t n = 1; n <= 4; ++n)
      for (size_t i = 0; i + n <= w.size(); ++i) ++out[{w.begin() + i, w.begin() + i + n}];
    return out;
  };
  PlainBleu b;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const auto h = words(hyps[i]);
    Ngrams best;
    int64_t closest = -1;
    const auto c = static_cast<int64_t>(h.size());
    for (const Lines& set : refs) {
      if (drop_empty && set[i].empty()) continue;
      const auto r = words(set[i]);
      const auto len = static_cast<int64_t>(r.size());
      if (closest < 0 || std::abs(c - len) < std::abs(c - closest) ||
          (std::abs(c - len) == std::abs(c - closest) && len < closest))
        closest = len;
      for (const auto& [g, k] : ngrams(r)) best[g] = std::max(best[g], k);
    }
    b.sys_len += c;
    b.ref_len += closest;
    for (const auto& [g, k] : ngrams(h)) {
      b.totals[g.size() - 1] += k;
      b.counts[g.size() - 1] += std::min(k, best[g]);
    }
  }
  double log_sum = 0, smooth = 1;
  for (size_t n = 0; n < 4; ++n) {
    double p = 100.0 * static_cast<double>(b.counts[n]) / static_cast<double>(b.totals[n]);
    if (b.counts[n] == 0) p = 100.0 / ((smooth *= 2) * static_cast<double>(b.totals[n]));
    log_sum += std::log(p);
  }
  const double bp =
      b.sys_len < b.ref_len
          ? std::exp(1 - static_cast<double>(b.ref_len) / static_cast<double>(b.sys_len))
          : 1.0;
  b.score = bp * std::exp(log_sum / 4);
  return b;
}

TEST(Bleu, SecondReferenceEmptyOnEverySeventhLine) {
  // The case: two references, the second empty on every 7th line. Hypotheses are a
  // little shorter than the references, and on the 7th lines very short, so that the empty
  // reference is the closest there: sacreBLEU 2.2+ counts r = 0 for those lines, 2.0/2.1 took
  // the first reference's length.
  const std::vector<std::string> vocab = {"the", "a",   "cat", "dog", "sat", "ran",
                                          "on",  "mat", "red", "big", "and", "it"};
  uint32_t state = 12345;
  auto next = [&](uint32_t range) {
    state = state * 1664525u + 1013904223u;  // a fixed LCG: the same corpus everywhere
    return (state >> 16) % range;
  };
  auto sentence = [&](size_t length) {
    std::string out;
    for (size_t k = 0; k < length; ++k) out += (k ? " " : "") + vocab[next(12)];
    return out;
  };
  Lines hyps, ref_a, ref_b;
  for (size_t i = 0; i < 70; ++i) {
    const bool seventh = i % 7 == 6;
    ref_a.push_back(sentence(8 + next(4)));
    ref_b.push_back(seventh ? "" : sentence(8 + next(4)));
    // The hypothesis shares a prefix with the first reference and then guesses.
    const size_t length = seventh ? 2 : 7 + next(3);
    std::string hyp;
    std::istringstream in(ref_a.back());
    std::string word;
    for (size_t k = 0; k < length; ++k) {
      const bool copy = k < length / 2 && (in >> word);
      hyp += (k ? " " : "") + (copy ? word : vocab[next(12)]);
    }
    hyps.push_back(hyp);
  }
  BleuOptions options;
  options.tokenizer = BleuTokenizer::kNone;
  const BleuScore s = corpus_bleu(hyps, {ref_a, ref_b}, options);
  const PlainBleu now = plain_bleu(hyps, {ref_a, ref_b}, false);
  const PlainBleu before = plain_bleu(hyps, {ref_a, ref_b}, true);
  EXPECT_EQ(s.sys_len, now.sys_len);
  EXPECT_EQ(s.ref_len, now.ref_len);
  EXPECT_EQ(s.counts, now.counts);
  EXPECT_EQ(s.totals, now.totals);
  EXPECT_NEAR(s.score, now.score, 1e-9);
  EXPECT_EQ(s.signature, "nrefs:2|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0");
  // The old rule: each of the ten 7th lines counted the first reference's 8..11 tokens (here
  // r = 627 against 529, c = 495: BLEU 25.47 against 31.04).
  EXPECT_EQ(now.ref_len, 529);
  EXPECT_EQ(before.ref_len, 627);
  EXPECT_LT(s.bp, 1.0);
  EXPECT_GT(s.score, before.score + 1.0);
}

TEST(Bleu, RejectsBadInput) {
  testing::expect_error(
      [] {
        corpus_bleu({"a", "b"}, {{"a"}});
      },
      {"reference set 1", "1 lines", "2 hypotheses"});
  testing::expect_error([] { corpus_bleu({}, {{}}); }, {"no hypotheses"});
  testing::expect_error([] { corpus_bleu({"a"}, {}); }, {"no reference"});
  testing::expect_error(
      [] {
        corpus_bleu({"a", "b\xff"}, {{"a", "b"}});
      },
      {"hypothesis line 2", "UTF-8", "0xff"});
  testing::expect_error(
      [] {
        corpus_bleu({"a"}, {{"a"}, {"\xc3"}});
      },
      {"reference set 2 line 1", "UTF-8"});
  BleuOptions order;
  order.max_ngram_order = 0;
  testing::expect_error([&] { corpus_bleu({"a"}, {{"a"}}, order); },
                        {"order 0", "allowed range 1 to 100"});
  order.max_ngram_order = 101;
  testing::expect_error([&] { corpus_bleu({"a"}, {{"a"}}, order); },
                        {"order 101", "allowed range 1 to 100"});
  order.max_ngram_order = kMaxBleuNgramOrder;
  EXPECT_EQ(corpus_bleu({"a"}, {{"a"}}, order).counts.size(), 100u);
  EXPECT_THROW(bleu_smoothing_from_name("floor2"), Error);
}

TEST(Bleu, TokenizedBleuIsMultiBleuPerl) {
  // Already tokenized text: split on whitespace only, so "mat." is one token and does not match
  // "mat" (13a would split it); no smoothing.
  const BleuScore s = corpus_bleu({"the cat sat on the mat."}, {{"the cat sat on the mat"}},
                                  tokenized_bleu_options());
  // p1 = 5/6, p2 = 4/5, p3 = 3/4, p4 = 2/3, BP = 1: (5/6 * 4/5 * 3/4 * 2/3)^(1/4) = (1/3)^(1/4).
  EXPECT_NEAR(s.score, 100 * std::pow(1.0 / 3, 0.25), 1e-9);
  EXPECT_EQ(s.format_multi_bleu(),
            "BLEU = 75.98, 83.3/80.0/75.0/66.7 (BP=1.000, ratio=1.000, hyp_len=6, ref_len=6)");
  EXPECT_EQ(s.signature, "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:2.6.0");
}

TEST(Bleu, JsonHasEveryField) {
  const BleuScore s = corpus_bleu({"the cat the dog"}, {{"the dog the cat"}});
  const nlohmann::ordered_json j = s.to_json();
  EXPECT_EQ(j["score"].get<double>(), 45.18);
  EXPECT_EQ(j["score_exact"].get<double>(), s.score);
  EXPECT_EQ(j["verbose_score"],
            "100.0/66.7/25.0/25.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 "
            "ref_len = 4)");
  EXPECT_EQ(j["counts"], nlohmann::json({4, 2, 0, 0}));
  EXPECT_EQ(j["signature"], "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
}

TEST(Bleu, StatisticsAddUpOverShards) {
  const Lines hyps = {"The dog bit the man.", "It wasn't surprising.",
                      "The man had just bitten him."};
  const std::vector<Lines> refs = {
      {"The dog bit the man.", "It was not unexpected.", "The man bit him first."}};
  BleuStatistics sum = corpus_bleu_statistics({hyps[0]}, {{refs[0][0]}});
  const BleuStatistics rest =
      corpus_bleu_statistics({hyps[1], hyps[2]}, {{refs[0][1], refs[0][2]}});
  sum.sys_len += rest.sys_len;
  sum.ref_len += rest.ref_len;
  for (size_t n = 0; n < 4; ++n) {
    sum.counts[n] += rest.counts[n];
    sum.totals[n] += rest.totals[n];
  }
  EXPECT_EQ(compute_bleu(sum).score, corpus_bleu(hyps, refs).score);
}

// --- sacreBLEU 2.x's published expectations: test/test_bleu.py ---

const Lines kReadmeHyps = {"The dog bit the man.", "It wasn't surprising.",
                           "The man had just bitten him."};
const std::vector<Lines> kReadmeRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

TEST(BleuSacrebleuTests, CorpusBleuCases) {
  // test_corpus_bleu_cases (EPSILON = 1e-8).
  auto score = [](BleuTokenizer tokenizer, BleuSmoothing smoothing = BleuSmoothing::kExp) {
    BleuOptions options;
    options.tokenizer = tokenizer;
    options.smoothing = smoothing;
    return corpus_bleu(kReadmeHyps, kReadmeRefs, options).score;
  };
  EXPECT_NEAR(score(BleuTokenizer::k13a), 48.530827, 1e-6);
  EXPECT_NEAR(score(BleuTokenizer::kNone), 49.1919566, 1e-7);
  EXPECT_NEAR(score(BleuTokenizer::kIntl), 43.91623493, 1e-8);
  EXPECT_NEAR(score(BleuTokenizer::k13a, BleuSmoothing::kNone), 48.530827, 1e-6);
  EXPECT_EQ(corpus_bleu({"", "", ""}, kReadmeRefs).score, 0.0);
  EXPECT_EQ(
      corpus_bleu(kReadmeHyps, kReadmeRefs).format(),
      "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
}

TEST(BleuSacrebleuTests, MaxNgramOrder) {
  // test_bleu_max_order: the score printed with two decimals for orders 1..6.
  const char* expected[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
  for (int order = 1; order <= 6; ++order) {
    BleuOptions options;
    options.max_ngram_order = order;
    EXPECT_EQ(fmt::format("{:.2f}", corpus_bleu(kReadmeHyps, kReadmeRefs, options).score),
              expected[order - 1]);
  }
}

TEST(BleuSacrebleuTests, RawCorpusBleu) {
  // test_raw_bleu_cases, test_effective_order, test_statistics, test_offset (score / 100).
  EXPECT_EQ(
      corpus_bleu({"this is a test", "another test"}, {{"ref1", "ref2"}}, raw_options(.01)).score,
      0.0);
  EXPECT_NEAR(corpus_bleu({"this is a test"}, {{"this is a test"}}, raw_options(.01)).score, 100.0,
              1e-6);
  EXPECT_NEAR(corpus_bleu({"this is a fest"}, {{"this is a test"}}, raw_options(.01)).score,
              22.3606797749979, 1e-6);
  EXPECT_NEAR(corpus_bleu({"test"}, {{"a test"}}, raw_options(.01)).score, 36.78794411714425, 1e-6);
  EXPECT_NEAR(corpus_bleu({"a test"}, {{"a test"}}, raw_options(.01)).score, 100.0, 1e-6);
  EXPECT_NEAR(corpus_bleu({"a little test"}, {{"a test"}}, raw_options(.01)).score,
              3.218297948685433, 1e-6);
  const Lines hyp = {"am I am a character sequence"};
  const std::vector<Lines> ref = {{"I am a symbol string sequence a a"}};
  const BleuScore stats = corpus_bleu(hyp, ref, raw_options(.01));
  EXPECT_EQ(stats.counts, (std::vector<int64_t>{4, 2, 1, 0}));
  EXPECT_EQ(stats.totals, (std::vector<int64_t>{6, 5, 4, 3}));
  EXPECT_EQ(corpus_bleu(hyp, ref, raw_options(0.0)).score, 0.0);
  EXPECT_NEAR(corpus_bleu(hyp, ref, raw_options(std::nullopt)).score, 15.55722182, 1e-6);
}

TEST(BleuSacrebleuTests, ScoringFromStatistics) {
  // test_scoring: compute_bleu([9,7,5,3], [10,8,6,4], 11, 11) with smooth_method 'none'.
  const BleuStatistics stats{11, 11, {9, 7, 5, 3}, {10, 8, 6, 4}, 1};
  EXPECT_NEAR(compute_bleu(stats, with_smoothing(BleuSmoothing::kNone)).score, 83.75922397, 1e-6);
  // test_degenerate_statistics: floor smoothing with these offsets scores exactly 0.
  const struct {
    BleuStatistics stats;
    double offset;
  } degenerate[] = {{{0, 1, {0, 0, 0, 0}, {4, 4, 2, 1}, 1}, 0.0},
                    {{14, 10, {0, 0, 0, 0}, {10, 11, 12, 0}, 1}, 0.0},
                    {{0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}, 1}, 0.0},
                    {{6, 6, {6, 5, 4, 0}, {6, 5, 4, 3}, 1}, 0.0},
                    {{0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}, 1}, 0.1},
                    {{1, 5, {0, 0, 0, 0}, {0, 0, 0, 0}, 1}, 0.01}};
  for (const auto& d : degenerate)
    EXPECT_EQ(compute_bleu(d.stats, with_smoothing(BleuSmoothing::kFloor, d.offset)).score, 0.0);
}

// --- test/test_sentence_bleu.py (EPSILON = 1e-3; effective order on) ---

TEST(BleuSacrebleuTests, SentenceBleu) {
  const std::string ref = "producţia de zahăr brut se exprimă în zahăr alb;";
  const std::string sys =
      "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
  auto score = [&](BleuSmoothing smoothing, std::optional<double> value,
                   BleuTokenizer tokenizer = BleuTokenizer::k13a) {
    BleuOptions options = with_smoothing(smoothing, value);
    options.tokenizer = tokenizer;
    options.effective_order = true;
    return sentence_bleu(sys, {ref}, options).score;
  };
  EXPECT_NEAR(score(BleuSmoothing::kExp, std::nullopt), 8.493, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kNone, std::nullopt), 0.0, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kFloor, std::nullopt), 4.51688, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kFloor, 0.1), 4.51688, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kFloor, 0.5), 10.10, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kAddK, std::nullopt), 14.882, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kAddK, 1), 14.882, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kAddK, 2), 21.389, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kExp, std::nullopt, BleuTokenizer::kNone), 7.347, 1e-3);
  EXPECT_NEAR(score(BleuSmoothing::kExp, std::nullopt, BleuTokenizer::kIntl), 8.493, 1e-3);
  // test_cases_zero_bleu: no match at all is 0 with every smoothing.
  for (BleuSmoothing smoothing :
       {BleuSmoothing::kExp, BleuSmoothing::kNone, BleuSmoothing::kFloor, BleuSmoothing::kAddK}) {
    BleuOptions options = with_smoothing(smoothing);
    options.effective_order = true;
    EXPECT_EQ(sentence_bleu("this is a cat", {"okay thanks"}, options).score, 0.0);
  }
}

TEST(BleuSignature, NamesEveryOption) {
  BleuOptions options;
  // sacreBLEU's Signature.format: the version field always last.
  EXPECT_EQ(bleu_signature(options, 2),
            "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  options.smoothing = BleuSmoothing::kFloor;
  options.tokenizer = BleuTokenizer::kIntl;
  options.effective_order = true;
  EXPECT_EQ(bleu_signature(options, 1),
            "nrefs:1|case:mixed|eff:yes|tok:intl|smooth:floor[0.10]|version:2.6.0");
  options.smoothing = BleuSmoothing::kAddK;
  options.smooth_value = 2;
  EXPECT_EQ(bleu_signature(options, -1),
            "nrefs:var|case:mixed|eff:yes|tok:intl|smooth:add-k[2.00]|version:2.6.0");
}

}  // namespace
}  // namespace tfm::internal::eval
