// tfm convert: other frameworks' models as tfm model directories (--from), and tfm's models as
// CTranslate2's (--to ctranslate2). docs/CONVERTING.md.
#include <cstdio>
#include <memory>
#include <string>

#include "tfm/cli/commands.h"
#include "tfm/convert/ctranslate2.h"
#include "tfm/convert/huggingface.h"
#include "tfm/convert/marian.h"
#include "tfm/convert/tfm_names.h"
#include "tfm/core/error.h"

namespace tfm::internal::cli {

namespace {

struct ConvertOptions {
  std::string from, to, input, model, output;
  std::string quantization = "float32";
};

void run_convert(const ConvertOptions& o) {
  TFM_CHECK(o.from.empty() != o.to.empty(), "give --from FORMAT -i SOURCE, or --to ctranslate2");
  if (!o.to.empty()) {
    TFM_CHECK(!o.model.empty(), "--to ctranslate2 needs -m MODEL_DIR (the tfm model to export)");
    convert::export_ctranslate2(o.model, o.output, o.quantization == "int8");
    std::fprintf(stderr, "wrote the CTranslate2 model %s (%s)\n", o.output.c_str(),
                 o.quantization.c_str());
    return;
  }
  TFM_CHECK(!o.input.empty(), "--from {} needs -i SOURCE (the model's folder)", o.from);
  if (o.from == "fairseq" || o.from == "opennmt")
    fail(
        "--from {}: its checkpoints are Python pickles; convert them with `python3 -m "
        "tfm.convert --from {} -i CHECKPOINT.pt ... -o {}` (docs/CONVERTING.md)",
        o.from, o.from, o.output);
  const convert::ImportedModel model = o.from == "marian" ? convert::import_marian(o.input)
                                       : o.from == "tfm-names"
                                           ? convert::import_tfm_names(o.input)
                                           : convert::import_huggingface(o.input);
  convert::write_imported_model(model, o.output, o.input);
  std::fprintf(stderr, "converted %s (%s) into the model directory %s\n", o.input.c_str(),
               o.from.c_str(), o.output.c_str());
}

}  // namespace

void register_convert(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Convert another framework's model into a tfm model directory, or export one");
  cmd->add_option("--from", options->from, "the source format")
      ->check(CLI::IsMember({"marian", "huggingface", "fairseq", "opennmt", "tfm-names"}));
  cmd->add_option("-i,--input", options->input,
                  "the model to convert (a folder; tfm-names: the folder python3 -m tfm.convert "
                  "stages)");
  cmd->add_option("--to", options->to, "export a tfm model to this format")
      ->check(CLI::IsMember({"ctranslate2"}));
  cmd->add_option("-m,--model", options->model, "the tfm model directory to export (--to)");
  cmd->add_option("-o,--output", options->output, "the directory to write")->required();
  cmd->add_option("--quantization", options->quantization,
                  "--to ctranslate2: float32 or int8 (per-row int8 weights, as CTranslate2's)")
      ->check(CLI::IsMember({"float32", "int8"}));
  cmd->callback([options] { run_convert(*options); });
}

}  // namespace tfm::internal::cli
