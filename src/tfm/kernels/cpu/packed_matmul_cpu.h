// Products with a weight packed once: y = x W^T for inference.
//
// oneDNN's matmul reads its weights in a blocked layout (for AVX-512, 16 x 64 tiles, bf16 pairs
// interleaved). Given a plain W it repacks W on every call: a pass over all of W that costs about
// as much as the product itself when x has few rows, as in a decoding step (32 to 128 rows against
// 512 x 2048 weights). PackedWeight does that once (converting to bf16 in the same pass when
// asked); ops::PackedWeight (ops/packed_weight.h) holds one, packed when an inference model is
// loaded, and ops::linear multiplies with it for products without a gradient.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tfm/core/dtype.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/cpu/quantize_cpu.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

class PackedWeight final : public kernels::PackedForm {
 public:
  // Packs w, f32 row-major [n, k] (n output features), into `dtype`: f32; bf16 (rounded to
  // nearest even, as f32_to_bf16); or i8 (each row quantised with its own scale, quantize_cpu.h).
  PackedWeight(const float* w, int64_t n, int64_t k, DType dtype);

  int64_t out_features() const override { return n_; }
  int64_t in_features() const override { return k_; }
  DType dtype() const override { return dtype_; }
  size_t bytes() const override {
    return storage_.nbytes() + (int8_panels_.defined() ? int8_panels_.nbytes() : 0);
  }
  std::string describe() const override;

  struct Layout;  // oneDNN's memory descriptor of the packed weight
  const Layout& layout() const { return *layout_; }
  const void* data() const { return storage_.raw(); }
  // i8 only: each row's scale and the sum of its quantised values, [n].
  const float* scales() const { return scales_.data<float>(); }
  const int32_t* row_sums() const { return row_sums_.data<int32_t>(); }
  // bf16 only: whether the weight is kept as f32 (its values rounded to bf16) and multiplied as
  // f32, x widened, because bf16_products_widened() (blocked_gemm_cpu.h): the FMA outruns
  // vdpbf16ps on this CPU; or because oneDNN has no bf16 products here (onednn_multiplies_bf16()).
  // The products are the same; the memory is f32's.
  bool widened() const { return widened_; }
  // f32, or bf16 widened: whether oneDNN chose the layout that our panel kernel reads
  // (panel_matmul_cpu.h), so that the products of few rows can run there.
  bool panels() const { return panels_; }
  // i8: the weight in our int8 kernel's panels (panel_int8_cpu.h) for the products of few rows,
  // int8_panel_groups() groups a panel: on a CPU without AVX512-VNNI a second copy of our own; with
  // VNNI oneDNN's copy itself, where its layout is those panels (and the build has the kernel with
  // vpdpbusd); null elsewhere.
  const int8_t* int8_panels() const {
    if (int8_panels_.defined()) return static_cast<const int8_t*>(int8_panels_.raw());
    return int8_reads_onednn_copy_ ? static_cast<const int8_t*>(storage_.raw()) : nullptr;
  }
  int64_t int8_panel_groups() const { return int8_panel_groups_; }

 private:
  int64_t n_ = 0, k_ = 0;
  DType dtype_ = DType::f32;
  bool panels_ = false;
  bool widened_ = false;
  std::shared_ptr<const Layout> layout_;
  Tensor storage_;
  Tensor scales_, row_sums_;
  Tensor int8_panels_;
  bool int8_reads_onednn_copy_ = false;
  int64_t int8_panel_groups_ = 0;
};

// How this kernel set multiplies int8 products on this CPU, for `tfm info --cpu`: the activations'
// bits and which products run in our panel kernel (panel_int8_cpu.h) and which in oneDNN's.
std::string describe_int8_products();

// y [m, n] (f32, row-major) = x [m, k] W^T (+ bias [n], f32), then `post` (ReLU, swish or GELU: in
// our panel kernels' stores, after oneDNN's products as a second pass, the same bits); x row-major
// in w.dtype(), or f32 for an i8 weight (quantised per row here). Runs on the calling thread alone
// inside an OpenMP parallel region (oneDNN's rule), else on all threads.
void packed_linear(const void* x, int64_t m, const PackedWeight& w, const float* bias, float* y,
                   kernels::PostOp post = kernels::PostOp::none);

// packed_linear for 1 to 4 weights of the same in_features on the same x (no ReLU): y[j] = x
// weights[j]^T + biases[j] (a bias may be null). Where every weight is i8 and our panel kernel
// takes each, x is quantised once and the products share one parallel region
// (panel_linears_quantising: a decoding step's queries, keys and values); else each runs as
// packed_linear. The same bits as packed_linear a weight.
void packed_linears(const void* x, int64_t m, const PackedWeight* const* weights,
                    const float* const* biases, float* const* y, int count);

// oneDNN's product alone (f32 or bf16 weight, no ReLU), where packed_linear may choose the panel
// kernel: for benchmarks and tests that compare the two.
void packed_linear_onednn(const void* x, int64_t m, const PackedWeight& w, const float* bias,
                          float* y);

// oneDNN's s32 product alone for an i8 weight, u quantised (where packed_linear_quantized may
// choose the int8 panel kernel): for benchmarks and tests that compare the two.
void packed_product_u8s8_onednn(const uint8_t* u, int64_t m, const PackedWeight& w, int32_t* acc);

// The same for an i8 weight with x already quantised (quantize_rows_u8 with zero_point: u [m, k]
// and its row scales), for several products with one x (the output projection's blocks).
void packed_linear_quantized(const uint8_t* u, const float* x_scales, int64_t m,
                             const PackedWeight& w, const float* bias, float* y,
                             kernels::PostOp post = kernels::PostOp::none,
                             int32_t zero_point = activation_zero_point());

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
