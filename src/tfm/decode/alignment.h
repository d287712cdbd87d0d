// Words from subword pieces, attention merged from pieces to words, and word alignments from
// encoder-decoder attention (tfm translate --alignment, tfm attention --words).
//
// Merging follows Clark et al. (2019, "What does BERT look at?"): the attention *to* a word is the
// sum of the weights to its pieces, and the attention *from* a word is the mean of its pieces'
// rows. Every merged row still sums to 1.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tfm::internal::decode {

// The word of each piece: SentencePiece marks the first piece of a word with "▁" (U+2581); a piece
// without it continues the word before it. Special tokens ("<s>", "</s>", "<unk>", anything in
// angle brackets) are words of their own, and so is a first piece without the mark.
//
// unknown_in_words: "<unk>" is instead a piece like any other without the mark. A source's <unk>
// stands for characters the vocabulary lacks, inside a word of the input ("mán": "▁m" "<unk>"
// "n"), so that the words are the input's; an output's <unk> is detokenized as a word of its own.
std::vector<int64_t> word_of_pieces(const std::vector<std::string>& pieces,
                                    bool unknown_in_words = false);

// The words' text: their pieces joined, the "▁" marks removed.
std::vector<std::string> join_words(const std::vector<std::string>& pieces,
                                    const std::vector<int64_t>& word_of);

// [Q, K] weights (row q = query piece q) -> [words of the queries, words of the keys]: the columns
// of a key word summed, the rows of a query word averaged. query_words/key_words: word_of_pieces.
std::vector<float> merge_to_words(const std::vector<float>& weights,
                                  const std::vector<int64_t>& query_words,
                                  const std::vector<int64_t>& key_words);

// A word alignment as (source word, target word) pairs, in target order.
using Alignment = std::vector<std::pair<int64_t, int64_t>>;

// weights: [target words, source words] (rows sum to 1). threshold <= 0: hard alignment, each
// target word to the source word it attends to most (the lower index on a tie); threshold > 0:
// each target word to every source word with weight >= threshold.
Alignment align_words(const std::vector<float>& weights, int64_t target_words, int64_t source_words,
                      double threshold = 0.0);

// The word alignment of a translation from its per-token attention over the source pieces
// (Hypothesis::attention: one row per output token; rows past the target pieces, eos's, are not
// read): target rows averaged and source columns summed per word, then align_words. Source words
// are word_of_pieces(source_pieces, true): the input's whitespace-separated words, whatever
// characters the vocabulary lacks.
Alignment align_translation(const std::vector<std::vector<float>>& attention,
                            const std::vector<std::string>& source_pieces,
                            const std::vector<std::string>& target_pieces, double threshold = 0.0);

// The Pharaoh format of fast_align, Moses and Marian: "i-j" per pair (i source, j target), 0-based,
// separated by spaces.
std::string pharaoh(const Alignment& alignment);

}  // namespace tfm::internal::decode
