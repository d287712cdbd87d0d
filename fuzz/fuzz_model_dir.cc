// Fuzz target: tfm::load_model_dir on a model directory whose config.json and model.safetensors
// both come from the input (split2: 2 bytes of config length, the config, then the weights), so
// that each file and their agreement (names, shapes, dtypes against the configuration) are fuzzed.
#include "fuzz_util.h"
#include "tfm/model/model_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path dir = tfm::fuzz::scratch_dir() / "model";
  std::filesystem::create_directories(dir);
  auto [config, weights] = tfm::fuzz::split2(data, size);
  tfm::fuzz::write_file(dir / tfm::kConfigFileName, config);
  tfm::fuzz::write_file(dir / tfm::kWeightsFileName, weights);
  tfm::fuzz::expect_only_tfm_errors([&] {
    tfm::LoadedModel model = tfm::load_model_dir(dir);
    for (const auto& [name, tensor] : model.parameters) (void)model.parameter(name).nbytes();
  });
  return 0;
}
