// tfm.Translator: a model loaded once, translating and scoring batches of sentences (or of token
// lists) in CTranslate2's manner, over tfm::Translator. The GIL is released while decoding; one
// Translator may be called from several Python threads at once, each call decoding in its own
// thread (tfm::Translator's contract), so threads translate in parallel over one model.
#include "tfm/translator.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "tfm/model.h"

namespace py = pybind11;

namespace tfm::internal::python {

namespace {

// One sentence's translations, as CTranslate2's TranslationResult: the hypotheses (text for text
// input, token lists for token input), their scores (with return_scores) and attention matrices
// (with return_attention, numpy f32 [target tokens, source tokens]), and their subword tokens.
struct PyTranslationResult {
  py::list hypotheses;
  py::list scores;
  py::list attention;
  py::list tokens;
};

struct PyScoringResult {
  std::vector<std::string> tokens;  // the target's pieces, then "</s>"
  py::array_t<float> log_probs;     // log p of each token
  double log_prob = 0;              // their sum
};

// The search options a call names. progress: after each batch, takes the GIL back for a moment
// to run Python's signal handlers (in the main thread), so that Ctrl-C stops a long call with
// KeyboardInterrupt.
struct SearchArguments {
  int64_t beam_size;
  double length_penalty;
  int64_t n_best;
  int64_t max_length_offset;
  int64_t max_length;
  int64_t min_length;
  int64_t batch_size;
  int64_t batch_tokens;
  int64_t no_repeat_ngram_size;
  bool mbr;
  double mbr_temperature;
  int64_t sampling;
  double sampling_epsilon;
  double sampling_temperature;
  uint64_t seed;

  TranslationOptions options() const {
    TranslationOptions o;
    o.beam_size = beam_size;
    o.length_penalty = length_penalty;
    o.n_best = n_best;
    o.max_length_offset = max_length_offset;
    o.max_length = max_length;
    o.min_length = min_length;
    o.batch_size = batch_size;
    o.batch_tokens = batch_tokens;
    o.no_repeat_ngram_size = no_repeat_ngram_size;
    o.mbr = mbr;
    o.mbr_temperature = mbr_temperature;
    o.sampling = sampling;
    o.sampling_epsilon = sampling_epsilon;
    o.sampling_temperature = sampling_temperature;
    o.seed = seed;
    o.progress = [](int64_t, int64_t) {
      py::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    return o;
  }
};

enum class SourceKind { empty, text, tokens };

// Whether `source` is a list of sentences or of token lists (judged by its first element).
SourceKind source_kind(const py::object& source, const char* call) {
  const std::string expected = std::string(call) + ": expected a list of sentences (str) or of " +
                               "token lists (lists of str)";
  if (py::isinstance<py::str>(source) || py::isinstance<py::bytes>(source) ||
      !py::isinstance<py::sequence>(source))
    throw py::type_error(expected + ", not " + py::str(py::type::of(source)).cast<std::string>());
  const auto sequence = source.cast<py::sequence>();
  if (py::len(sequence) == 0) return SourceKind::empty;
  return py::isinstance<py::str>(sequence[0]) ? SourceKind::text : SourceKind::tokens;
}

template <typename T>
T cast_sources(const py::object& source, const char* call, const char* what) {
  try {
    return source.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(call) + ": every source must be " + what +
                         ", as the first one is");
  }
}

py::array_t<float> matrix(const std::vector<std::vector<float>>& rows) {
  const size_t columns = rows.empty() ? 0 : rows.front().size();
  py::array_t<float> array({rows.size(), columns});
  auto view = array.mutable_unchecked<2>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < columns; ++c)
      view(static_cast<py::ssize_t>(r), static_cast<py::ssize_t>(c)) = rows[r][c];
  return array;
}

class PyTranslator {
 public:
  PyTranslator(const std::filesystem::path& model_dir, const std::string& device,
               const std::string& compute_type, int threads)
      : threads_(threads) {
    LoadOptions load;
    load.precision = parse_precision(compute_type);  // the binding keeps Python's strings
    load.device = parse_device(device);
    py::gil_scoped_release release;
    model_ = Model::load(model_dir, load);
    translator_ = std::make_unique<Translator>(model_, TranslatorOptions{threads});
  }

  std::vector<PyTranslationResult> translate_batch(const py::object& source,
                                                   const SearchArguments& search,
                                                   bool return_scores, bool return_attention,
                                                   int64_t attention_layer,
                                                   int64_t attention_head) {
    const SourceKind kind = source_kind(source, "translate_batch");
    if (kind == SourceKind::empty) return {};
    TranslationOptions options = search.options();
    options.return_attention = return_attention;
    options.attention_layer = attention_layer;
    options.attention_head = attention_head;
    std::vector<TranslationResult> results;
    if (kind == SourceKind::text) {
      const auto sentences =
          cast_sources<std::vector<std::string>>(source, "translate_batch", "a str");
      py::gil_scoped_release release;
      results = translator_->translate(sentences, options);
    } else {
      const auto tokens = cast_sources<std::vector<std::vector<std::string>>>(
          source, "translate_batch", "a list of str");
      py::gil_scoped_release release;
      results = translator_->translate_tokens(tokens, options);
    }
    std::vector<PyTranslationResult> out(results.size());
    for (size_t i = 0; i < results.size(); ++i)
      for (const Hypothesis& h : results[i].hypotheses) {
        if (kind == SourceKind::text)
          out[i].hypotheses.append(h.text);
        else
          out[i].hypotheses.append(py::cast(h.tokens));
        out[i].tokens.append(py::cast(h.tokens));
        if (return_scores) out[i].scores.append(h.score);
        if (return_attention) out[i].attention.append(matrix(h.attention));
      }
    return out;
  }

  int64_t translate_file(const std::filesystem::path& input, const std::filesystem::path& output,
                         const SearchArguments& search, bool n_best_output) {
    const TranslationOptions options = search.options();
    py::gil_scoped_release release;
    return translator_->translate_file(input, output, options, n_best_output);
  }

  std::vector<PyScoringResult> score_batch(const std::vector<std::string>& source,
                                           const std::vector<std::string>& target,
                                           int64_t batch_size) {
    std::vector<ScoringResult> scores;
    {
      py::gil_scoped_release release;
      scores = translator_->score(source, target, batch_size);
    }
    std::vector<PyScoringResult> out;
    for (ScoringResult& s : scores) {
      PyScoringResult& r = out.emplace_back();
      r.tokens = std::move(s.tokens);
      r.log_probs = py::array_t<float>(static_cast<py::ssize_t>(s.token_log_probs.size()),
                                       s.token_log_probs.data());
      r.log_prob = s.log_prob;
    }
    return out;
  }

  const Model& model() const { return *model_; }
  int threads() const { return threads_; }

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Translator> translator_;
  int threads_ = 0;
};

// The keyword arguments of a search, in translate_batch's and translate_file's order.
#define TFM_SEARCH_ARGUMENTS                                                                    \
  py::arg("beam_size") = 4, py::arg("length_penalty") = 0.6, py::arg("n_best") = 1,             \
  py::arg("max_length_offset") = 50, py::arg("max_length") = 0, py::arg("min_length") = 0,      \
  py::arg("batch_size") = 32, py::arg("batch_tokens") = 0, py::arg("no_repeat_ngram_size") = 0, \
  py::arg("mbr") = false, py::arg("mbr_temperature") = 1.0, py::arg("sampling") = 0,            \
  py::arg("sampling_epsilon") = 0.02, py::arg("sampling_temperature") = 1.0, py::arg("seed") = 0

}  // namespace

void bind_translator(py::module_& m) {
  py::class_<PyTranslationResult>(m, "TranslationResult",
                                  "The translations of one source, best first")
      .def_readonly("hypotheses", &PyTranslationResult::hypotheses,
                    "str for a text source, a token list for a token-list source")
      .def_readonly("scores", &PyTranslationResult::scores,
                    "with return_scores: log p / ((5 + length) / 6)^length_penalty of each")
      .def_readonly("attention", &PyTranslationResult::attention,
                    "with return_attention: float32 [target tokens (+ </s>), source tokens] each")
      .def_readonly("tokens", &PyTranslationResult::tokens, "each hypothesis's subword tokens")
      .def("__repr__", [](const PyTranslationResult& r) {
        return "TranslationResult(hypotheses=" + py::repr(r.hypotheses).cast<std::string>() +
               ", scores=" + py::repr(r.scores).cast<std::string>() + ")";
      });
  py::class_<PyScoringResult>(m, "ScoringResult", "A target's teacher-forced log-probabilities")
      .def_readonly("tokens", &PyScoringResult::tokens, "the target's subword tokens, then </s>")
      .def_readonly("log_probs", &PyScoringResult::log_probs, "float32 log p of each token")
      .def_readonly("log_prob", &PyScoringResult::log_prob, "their sum")
      .def("__repr__", [](const PyScoringResult& r) {
        return "ScoringResult(tokens=" + py::repr(py::cast(r.tokens)).cast<std::string>() +
               ", log_prob=" + std::to_string(r.log_prob) + ")";
      });

  py::class_<PyTranslator>(m, "Translator",
                           "A model directory loaded once, translating and scoring batches")
      .def(py::init<const std::filesystem::path&, const std::string&, const std::string&, int>(),
           py::arg("model_dir"), py::arg("device") = "cpu", py::arg("compute_type") = "f32",
           py::arg("threads") = 0,
           "Loads model_dir (config.json, model.safetensors, vocab.model). compute_type: the "
           "matrix products' operands, 'f32', 'bf16', 'auto', 'int8' or 'int8-bf16'; threads: "
           "OpenMP threads of each "
           "call (0: all cores).")
      .def(
          "translate_batch",
          [](PyTranslator& self, const py::object& source, int64_t beam_size, double length_penalty,
             int64_t n_best, int64_t max_length_offset, int64_t max_length, int64_t min_length,
             int64_t batch_size, int64_t batch_tokens, int64_t no_repeat_ngram_size, bool mbr,
             double mbr_temperature, int64_t sampling, double sampling_epsilon,
             double sampling_temperature, uint64_t seed, bool return_scores, bool return_attention,
             int64_t attention_layer, int64_t attention_head) {
            return self.translate_batch(
                source,
                {beam_size, length_penalty, n_best, max_length_offset, max_length, min_length,
                 batch_size, batch_tokens, no_repeat_ngram_size, mbr, mbr_temperature, sampling,
                 sampling_epsilon, sampling_temperature, seed},
                return_scores, return_attention, attention_layer, attention_head);
          },
          py::arg("source"), py::kw_only(), TFM_SEARCH_ARGUMENTS, py::arg("return_scores") = false,
          py::arg("return_attention") = false, py::arg("attention_layer") = -1,
          py::arg("attention_head") = -1,
          "Translates a list of sentences, or of token lists; one TranslationResult per source, "
          "in order.")
      .def(
          "translate_file",
          [](PyTranslator& self, const std::filesystem::path& input_path,
             const std::filesystem::path& output_path, int64_t beam_size, double length_penalty,
             int64_t n_best, int64_t max_length_offset, int64_t max_length, int64_t min_length,
             int64_t batch_size, int64_t batch_tokens, int64_t no_repeat_ngram_size, bool mbr,
             double mbr_temperature, int64_t sampling, double sampling_epsilon,
             double sampling_temperature, uint64_t seed, bool n_best_output) {
            return self.translate_file(
                input_path, output_path,
                {beam_size, length_penalty, n_best, max_length_offset, max_length, min_length,
                 batch_size, batch_tokens, no_repeat_ngram_size, mbr, mbr_temperature, sampling,
                 sampling_epsilon, sampling_temperature, seed},
                n_best_output);
          },
          py::arg("input_path"), py::arg("output_path"), py::kw_only(), TFM_SEARCH_ARGUMENTS,
          py::arg("n_best_output") = false,
          "Translates a text file line by line into output_path, as tfm translate -i -o does; "
          "returns the number of lines.")
      .def("score_batch", &PyTranslator::score_batch, py::arg("source"), py::arg("target"),
           py::kw_only(), py::arg("batch_size") = 32,
           "The teacher-forced log-probability of each target token given its source.")
      .def(
          "tokenize",
          [](const PyTranslator& self, const std::string& text) {
            return self.model().tokenize(text);
          },
          py::arg("text"), "A sentence's subword tokens in the model's vocabulary")
      .def(
          "detokenize",
          [](const PyTranslator& self, const std::vector<std::string>& tokens) {
            return self.model().detokenize(tokens);
          },
          py::arg("tokens"), "The sentence of a token list")
      .def(
          "token_ids",
          [](const PyTranslator& self, const std::vector<std::string>& tokens) {
            return self.model().token_ids(tokens);
          },
          py::arg("tokens"), "The vocabulary ids of tokens (<unk>'s, 1, for unknown ones)")
      .def_property_readonly("model_dir",
                             [](const PyTranslator& self) { return self.model().dir().string(); })
      .def_property_readonly("device",
                             [](const PyTranslator& self) { return self.model().device(); })
      .def_property_readonly(
          "compute_type", [](const PyTranslator& self) { return self.model().precision(); },
          "'f32' or 'bf16' ('auto' resolved)")
      .def_property_readonly("threads", &PyTranslator::threads)
      .def_property_readonly("vocab_size",
                             [](const PyTranslator& self) { return self.model().vocab_size(); })
      .def_property_readonly(
          "layers", [](const PyTranslator& self) { return self.model().layers(); },
          "the encoder's layers")
      .def_property_readonly(
          "decoder_layers", [](const PyTranslator& self) { return self.model().decoder_layers(); },
          "the decoder's layers (layers, unless the model was made with model.decoder_layers)")
      .def_property_readonly("d_model",
                             [](const PyTranslator& self) { return self.model().d_model(); })
      .def_property_readonly(
          "parameter_count",
          [](const PyTranslator& self) { return self.model().parameter_count(); })
      .def("__repr__", [](const PyTranslator& self) {
        return "<tfm.Translator " + self.model().dir().string() + " (" + self.model().precision() +
               ", " + self.model().device() + ")>";
      });
}

}  // namespace tfm::internal::python
