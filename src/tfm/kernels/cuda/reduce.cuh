// Block-wide sums and maxima for the row kernels: warp shuffles, then one value per warp through
// shared memory. Every thread of the block must call them (they synchronise), with blockDim.x a
// multiple of 32 and at most 1024; every thread gets the result. The order of the additions depends
// only on the block size, so a result is the same from run to run.
#pragma once

#include <cuda_runtime.h>

namespace tfm::internal::cuda {

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The block's sum of v. `scratch` holds 32 values of T in shared memory; the function may be
// called again right after it returns (it synchronises before reusing the scratch).
template <typename T>
__device__ inline T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // an earlier call's readers are done with the scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

// The block's maximum of v. fmaxf ignores NaN, as the CPU's comparison does; a row holding a NaN
// still gives NaN through its exponentials.
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -__int_as_float(0x7f800000);
  return warp_max(v);
}

}  // namespace tfm::internal::cuda
