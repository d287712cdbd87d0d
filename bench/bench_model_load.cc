// What the integrity checks cost when loading a model: load_model_dir of a preset's model
// directory (random weights) written by tfm (a CRC-32 per tensor, verified on load, plus the
// finite-weights scan) and of the same file without the checksums (as another tool writes it:
// only the finite scan), alternated, each timed --repeats times from the page cache. Prints one
// JSON line per variant with the median, min and max in milliseconds.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tfm/core/threading.h"
#include "tfm/decode/inference_model.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"

namespace fs = std::filesystem;

namespace {

// Rewrites a safetensors file without the "crc32:" keys of its __metadata__.
void strip_checksums(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(bytes[i]);
  auto header = nlohmann::ordered_json::parse(bytes.substr(8, header_bytes));
  auto& metadata = header["__metadata__"];
  for (auto it = metadata.begin(); it != metadata.end();)
    it = it.key().starts_with("crc32:") ? metadata.erase(it) : std::next(it);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(text.size() >> (8 * i));
  std::ofstream(to, std::ios::binary) << out << text << bytes.substr(8 + header_bytes);
}

double milliseconds_to_load(const fs::path& dir, bool expect_verified) {
  const auto start = std::chrono::steady_clock::now();
  tfm::internal::LoadedModel model = tfm::internal::load_model_dir(dir);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (model.checksums_verified != expect_verified) std::abort();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_model_dir with and without per-tensor checksums"};
  std::string preset = "base";
  int64_t vocab = 37000, repeats = 7, threads = 0;
  std::string work = "build/bench-model-load";
  app.add_option("--preset", preset);
  app.add_option("--vocab", vocab);
  app.add_option("--repeats", repeats);
  app.add_option("--threads", threads, "0: the OpenMP default");
  app.add_option("--work-dir", work);
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) tfm::internal::set_num_threads(static_cast<int>(threads));

  tfm::internal::ModelConfig config = tfm::internal::preset(preset);
  config.vocab_size = vocab;
  const fs::path checked = fs::path(work) / "checked", plain = fs::path(work) / "plain";
  tfm::internal::nn::Transformer model(config);
  model.init(1);
  tfm::internal::save_model_dir(checked, config, model.named_parameters());
  fs::create_directories(plain);
  fs::copy_file(checked / tfm::internal::kConfigFileName, plain / tfm::internal::kConfigFileName,
                fs::copy_options::overwrite_existing);
  strip_checksums(checked / tfm::internal::kWeightsFileName,
                  plain / tfm::internal::kWeightsFileName);

  std::vector<double> with, without;
  milliseconds_to_load(checked, true);  // warm the page cache
  milliseconds_to_load(plain, false);
  for (int64_t r = 0; r < repeats; ++r) {
    with.push_back(milliseconds_to_load(checked, true));
    without.push_back(milliseconds_to_load(plain, false));
  }
  // Building the model to translate with, from the loaded weights: the constructor that adopts
  // them (shares their storage: no copy, no random initialisation) against random initialisation
  // then load() (a copy), the old path.
  std::vector<double> build_loaded, build_random_then_load;
  const tfm::internal::LoadedModel loaded = tfm::internal::load_model_dir(checked);
  for (int64_t r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    {
      const tfm::internal::nn::Transformer built(loaded.config, loaded.parameters);
      if (!built.output_embedding().same_storage(loaded.parameter("embedding.weight")))
        std::abort();
    }
    build_loaded.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    start = std::chrono::steady_clock::now();
    {
      tfm::internal::nn::Transformer built(loaded.config);
      built.load(loaded.parameters);
    }
    build_random_then_load.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  for (auto* times : {&build_loaded, &build_random_then_load}) {
    std::sort(times->begin(), times->end());
    nlohmann::json line = {
        {"preset", preset},
        {"build", times == &build_loaded ? "Transformer(config, weights)" : "init(1) + load()"},
        {"median_ms", (*times)[times->size() / 2]},
        {"min_ms", times->front()},
        {"max_ms", times->back()}};
    std::printf("%s\n", line.dump().c_str());
  }
  // The whole load of a model to translate with (decode::load_inference_model): read and check the
  // file, build the Transformer from its weights, pack every product's weight in the precision.
  for (const tfm::internal::DType precision :
       {tfm::internal::DType::f32, tfm::internal::DType::bf16}) {
    std::vector<double> times;
    for (int64_t r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      { const auto inference = tfm::internal::decode::load_inference_model(checked, {precision}); }
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(times.begin(), times.end());
    nlohmann::json line = {{"preset", preset},
                           {"inference_model", std::string(tfm::internal::dtype_name(precision))},
                           {"median_ms", times[times.size() / 2]},
                           {"min_ms", times.front()},
                           {"max_ms", times.back()}};
    std::printf("%s\n", line.dump().c_str());
  }
  const double bytes =
      static_cast<double>(fs::file_size(checked / tfm::internal::kWeightsFileName));
  for (auto* times : {&with, &without}) {
    std::sort(times->begin(), times->end());
    nlohmann::json line = {{"preset", preset},
                           {"weights_mb", bytes / 1e6},
                           {"checksums", times == &with},
                           {"median_ms", (*times)[times->size() / 2]},
                           {"min_ms", times->front()},
                           {"max_ms", times->back()},
                           {"repeats", repeats}};
    std::printf("%s\n", line.dump().c_str());
  }
  fs::remove_all(work);
  return 0;
}
