// Fuzz target: tfm::internal::load_checkpoint on a checkpoint whose model directory is a valid tiny
// model (written once at start-up) and whose state.json and optimizer.safetensors come from the
// input (split2: 2 bytes of state.json length, state.json, then optimizer.safetensors).
#include "fuzz_util.h"
#include "tfm/model/model_dir.h"
#include "tfm/train/checkpoint.h"

namespace {

const std::filesystem::path& checkpoint_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = tfm::internal::fuzz::scratch_dir() / "checkpoints" / "step-000000010";
    const tfm::internal::ModelConfig config = tfm::internal::fuzz::tiny_config();
    tfm::internal::save_model_dir(d, config, tfm::internal::fuzz::tiny_parameters(config));
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path& dir = checkpoint_dir();
  auto [state, optimizer] = tfm::internal::fuzz::split2(data, size);
  tfm::internal::fuzz::write_file(dir / "state.json", state);
  tfm::internal::fuzz::write_file(dir / "optimizer.safetensors", optimizer);
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    tfm::internal::Checkpoint c = tfm::internal::load_checkpoint(dir);
    (void)c.state.extra.dump();
  });
  // What resume does: the newest checkpoint that loads, a damaged one reported, never thrown.
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    (void)tfm::internal::load_latest_checkpoint(dir.parent_path(), [](const std::string&) {});
  });
  // A damaged checkpoint is moved aside as step-N.damaged: put it back for the next input.
  std::filesystem::path aside = dir;
  aside += ".damaged";
  if (!std::filesystem::exists(dir) && std::filesystem::exists(aside))
    std::filesystem::rename(aside, dir);
  return 0;
}
