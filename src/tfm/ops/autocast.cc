#include "tfm/ops/autocast.h"

#include <unordered_map>
#include <utility>

#include "tfm/kernels/cpu/convert_cpu.h"

namespace tfm::ops {

namespace {

struct AutocastState {
  DType dtype = DType::f32;
  int depth = 0;
  // Keyed by the weight's first element: the entry keeps the weight itself alive, so no other
  // tensor can be given that address while the entry exists.
  std::unordered_map<const void*, std::pair<Tensor, Tensor>> weights;  // weight, its bf16 copy
};

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

}  // namespace

AutocastScope::AutocastScope(DType product_dtype) : previous_(state().dtype) {
  TFM_CHECK(product_dtype == DType::f32 || product_dtype == DType::bf16,
            "autocast: products in {} are not supported (f32 or bf16)", dtype_name(product_dtype));
  state().dtype = product_dtype;
  ++state().depth;
}

AutocastScope::~AutocastScope() {
  AutocastState& s = state();
  s.dtype = previous_;
  if (--s.depth == 0) s.weights.clear();
}

DType autocast_dtype() {
  return state().dtype;
}

Tensor to_bf16(const Tensor& x) {
  TFM_CHECK(x.defined() && x.dtype() == DType::f32, "to_bf16: {} must be f32",
            x.defined() ? x.describe() : std::string("an undefined tensor"));
  Tensor out = Tensor::empty(x.shape(), DType::bf16);
  cpu::f32_to_bf16(x.data<float>(), out.data<bf16>(), x.numel());
  return out;
}

Tensor cast_weight_bf16(const Tensor& weight) {
  AutocastState& s = state();
  if (s.depth == 0) return to_bf16(weight);
  auto found = s.weights.find(weight.raw());
  if (found != s.weights.end() && found->second.first.shape() == weight.shape()) {
    return found->second.second;
  }
  Tensor copy = to_bf16(weight);
  s.weights[weight.raw()] = {weight, copy};
  return copy;
}

}  // namespace tfm::ops
