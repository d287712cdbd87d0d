// The public options that name a choice, as enums with a parser and a name each. The names are
// the command line's (tfm translate --precision, --device) and the Python bindings' (compute_type,
// device), which convert them at the binding; a name that is not one is a tfm::Error.
#pragma once

#include <string_view>

#include "tfm/export.h"

namespace tfm {

// Operand type of the matrix products, fixed when a model is loaded.
enum class Precision {
  f32,        // "f32"
  bf16,       // "bf16": bf16 operands, f32 accumulation
  automatic,  // "auto": bf16 where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), else f32
  int8,       // "int8": the linear layers and the output projection in int8 (7-bit activations on
              // a CPU without AVX512-VNNI or AMX), the rest f32
  int8_bf16,  // "int8-bf16": the same, the rest bf16
};

// "f32", "bf16", "auto", "int8" or "int8-bf16"; another name is a tfm::Error
// "<what>: '<name>' is not a precision (f32, bf16, auto, int8 or int8-bf16)".
TFM_API Precision parse_precision(std::string_view name, std::string_view what = "precision");
TFM_API std::string_view to_string(Precision precision);

// Where a model computes.
enum class ComputeDevice {
  cpu,        // "cpu"
  cuda,       // "cuda" (also read from "gpu"): a build with the CUDA backend and a GPU
  automatic,  // "auto": the GPU when this build and machine have one, else the CPU
};

// "cpu", "cuda" (or "gpu") or "auto"; another name is a tfm::Error
// "unknown device '<name>' (expected cpu, cuda or auto)".
TFM_API ComputeDevice parse_device(std::string_view name);
TFM_API std::string_view to_string(ComputeDevice device);

}  // namespace tfm
