#include "tfm/kernels/cpu/attention_cpu.h"

#include <bit>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <cmath>
#include <limits>
#include <type_traits>

#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/softmax_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// Softmax in place over the n visible scores of a row (softmax_row: the maximum subtracted, a
// vectorised exp); the masked tail up to tk becomes 0.
inline void softmax_visible(float* p_row, int64_t n, int64_t tk) {
  softmax_row(p_row, p_row, n);
  for (int64_t i = n; i < tk; ++i) p_row[i] = 0.0f;
}

// Cache elements as f32: bf16 is the upper half of an f32.
inline float load(const float* p, int64_t i) {
  return p[i];
}
inline float load(const bf16* p, int64_t i) {
  return std::bit_cast<float>(static_cast<uint32_t>(p[i].bits) << 16);
}

#ifdef __AVX512F__
// Heads of 64 (base and big): one row of attention_cached_rows with the query, the output and each
// key and value in four 16-float registers. Scores go four keys at a time with one transposing
// reduction for the four dot products (instead of four horizontal sums), and O = P v accumulates
// in registers over all keys (instead of a load and store of the output row per key group). The
// zero-masked forms of the shuffles are used throughout: GCC 12 warns that the unmasked ones read
// an uninitialised register.
constexpr __mmask16 kAll16 = 0xffff;

inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load16(const bf16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m512i widened = _mm512_maskz_cvtepu16_epi32(kAll16, bits);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, widened, 16));
}

// q . k for a 64-wide head, as the 16 partial sums of one register.
template <typename T>
inline __m512 dot64_partial(const __m512 q[4], const T* k) {
  __m512 acc = _mm512_mul_ps(q[0], load16(k));
  acc = _mm512_fmadd_ps(q[1], load16(k + 16), acc);
  acc = _mm512_fmadd_ps(q[2], load16(k + 32), acc);
  return _mm512_fmadd_ps(q[3], load16(k + 48), acc);
}

// The sums of the lanes of a, b, c and d, as the four floats of one register.
inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Pairwise within 128-bit lanes: ab = [a0+a2, b0+b2, a1+a3, b1+b3] per lane (cd likewise).
  const __m512 ab =
      _mm512_add_ps(_mm512_maskz_unpacklo_ps(kAll16, a, b), _mm512_maskz_unpackhi_ps(kAll16, a, b));
  const __m512 cd =
      _mm512_add_ps(_mm512_maskz_unpacklo_ps(kAll16, c, d), _mm512_maskz_unpackhi_ps(kAll16, c, d));
  // [a, b, c, d] partial sums per 128-bit lane, then across the four lanes.
  const __m512 abcd = _mm512_add_ps(_mm512_maskz_shuffle_ps(kAll16, ab, cd, 0x44),
                                    _mm512_maskz_shuffle_ps(kAll16, ab, cd, 0xEE));
  const __m256 half = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xff, abcd, 0),
                                    _mm512_maskz_extractf32x8_ps(0xff, abcd, 1));
  return _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
}

template <typename T, typename Key, typename Value>
void attention_row64(const float* q_row, Key key, Value value, int64_t n, int64_t tk, float alpha,
                     float* p_row, float* o_row) {
  const __m512 q[4] = {_mm512_loadu_ps(q_row), _mm512_loadu_ps(q_row + 16),
                       _mm512_loadu_ps(q_row + 32), _mm512_loadu_ps(q_row + 48)};
  const __m128 scale = _mm_set1_ps(alpha);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m128 s = sum4(dot64_partial<T>(q, key(j)), dot64_partial<T>(q, key(j + 1)),
                          dot64_partial<T>(q, key(j + 2)), dot64_partial<T>(q, key(j + 3)));
    _mm_storeu_ps(p_row + j, _mm_mul_ps(s, scale));
  }
  for (; j < n; ++j) {
    const __m512 dot = dot64_partial<T>(q, key(j));
    p_row[j] = alpha * _mm_cvtss_f32(sum4(dot, dot, dot, dot));
  }

  softmax_visible(p_row, n, tk);

  __m512 o[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  for (int64_t i = 0; i < n; ++i) {
    const __m512 p = _mm512_set1_ps(p_row[i]);
    const T* v = value(i);
    for (int c = 0; c < 4; ++c) o[c] = _mm512_fmadd_ps(p, load16(v + 16 * c), o[c]);
  }
  for (int c = 0; c < 4; ++c) _mm512_storeu_ps(o_row + 16 * c, o[c]);
}

// The same row for a bf16 cache, without widening each bf16 element on its own: 32 bf16 (one
// register) give their 16 even elements as f32 by a shift (bits << 16) and their 16 odd ones by a
// mask (bits & 0xffff0000), two instructions for 32 values instead of four. The query is split into
// even and odd elements once per row to match; the output accumulates as even and odd halves and
// is put back in order once per row. The products and the sums over keys are those of
// attention_row64 (only the order of the 64 terms of a dot product differs).
inline __m512 even_bf16(__m512i pairs) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, pairs, 16));
}
inline __m512 odd_bf16(__m512i pairs) {
  return _mm512_castsi512_ps(
      _mm512_maskz_and_epi32(kAll16, pairs, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
inline __m512i load32(const bf16* p) {
  return _mm512_loadu_si512(p);
}

template <typename Key, typename Value>
void attention_row64_bf16(const float* q_row, Key key, Value value, int64_t n, int64_t tk,
                          float alpha, float* p_row, float* o_row) {
  // Element indices of the even and odd elements of two 16-float registers (permutex2var: 0-15 the
  // first, 16-31 the second), and of the interleaving that undoes the split.
  const __m512i even_index =
      _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_index =
      _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const __m512i low_index =
      _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high_index =
      _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  __m512 q_even[2], q_odd[2];
  for (int c = 0; c < 2; ++c) {
    const __m512 a = _mm512_loadu_ps(q_row + 32 * c), b = _mm512_loadu_ps(q_row + 32 * c + 16);
    q_even[c] = _mm512_maskz_permutex2var_ps(kAll16, a, even_index, b);
    q_odd[c] = _mm512_maskz_permutex2var_ps(kAll16, a, odd_index, b);
  }
  auto dot = [&](const bf16* k) {
    const __m512i k0 = load32(k), k1 = load32(k + 32);
    __m512 acc = _mm512_mul_ps(q_even[0], even_bf16(k0));
    acc = _mm512_fmadd_ps(q_odd[0], odd_bf16(k0), acc);
    acc = _mm512_fmadd_ps(q_even[1], even_bf16(k1), acc);
    return _mm512_fmadd_ps(q_odd[1], odd_bf16(k1), acc);
  };
  const __m128 scale = _mm_set1_ps(alpha);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m128 s = sum4(dot(key(j)), dot(key(j + 1)), dot(key(j + 2)), dot(key(j + 3)));
    _mm_storeu_ps(p_row + j, _mm_mul_ps(s, scale));
  }
  for (; j < n; ++j) {
    const __m512 d = dot(key(j));
    p_row[j] = alpha * _mm_cvtss_f32(sum4(d, d, d, d));
  }

  softmax_visible(p_row, n, tk);

  __m512 o_even[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m512 o_odd[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < n; ++i) {
    const __m512 p = _mm512_set1_ps(p_row[i]);
    const bf16* v = value(i);
    for (int c = 0; c < 2; ++c) {
      const __m512i pairs = load32(v + 32 * c);
      o_even[c] = _mm512_fmadd_ps(p, even_bf16(pairs), o_even[c]);
      o_odd[c] = _mm512_fmadd_ps(p, odd_bf16(pairs), o_odd[c]);
    }
  }
  for (int c = 0; c < 2; ++c) {
    _mm512_storeu_ps(o_row + 32 * c,
                     _mm512_maskz_permutex2var_ps(kAll16, o_even[c], low_index, o_odd[c]));
    _mm512_storeu_ps(o_row + 32 * c + 16,
                     _mm512_maskz_permutex2var_ps(kAll16, o_even[c], high_index, o_odd[c]));
  }
}
#endif

template <typename T>
void attention_cached_rows(const AttentionDims& dims, const AttentionMaskSpec& mask, const float* q,
                           const CachedKeyValues& kv, float* probs, float* out) {
  const int64_t h = dims.heads, dk = dims.dk, dv = dims.dv, tq = dims.tq, tk = dims.tk;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dk));
  const int64_t rows = dims.batch * h * tq;
  const int64_t stride_k = h * dk, stride_v = h * dv;
  const T* k = static_cast<const T*>(kv.k);
  const T* v = static_cast<const T*>(kv.v);
  // Row r of P is (batch b, head, query t) as in attention_forward: r = (b * h + head) * Tq + t.
#pragma omp parallel for schedule(static) if (rows * tk * (dk + dv) >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (h * tq), head = (r / tq) % h, t = r % tq;
    const float* q_row = q + (b * tq + t) * h * dk + head * dk;
    const int32_t* slots = kv.slots ? kv.slots + b * kv.slots_stride : nullptr;
    // Key j of this row and head: its slot's row, then position j.
    auto key = [&](int64_t j) {
      const int64_t slot = slots ? slots[j] : b;
      return k + slot * kv.k_batch_stride + j * stride_k + head * dk;
    };
    auto value = [&](int64_t j) {
      const int64_t slot = slots ? slots[j] : b;
      return v + slot * kv.v_batch_stride + j * stride_v + head * dv;
    };
    float* p_row = probs + r * tk;
    float* o_row = out + (b * tq + t) * h * dv + head * dv;
    const int64_t n = mask.visible_keys(b, t, tk);
#ifdef __AVX512F__
    if (dk == 64 && dv == 64) {
      if constexpr (std::is_same_v<T, bf16>) {
        attention_row64_bf16(q_row, key, value, n, tk, alpha, p_row, o_row);
      } else {
        attention_row64<T>(q_row, key, value, n, tk, alpha, p_row, o_row);
      }
      continue;
    }
#endif

    // P = softmax(q k^T / sqrt(dk)) over the visible keys, the maximum subtracted first. Keys go
    // four at a time: four independent sums per pass over q, and in O += P v one load and store of
    // the output row per four keys instead of per key (that chain through memory bounds the loop).
    const int64_t n4 = n - n % 4;
    for (int64_t j = 0; j < n4; j += 4) {
      const T *k0 = key(j), *k1 = key(j + 1), *k2 = key(j + 2), *k3 = key(j + 3);
      float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
#pragma omp simd reduction(+ : d0, d1, d2, d3)
      for (int64_t i = 0; i < dk; ++i) {
        d0 += q_row[i] * load(k0, i);
        d1 += q_row[i] * load(k1, i);
        d2 += q_row[i] * load(k2, i);
        d3 += q_row[i] * load(k3, i);
      }
      p_row[j] = alpha * d0;
      p_row[j + 1] = alpha * d1;
      p_row[j + 2] = alpha * d2;
      p_row[j + 3] = alpha * d3;
    }
    for (int64_t j = n4; j < n; ++j) {
      const T* k_row = key(j);
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t i = 0; i < dk; ++i) dot += q_row[i] * load(k_row, i);
      p_row[j] = alpha * dot;
    }
    softmax_visible(p_row, n, tk);

    // O = P v for this head's columns of the concatenated output.
    for (int64_t i = 0; i < dv; ++i) o_row[i] = 0.0f;
    for (int64_t j = 0; j < n4; j += 4) {
      const T *v0 = value(j), *v1 = value(j + 1), *v2 = value(j + 2), *v3 = value(j + 3);
      const float p0 = p_row[j], p1 = p_row[j + 1], p2 = p_row[j + 2], p3 = p_row[j + 3];
#pragma omp simd
      for (int64_t i = 0; i < dv; ++i)
        o_row[i] += p0 * load(v0, i) + p1 * load(v1, i) + p2 * load(v2, i) + p3 * load(v3, i);
    }
    for (int64_t j = n4; j < n; ++j) {
      const T* v_row = value(j);
      const float p = p_row[j];
#pragma omp simd
      for (int64_t i = 0; i < dv; ++i) o_row[i] += p * load(v_row, i);
    }
  }
}

}  // namespace

void attention_forward_cached(const AttentionDims& dims, const AttentionMaskSpec& mask,
                              const float* q, const CachedKeyValues& kv, float* probs, float* out) {
  if (kv.dtype == DType::bf16) {
    attention_cached_rows<bf16>(dims, mask, q, kv, probs, out);
  } else {
    attention_cached_rows<float>(dims, mask, q, kv, probs, out);
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
