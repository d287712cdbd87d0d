#include "tfm/kernels/cpu/elementwise_cpu.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] += scale * src[i];
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] = scale * src[i];
  }
}

namespace {

// dst[j] (+)= the sum over r < rows of value(r * cols + j), for j < cols; value(i) may also write
// element i's other outputs. Each thread owns one range of whole vectors of columns, so that no two
// write one element and each column is summed over the rows in order whatever the thread count. It
// takes kRowBlock rows at a time, the running sums kept in registers between them: stored to dst
// once a row, the sums were the loop's bottleneck (relu_backward_bias_bf16 took 2.6x as long).
template <class Value>
void sum_columns_in_order(int64_t rows, int64_t cols, float* dst, bool accumulate, Value value) {
  constexpr int64_t kRowBlock = 8;
#pragma omp parallel if (rows * cols >= kParallelMinElements)
  {
    // The thread's own copy: read through the shared one, its pointers would be loaded again after
    // every store value makes, which stops vectorisation (5x slower).
    const Value element = value;
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    constexpr int64_t kLanes = 16;
    const int64_t vectors = (cols + kLanes - 1) / kLanes;
    const int64_t j0 = std::min(cols, vectors * thread / threads * kLanes);
    const int64_t j1 = std::min(cols, vectors * (thread + 1) / threads * kLanes);
    if (!accumulate) std::fill(dst + j0, dst + j1, 0.0f);
    int64_t r0 = 0;
    for (; r0 + kRowBlock <= rows; r0 += kRowBlock) {
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) {
        float sum = dst[j];
        for (int64_t r = r0; r < r0 + kRowBlock; ++r) sum += element(r * cols + j);
        dst[j] = sum;
      }
    }
    for (; r0 < rows; ++r0) {
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) dst[j] += element(r0 * cols + j);
    }
  }
}

}  // namespace

void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate) {
  sum_columns_in_order(rows, cols, dst, accumulate, [src](int64_t i) { return src[i]; });
}

void add(const float* a, const float* b, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void relu(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* y, const float* g, float* dx, int64_t n, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] += y[i] > 0.0f ? g[i] : 0.0f;
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? g[i] : 0.0f;
  }
}

void relu_backward_bf16(const float* y, const float* g, float* dx, bf16* dx_bf16, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(dx_bf16);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    const float v = y[i] > 0.0f ? g[i] : 0.0f;
    dx[i] = v;
    out[i] = f32_to_bf16_bits(v);
  }
}

namespace {

// relu_backward_bias_bf16 with y read as f32 (Y float) or as bf16's bits (Y uint16_t).
template <class Y>
void relu_backward_bias_rounded(const Y* y, const float* g, int64_t rows, int64_t cols,
                                bf16* dx_bf16, float* db, bool accumulate) {
  auto* out = reinterpret_cast<uint16_t*>(dx_bf16);
  auto positive = [y](int64_t i) {
    if constexpr (std::is_same_v<Y, float>) {
      return y[i] > 0.0f;
    } else {
      return std::bit_cast<float>(uint32_t{y[i]} << 16) > 0.0f;  // a bf16 is its f32's high half
    }
  };
  const int64_t n = rows * cols;
  if (db == nullptr) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16_bits(positive(i) ? g[i] : 0.0f);
    return;
  }
  // db's columns summed over the rows in order, as sum_rows: the same bits.
  sum_columns_in_order(rows, cols, db, accumulate, [positive, g, out](int64_t i) {
    const float v = positive(i) ? g[i] : 0.0f;
    out[i] = f32_to_bf16_bits(v);
    return v;
  });
}

}  // namespace

void relu_backward_bias_bf16(const float* y, const float* g, int64_t rows, int64_t cols,
                             bf16* dx_bf16, float* db, bool accumulate) {
  relu_backward_bias_rounded(y, g, rows, cols, dx_bf16, db, accumulate);
}

void relu_backward_bias_from_bf16(const bf16* y_bf16, const float* g, int64_t rows, int64_t cols,
                                  bf16* dx_bf16, float* db, bool accumulate) {
  relu_backward_bias_rounded(reinterpret_cast<const uint16_t*>(y_bf16), g, rows, cols, dx_bf16, db,
                             accumulate);
}

namespace {

// The derivatives, in float as the forwards (PyTorch's CPU kernels compute these in float too).
using gelu_constants::kErfcP;
using gelu_constants::kInvSqrt2;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// GELU(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. std::erf is a scalar libm call that GCC does
// not vectorise, so erfc comes from Numerical Recipes' Chebyshev fit (2nd ed., section 6.2,
// erfcc): for z >= 0, erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2), within 1.2e-7 of erfc
// relative to it at every z >= 0 (in double; 1.04e-7 measured). erfc(-z) = 2 - erfc(z). Its
// exponent takes -z^2 as -x^2/2 (one rounding), and exp_f32 vectorises (kErfcP: vector_math.h).

// t and P(t) of erfc(|x| / sqrt 2) = t e^(P(t) - x^2/2).
inline float erfc_t(float x) {
  return 1.0f / (1.0f + 0.5f * kInvSqrt2 * std::fabs(x));
}
inline float erfc_exponent(float t) {
  float p = kErfcP[9];
  for (int i = 8; i >= 0; --i) p = p * t + kErfcP[i];
  return p;
}
// 2 Phi(x) from erfc(|x| / sqrt 2).
inline float twice_phi(float x, float erfc_abs) {
  return x >= 0.0f ? 2.0f - erfc_abs : erfc_abs;
}

inline float gelu_value(float x) {
  const float t = erfc_t(x);
  const float erfc_abs = t * exp_f32(erfc_exponent(t) - 0.5f * x * x);
  return 0.5f * x * twice_phi(x, erfc_abs);
}
// GELU'(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi): one e^(-x^2/2) serves both.
inline float gelu_slope(float x) {
  const float t = erfc_t(x);
  const float gauss = exp_f32(-0.5f * x * x);
  const float erfc_abs = t * gauss * exp_f32(erfc_exponent(t));
  return 0.5f * twice_phi(x, erfc_abs) + x * kInvSqrt2Pi * gauss;
}
// With exp_f32 (vector_math.h) rather than std::exp, so that the loops over it vectorise: swish is
// the FFN's activation of every converted OPUS-MT model, rows x d_ff values a decoding step.
inline float sigmoid(float x) {
  return 1.0f / (1.0f + exp_f32(-x));
}
inline float swish_slope(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

// Slope: a lambda, not a function pointer, so that each instantiation inlines it and vectorises.
template <typename Slope>
void activation_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate,
                         Slope slope) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] += g[i] * slope(x[i]);
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * slope(x[i]);
  }
}

#ifdef __AVX512F__
// y = f(x) 16 lanes at a time (the last vector masked), shared among the threads.
template <typename F>
void by_vectors(const float* x, float* y, int64_t n, F f) {
  const int64_t vectors = (n + 15) / 16;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t v = 0; v < vectors; ++v) {
    const __mmask16 lanes = first_lanes(std::min<int64_t>(16, n - 16 * v));
    _mm512_mask_storeu_ps(y + 16 * v, lanes, f(_mm512_maskz_loadu_ps(lanes, x + 16 * v)));
  }
}
#endif

}  // namespace

void gelu(const float* x, float* y, int64_t n) {
#ifdef __AVX512F__
  // gelu16, as the products that apply GELU in their stores (PostOp::gelu): the same bits.
  by_vectors(x, y, n, [](__m512 v) { return gelu16(v); });
#else
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_value(x[i]);
#endif
}

void gelu_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward(x, g, dx, n, accumulate, [](float v) { return gelu_slope(v); });
}

void swish(const float* x, float* y, int64_t n) {
#ifdef __AVX512F__
  // swish16, as the products that apply swish in their stores (PostOp::swish): the same bits.
  by_vectors(x, y, n, [](__m512 v) { return swish16(v); });
#else
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
#endif
}

void swish_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward(x, g, dx, n, accumulate, [](float v) { return swish_slope(v); });
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
