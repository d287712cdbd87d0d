// A model configuration small enough for tests that save, load and average whole models.
#pragma once

#include "tfm/model/config.h"

namespace tfm::internal::testing {

inline ModelConfig small_model_config() {
  ModelConfig c;
  c.layers = 1;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.d_k = 4;
  c.d_v = 4;
  c.vocab_size = 20;
  c.max_positions = 16;
  return c;
}

}  // namespace tfm::internal::testing
