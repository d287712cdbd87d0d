// The Python module `tfm._tfm` over the public library (include/tfm): BLEU, training, a model's
// weights as numpy arrays, and (python/translator.cc) the Translator. python/tfm/__init__.py is
// the package around it; docs/PYTHON.md describes the API.
//
// Every call that computes (loading, decoding, scoring, BLEU, training, reading and writing model
// files) releases the GIL, so that other Python threads run meanwhile; callbacks into Python
// (training progress, Ctrl-C checks) take it back. A tfm::Error becomes tfm.Error (a
// RuntimeError) with the C++ message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "tfm/tfm.h"
#include "tfm/version.h"

namespace py = pybind11;

namespace tfm::internal::python {

namespace {

// A list of references: one reference per hypothesis (one set), or a list of such sets.
std::vector<std::vector<std::string>> reference_sets(const py::sequence& references) {
  if (py::len(references) > 0 && py::isinstance<py::str>(references[0]))
    return {references.cast<std::vector<std::string>>()};
  return references.cast<std::vector<std::vector<std::string>>>();
}

BleuResult bleu(const std::vector<std::string>& hypotheses, const py::sequence& references,
                const std::string& tokenize, bool lowercase, const std::string& smooth,
                const std::string& language, bool split_compounds) {
  if (py::isinstance<py::str>(references))
    throw py::type_error("bleu: references must be a list of str (or a list of such lists)");
  const std::vector<std::vector<std::string>> sets = reference_sets(references);
  BleuOptions options;
  options.tokenize = tokenize;
  options.lowercase = lowercase;
  options.smooth = smooth;
  options.language = language;
  options.split_compounds = split_compounds;
  py::gil_scoped_release release;
  return corpus_bleu(hypotheses, sets, options);
}

// "section.key=value" assignments from {"section.key": value} (bools as YAML's true/false) or
// from a list of such strings.
std::vector<std::string> override_assignments(const py::object& overrides) {
  if (overrides.is_none()) return {};
  if (!py::isinstance<py::dict>(overrides)) {
    const char* expected = "train: overrides must be a dict or a list of 'key=value' strings";
    if (py::isinstance<py::str>(overrides)) throw py::type_error(expected);
    try {
      return overrides.cast<std::vector<std::string>>();
    } catch (const py::cast_error&) {
      // pybind11 reports a failed cast as RuntimeError; a wrong type is a TypeError.
      throw py::type_error(std::string(expected) + ", not " +
                           py::str(py::type::of(overrides)).cast<std::string>());
    }
  }
  std::vector<std::string> assignments;
  for (const auto& [key, value] : overrides.cast<py::dict>()) {
    const std::string text = py::isinstance<py::bool_>(value)
                                 ? std::string(value.cast<bool>() ? "true" : "false")
                                 : py::str(value).cast<std::string>();
    assignments.push_back(py::str(key).cast<std::string>() + "=" + text);
  }
  return assignments;
}

TrainingResult train(const std::optional<std::filesystem::path>& recipe,
                     const py::object& overrides,
                     const std::optional<std::filesystem::path>& run_dir, int64_t max_steps,
                     double max_minutes, int threads, bool resume,
                     const std::optional<std::string>& device, const py::object& progress) {
  TrainingOptions options;
  options.recipe = recipe.value_or(std::filesystem::path());
  options.overrides = override_assignments(overrides);
  options.run_dir = run_dir.value_or(std::filesystem::path());
  options.max_steps = max_steps;
  options.max_minutes = max_minutes;
  options.threads = threads;
  options.resume = resume;
  if (device) options.device = parse_device(*device);
  // The callback is called with the GIL taken back; it lives in this frame, so copies of the
  // std::function never copy a Python object without the GIL.
  if (!progress.is_none())
    options.progress = [&progress](const TrainingProgress& report) {
      py::gil_scoped_acquire acquire;
      progress(report);
    };
  py::gil_scoped_release release;
  return tfm::train(options);
}

// A read-only numpy array over a weight's memory, which the array keeps alive: no copy.
py::array weight_array(const Weight& weight) {
  auto* owner = new std::shared_ptr<const void>(weight.owner);
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); });
  py::array_t<float> array(weight.shape, weight.data, base);
  array.attr("flags").attr("writeable") = false;
  return array;
}

py::tuple read_weights(const std::filesystem::path& dir) {
  ModelWeights model;
  {
    py::gil_scoped_release release;
    model = read_model_weights(dir);
  }
  py::list weights;
  for (const Weight& weight : model.weights)
    weights.append(py::make_tuple(weight.name, weight_array(weight)));
  return py::make_tuple(model.config_json, weights);
}

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

void write_weights(const std::filesystem::path& dir, const std::string& config_json,
                   const std::vector<std::pair<std::string, py::object>>& weights,
                   const py::bytes& vocabulary) {
  ModelWeights model;
  model.config_json = config_json;
  std::vector<FloatArray> arrays;  // C-contiguous f32 (converted where needed), alive until the end
  for (const auto& [name, value] : weights) {
    FloatArray array = FloatArray::ensure(value);
    if (!array) {
      PyErr_Clear();
      throw py::type_error("save_model: weight '" + name + "' is not an array of numbers");
    }
    Weight& weight = model.weights.emplace_back();
    weight.name = name;
    weight.shape.assign(array.shape(), array.shape() + array.ndim());
    weight.data = array.data();
    arrays.push_back(std::move(array));
  }
  const std::string vocabulary_bytes = vocabulary;
  py::gil_scoped_release release;
  write_model_weights(dir, model, vocabulary_bytes);
}

}  // namespace

}  // namespace tfm::internal::python

PYBIND11_MODULE(_tfm, m) {
  using namespace tfm::internal::python;
  using tfm::BleuResult;
  using tfm::TrainingProgress;
  using tfm::TrainingResult;
  m.doc() = "tfm: the Transformer of 'Attention Is All You Need' (the C++ library's bindings)";
  m.attr("__version__") = TFM_VERSION;
  py::register_exception<tfm::Error>(m, "Error", PyExc_RuntimeError);

  bind_translator(m);

  py::class_<BleuResult>(m, "BleuResult", "Corpus BLEU, as tfm bleu prints it (docs/BLEU.md)")
      .def_readonly("score", &BleuResult::score, "0..100")
      .def_readonly("precisions", &BleuResult::precisions, "n-gram precisions in percent, 1..4")
      .def_readonly("brevity_penalty", &BleuResult::brevity_penalty)
      .def_readonly("hypothesis_length", &BleuResult::hypothesis_length)
      .def_readonly("reference_length", &BleuResult::reference_length)
      .def_readonly("signature", &BleuResult::signature)
      .def_readonly("line", &BleuResult::line, "tfm bleu's output line")
      .def("__str__", [](const BleuResult& r) { return r.line; })
      .def("__repr__", [](const BleuResult& r) { return "<tfm.BleuResult " + r.line + ">"; });
  m.def("bleu", &bleu, py::arg("hypotheses"), py::arg("references"), py::kw_only(),
        py::arg("tokenize") = "13a", py::arg("lowercase") = false, py::arg("smooth") = "exp",
        py::arg("language") = "en", py::arg("split_compounds") = false,
        "Corpus BLEU of hypotheses against references (one reference per hypothesis, or a list "
        "of such sets), as tfm bleu computes it: sacreBLEU's score, or the paper's tokenized BLEU "
        "with tokenize='moses' and smooth='none'.");

  py::class_<TrainingProgress>(m, "TrainingProgress", "A report of the training loop")
      .def_readonly("kind", &TrainingProgress::kind, "'train' or 'valid'")
      .def_readonly("step", &TrainingProgress::step)
      .def_readonly("epoch", &TrainingProgress::epoch)
      .def_readonly("loss", &TrainingProgress::loss)
      .def_readonly("perplexity", &TrainingProgress::perplexity)
      .def_readonly("learning_rate", &TrainingProgress::learning_rate)
      .def_readonly("tokens_per_second", &TrainingProgress::tokens_per_second)
      .def_readonly("bleu", &TrainingProgress::bleu)
      .def_readonly("elapsed_seconds", &TrainingProgress::elapsed_seconds)
      .def("__repr__", [](const TrainingProgress& p) {
        return "<tfm.TrainingProgress " + p.kind + " step " + std::to_string(p.step) + " loss " +
               std::to_string(p.loss) + ">";
      });
  py::class_<TrainingResult>(m, "TrainingResult", "What a training run did")
      .def_readonly("steps", &TrainingResult::steps)
      .def_readonly("elapsed_seconds", &TrainingResult::elapsed_seconds)
      .def_readonly("last_valid_loss", &TrainingResult::last_valid_loss)
      .def_readonly("last_valid_bleu", &TrainingResult::last_valid_bleu)
      .def_readonly("interrupted", &TrainingResult::interrupted)
      .def_property_readonly(
          "last_checkpoint", [](const TrainingResult& r) { return r.last_checkpoint.string(); },
          "the last checkpoint: a model directory")
      .def("__repr__", [](const TrainingResult& r) {
        return "<tfm.TrainingResult steps " + std::to_string(r.steps) + ", last checkpoint " +
               r.last_checkpoint.string() + ">";
      });
  m.def("train", &train, py::arg("recipe") = py::none(), py::arg("overrides") = py::none(),
        py::kw_only(), py::arg("run_dir") = py::none(), py::arg("max_steps") = -1,
        py::arg("max_minutes") = -1.0, py::arg("threads") = -1, py::arg("resume") = false,
        py::arg("device") = py::none(), py::arg("progress") = py::none(),
        "Trains from a YAML recipe into a run directory, as tfm train does (docs/TRAINING.md).");

  m.def("_read_model_weights", &read_weights, py::arg("model_dir"));
  m.def("_write_model_weights", &write_weights, py::arg("model_dir"), py::arg("config_json"),
        py::arg("weights"), py::arg("vocabulary"));
}
