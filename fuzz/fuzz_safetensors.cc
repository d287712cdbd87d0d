// Fuzz target: tfm::internal::read_safetensors on arbitrary bytes (header length, JSON header,
// dtypes, shapes, offsets, coverage of the data area, metadata).
#include "fuzz_util.h"
#include "tfm/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = tfm::internal::fuzz::scratch_dir() / "input.safetensors";
  tfm::internal::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    tfm::internal::SafeTensors st = tfm::internal::read_safetensors(file);
    // Touch what was read, as a loader does.
    for (const std::string& name : st.names) (void)st.get(name).nbytes();
  });
  return 0;
}
