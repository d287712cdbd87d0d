#include "tfm/ops/autocast.h"

#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"

namespace tfm::ops {

namespace {

struct AutocastState {
  DType dtype = DType::f32;
  int depth = 0;
  // Keyed by the weight's first element: the entry keeps the weight itself alive, so no other
  // tensor can be given that address while the entry exists.
  std::unordered_map<const void*, std::pair<Tensor, Tensor>> weights;  // weight, its bf16 copy
  // Packed weights per (first element, rows, product type): the weight itself (kept alive, as
  // above), its packed copy. The row count tells a block of rows from the matrix it starts.
  std::map<std::tuple<const void*, int64_t, DType>,
           std::pair<Tensor, std::unique_ptr<cpu::PackedWeight>>>
      packed;
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
  if (--s.depth == 0) {
    s.weights.clear();
    s.packed.clear();
  }
}

bool native_bf16_products() {
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
}

DType parse_precision(const std::string& name, const char* what) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "auto") return native_bf16_products() ? DType::bf16 : DType::f32;
  fail("{}: '{}' is not a precision (f32, bf16 or auto)", what, name);
}

DType autocast_dtype() {
  return state().dtype;
}

int autocast_depth() {
  return state().depth;
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

const cpu::PackedWeight* packed_weight(const Tensor& weight) {
  AutocastState& s = state();
  if (s.depth == 0) return nullptr;
  TFM_CHECK(weight.defined() && weight.dtype() == DType::f32 && weight.rank() == 2,
            "packed_weight: {} must be an f32 matrix",
            weight.defined() ? weight.describe() : std::string("an undefined tensor"));
  auto& entry = s.packed[{weight.raw(), weight.dim(0), s.dtype}];
  if (!entry.second || entry.first.shape() != weight.shape()) {
    entry = {weight, std::make_unique<cpu::PackedWeight>(weight.data<float>(), weight.dim(0),
                                                         weight.dim(1), s.dtype)};
  }
  return entry.second.get();
}

}  // namespace tfm::ops
