// Mixed precision, as torch.autocast on CPU, with the product type as a value: ops::linear,
// ops::linear_relu and ops::output_cross_entropy take it as an argument (ops::ProductOptions,
// nn::ForwardContext::precision()). With bf16 their products take bf16 operands and accumulate and
// return f32; everything else (LayerNorm, softmax, the loss, residual sums, the optimizer and the
// master weights) stays f32. There is no per-thread state: two threads may use two precisions.
#pragma once

#include <string>

#include "tfm/core/tensor.h"

namespace tfm::internal::ops {

// Whether this CPU multiplies bf16 faster than f32 at the instruction-set level in use
// (kernels/cpu/isa_dispatch.h): oneDNN on AMX tiles, or AVX512-BF16 unless its vdpbf16ps measured
// no faster than its FMA (cpu::vdpbf16ps_to_fma_rate(): an Intel Xeon without AMX, where bf16
// products are widened to f32 and run at f32's speed). Elsewhere oneDNN emulates bf16 products,
// which are then slower than f32 ones.
bool native_bf16_products();
// The same for `device`: the CPU's rule above, or the device's own (a GPU with bf16 tensor cores).
bool native_bf16_products(Device device);

// The one parser of precision names (the CLI's --precision, training.precision, the benchmarks):
// "f32", "bf16", or "auto" (bf16 where native_bf16_products(device), else f32: the device that
// multiplies decides). A one-line error for anything else; `what` names the setting.
DType parse_precision(const std::string& name, const char* what = "precision",
                      Device device = Device::cpu);

// How a CPU runs products of `precision`, for a log line: "" for f32 or another device; for bf16
// " (widened to f32: this CPU's vdpbf16ps does 0.51x the multiply-adds of its FMA)" where
// cpu::bf16_products_widened(), " (widened to f32: this CPU has no bf16 products)" where oneDNN
// has none (cpu::onednn_multiplies_bf16()), else "".
std::string describe_products(DType precision, Device device);

// `tfm info --cpu`: the CPU, the instruction-set levels this build has and which is in use and why
// (kernels/cpu/isa_dispatch.h), oneDNN's instruction set, and the measured rate that decides
// `precision: auto` on the CPU. Lines of text, each ending in a newline.
std::string describe_cpu();

// x (f32) converted to bf16, a fresh tensor with no autograd link.
Tensor to_bf16(const Tensor& x);

// How many to_bf16 calls ran in this process, and how many elements they converted (both only
// grow; take differences). Copies that producers write themselves (the cross-entropy gradient's,
// linear_relu's backward) are not counted: they are no separate pass.
struct Bf16Conversions {
  int64_t calls = 0;
  int64_t elements = 0;
};
Bf16Conversions bf16_conversions();

}  // namespace tfm::internal::ops
