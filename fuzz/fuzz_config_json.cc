// Fuzz target: config.json (tfm::internal::load_config: JSON syntax, key names, types, ranges),
// then the parameter list of the configuration it accepted (sizes that overflow are its problem
// too).
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "tfm/model/config.h"
#include "tfm/model/parameters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = tfm::internal::fuzz::scratch_dir() / "config.json";
  tfm::internal::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    tfm::internal::ModelConfig config = tfm::internal::load_config(file);
    (void)tfm::internal::parameter_specs(config);
    (void)tfm::internal::parameter_count(config);
    // What is accepted must survive a round trip.
    if (tfm::internal::config_from_json(tfm::internal::config_to_json(config)) != config) {
      std::fprintf(stderr, "fuzz: config.json round trip changed the configuration\n");
      std::abort();
    }
  });
  return 0;
}
