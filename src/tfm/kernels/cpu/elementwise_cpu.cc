#include "tfm/kernels/cpu/elementwise_cpu.h"

#include <algorithm>
#include <cmath>

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

void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate) {
  // Threads own blocks of columns, so no two write one element.
  constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    int64_t j1 = std::min(j0 + kBlock, cols);
    if (!accumulate)
      for (int64_t j = j0; j < j1; ++j) dst[j] = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j) dst[j] += src[r * cols + j];
  }
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

// The derivatives, in float as the forwards (PyTorch's CPU kernels compute these in float too).
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

inline float gelu_value(float x) {
  return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
}
inline float gelu_slope(float x) {
  return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
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

template <typename Slope>
void activation_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate,
                         Slope slope) {
  if (accumulate) {
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] += g[i] * slope(x[i]);
  } else {
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * slope(x[i]);
  }
}

}  // namespace

void gelu(const float* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_value(x[i]);
}

void gelu_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward(x, g, dx, n, accumulate, gelu_slope);
}

void swish(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
}

void swish_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward(x, g, dx, n, accumulate, swish_slope);
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
