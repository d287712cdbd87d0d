// tfm translate: raw sentences in (stdin or a file), detokenized translations out, in input order.
// The model directory's vocab.model encodes the input and decodes the output. Empty input lines
// give empty output lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/cli/text_io.h"
#include "tfm/cli/translate_attention.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/mbr.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/translation/file_translation.h"
#include "tfm/translation/model_loading.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::cli {

namespace {

struct TranslateCommandOptions {
  std::vector<std::string> models;  // one, or an ensemble's
  std::string input;                // empty or "-": stdin
  std::string output;               // empty or "-": stdout
  decode::TranslateOptions decoding;
  bool n_best_output = false;
  bool mbr = false;  // each line the MBR choice of its n-best list (eval/mbr.h)
  eval::MbrOptions mbr_options;
  int64_t attention_layer = -1;
  int64_t attention_head = -1;
  std::string attention_output;
  bool alignment = false;
  double alignment_threshold = 0.0;  // 0: hard (argmax) alignment
  std::string alignment_layer;       // a 0-based layer or "all"; empty: the last layer
  int threads = 0;
  std::string precision = "f32";
  std::string device = "cpu";
  bool reject_long_inputs = false;
};

void run_translate(TranslateCommandOptions options) {
  check_standard_input(options.input);  // before any file is opened
  set_num_threads(options.threads);     // loading too (the checksums run in parallel)
  // Each model loaded once, packed once (in the precision asked for), then only read.
  const decode::InferenceOptions inference =
      translation::inference_options(options.precision, options.device);
  std::vector<std::shared_ptr<const decode::InferenceModel>> models;
  std::optional<data::Vocabulary> first_vocab;
  int64_t max_input = 0;
  for (const std::filesystem::path dir : options.models) {
    auto model = decode::load_inference_model(dir, inference);
    const ModelConfig& model_config = model->config();
    TFM_CHECK(model_config.task == "translation",
              "{}: a {} model (config.json task \"{}\"); use tfm parse for it", dir.string(),
              model_config.task, model_config.task);
    data::Vocabulary vocab = translation::model_vocabulary(
        dir, model_config,
        "a model directory needs its SentencePiece vocabulary to translate text");
    const int64_t longest = decode::max_input_length(options.decoding, model_config);
    max_input = models.empty() ? longest : std::min(max_input, longest);
    if (!first_vocab) {
      first_vocab.emplace(std::move(vocab));
    } else {
      // An ensemble reads and writes one vocabulary: the same pieces under the same ids.
      TFM_CHECK(vocab.hash() == first_vocab->hash(),
                "{}: not the vocabulary of {}: an ensemble's models need one vocabulary",
                vocab.path().string(), first_vocab->path().string());
    }
    models.push_back(std::move(model));
  }
  const ModelConfig& config = models.front()->config();
  const data::Vocabulary& vocab = *first_vocab;
  TFM_CHECK(models.size() == 1 || (options.attention_output.empty() && !options.alignment),
            "--attention-output and --alignment read one model's attention, not an ensemble's of "
            "{}",
            models.size());

  std::vector<std::string> lines = read_input_lines(options.input);
  const std::string name = input_name(options.input);
  // A file is replaced only when every line is translated and written.
  TextOutput output(options.output);
  std::ofstream attention_file;
  if (!options.attention_output.empty()) {
    TFM_CHECK(options.attention_layer >= 0, "--attention-output needs --attention-layer");
    TFM_CHECK(options.attention_layer < config.decoder_depth(),
              "--attention-layer {} out of range: the model has {} decoder layers",
              options.attention_layer, config.decoder_depth());
    TFM_CHECK(options.attention_head < config.heads,
              "--attention-head {} out of range: the model has {} heads", options.attention_head,
              config.heads);
    options.decoding.attention = {options.attention_layer, options.attention_head};
    open_for_writing(attention_file, options.attention_output);
  }
  if (options.alignment)
    options.decoding.attention = alignment_probe(options.alignment_layer, config);
  const int64_t samples = options.decoding.sampling.samples;
  if (samples > 0) {
    // The list is the samples, best score first; --mbr weighs each the same.
    options.mbr_options.uniform = true;
    TFM_CHECK(!options.mbr || samples >= 2,
              "--mbr chooses among the --sampling samples: draw at least 2, not {}", samples);
  } else {
    TFM_CHECK(options.decoding.n_best <= options.decoding.beam_size,
              "--n-best {} exceeds the beam size {}", options.decoding.n_best,
              options.decoding.beam_size);
    TFM_CHECK(!options.mbr || options.decoding.n_best >= 2,
              "--mbr chooses from the --n-best list: give it at least 2 hypotheses (e.g. -b 16 "
              "--n-best 16), not {}",
              options.decoding.n_best);
  }

  // One worker, with --threads OpenMP threads, for every chunk.
  const decode::Translator translator(models, options.decoding, options.threads);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int64_t truncated = 0;
  const translation::LengthPolicy policy{max_input, options.reject_long_inputs
                                                        ? translation::LongInputs::reject
                                                        : translation::LongInputs::truncate};
  // Every line is encoded (and checked for length) before anything is translated.
  std::vector<std::vector<int32_t>> encoded =
      translation::encode_lines(vocab, lines, policy, name, &truncated);
  int64_t target_tokens = 0;
  translation::ChunkedTranslation chunks;  // 512 lines a chunk, a progress line after each
  chunks.format = {options.n_best_output, options.alignment, options.alignment_threshold};
  chunks.on_line = [&](size_t i, const translation::NBest* nbest) {
    if (!nbest || nbest->empty()) return;
    target_tokens += nbest->front().length;
    if (attention_file.is_open())
      attention_file << attention_record(vocab, options.attention_layer, options.attention_head, i,
                                         lines[i], nbest->front())
                            .dump()
                     << "\n";
  };
  chunks.on_chunk = [&](size_t done) {
    if (done == lines.size()) return;
    double seconds = std::chrono::duration<double>(clock::now() - start).count();
    std::fprintf(stderr, "translated %zu/%zu sentences, %.1f sentences/s, %.0f target tokens/s\n",
                 done, lines.size(), static_cast<double>(done) / seconds,
                 static_cast<double>(target_tokens) / seconds);
  };
  translation::translate_chunks(
      vocab, std::move(encoded),
      [&](const std::vector<std::vector<int32_t>>& sources) {
        std::vector<translation::NBest> lists = translator.translate(sources);
        if (options.mbr) eval::choose_by_mbr(vocab, lists, options.mbr_options);
        return lists;
      },
      [&](std::string_view text) { output.write(text); }, chunks);
  output.commit();
  // The summary, for inputs of any size (stderr: stdout holds only the translations).
  const double seconds =
      std::max(std::chrono::duration<double>(clock::now() - start).count(), 1e-9);
  const std::string note = truncated > 0 ? fmt::format(", {} truncated", truncated) : "";
  std::fprintf(stderr,
               "translated %zu sentences in %.2f s, %.1f sentences/s, %.0f target tokens/s%s\n",
               lines.size(), seconds, static_cast<double>(lines.size()) / seconds,
               static_cast<double>(target_tokens) / seconds, note.c_str());
}

}  // namespace

void register_translate(CLI::App& app) {
  auto o = std::make_shared<TranslateCommandOptions>();
  CLI::App* cmd = app.add_subcommand("translate", "Translate raw sentences with a model directory");
  cmd->add_option("-m,--model", o->models,
                  "model directory (config.json, model.safetensors, vocab.model); several (-m A "
                  "-m B): an ensemble, each step the mean of their probabilities (one vocabulary)")
      ->required();
  cmd->add_option("-i,--input", o->input, "input file, plain or .gz (default: stdin)");
  cmd->add_option("-o,--output", o->output, "output file (default: stdout)");
  CLI::Option* beam_size =
      cmd->add_option("-b,--beam-size", o->decoding.beam_size, "beam size; 1: greedy (default 4)")
          ->check(CLI::Range(1, 1024));
  cmd->add_option("--alpha", o->decoding.alpha, "length penalty ((5+len)/6)^alpha (default 0.6)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--max-length-offset", o->decoding.max_length_offset,
                  "maximum output length = source length + this (default 50)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--max-input-length", o->decoding.max_input_length,
                  "longer inputs (in subword tokens) are truncated, with a warning naming the line "
                  "(default 0: the model's max_positions)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_flag("--reject-long-inputs", o->reject_long_inputs,
                "an input longer than --max-input-length is an error instead");
  cmd->add_option("--batch-size", o->decoding.batch_size, "sentences per batch (default 32)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--batch-tokens", o->decoding.batch_tokens,
                  "also at most this many padded source tokens per batch (default: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  CLI::Option* n_best =
      cmd->add_option("--n-best", o->decoding.n_best, "hypotheses per sentence (default 1)")
          ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--no-repeat-ngram-size", o->decoding.no_repeat_ngram,
                  "no output repeats an n-gram of this many subword tokens (default 0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  CLI::Option* n_best_output =
      cmd->add_flag("--n-best-output", o->n_best_output,
                    "write 'line ||| translation ||| score' for each of the n best");
  CLI::Option* mbr =
      cmd->add_flag("--mbr", o->mbr,
                    "write the minimum Bayes risk choice of each sentence's --n-best list: the "
                    "hypothesis with the highest expected sentence BLEU against the list, each "
                    "weighted by the softmax of its score (docs/DECODING.md)")
          ->excludes(n_best_output);
  CLI::Option* mbr_temperature =
      cmd->add_option("--mbr-temperature", o->mbr_options.temperature,
                      "temperature of --mbr's weights: softmax(score / T) (default 1)")
          ->check(CLI::PositiveNumber)
          ->needs(mbr);
  CLI::Option* sampling =
      cmd->add_option("--sampling", o->decoding.sampling.samples,
                      "draw this many translations of each sentence by epsilon sampling instead "
                      "of a beam search; the best scored is written, or with --mbr the minimum "
                      "Bayes risk choice among them, each weighing the same (docs/DECODING.md)")
          ->check(CLI::Range(int64_t{1}, int64_t{1024}))
          ->excludes(mbr_temperature)
          ->excludes(beam_size)
          ->excludes(n_best);
  cmd->add_option("--sampling-epsilon", o->decoding.sampling.epsilon,
                  "tokens of probability below this are never drawn (default 0.02; 0: any token)")
      ->check(CLI::Range(0.0, 0.999999))
      ->needs(sampling);
  cmd->add_option("--sampling-temperature", o->decoding.sampling.temperature,
                  "draw from softmax(log p / T) (default 1)")
      ->check(CLI::PositiveNumber)
      ->needs(sampling);
  cmd->add_option("--seed", o->decoding.sampling.seed,
                  "seed of --sampling's draws: the same seed, the same samples (default 0)")
      ->needs(sampling);
  CLI::Option* attention_output =
      cmd->add_option("--attention-output", o->attention_output,
                      "JSON lines file for the attention weights of the best translation");
  cmd->add_option("--attention-layer", o->attention_layer,
                  "decoder layer whose encoder-decoder attention to write (0-based)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->needs(attention_output);
  cmd->add_option("--attention-head", o->attention_head,
                  "head, 0-based (default: the mean of the heads)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->needs(attention_output);
  CLI::Option* alignment =
      cmd->add_flag("--alignment", o->alignment,
                    "append ' ||| ' and the word alignment from the encoder-decoder attention, "
                    "in the Pharaoh format ('0-0 1-2': source word - target word, 0-based)")
          ->excludes(attention_output);
  cmd->add_option("--alignment-threshold", o->alignment_threshold,
                  "align each target word to every source word with at least this much attention "
                  "(default 0: to the one it attends to most)")
      ->check(CLI::Range(0.0, 1.0))
      ->needs(alignment);
  cmd->add_option("--alignment-layer", o->alignment_layer,
                  "decoder layer (0-based) whose heads' mean attention aligns, or 'all' for the "
                  "mean of every layer (default: the last layer)")
      ->needs(alignment);
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(CLI::Range(0, 4096));
  cmd->add_option("--precision", o->precision,
                  "operands of the matrix products: f32, bf16 (f32 accumulation; faster where the "
                  "CPU has AMX, or AVX512-BF16 at full rate), auto (bf16 where faster), int8 (the "
                  "linear layers "
                  "in int8, 7-bit activations without AVX512-VNNI; the rest f32) or int8-bf16 (the "
                  "rest bf16) "
                  "(default f32)");
  cmd->add_option("--device", o->device, "cpu or cuda (default cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([o] { run_translate(*o); });
}

}  // namespace tfm::internal::cli
