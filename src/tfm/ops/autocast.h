// Mixed precision, as torch.autocast on CPU: inside an AutocastScope(DType::bf16) the products of
// ops::linear (and of the fused output projection with its loss) take bf16 operands and accumulate
// and return f32. Everything else (LayerNorm, softmax, the loss, residual sums, the optimizer and
// the master weights) stays f32. Scopes nest; the innermost decides. The state is per thread.
//
// Weights are converted once per outermost scope and cached: wrap one training step (forward and
// backward, not the optimizer update) or one whole translation in a scope, and never change a
// weight while a scope that has used it is open.
#pragma once

#include <string>

#include "tfm/core/tensor.h"

namespace tfm::cpu {
class PackedWeight;
}

namespace tfm::ops {

class AutocastScope {
 public:
  explicit AutocastScope(DType product_dtype);  // DType::f32 (plain products) or DType::bf16
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  DType previous_;
};

// Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16). Elsewhere oneDNN emulates
// bf16 products, which are then slower than f32 ones.
bool native_bf16_products();

// A precision setting: "f32", "bf16", or "auto" (bf16 where native_bf16_products(), else f32). A
// one-line error for anything else; `what` names the setting.
DType parse_precision(const std::string& name, const char* what = "precision");

// The operand type of products now: f32 outside any scope.
DType autocast_dtype();
// Scopes open now on this thread (0: none).
int autocast_depth();

// x (f32) converted to bf16, a fresh tensor with no autograd link.
Tensor to_bf16(const Tensor& x);

// The bf16 copy of a weight for this scope: converted on first use and kept (with a handle on the
// weight, so its storage cannot be reused by another tensor) until the outermost scope closes.
// Outside any scope it converts without caching.
Tensor cast_weight_bf16(const Tensor& weight);

// The weight [out, in] of y = x W^T packed for fast products in the scope's product type
// (cpu::PackedWeight): packed on first use and kept, like cast_weight_bf16's copies, until the
// outermost scope closes. nullptr outside any scope, where packing for one product would cost more
// than it saves. ops::linear uses it for products that need no gradient.
const cpu::PackedWeight* packed_weight(const Tensor& weight);

}  // namespace tfm::ops
