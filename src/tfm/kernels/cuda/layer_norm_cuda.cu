#include "tfm/kernels/cuda/dropout_mask.cuh"
#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/layer_norm_cuda.h"
#include "tfm/kernels/cuda/reduce.cuh"

namespace tfm::internal::cuda {

namespace {

// Threads of a row's block: about four elements each, a whole number of warps, at most 1024.
int row_threads(int64_t d) {
  const int64_t warps = (d + 127) / 128;
  return static_cast<int>(warps < 1 ? 32 : (warps > 32 ? 1024 : warps * 32));
}

// One row of layer_norm by one block, each thread on the elements j = threadIdx.x + k blockDim.x
// (so a thread reads back only what it wrote itself in the fused kernel). As on the CPU: the mean
// summed in double, then the variance of the centred values.
__device__ void normalize_row(const float* xr, const float* gamma, const float* beta, float* yr,
                              float* mean, float* rstd, int64_t d, float eps) {
  __shared__ double dscratch[32];
  __shared__ float fscratch[32];
  double sum = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += xr[j];
  sum = block_sum(sum, dscratch);
  const float mu = static_cast<float>(sum / static_cast<double>(d));
  float squares = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float c = xr[j] - mu;
    squares += c * c;
  }
  squares = block_sum(squares, fscratch);
  const float rs = 1.0f / sqrtf(squares / static_cast<float>(d) + eps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
  if (threadIdx.x == 0) {
    *mean = mu;
    *rstd = rs;
  }
}

__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* rstd, int64_t d, float eps) {
  const int64_t r = blockIdx.x;
  normalize_row(x + r * d, gamma, beta, y + r * d, mean + r, rstd + r, d, eps);
}

// `scale` = 1 / (1 - p) from the host. The dropped branch is rounded before it is added
// (__fmul_rn, __fadd_rn: no fused multiply-add), as the unfused dropout and add round it.
__global__ void add_dropout_layer_norm_kernel(const float* x, const float* branch, float p,
                                              float scale, uint64_t seed, const float* gamma,
                                              const float* beta, float* sum, float* y, float* mean,
                                              float* rstd, int64_t d, float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * d;
  const float* br = branch + r * d;
  float* sr = sum + r * d;
  const uint64_t first = static_cast<uint64_t>(r * d);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    if (p > 0.0f) {
      const float dropped = dropout_keep(seed, first + j, p) ? __fmul_rn(br[j], scale) : 0.0f;
      sr[j] = __fadd_rn(xr[j], dropped);
    } else {
      sr[j] = xr[j] + br[j];
    }
  }
  normalize_row(sr, gamma, beta, y + r * d, mean + r, rstd + r, d, eps);
}

// With xhat = (x - mean) * rstd, y = xhat * gamma + beta and dxhat = g * gamma:
//   ds = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat))  (+ residual, when given)
// written to dx (when wanted) and, with a branch, d(branch) = mask * ds / (1 - p). One block a row.
__global__ void backward_rows_kernel(const float* x, const float* gamma, const float* mean,
                                     const float* rstd, const float* g, int64_t d, float inv_d,
                                     float* dx, bool dx_accumulate, const float* residual,
                                     float* dbranch, bool dbranch_accumulate, float p, float scale,
                                     uint64_t seed) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * d;
  const float* gr = g + r * d;
  const float mu = mean[r], rs = rstd[r];
  float sum_dxhat = 0, sum_dxhat_xhat = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float dxhat = gr[j] * gamma[j];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * (xr[j] - mu) * rs;
  }
  sum_dxhat = block_sum(sum_dxhat, scratch);
  sum_dxhat_xhat = block_sum(sum_dxhat_xhat, scratch);
  const float mean_dxhat = sum_dxhat * inv_d;
  const float mean_dxhat_xhat = sum_dxhat_xhat * inv_d;
  const uint64_t first = static_cast<uint64_t>(r * d);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float through = gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat;
    const float ds = residual != nullptr ? residual[r * d + j] + rs * through : rs * through;
    if (dx != nullptr) {
      float* out = dx + r * d + j;
      *out = dx_accumulate ? *out + ds : ds;
    }
    if (dbranch != nullptr) {
      float v = ds;
      if (p != 0.0f) v = dropout_keep(seed, first + j, p) ? __fmul_rn(ds, scale) : 0.0f;
      float* out = dbranch + r * d + j;
      *out = dbranch_accumulate ? *out + v : v;
    }
  }
}

// Stage one of dgamma = sum_r g * xhat and dbeta = sum_r g: block (32, kRowThreads) sums 32
// adjacent columns over chunk blockIdx.y of kRowsPerChunk rows into
// partial[chunk] = [dgamma part (d values), dbeta part (d values)].
constexpr int kRowsPerChunk = 64;
constexpr int kRowThreads = 8;

__global__ void param_partials_kernel(const float* x, const float* mean, const float* rstd,
                                      const float* g, int64_t rows, int64_t d, float* partial) {
  __shared__ float pg[kRowThreads][33];
  __shared__ float pb[kRowThreads][33];
  const int64_t j = blockIdx.x * int64_t{32} + threadIdx.x;
  const int64_t c = blockIdx.y;
  const int64_t begin = c * kRowsPerChunk;
  const int64_t end = begin + kRowsPerChunk < rows ? begin + kRowsPerChunk : rows;
  float sg = 0, sb = 0;
  if (j < d) {
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowThreads) {
      const float gv = g[r * d + j];
      sg += gv * (x[r * d + j] - mean[r]) * rstd[r];
      sb += gv;
    }
  }
  pg[threadIdx.y][threadIdx.x] = sg;
  pb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      pg[threadIdx.y][threadIdx.x] += pg[threadIdx.y + half][threadIdx.x];
      pb[threadIdx.y][threadIdx.x] += pb[threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && j < d) {
    partial[c * 2 * d + j] = pg[0][threadIdx.x];
    partial[c * 2 * d + d + j] = pb[0][threadIdx.x];
  }
}

// Stage two: block (32, kChunkThreads) adds the chunks' partials of 32 adjacent columns, thread
// (x, y) chunks y, y + kChunkThreads, ... of its column in double (as the CPU), then the block the
// kChunkThreads values in a fixed tree: the same order every run, and each warp's reads coalesced.
// (A thread per column, over the ~400 chunks of a [25024, 512] batch, left the device idle.)
constexpr int kChunkThreads = 32;

__global__ void param_totals_kernel(const float* partial, int64_t chunks, int64_t d, float* dgamma,
                                    bool dgamma_accumulate, float* dbeta, bool dbeta_accumulate) {
  __shared__ double tg[kChunkThreads][33];
  __shared__ double tb[kChunkThreads][33];
  const int64_t j = blockIdx.x * int64_t{32} + threadIdx.x;
  double sg = 0, sb = 0;
  if (j < d) {
    for (int64_t c = threadIdx.y; c < chunks; c += kChunkThreads) {
      sg += partial[c * 2 * d + j];
      sb += partial[c * 2 * d + d + j];
    }
  }
  tg[threadIdx.y][threadIdx.x] = sg;
  tb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  for (int half = kChunkThreads / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      tg[threadIdx.y][threadIdx.x] += tg[threadIdx.y + half][threadIdx.x];
      tb[threadIdx.y][threadIdx.x] += tb[threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  if (threadIdx.y != 0 || j >= d) return;
  if (dgamma != nullptr) {
    const float v = static_cast<float>(tg[0][threadIdx.x]);
    dgamma[j] = dgamma_accumulate ? dgamma[j] + v : v;
  }
  if (dbeta != nullptr) {
    const float v = static_cast<float>(tb[0][threadIdx.x]);
    dbeta[j] = dbeta_accumulate ? dbeta[j] + v : v;
  }
}

int64_t chunks_for(int64_t rows) {
  return (rows + kRowsPerChunk - 1) / kRowsPerChunk;
}

void backward(const float* x, const float* gamma, const float* mean, const float* rstd,
              const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads, float* dbranch,
              bool dbranch_accumulate, float p, uint64_t seed, float* workspace) {
  if (d <= 0) return;
  if (rows > 0 && (grads.dx != nullptr || dbranch != nullptr)) {
    const int threads = row_threads(d);
    const float inv_d = 1.0f / static_cast<float>(d);
    const float scale = 1.0f / (1.0f - p);
    backward_rows_kernel<<<static_cast<unsigned>(rows), threads, 0, stream()>>>(
        x, gamma, mean, rstd, g, d, inv_d, grads.dx, grads.dx_accumulate, grads.residual, dbranch,
        dbranch_accumulate, p, scale, seed);
    TFM_CUDA_LAUNCHED(backward_rows_kernel);
  }
  if (grads.dgamma == nullptr && grads.dbeta == nullptr) return;
  const int64_t chunks = chunks_for(rows);
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>((d + 31) / 32), static_cast<unsigned>(chunks));
    param_partials_kernel<<<grid, dim3(32, kRowThreads), 0, stream()>>>(x, mean, rstd, g, rows, d,
                                                                        workspace);
    TFM_CUDA_LAUNCHED(param_partials_kernel);
  }
  param_totals_kernel<<<static_cast<unsigned>((d + 31) / 32), dim3(32, kChunkThreads), 0,
                        stream()>>>(workspace, chunks, d, grads.dgamma, grads.dgamma_accumulate,
                                    grads.dbeta, grads.dbeta_accumulate);
  TFM_CUDA_LAUNCHED(param_totals_kernel);
}

}  // namespace

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps) {
  if (rows <= 0 || d <= 0) return;
  layer_norm_kernel<<<static_cast<unsigned>(rows), row_threads(d), 0, stream()>>>(
      x, gamma, beta, y, mean, rstd, d, eps);
  TFM_CUDA_LAUNCHED(layer_norm_kernel);
}

int64_t layer_norm_backward_workspace(int64_t rows, int64_t d) {
  return chunks_for(rows) * 2 * d;
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads,
                         float* workspace) {
  backward(x, gamma, mean, rstd, g, rows, d, grads, nullptr, false, 0.0f, 0, workspace);
}

void add_dropout_layer_norm(const float* x, const float* branch, float p, uint64_t seed,
                            const float* gamma, const float* beta, float* sum, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t d, float eps) {
  if (rows <= 0 || d <= 0) return;
  const float scale = 1.0f / (1.0f - p);
  add_dropout_layer_norm_kernel<<<static_cast<unsigned>(rows), row_threads(d), 0, stream()>>>(
      x, branch, p, scale, seed, gamma, beta, sum, y, mean, rstd, d, eps);
  TFM_CUDA_LAUNCHED(add_dropout_layer_norm_kernel);
}

void add_dropout_layer_norm_backward(const float* sum, const float* gamma, const float* mean,
                                     const float* rstd, const float* g, int64_t rows, int64_t d,
                                     float p, uint64_t seed, const LayerNormGrads& grads,
                                     float* dbranch, bool dbranch_accumulate, float* workspace) {
  backward(sum, gamma, mean, rstd, g, rows, d, grads, dbranch, dbranch_accumulate, p, seed,
           workspace);
}

}  // namespace tfm::internal::cuda
