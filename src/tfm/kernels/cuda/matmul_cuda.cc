// cuBLASLt is column-major; our operands are row-major or transposed views of row-major blocks. A
// row-major [M, N] matrix C with row stride ldc is the column-major [N, M] matrix C^T with leading
// dimension ldc, so C = A B is computed as C^T = B^T A^T: the library's first operand is b and its
// second a. A matrix with unit column stride is its own transpose in column-major terms (op N on
// a [cols, rows] layout); one with unit row stride is op T on a [rows, cols] layout.
#include "tfm/kernels/cuda/matmul_cuda.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/kernels/cuda/cublaslt_library.h"
#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/runtime_cuda.h"

namespace tfm::internal::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt's recommended size for Hopper

std::atomic<bool> g_tf32{false};

void check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasLt& lt = cublaslt();
  ::tfm::internal::fail("cuda: {} failed: {} ({})", what, lt.cublasLtGetStatusString(status),
                        lt.cublasLtGetStatusName(status));
}

#define TFM_CUBLAS_CHECK(call) check((call), #call)

struct Library {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

Library& library() {
  static std::once_flag once;
  static Library lib;
  std::call_once(once, [] {
    TFM_CUBLAS_CHECK(cublaslt().cublasLtCreate(&lib.handle));
    TFM_CUDA_CHECK(cudaMalloc(&lib.workspace, kWorkspaceBytes));
  });
  return lib;
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      ::tfm::internal::fail("cuda gemm: operands of type {} are not supported", dtype_name(dtype));
  }
}

// One operand as cuBLASLt sees it: a column-major layout, whether the library transposes it, the
// batch count and stride.
struct Layout {
  cublasOperation_t op = CUBLAS_OP_N;
  uint64_t rows = 0, cols = 0;  // of the stored column-major matrix
  int64_t ld = 0;
  int batch = 1;
  int64_t batch_stride = 0;
  cudaDataType_t type = CUDA_R_32F;
};

// The batch of an operand: the product of the dims before the last two; their strides must fold
// into one (a dim of 1 broadcasts: stride 0).
void batch_of(const kernels::GemmOperand& x, int* count, int64_t* stride) {
  int64_t n = 1, s = 0;
  for (int i = 0; i < x.rank - 2; ++i) {
    if (x.dims[i] == 1) continue;
    if (n > 1) TFM_CHECK(s == x.dims[i] * x.strides[i], "cuda gemm: batch strides do not fold");
    n *= x.dims[i];
    s = x.strides[i];
  }
  *count = static_cast<int>(n);
  *stride = n > 1 ? s : 0;
}

// Whether batch_of takes x: its batch dims fold into one stride.
bool batch_folds(const kernels::GemmOperand& x) {
  int64_t n = 1, s = 0;
  for (int i = 0; i < x.rank - 2; ++i) {
    if (x.dims[i] == 1) continue;
    if (n > 1 && s != x.dims[i] * x.strides[i]) return false;
    n *= x.dims[i];
    s = x.strides[i];
  }
  return true;
}

// Matrix batch i1 of a rank-4 operand's second batch dim as a rank-3 operand [d0, rows, cols]
// (a dim of 1 broadcasts: always its only matrix).
kernels::GemmOperand second_batch_slice(const kernels::GemmOperand& x, int64_t i1) {
  kernels::GemmOperand s = x;
  const int64_t at = x.dims[1] == 1 ? 0 : i1;
  s.data =
      static_cast<char*>(x.data) + at * x.strides[1] * static_cast<int64_t>(dtype_size(x.dtype));
  s.rank = 3;
  s.dims = {x.dims[0], x.dims[2], x.dims[3], 0};
  s.strides = {x.strides[0], x.strides[2], x.strides[3], 0};
  return s;
}

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic assumes 256
// unless told, and a head view of [B, T, h*d] starts d elements after the previous head.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// The layout of op(X) where the product wants X^T (our row-major operand as the library's
// column-major one): x is [r, c] with strides (sr, sc).
Layout transposed_layout(const kernels::GemmOperand& x) {
  Layout l;
  const int64_t r = x.rows(), c = x.cols();
  const int64_t sr = x.strides[x.rank - 2], sc = x.strides[x.rank - 1];
  if (sc == 1 || c == 1) {
    // Memory is column-major [c, r] with ld sr: that is X^T already.
    l.op = CUBLAS_OP_N;
    l.rows = c;
    l.cols = r;
    l.ld = std::max<int64_t>(sr, c);
  } else {
    TFM_CHECK(sr == 1 || r == 1, "cuda gemm: an operand with strides ({}, {}) has no unit stride",
              sr, sc);
    // Memory is column-major [r, c] with ld sc: X itself, so the library transposes it.
    l.op = CUBLAS_OP_T;
    l.rows = r;
    l.cols = c;
    l.ld = std::max<int64_t>(sc, r);
  }
  batch_of(x, &l.batch, &l.batch_stride);
  l.type = data_type(x.dtype);
  return l;
}

// The algorithm the heuristic picks, kept per distinct problem (the heuristic costs tens of
// microseconds, a small product about as much).
struct ProblemKey {
  std::tuple<int, int, uint64_t, uint64_t, int64_t, int, int64_t, int, int, uint64_t, uint64_t,
             int64_t, int, int64_t, int, int, uint64_t, uint64_t, int64_t, int64_t, int, int, int,
             uint32_t>
      fields;
  bool operator==(const ProblemKey& other) const { return fields == other.fields; }
};

struct ProblemHash {
  size_t operator()(const ProblemKey& key) const {
    return std::apply(
        [](const auto&... f) {
          size_t h = 0;
          ((h = h * 1000003u ^ std::hash<std::decay_t<decltype(f)>>()(f)), ...);
          return h;
        },
        key.fields);
  }
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

// Everything cuBLASLt needs for one distinct problem, made once: the descriptor, the three layouts
// and the algorithm its heuristic picked. Creating them costs tens of microseconds, about as much
// as a small product (attention runs ~50 products per layer and step). The bias pointer changes
// between calls: it is set under the plan's lock just before the product is queued.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::mutex mutex;
  ~Plan() {
    const CublasLt& lt = cublaslt();
    if (out) lt.cublasLtMatrixLayoutDestroy(out);
    if (second) lt.cublasLtMatrixLayoutDestroy(second);
    if (first) lt.cublasLtMatrixLayoutDestroy(first);
    if (desc) lt.cublasLtMatmulDescDestroy(desc);
  }
};

// Never destroyed: plans may be used until the process ends.
std::unordered_map<ProblemKey, std::unique_ptr<Plan>, ProblemHash>& plan_cache() {
  static auto* cache = new std::unordered_map<ProblemKey, std::unique_ptr<Plan>, ProblemHash>();
  return *cache;
}

cublasLtMatrixLayout_t make_layout(const Layout& l) {
  const CublasLt& lt = cublaslt();
  cublasLtMatrixLayout_t layout = nullptr;
  TFM_CUBLAS_CHECK(lt.cublasLtMatrixLayoutCreate(&layout, l.type, l.rows, l.cols, l.ld));
  if (l.batch > 1) {
    const int32_t count = l.batch;
    TFM_CUBLAS_CHECK(lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count)));
    TFM_CUBLAS_CHECK(
        lt.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &l.batch_stride, sizeof(l.batch_stride)));
  }
  return layout;
}

}  // namespace

void set_tf32(bool enabled) {
  g_tf32 = enabled;
}
bool tf32() {
  return g_tf32;
}

void gemm(const kernels::GemmArgs& args, bool allow_tf32) {
  const CublasLt& lt = cublaslt();  // loaded on the first product (cublaslt_library.h)
  const kernels::GemmOperand &a = args.a, &b = args.b, &c = args.c;
  TFM_CHECK(a.rank == b.rank && a.rank == c.rank, "cuda gemm: operand ranks differ");
  const int64_t m = a.rows(), k = a.cols(), n = b.cols();
  TFM_CHECK(b.rows() == k && c.rows() == m && c.cols() == n,
            "cuda gemm: [{}, {}] @ [{}, {}] -> [{}, {}] do not fit", m, k, b.rows(), n, c.rows(),
            c.cols());
  TFM_CHECK(c.strides[c.rank - 1] == 1 || n == 1, "cuda gemm: the result must be row-major");
  TFM_CHECK(!(args.bias && args.alpha != 1.0f), "cuda gemm: a bias with alpha != 1");
  if (m == 0 || n == 0) return;
  // cuBLASLt takes one batch stride: a rank-4 product whose batch dims do not fold (per-head views
  // [B, h, T, d] of [B, T, h*d] activations) runs as one strided batched product over the first
  // batch dim per index of the second.
  if (c.rank == 4 && !(batch_folds(a) && batch_folds(b) && batch_folds(c))) {
    TFM_CHECK(
        (a.dims[1] == c.dims[1] || a.dims[1] == 1) && (b.dims[1] == c.dims[1] || b.dims[1] == 1),
        "cuda gemm: batch dims {} and {} do not give {}", a.dims[1], b.dims[1], c.dims[1]);
    kernels::GemmArgs slice = args;
    for (int64_t i = 0; i < c.dims[1]; ++i) {
      slice.a = second_batch_slice(a, i);
      slice.b = second_batch_slice(b, i);
      slice.c = second_batch_slice(c, i);
      gemm(slice, allow_tf32);
    }
    return;
  }
  // C^T [n, m] = op(B^T) [n, k] op(A^T) [k, m].
  const Layout lb = transposed_layout(b), la = transposed_layout(a);
  Layout lc;
  lc.rows = n;
  lc.cols = m;
  lc.ld = std::max<int64_t>(c.strides[c.rank - 2], n);
  batch_of(c, &lc.batch, &lc.batch_stride);
  lc.type = data_type(c.dtype);
  TFM_CHECK((la.batch == lc.batch || la.batch == 1) && (lb.batch == lc.batch || lb.batch == 1),
            "cuda gemm: batch counts {} and {} do not give {}", la.batch, lb.batch, lc.batch);
  Layout la_b = la, lb_b = lb;  // a batch of 1 broadcasts with stride 0
  la_b.batch = lb_b.batch = lc.batch;

  if (k == 0) {  // an empty sum: c = bias or 0 (not reached by the model; kept exact)
    TFM_CHECK(!args.bias && !args.accumulate, "cuda gemm: an empty product with a bias");
    TFM_CHECK(lc.ld == n, "cuda gemm: an empty product into a strided result");
    TFM_CUDA_CHECK(cudaMemsetAsync(
        c.data, 0, static_cast<size_t>(lc.batch) * m * n * dtype_size(c.dtype), stream()));
    return;
  }
  Library& lib = library();
  const bool f32_operands = a.dtype == DType::f32;
  const cublasComputeType_t compute =
      f32_operands && allow_tf32 && tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;

  const cublasOperation_t op_first = lb.op, op_second = la.op;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (args.bias)
    epilogue = args.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (args.relu)
    epilogue = CUBLASLT_EPILOGUE_RELU;
  // The library's A is our b, its B our a; C and D are c.
  const uint32_t align_first = alignment_of(b.data), align_second = alignment_of(a.data),
                 align_out = alignment_of(c.data);
  const uint32_t alignments = align_first | align_second << 9 | align_out << 18;
  const ProblemKey key{{static_cast<int>(op_first),
                        static_cast<int>(op_second),
                        lb.rows,
                        lb.cols,
                        lb.ld,
                        lb.batch,
                        lb.batch_stride,
                        static_cast<int>(lb.type),
                        static_cast<int>(la.type),
                        la.rows,
                        la.cols,
                        la.ld,
                        la.batch,
                        la.batch_stride,
                        static_cast<int>(lc.type),
                        lc.batch,
                        lc.rows,
                        lc.cols,
                        lc.ld,
                        lc.batch_stride,
                        static_cast<int>(epilogue),
                        static_cast<int>(compute),
                        args.accumulate ? 1 : 0,
                        alignments}};
  Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = plan_cache().find(key);
    if (it != plan_cache().end()) plan = it->second.get();
  }
  if (plan == nullptr) {
    auto made = std::make_unique<Plan>();
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescCreate(&made->desc, compute, CUDA_R_32F));
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(made->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                       &op_first, sizeof(op_first)));
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(made->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                       &op_second, sizeof(op_second)));
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(made->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                       &epilogue, sizeof(epilogue)));
    if (args.bias) {
      const void* bias = args.bias;
      const cudaDataType_t bias_type = CUDA_R_32F;
      TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(
          made->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(
          made->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    }
    made->first = make_layout(lb_b);
    made->second = make_layout(la_b);
    made->out = make_layout(lc);
    cublasLtMatmulPreference_t preference = nullptr;
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceCreate(&preference));
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
        sizeof(kWorkspaceBytes)));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_first},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_second},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_out},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_out}};
    for (const auto& [attribute, bytes] : aligned)
      TFM_CUBLAS_CHECK(
          lt.cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status =
        lt.cublasLtMatmulAlgoGetHeuristic(lib.handle, made->desc, made->first, made->second,
                                          made->out, made->out, preference, 1, &result, &returned);
    lt.cublasLtMatmulPreferenceDestroy(preference);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    TFM_CHECK(returned > 0, "cuda gemm: cuBLASLt has no algorithm for [{}, {}] @ [{}, {}] ({})", m,
              k, k, n, lc.batch);
    made->algo = result.algo;
    std::lock_guard<std::mutex> lock(cache_mutex());
    // Another thread may have made the same plan meanwhile: the first one stays.
    plan = plan_cache().emplace(key, std::move(made)).first->second.get();
  }
  const float alpha = args.alpha, beta = args.accumulate ? 1.0f : 0.0f;
  std::lock_guard<std::mutex> lock(plan->mutex);
  if (args.bias) {
    const void* bias = args.bias;
    TFM_CUBLAS_CHECK(lt.cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  check(lt.cublasLtMatmul(lib.handle, plan->desc, &alpha, b.data, plan->first, a.data, plan->second,
                          &beta, c.data, plan->out, c.data, plan->out, &plan->algo, lib.workspace,
                          kWorkspaceBytes, stream()),
        "cublasLtMatmul");
}

}  // namespace tfm::internal::cuda
