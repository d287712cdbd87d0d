// The m largest values of a stream of (value, index) pairs, for the searches of decode/: a sorted
// array of at most m entries, best first. Among equal values the lower index comes first, in
// whatever order the pairs arrive, so that the list is the same for any order of the stream (the
// threads of log_softmax_top_cpu.cc take the blocks of the vocabulary in no fixed order). -inf and
// NaN never enter.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

struct TopK {
  float* values = nullptr;     // [m]
  int32_t* indices = nullptr;  // [m]
  int32_t m = 0;
  int32_t count = 0;

  // The value a new pair must reach to enter (and exceed, unless its index is lower than the last
  // entry's).
  float threshold() const {
    return count == m ? values[m - 1] : -std::numeric_limits<float>::infinity();
  }

  // Whether (value, index) comes before (other, other_index): a larger value, or an equal one with
  // a lower index.
  static bool before(float value, int32_t index, float other, int32_t other_index) {
    return value > other || (value == other && index < other_index);
  }

  void insert(float value, int32_t index) {
    if (!(value > -std::numeric_limits<float>::infinity())) return;  // -inf and NaN
    if (count == m && !before(value, index, values[m - 1], indices[m - 1])) return;
    int32_t at = count < m ? count : m - 1;
    while (at > 0 && before(value, index, values[at - 1], indices[at - 1])) {
      values[at] = values[at - 1];
      indices[at] = indices[at - 1];
      --at;
    }
    values[at] = value;
    indices[at] = index;
    if (count < m) ++count;
  }

  // Every entry of row[0, n) (index offset + j), skipping `excluded`. Chunks of 16 whose maximum
  // cannot enter are skipped without looking at their elements one by one. Returns the maximum of
  // the whole row (`excluded` included), max_of's bits, found in the same pass.
  float scan(const float* row, int64_t n, int64_t offset, int64_t excluded) {
    constexpr int64_t kChunk = 16;
    int64_t j = 0;
#ifdef __AVX512F__
    // The row's maximum as max_of takes it: the same vmaxps over the same chunks in the same order
    // (vmaxps returns its second operand where either is NaN).
    __m512 max16 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    // One compare a chunk: only the lanes at or above the threshold as it stands (and above -inf)
    // can enter (it only rises while they are inserted), in index order, as the loop below. Once
    // the list is full, a value equal to its last enters only with a lower index than the last
    // entry's: none of a chunk whose first index is above that (a thread takes its blocks in
    // rising order), where only the lanes above the threshold are asked, so that a row of equal
    // values inserts nothing rather than every element.
    const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 threshold16 = _mm512_set1_ps(threshold());
    // The first j of the row from which ties stay out (kept in a register: it changes only with
    // the list).
    auto first_strict = [&] {
      return count == m ? int64_t{indices[m - 1]} - offset + 1
                        : std::numeric_limits<int64_t>::max();
    };
    int64_t strict_from = first_strict();
    for (; j + kChunk <= n; j += kChunk) {
      const __m512 chunk = _mm512_loadu_ps(row + j);
      max16 = _mm512_maskz_max_ps(kAllLanes, max16, chunk);
      const __mmask16 finite = _mm512_cmp_ps_mask(chunk, lowest, _CMP_GT_OQ);
      uint32_t above = j >= strict_from
                           ? _mm512_mask_cmp_ps_mask(finite, chunk, threshold16, _CMP_GT_OQ)
                           : _mm512_mask_cmp_ps_mask(finite, chunk, threshold16, _CMP_GE_OQ);
      if (above == 0) continue;
      for (; above != 0; above &= above - 1) {
        const int64_t i = j + std::countr_zero(above);
        if (offset + i != excluded) insert(row[i], static_cast<int32_t>(offset + i));
      }
      threshold16 = _mm512_set1_ps(threshold());
      strict_from = first_strict();
    }
    if (j < n)
      max16 = _mm512_maskz_max_ps(kAllLanes, max16,
                                  _mm512_mask_loadu_ps(lowest, first_lanes(n - j), row + j));
    float max = horizontal_max(max16);
#else
    // Without AVX-512 max_of's loop, where a NaN never enters.
    float max = -std::numeric_limits<float>::infinity();
#endif
    for (; j + kChunk <= n; j += kChunk) {
      float chunk_max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : chunk_max)
      for (int64_t i = 0; i < kChunk; ++i)
        chunk_max = row[j + i] > chunk_max ? row[j + i] : chunk_max;
      max = chunk_max > max ? chunk_max : max;
      if (!(chunk_max >= threshold() && chunk_max > -std::numeric_limits<float>::infinity()))
        continue;
      for (int64_t i = j; i < j + kChunk; ++i)
        if (offset + i != excluded) insert(row[i], static_cast<int32_t>(offset + i));
    }
    for (; j < n; ++j) {
#ifndef __AVX512F__
      max = row[j] > max ? row[j] : max;
#endif
      if (offset + j != excluded) insert(row[j], static_cast<int32_t>(offset + j));
    }
    return max;
  }
};

// The k largest entries of each row of x [rows, n] (skipping index `excluded`), best first:
// values/indices [rows, k], counts[r] <= k of them filled (the rest left as they are).
void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, int64_t excluded, float* values,
                int32_t* indices, int32_t* counts);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
