// Fuzz target: tfm::internal::load_model_dir on a model directory whose config.json and
// model.safetensors both come from the input (split2: 2 bytes of config length, the config, then
// the weights), so that each file and their agreement (names, shapes, dtypes against the
// configuration) are fuzzed.
#include "fuzz_util.h"
#include "tfm/model/model_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path dir = tfm::internal::fuzz::scratch_dir() / "model";
  std::filesystem::create_directories(dir);
  auto [config, weights] = tfm::internal::fuzz::split2(data, size);
  tfm::internal::fuzz::write_file(dir / tfm::internal::kConfigFileName, config);
  tfm::internal::fuzz::write_file(dir / tfm::internal::kWeightsFileName, weights);
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    tfm::internal::LoadedModel model = tfm::internal::load_model_dir(dir);
    for (const auto& [name, tensor] : model.parameters) (void)model.parameter(name).nbytes();
  });
  return 0;
}
