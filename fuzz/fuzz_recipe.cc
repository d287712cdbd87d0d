// Fuzz target: the YAML training recipe (tfm::internal::load_recipe: YAML syntax, sections, keys,
// types,
// ${VAR}), then validate() and the model configuration it describes, as `tfm train` does.
#include "fuzz_util.h"
#include "tfm/model/parameters.h"
#include "tfm/train/recipe.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // ${TFM_DATA_DIR} (the recipes in configs/ use it) resolves; other variables may be unset.
  ::setenv("TFM_DATA_DIR", "/data", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = tfm::internal::fuzz::scratch_dir() / "recipe.yaml";
  tfm::internal::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    tfm::internal::TrainRecipe recipe = tfm::internal::load_recipe(file);
    tfm::internal::validate(recipe);
    (void)tfm::internal::parameter_specs(recipe.model_config(recipe.vocab_size));
  });
  return 0;
}
