#include "tfm/tasks/parsing.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/tasks/tree_constraint.h"

namespace tfm::internal::tasks {

using decode::Hypothesis;
using decode::TranslateOptions;
using decode::Translator;

TranslateOptions paper_parse_options() {
  TranslateOptions options;
  options.beam_size = 21;
  options.alpha = 0.3;
  options.max_length_offset = 300;
  return options;
}

std::string parse_source(const std::vector<std::string>& words) {
  return fmt::format("{}", fmt::join(words, " "));
}

ParseResult choose_trees(const std::vector<std::string>& sequences,
                         const std::vector<double>& scores, const ParseInput& input, int64_t n_best,
                         ParseCounts* counts) {
  TFM_CHECK(sequences.size() == scores.size(), "choose_trees: {} sequences but {} scores",
            sequences.size(), scores.size());
  ParseResult result;
  std::vector<size_t> ill_formed;
  for (size_t rank = 0; rank < sequences.size(); ++rank) {
    std::optional<data::Tree> tree = data::delinearise(sequences[rank], input.words, input.tags);
    if (!tree) {
      ill_formed.push_back(rank);
      continue;
    }
    if (static_cast<int64_t>(result.trees.size()) < n_best)
      result.trees.push_back({std::move(*tree), scores[rank], static_cast<int64_t>(rank), 0});
  }
  if (counts) {
    ++counts->sentences;
    if (!ill_formed.empty() && ill_formed.front() == 0) ++counts->best_ill_formed;
    if (result.trees.empty()) ++counts->repaired;
  }
  for (size_t rank : ill_formed) {
    if (static_cast<int64_t>(result.trees.size()) >= n_best) break;
    data::Repaired repaired = data::repair(sequences[rank], input.words, input.tags);
    result.trees.push_back(
        {std::move(repaired.tree), scores[rank], static_cast<int64_t>(rank), repaired.edits});
  }
  // No hypothesis at all (none of finite probability): the words alone under the root.
  if (result.trees.empty()) {
    data::Repaired repaired = data::repair("", input.words, input.tags);
    result.trees.push_back({std::move(repaired.tree), 0.0, 0, repaired.edits});
  }
  return result;
}

std::string placeholder_sequence(const std::vector<int32_t>& ids, const Leaves& leaves,
                                 const data::Vocabulary& vocab) {
  std::string out;
  auto append = [&out](std::string_view text) {
    if (text.empty()) return;
    if (!out.empty()) out += ' ';
    out += text;
  };
  std::vector<int32_t> rest;  // tokens between the words: brackets (or, unconstrained, anything)
  auto flush = [&] {
    append(data::placeholder_leaves(vocab.decode(rest)));
    rest.clear();
  };
  size_t word = 0;
  for (size_t i = 0; i < ids.size();) {
    const std::vector<int32_t>* leaf = word < leaves.size() ? &leaves[word] : nullptr;
    if (leaf && ids.size() - i >= leaf->size() &&
        std::equal(leaf->begin(), leaf->end(), ids.begin() + static_cast<ptrdiff_t>(i))) {
      flush();
      append(data::kPreterminalPlaceholder);
      i += leaf->size();
      ++word;
    } else {
      rest.push_back(ids[i++]);
    }
  }
  flush();
  return out;
}

namespace {

// Encodes the inputs with words, searches them with `search` (all finished hypotheses of each,
// under the tree constraint when `constrained`), and chooses each sentence's trees. The model
// configuration's tree_leaves says what a leaf is.
template <typename Search>
std::vector<ParseResult> parse_inputs(const Search& search, const ModelConfig& config,
                                      const data::Vocabulary& vocab,
                                      const std::vector<ParseInput>& inputs, int64_t n_best,
                                      bool constrained, ParseCounts* counts) {
  TFM_CHECK(n_best >= 1, "parse: n-best {} must be at least 1", n_best);
  const data::TreeLeaves scheme = data::tree_leaves_named(config.tree_leaves);
  const bool words = scheme == data::TreeLeaves::words;
  std::vector<std::vector<int32_t>> sources;
  std::vector<int64_t> word_counts;
  std::vector<Leaves> leaves;  // lexicalised: each sentence's word pieces
  std::vector<size_t> positions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TFM_CHECK(inputs[i].tags.empty() || inputs[i].tags.size() == inputs[i].words.size(),
              "parse: sentence {} has {} words but {} tags", i, inputs[i].words.size(),
              inputs[i].tags.size());
    if (inputs[i].words.empty()) continue;
    sources.push_back(vocab.encode(parse_source(inputs[i].words)));
    word_counts.push_back(static_cast<int64_t>(inputs[i].words.size()));
    if (words) leaves.push_back(leaf_pieces(vocab, inputs[i].words));
    positions.push_back(i);
  }
  std::vector<ParseResult> results(inputs.size());
  if (sources.empty()) return results;
  std::shared_ptr<const decode::Constraint> constraint;
  if (constrained) {
    auto tokens = std::make_shared<TreeTokens>(TreeTokens::from_vocabulary(vocab, scheme));
    if (words)
      constraint = std::make_shared<TreeConstraint>(std::move(tokens), WordLeaves{leaves});
    else
      constraint = std::make_shared<TreeConstraint>(std::move(tokens), std::move(word_counts));
  }
  const std::vector<std::vector<Hypothesis>> hypotheses = search(sources, constraint);
  for (size_t k = 0; k < positions.size(); ++k) {
    std::vector<std::string> sequences;
    std::vector<double> scores;
    for (const Hypothesis& hypothesis : hypotheses[k]) {
      sequences.push_back(words ? placeholder_sequence(hypothesis.tokens, leaves[k], vocab)
                                : vocab.decode(hypothesis.tokens));
      scores.push_back(hypothesis.score);
    }
    results[positions[k]] = choose_trees(sequences, scores, inputs[positions[k]], n_best, counts);
  }
  return results;
}

}  // namespace

std::vector<ParseResult> parse(const Translator& translator, const data::Vocabulary& vocab,
                               const std::vector<ParseInput>& inputs, int64_t n_best,
                               bool constrained, ParseCounts* counts) {
  auto search = [&](const auto& sources, std::shared_ptr<const decode::Constraint> constraint) {
    TranslateOptions options = translator.options();
    options.n_best = options.beam_size;
    options.constraint = std::move(constraint);
    const Translator all_hypotheses(translator.shared_model(), options, translator.threads());
    return all_hypotheses.translate(sources);
  };
  return parse_inputs(search, translator.shared_model()->config(), vocab, inputs, n_best,
                      constrained, counts);
}

std::vector<ParseResult> parse(const nn::Transformer& model, const TranslateOptions& options,
                               const data::Vocabulary& vocab, const std::vector<ParseInput>& inputs,
                               int64_t n_best, bool constrained, ParseCounts* counts,
                               DType precision) {
  auto search = [&](const auto& sources, std::shared_ptr<const decode::Constraint> constraint) {
    TranslateOptions all = options;
    all.n_best = all.beam_size;
    all.constraint = std::move(constraint);
    return translate(model, sources, all, precision);
  };
  return parse_inputs(search, model.config(), vocab, inputs, n_best, constrained, counts);
}

}  // namespace tfm::internal::tasks
