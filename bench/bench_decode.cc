// Translation throughput: decode::translate of a preset with random weights on `batch` random
// source sentences of src_len tokens, with exactly out_len output tokens per sentence (eos
// suppressed: min_length = max_length = out_len), for each beam size asked (1 = greedy), with f32
// bf16 or int8 products (--precision: f32, bf16, int8 or int8-bf16, as `tfm translate`). Encoder
// and search are both timed. Prints one JSON line per mode with the fields bench/decode_pytorch.py
// prints, so that bench/decode.sh can put both side by side; "mode" is "beam4" or "greedy", with
// "-" and the precision appended when it is not f32 ("beam4-bf16"; "precision" says it too).
//
// --model-dir writes the weights (model directory: config.json + model.safetensors) and the sources
// (sources.safetensors, i32 [batch, src_len]) so that PyTorch decodes the same model and input;
// --outputs writes the best output of every sentence per mode as JSON, for the agreement check;
// --gemm-shapes adds the timed decodes' products by kind ("gemm_shapes": per decode).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "peak_memory.h"
#include "region_times_mark.h"
#include "tfm/core/openmp_wait.h"
#include "tfm/core/threading.h"
#include "tfm/decode/translate.h"
#include "tfm/io/safetensors.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"

namespace {

std::vector<int64_t> parse_beams(const std::string& text) {
  std::vector<int64_t> beams;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) beams.push_back(std::stoll(item));
  return beams;
}

// ", \"gemm_shapes\": [...]": the products counted since set_gemm_shape_stats(true), per decode
// (empty when not asked for).
std::string shapes_json(bool asked, int runs) {
  if (!asked) return "";
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array();
  for (const auto& kind : tfm::internal::cpu::gemm_shape_stats())
    kinds.push_back(
        {{"shape", kind.shape},
         {"calls_per_decode", static_cast<double>(kind.calls) / runs},
         {"seconds_per_decode", kind.seconds / runs},
         {"gflops_per_second", kind.seconds > 0 ? kind.flops / kind.seconds / 1e9 : 0}});
  return ", \"gemm_shapes\": " + kinds.dump();
}

}  // namespace

int main(int argc, char** argv) {
  tfm::internal::use_default_openmp_spin(argv);  // as the tfm command (core/openmp_wait.h)
  CLI::App app{"tfm decoding benchmark"};
  std::string preset = "base", beams_text = "4,1", model_dir, outputs_path, precision = "f32",
              device_option = "cpu", activation = "relu";
  int64_t vocab = 32000, batch = 32, src_len = 25, out_len = 25;
  int runs = 2, warmup = 1, threads = 2;
  double alpha = 0.6;
  bool gemm_shapes = false;
  app.add_option("--preset", preset, "model preset");
  app.add_option("--vocab", vocab, "vocabulary size");
  app.add_option("--batch", batch, "source sentences (decoded as one batch)");
  app.add_option("--src-len", src_len, "source tokens per sentence");
  app.add_option("--out-len", out_len, "output tokens per sentence (eos suppressed)");
  app.add_option("--beams", beams_text, "comma-separated beam sizes; 1 = greedy");
  app.add_option("--alpha", alpha, "length penalty");
  app.add_option("--runs", runs, "timed runs per mode");
  app.add_option("--warmup", warmup, "untimed runs per mode first");
  app.add_option("--threads", threads, "threads");
  app.add_option("--precision", precision,
                 "operands of the matrix products: f32, bf16, int8 or int8-bf16");
  app.add_option("--device", device_option, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--activation", activation, "the FFN's activation (the preset's is relu)")
      ->check(CLI::IsMember({"relu", "gelu", "swish"}));
  app.add_option("--model-dir", model_dir, "write the model and the sources here");
  app.add_option("--outputs", outputs_path, "write the outputs here (JSON)");
  app.add_flag("--gemm-shapes", gemm_shapes,
               "also list the timed decodes' products by kind (gemm_shapes: shape, calls, seconds "
               "and GFLOP/s per decode)");
  CLI11_PARSE(app, argc, argv);

  try {
    tfm::internal::set_num_threads(threads);
    tfm::internal::ModelConfig config = tfm::internal::preset(preset);
    config.vocab_size = vocab;
    config.activation = activation;
    tfm::internal::nn::Transformer trained(config);
    trained.init(7);

    std::mt19937 rng(11);
    std::uniform_int_distribution<int32_t> word(4, static_cast<int32_t>(vocab) - 1);
    std::vector<std::vector<int32_t>> sources(static_cast<size_t>(batch));
    std::vector<int32_t> flat;
    for (auto& s : sources) {
      for (int64_t t = 0; t < src_len; ++t) s.push_back(word(rng));
      flat.insert(flat.end(), s.begin(), s.end());
    }
    if (!model_dir.empty()) {
      tfm::internal::save_model_dir(model_dir, config, trained.named_parameters());
      tfm::internal::write_safetensors(
          std::filesystem::path(model_dir) / "sources.safetensors",
          {{"sources", tfm::internal::Tensor::from_ints({batch, src_len}, flat)}});
    }

    // As a translation service would (and `tfm translate` does): an inference model whose weights
    // are packed (and converted) once, before the timed runs, as loading them is. The packing is
    // timed on its own and reported as "pack_seconds".
    tfm::internal::decode::InferenceOptions inference;
    tfm::internal::decode::parse_inference_precision(precision, "--precision", inference);
    const auto pack_start = std::chrono::steady_clock::now();
    inference.device = tfm::internal::ops::parse_device(device_option);
    const tfm::internal::Device device = inference.device;
    const tfm::internal::decode::InferenceModel model(trained, inference);
    const double pack_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - pack_start).count();
    nlohmann::json outputs = nlohmann::json::object();
    for (int64_t beam : parse_beams(beams_text)) {
      tfm::internal::decode::TranslateOptions options;
      options.beam_size = beam;
      options.alpha = alpha;
      options.max_length = out_len;
      options.min_length = out_len;
      options.batch_size = batch;
      std::vector<std::vector<tfm::internal::decode::Hypothesis>> result;
      double total = 0, best = 1e30;
      for (int run = 0; run < warmup + runs; ++run) {
        if (run == warmup) {
          tfm::internal::cpu::reset_gemm_stats();
          if (gemm_shapes) tfm::internal::cpu::set_gemm_shape_stats(true);
          mark_region_times_start();  // bench/region_times.sh
        }
        auto t0 = std::chrono::steady_clock::now();
        result = tfm::internal::decode::translate(model, sources, options);
        tfm::internal::ops::synchronize(device);
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "tfm %s beam %lld run %d: %.3f s%s\n", precision.c_str(),
                     static_cast<long long>(beam), run, seconds, run < warmup ? " (warm-up)" : "");
        if (run < warmup) continue;
        total += seconds;
        best = std::min(best, seconds);
      }
      int64_t tokens = 0;
      nlohmann::json best_outputs = nlohmann::json::array();
      for (const auto& hypotheses : result) {
        tokens += static_cast<int64_t>(hypotheses.at(0).tokens.size());
        best_outputs.push_back(hypotheses.at(0).tokens);
      }
      TFM_CHECK(tokens == batch * out_len, "bench: {} output tokens, expected {}", tokens,
                batch * out_len);
      const std::string mode = (beam == 1 ? "greedy" : "beam" + std::to_string(beam)) +
                               (inference.int8 || inference.precision != tfm::internal::DType::f32
                                    ? "-" + tfm::internal::decode::precision_name(inference)
                                    : "");
      outputs[mode] = best_outputs;
      const double mean = total / runs;
      const double gemm_seconds = tfm::internal::cpu::gemm_stats().seconds / runs;
      std::printf(
          "{\"framework\": \"tfm\", \"device\": \"%s\", \"mode\": \"%s\", \"precision\": \"%s\", "
          "\"preset\": \"%s\", \"activation\": \"%s\", \"vocab\": %lld, "
          "\"batch\": %lld, \"src_len\": %lld, \"out_len\": %lld, \"threads\": %d, \"runs\": %d, "
          "\"warmup\": %d, \"seconds\": %.4f, \"best_seconds\": %.4f, "
          "\"target_tokens_per_second\": %.1f, \"pack_seconds\": %.4f, \"peak_rss_mb\": %.1f, "
          "\"gemm_seconds\": %.4f, \"outside_gemm_fraction\": %.4f%s}\n",
          tfm::internal::ops::describe_device(device).c_str(), mode.c_str(), precision.c_str(),
          preset.c_str(), activation.c_str(), static_cast<long long>(vocab),
          static_cast<long long>(batch), static_cast<long long>(src_len),
          static_cast<long long>(out_len), threads, runs, warmup, mean, best,
          static_cast<double>(tokens) / mean, pack_seconds, peak_rss_mb(), gemm_seconds,
          1.0 - gemm_seconds / mean, shapes_json(gemm_shapes, runs).c_str());
      std::fflush(stdout);
    }
    if (!outputs_path.empty()) std::ofstream(outputs_path) << outputs.dump() << "\n";
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
