#include "tfm/kernels/cpu/packed_matmul_cpu.h"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/panel_int8_cpu.h"
#include "tfm/kernels/cpu/panel_matmul_cpu.h"
#include "tfm/kernels/cpu/primitive_cache.h"
#include "tfm/kernels/cpu/quantize_cpu.h"
#include "tfm/kernels/cpu/scratch.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

struct PackedWeight::Layout {
  dnnl::memory::desc md;  // of W^T, [k, n]
};

namespace {

using dnnl::memory;
using kernels::PostOp;

// The weight's type in oneDNN.
memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return memory::data_type::f32;
    case DType::bf16:
      return memory::data_type::bf16;
    case DType::i8:
      return memory::data_type::s8;
    case DType::i32:
      break;
  }
  fail("packed weight: {} is not supported (f32, bf16 or i8)", dtype_name(dtype));
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// The descriptors of y [m, n] = x [m, k] W^T + bias, with W^T in layout `weights`. An int8 product
// multiplies u8 activations with s8 weights into s32 (quantize_cpu.h), with no bias: the
// dequantising epilogue adds it.
struct ProductDescs {
  memory::desc x, y, bias;
};

ProductDescs product_descs(int64_t m, int64_t n, int64_t k, DType dtype) {
  const bool int8 = dtype == DType::i8;
  ProductDescs d;
  d.x =
      memory::desc({m, k}, int8 ? memory::data_type::u8 : dnnl_type(dtype), memory::format_tag::ab);
  d.y = memory::desc({m, n}, int8 ? memory::data_type::s32 : memory::data_type::f32,
                     memory::format_tag::ab);
  d.bias = memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
  return d;
}

dnnl::matmul::primitive_desc product_pd(const ProductDescs& d, const memory::desc& weights,
                                        bool bias) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto desc =
      bias ? dnnl::matmul::desc(d.x, weights, d.bias, d.y) : dnnl::matmul::desc(d.x, weights, d.y);
  return dnnl::matmul::primitive_desc(desc, attr, engine());
}

// Primitives per (m, n, k, dtype, bias, thread count): the packed layout is a function of (n, k,
// dtype); oneDNN fixes a primitive's thread partitioning when it is created, so a decoding worker
// with its own thread count gets primitives of its own.
struct Key {
  int64_t m, n, k;
  DType dtype;
  bool bias;
  int threads;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    uint64_t h = static_cast<uint64_t>(key.m) * 0x9e3779b97f4a7c15ull;
    h ^= static_cast<uint64_t>(key.n) + 0x7f4a7c159e3779b9ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(key.k) + 0x94d049bb133111ebull + (h << 6) + (h >> 2);
    h ^= (static_cast<uint64_t>(key.dtype) << 1 | (key.bias ? 1u : 0u)) + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(key.threads) + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

struct Product {
  dnnl::matmul primitive;
  ProductDescs descs;
  size_t scratchpad_bytes = 0;
};

// Decoding asks for every row count from 1 up to sources x beam, the encoder for every sentences x
// padded length: a bounded cache (primitive_cache.h).
Product product(const Key& key, const memory::desc& weights) {
  static PrimitiveCache<Key, Product, KeyHash> cache(256);
  return cache.get(key, [&] {
    Product p;
    p.descs = product_descs(key.m, key.n, key.k, key.dtype);
    auto pd = product_pd(p.descs, weights, key.bias);
    p.scratchpad_bytes = pd.scratchpad_desc().get_size();
    p.primitive = dnnl::matmul(pd);
    return p;
  });
}

}  // namespace

std::string PackedWeight::describe() const {
  return fmt::format("{}[{}, {}] packed for the CPU", dtype_name(dtype_), n_, k_);
}

namespace {

// Whether our int8 kernel multiplies with vpdpbusd on oneDNN's own packed copy here: 8-bit
// activations (VNNI), not on AMX tiles (oneDNN's products there), and a kernel set with vpdpbusd.
// The weight's layout is checked besides (PackedWeight).
bool int8_kernel_on_onednn_copy() {
  return native_int8_products() && !onednn_uses_amx() &&
         int8_panel_kernel_exact_for(kNativeZeroPoint);
}

}  // namespace

PackedWeight::PackedWeight(const float* w, int64_t n, int64_t k, DType dtype)
    : n_(n), k_(k), dtype_(dtype) {
  TFM_CHECK(n > 0 && k > 0, "packed weight: [{}, {}] is empty", n, k);
  // bf16 products where the FMA outruns vdpbf16ps (blocked_gemm_cpu.h, Bf16Products::widened), or
  // where oneDNN has no bf16 products (matmul_cpu.h): the weight rounded to bf16 and kept in f32,
  // multiplied as an f32 weight; packed_linear widens x.
  std::vector<float> rounded;
  if (dtype == DType::bf16 && (bf16_products_widened() || !onednn_multiplies_bf16())) {
    widened_ = true;
    rounded.resize(static_cast<size_t>(n * k));
    for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = bf16_to_float(float_to_bf16(w[i]));
    w = rounded.data();
    dtype = DType::f32;
  }
  // The layout oneDNN picks for a typical decoding product; it depends on n, k and the type only
  // (the same for every row count), so it serves every m.
  constexpr int64_t kTypicalRows = 128;
  const ProductDescs descs = product_descs(kTypicalRows, n, k, dtype);
  const memory::desc any({k, n}, dnnl_type(dtype), memory::format_tag::any);
  auto layout = std::make_shared<Layout>();
  try {
    layout->md = product_pd(descs, any, false).weights_desc();
    panels_ =
        dtype == DType::f32 && panel_kernel_available() &&
        layout->md == memory::desc({k, n}, memory::data_type::f32, memory::format_tag::BA16a64b);
    // int8: W's rows quantised (quantize_cpu.h), their scales and sums kept for the epilogue.
    std::vector<int8_t> quantised;
    bool int8_reads_onednn_copy = false;
    if (dtype == DType::i8) {
      quantised.resize(static_cast<size_t>(n * k));
      scales_ = Tensor::empty({n});
      row_sums_ = Tensor::empty({n}, DType::i32);
      quantize_rows_s8(w, n, k, quantised.data(), scales_.data<float>());
      int32_t* sums = row_sums_.data<int32_t>();
      for (int64_t j = 0; j < n; ++j) {
        int32_t sum = 0;
        for (int64_t i = 0; i < k; ++i) sum += quantised[static_cast<size_t>(j * k + i)];
        sums[j] = sum;
      }
      // Without VNNI, oneDNN packs a plain int8 weight again in every product: products of few
      // rows read our own packed copy instead (panel_int8_cpu.h).
      if (!native_int8_products() && int8_panel_kernel_available()) {
        int8_panels_ = Tensor::empty({(int8_panel_bytes(n, k) + 3) / 4});  // in 4-byte elements
        pack_int8_panels(quantised.data(), n, k, static_cast<int8_t*>(int8_panels_.raw()));
        int8_panel_groups_ = cpu::int8_panel_groups(k);
      }
      // With VNNI our kernel reads oneDNN's own copy where its layout is BA16a64b4a.
      int8_reads_onednn_copy =
          int8_kernel_on_onednn_copy() &&
          layout->md == memory::desc({k, n}, memory::data_type::s8, memory::format_tag::BA16a64b4a);
      if (int8_reads_onednn_copy) int8_panel_groups_ = onednn_int8_panel_groups(k);
    }
    // W [n, k] row-major is W^T [k, n] with strides {1, k}.
    const memory::desc plain({k, n},
                             dtype == DType::i8 ? memory::data_type::s8 : memory::data_type::f32,
                             memory::dims{1, k});
    const auto bytes = static_cast<int64_t>(layout->md.get_size());
    storage_ = Tensor::empty({(bytes + 3) / 4});  // raw bytes, in 4-byte elements
    void* source =
        dtype == DType::i8 ? static_cast<void*>(quantised.data()) : const_cast<float*>(w);
    memory from(plain, engine(), source);
    memory to(layout->md, engine(), storage_.raw());
    dnnl::reorder(from, to).execute(stream(), from, to);
    stream().wait();
    int8_reads_onednn_copy_ = int8_reads_onednn_copy;
  } catch (const dnnl::error& e) {
    fail("packed weight [{}, {}] in {}: oneDNN failed: {}", n, k, dtype_name(dtype_), e.what());
  }
  layout_ = std::move(layout);
}

namespace {

double product_flops(int64_t m, const PackedWeight& w) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(w.out_features()) *
         static_cast<double>(w.in_features());
}

// Counts a product's time and work with the others' (record_gemm), whichever kernel ran it; its
// kind in gemm_shape_stats() is "packed <weight type> MxNxK <kernel>".
class GemmTimer {
 public:
  GemmTimer(int64_t m, const PackedWeight& w, const char* kernel) : m_(m), w_(w), kernel_(kernel) {}
  ~GemmTimer() {
    record_gemm(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
                product_flops(m_, w_), [&] {
                  return fmt::format("packed {} {}x{}x{} {}", dtype_name(w_.dtype()), m_,
                                     w_.out_features(), w_.in_features(), kernel_);
                });
  }
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

 private:
  int64_t m_;
  const PackedWeight& w_;
  const char* kernel_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// y = x W^T (+ bias) in oneDNN; for an int8 weight, y receives the s32 product.
void run_product(const void* x, int64_t m, const PackedWeight& w, const float* bias, void* y) {
  const GemmTimer timer(m, w, "onednn");
  const Key key{m,
                w.out_features(),
                w.in_features(),
                w.widened() ? DType::f32 : w.dtype(),
                bias != nullptr,
                omp_get_max_threads()};
  Product p;
  try {
    p = product(key, w.layout().md);
  } catch (const dnnl::error& e) {
    fail("packed linear: oneDNN has no matmul for x [{}, {}] @ packed {}[{}, {}]^T: {}", m,
         w.in_features(), dtype_name(w.dtype()), w.out_features(), w.in_features(), e.what());
  }
  dnnl::engine& eng = engine();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(p.descs.x, eng, const_cast<void*>(x))},
      {DNNL_ARG_WEIGHTS, memory(w.layout().md, eng, const_cast<void*>(w.data()))},
      {DNNL_ARG_DST, memory(p.descs.y, eng, y)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.descs.bias, eng, const_cast<float*>(bias)));
  void* scratchpad = nullptr;
  if (p.scratchpad_bytes > 0) {
    scratchpad = CachingAllocator::cpu().allocate(p.scratchpad_bytes);
    args.emplace(DNNL_ARG_SCRATCHPAD, memory({{static_cast<int64_t>(p.scratchpad_bytes)},
                                              memory::data_type::u8,
                                              memory::format_tag::a},
                                             eng, scratchpad));
  }
  try {
    p.primitive.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    if (scratchpad) CachingAllocator::cpu().release(scratchpad, p.scratchpad_bytes);
    fail("packed linear: oneDNN matmul failed for x [{}, {}]: {}", m, w.in_features(), e.what());
  }
  if (scratchpad) CachingAllocator::cpu().release(scratchpad, p.scratchpad_bytes);
}

// x itself, or for a widened bf16 weight x's bf16 widened (exactly) into this thread's buffer, for
// the f32 product.
const void* widened_if_needed(const void* x, int64_t m, const PackedWeight& w) {
  if (!w.widened()) return x;
  thread_local std::vector<float> widened;
  float* x_f32 = scratch(widened, static_cast<size_t>(m * w.in_features()));
  bf16_to_f32(static_cast<const bf16*>(x), x_f32, m * w.in_features());
  return x_f32;
}

// The most rows of x for which packed_linear takes the panel kernel. With weights streaming from
// memory, as in a decoding step, its prefetching into L2 makes it faster than oneDNN up to 128
// rows and no faster beyond (gemm_bench decoder_step_f32; the measurements:
// docs/journal/2026-11-26-panel-kernel-int8-without-vnni.md,
// docs/journal/2026-11-27-decode-weights-streamed.md).
constexpr int64_t kPanelMaxRows = 128;

// Whether the f32 panel kernel takes the product of m rows by w (f32, or bf16 widened to f32).
bool panel_kernel_takes(int64_t m, const PackedWeight& w) {
  return w.panels() && m <= kPanelMaxRows;
}

// The same for the int8 panel kernel (a CPU without VNNI, where oneDNN packs the weight again in
// every call): faster than oneDNN up to 64 rows in gemm_bench's packed_product_i8
// (docs/journal/2026-11-26-panel-kernel-int8-without-vnni.md, "int8 without VNNI").
constexpr int64_t kInt8PanelMaxRows = 64;

// With VNNI, where the kernel reads oneDNN's own copy of the weight: as fast as oneDNN's brgemm at
// 128 rows and faster below, with the dequantisation in the same pass
// (docs/journal/2026-12-04-int8-panels-with-vnni.md).
constexpr int64_t kVnniPanelMaxRows = 128;

// Whether our int8 kernel takes the product of m rows of activations quantised with zero_point by
// w: a weight in panels, few rows, and sums exact for those activations.
bool int8_kernel_takes(int64_t m, const PackedWeight& w, int32_t zero_point) {
  const int64_t max_rows = native_int8_products() ? kVnniPanelMaxRows : kInt8PanelMaxRows;
  return w.int8_panels() && m <= max_rows && int8_panel_kernel_exact_for(zero_point);
}

// This thread's buffers for m rows of k quantised activations and their scales (one product at a
// time).
std::pair<uint8_t*, float*> activation_buffers(int64_t m, int64_t k) {
  thread_local std::vector<uint8_t> u_buffer;
  thread_local std::vector<float> scales_buffer;
  return {scratch(u_buffer, static_cast<size_t>(m * k)),
          scratch(scales_buffer, static_cast<size_t>(m))};
}

Int8Epilogue int8_epilogue(const PackedWeight& w, const float* x_scales, const float* bias,
                           PostOp post, int32_t zero_point) {
  Int8Epilogue e;
  e.x_scales = x_scales;
  e.w_scales = w.scales();
  e.w_row_sums = w.row_sums();
  e.bias = bias;
  e.post = post;
  e.zero_point = zero_point;
  return e;
}

}  // namespace

std::string describe_int8_products() {
  // The conditions of PackedWeight's constructor and packed_linear_quantized.
  if (!native_int8_products()) {
    if (!int8_panel_kernel_available())
      return "7-bit activations (oneDNN without VNNI here): oneDNN's products";
    return fmt::format(
        "7-bit activations (oneDNN without VNNI here): up to {} rows in our panel kernel "
        "(vpmaddubsw) on its own packed copy, more in oneDNN's",
        kInt8PanelMaxRows);
  }
  if (onednn_uses_amx()) return "8-bit activations: oneDNN's products (AMX tiles)";
  if (!int8_kernel_on_onednn_copy())
    return "8-bit activations: oneDNN's products (the kernels in use have no vpdpbusd)";
  return fmt::format(
      "8-bit activations (AVX512-VNNI): up to {} rows in our panel kernel (vpdpbusd) on oneDNN's "
      "packed copy, more in oneDNN's",
      kVnniPanelMaxRows);
}

namespace {

// `post` as a second pass over y [m, n], for the products that cannot apply it in their stores.
void post_pass(PostOp post, float* y, int64_t m, int64_t n) {
  if (post == PostOp::relu) cpu::relu(y, y, m * n);
  if (post == PostOp::swish) cpu::swish(y, y, m * n);
  if (post == PostOp::gelu) cpu::gelu(y, y, m * n);
}

}  // namespace

void packed_linear(const void* x, int64_t m, const PackedWeight& w, const float* bias, float* y,
                   PostOp post) {
  if (m == 0) return;
  if (w.dtype() == DType::i8) {
    // The activations quantised per row: by our kernel's threads in its own parallel region where
    // it takes the product.
    const auto [u, scales] = activation_buffers(m, w.in_features());
    const int32_t zero_point = activation_zero_point();
    if (int8_kernel_takes(m, w, zero_point)) {
      const GemmTimer timer(m, w, "panel");
      panel_linear_quantising(static_cast<const float*>(x), m, w.out_features(), w.in_features(),
                              w.int8_panels(), w.int8_panel_groups(),
                              int8_epilogue(w, nullptr, bias, post, zero_point), u, scales, y);
      return;
    }
    quantize_rows_u8(static_cast<const float*>(x), m, w.in_features(), u, scales, zero_point);
    packed_linear_quantized(u, scales, m, w, bias, y, post, zero_point);
    return;
  }
  x = widened_if_needed(x, m, w);
  if (panel_kernel_takes(m, w)) {
    const GemmTimer timer(m, w, "panel");
    panel_linear_f32(static_cast<const float*>(x), m, w.out_features(), w.in_features(),
                     static_cast<const float*>(w.data()), bias, post, y);
    return;
  }
  run_product(x, m, w, bias, y);
  // The packed product has no post-op: it is a second pass over the output.
  post_pass(post, y, m, w.out_features());
}

namespace {

// The products of packed_linears' one region, timed as one product (gemm_shapes): "packed i8
// 128x512+512+512x512 panel".
void record_together(std::chrono::steady_clock::time_point start, int64_t m,
                     const PackedWeight* const* weights, int count, const char* type) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double flops = 0;
  for (int j = 0; j < count; ++j) flops += product_flops(m, *weights[j]);
  record_gemm(seconds, flops, [&] {
    std::string columns;
    for (int j = 0; j < count; ++j)
      columns += fmt::format("{}{}", j ? "+" : "", weights[j]->out_features());
    return fmt::format("packed {} {}x{}x{} panel", type, m, columns, weights[0]->in_features());
  });
}

}  // namespace

void packed_linears(const void* x, int64_t m, const PackedWeight* const* weights,
                    const float* const* biases, float* const* y, int count) {
  TFM_CHECK(count >= 1 && count <= 4, "packed_linears: {} weights (1 to 4)", count);
  const int64_t k = weights[0]->in_features();
  // f32 weights (not widened bf16: x is f32 here) in panels, few rows: one region of the panel
  // kernel for all of them.
  bool f32_panels = count > 1 && m > 0;
  for (int j = 0; j < count && f32_panels; ++j)
    f32_panels = weights[j]->dtype() == DType::f32 && panel_kernel_takes(m, *weights[j]) &&
                 weights[j]->in_features() == k;
  if (f32_panels) {
    PanelLinearF32 products[4];
    for (int j = 0; j < count; ++j)
      products[j] = {static_cast<const float*>(weights[j]->data()), weights[j]->out_features(),
                     biases[j], y[j]};
    const auto start = std::chrono::steady_clock::now();
    panel_linears_f32(static_cast<const float*>(x), m, k, products, count);
    record_together(start, m, weights, count, "f32");
    return;
  }
  const int32_t zero_point = activation_zero_point();
  bool together = count > 1 && m > 0;
  for (int j = 0; j < count && together; ++j)
    together = weights[j]->dtype() == DType::i8 && weights[j]->in_features() == k &&
               weights[j]->int8_panel_groups() == weights[0]->int8_panel_groups() &&
               int8_kernel_takes(m, *weights[j], zero_point);
  if (!together) {
    for (int j = 0; j < count; ++j) packed_linear(x, m, *weights[j], biases[j], y[j]);
    return;
  }
  // As packed_linear's int8 path, the activations quantised once.
  const auto [u, scales] = activation_buffers(m, k);
  Int8PanelLinear products[4];
  for (int j = 0; j < count; ++j)
    products[j] = {weights[j]->int8_panels(), weights[j]->out_features(),
                   int8_epilogue(*weights[j], nullptr, biases[j], PostOp::none, zero_point), y[j]};
  const auto start = std::chrono::steady_clock::now();
  panel_linears_quantising(static_cast<const float*>(x), m, k, weights[0]->int8_panel_groups(),
                           products, count, u, scales);
  record_together(start, m, weights, count, "i8");
}

void packed_linear_onednn(const void* x, int64_t m, const PackedWeight& w, const float* bias,
                          float* y) {
  TFM_CHECK(w.dtype() != DType::i8, "packed_linear_onednn: an i8 weight needs quantised x");
  if (m > 0) run_product(widened_if_needed(x, m, w), m, w, bias, y);
}

void packed_product_u8s8_onednn(const uint8_t* u, int64_t m, const PackedWeight& w, int32_t* acc) {
  TFM_CHECK(w.dtype() == DType::i8, "packed_product_u8s8_onednn: the weight is {}, not i8",
            dtype_name(w.dtype()));
  if (m > 0) run_product(u, m, w, nullptr, acc);
}

void packed_linear_quantized(const uint8_t* u, const float* x_scales, int64_t m,
                             const PackedWeight& w, const float* bias, float* y, PostOp post,
                             int32_t zero_point) {
  TFM_CHECK(w.dtype() == DType::i8, "packed_linear_quantized: the weight is {}, not i8",
            dtype_name(w.dtype()));
  if (m == 0) return;
  // The s32 product in y's own memory (4 bytes an element, as the f32 result), then converted
  // in place.
  auto* acc = reinterpret_cast<int32_t*>(y);
  // Our kernel, the dequantisation in the same pass (its time counted as the product's).
  if (int8_kernel_takes(m, w, zero_point)) {
    const GemmTimer timer(m, w, "panel");
    panel_linear_u8s8(u, m, w.out_features(), w.in_features(), w.int8_panels(),
                      w.int8_panel_groups(), int8_epilogue(w, x_scales, bias, post, zero_point), y);
    return;
  }
  run_product(u, m, w, nullptr, acc);
  dequantize_product(acc, m, w.out_features(), x_scales, w.scales(), w.row_sums(), bias,
                     post == PostOp::relu, y, zero_point);
  if (post == PostOp::swish || post == PostOp::gelu) post_pass(post, y, m, w.out_features());
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
