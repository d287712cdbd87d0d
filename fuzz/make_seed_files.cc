// Writes the files fuzz/make_seeds.sh packs into the seed corpus: tiny model directories (two
// configurations covering every parameter kind), a checkpoint, and safetensors files of each dtype.
// Usage: make_seed_files <output folder>
#include <cstdio>

#include "fuzz_util.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/train/adam.h"
#include "tfm/train/checkpoint.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seed_files <output folder>\n");
    return 2;
  }
  const fs::path out = argv[1];
  using namespace tfm;

  const ModelConfig tiny = fuzz::tiny_config();
  save_model_dir(out / "model", tiny, fuzz::tiny_parameters(tiny));

  ModelConfig other = tiny;  // the other branches: learned positions, pre-norm, attention biases
  other.positional = "learned";
  other.norm = "pre";
  other.attention_bias = true;
  other.max_positions = 4;
  save_model_dir(out / "model-learned-pre-bias", other, fuzz::tiny_parameters(other));

  auto parameters = fuzz::tiny_parameters(tiny);
  std::vector<Tensor> tensors, m, v;
  for (auto& [name, tensor] : parameters) {
    tensor.set_requires_grad(true);
    tensors.push_back(tensor);
    m.push_back(Tensor::full(tensor.shape(), 0.001f));
    v.push_back(Tensor::full(tensor.shape(), 0.0001f));
  }
  Adam adam(tensors);
  adam.restore(10, m, v);
  TrainingState state;
  state.step = 10;
  state.epoch = 1;
  state.batch_in_epoch = 3;
  state.seed = 1;
  state.extra = {{"elapsed_s", 1.5}, {"batcher_fingerprint", 1234567}};
  save_checkpoint(out / "checkpoints", tiny, parameters, adam, state);

  write_safetensors(out / "dtypes.safetensors",
                    {{"f", Tensor::from_floats(Shape{2, 2}, {1, -2, 3.5f, 0})},
                     {"b", Tensor::zeros(Shape{3}, DType::bf16)},
                     {"i", Tensor::from_ints(Shape{2}, {7, -1})},
                     {"scalar", Tensor::from_floats(Shape(), {4})}},
                    {{"format", "pt"}, {"steps", "3"}});
  write_safetensors(out / "empty.safetensors", {});
  return 0;
}
