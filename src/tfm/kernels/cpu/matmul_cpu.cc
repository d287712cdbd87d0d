#include "tfm/kernels/cpu/matmul_cpu.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/primitive_cache.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// Everything a oneDNN matmul primitive is specialised on. Plain data, zero-filled past `rank`, so
// that equality and hashing can look at every field.
struct GemmKey {
  int rank = 0;
  std::array<int64_t, kMaxGemmRank> dims[3]{};
  std::array<int64_t, kMaxGemmRank> strides[3]{};
  DType dtypes[3]{};
  bool bias = false;
  bool accumulate = false;
  bool relu = false;
  float alpha = 1.0f;
  // oneDNN fixes a primitive's thread partitioning when it is created: a caller that runs with
  // another thread count (a decoding worker with its own) gets a primitive of its own.
  int threads = 1;

  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  size_t operator()(const GemmKey& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
    auto mix = [&h](uint64_t v) {
      h ^= v;
      h *= 1099511628211ull;
    };
    mix(static_cast<uint64_t>(key.rank));
    for (int i = 0; i < 3; ++i) {
      for (int d = 0; d < kMaxGemmRank; ++d) {
        mix(static_cast<uint64_t>(key.dims[i][d]));
        mix(static_cast<uint64_t>(key.strides[i][d]));
      }
      mix(static_cast<uint64_t>(key.dtypes[i]));
    }
    uint32_t alpha_bits;
    std::memcpy(&alpha_bits, &key.alpha, 4);
    mix(alpha_bits);
    mix((key.relu ? 4u : 0u) | (key.bias ? 2u : 0u) | (key.accumulate ? 1u : 0u));
    mix(static_cast<uint64_t>(key.threads));
    return static_cast<size_t>(h);
  }
};

struct GemmPrimitive {
  dnnl::matmul primitive;
  dnnl::memory::desc a_md, b_md, c_md, bias_md;
  size_t scratchpad_bytes = 0;
};

dnnl::memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return dnnl::memory::data_type::f32;
    case DType::bf16:
      return dnnl::memory::data_type::bf16;
    case DType::i32:
    case DType::i8:
      break;
  }
  fail("gemm: element type {} is not supported", dtype_name(dtype));
}

dnnl::memory::desc memory_desc(int rank, const std::array<int64_t, kMaxGemmRank>& dims,
                               const std::array<int64_t, kMaxGemmRank>& strides, DType dtype) {
  dnnl::memory::dims d(dims.begin(), dims.begin() + rank);
  dnnl::memory::dims s(strides.begin(), strides.begin() + rank);
  return dnnl::memory::desc(d, dnnl_type(dtype), s);
}

std::string describe(const GemmOperand& op) {
  std::string s = std::string(dtype_name(op.dtype)) + "[";
  for (int i = 0; i < op.rank; ++i) s += (i ? ", " : "") + std::to_string(op.dims[i]);
  s += "] strides [";
  for (int i = 0; i < op.rank; ++i) s += (i ? ", " : "") + std::to_string(op.strides[i]);
  return s + "]";
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A stream per thread: executions from different threads then share no stream state.
dnnl::stream& cpu_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

std::atomic<int64_t> primitives_made{0};

GemmPrimitive create_primitive(const GemmKey& key) {
  primitives_made.fetch_add(1, std::memory_order_relaxed);
  GemmPrimitive p;
  p.a_md = memory_desc(key.rank, key.dims[0], key.strides[0], key.dtypes[0]);
  p.b_md = memory_desc(key.rank, key.dims[1], key.strides[1], key.dtypes[1]);
  p.c_md = memory_desc(key.rank, key.dims[2], key.strides[2], key.dtypes[2]);
  dnnl::primitive_attr attr;
  // Our caching allocator provides the scratchpad: no per-call system allocation, and concurrent
  // executions of one primitive do not share a library-owned buffer.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.accumulate || key.relu) {
    dnnl::post_ops ops;
    if (key.accumulate) ops.append_sum(1.0f);
    if (key.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd;
  if (key.bias) {
    std::array<int64_t, kMaxGemmRank> bias_dims{}, bias_strides{};
    for (int i = 0; i < key.rank; ++i) bias_dims[i] = 1;
    bias_dims[key.rank - 1] = key.dims[2][key.rank - 1];
    for (int i = 0; i < key.rank; ++i) bias_strides[i] = bias_dims[key.rank - 1];
    bias_strides[key.rank - 1] = 1;
    p.bias_md = memory_desc(key.rank, bias_dims, bias_strides, DType::f32);
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a_md, p.b_md, p.bias_md, p.c_md), attr,
                                      cpu_engine());
  } else {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(p.a_md, p.b_md, p.c_md), attr,
                                      cpu_engine());
  }
  p.scratchpad_bytes = pd.scratchpad_desc().get_size();
  p.primitive = dnnl::matmul(pd);
  return p;
}

// Bounded caches. Batched products (attention's) change shape with every batch's sequence lengths
// and have one of their own, so that they do not push out the one-matrix products, whose shapes
// try_split_for_few_shapes keeps to a few per layer.
using GemmCache = PrimitiveCache<GemmKey, GemmPrimitive, GemmKeyHash>;

GemmCache& gemm_cache(bool batched) {
  static GemmCache matrices(512), batches(256);
  return batched ? batches : matrices;
}

void check_shapes(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  TFM_CHECK(a.rank == b.rank && b.rank == c.rank && a.rank >= 2 && a.rank <= kMaxGemmRank,
            "gemm: operand ranks {}, {}, {} differ or are outside 2..{}", a.rank, b.rank, c.rank,
            kMaxGemmRank);
  bool ok = a.rows() == c.rows() && b.cols() == c.cols() && a.cols() == b.rows();
  for (int i = 0; i < a.rank - 2; ++i) {
    ok = ok && (a.dims[i] == c.dims[i] || a.dims[i] == 1) &&
         (b.dims[i] == c.dims[i] || b.dims[i] == 1);
  }
  TFM_CHECK(ok, "gemm: a {} @ b {} cannot give c {}", describe(a), describe(b), describe(c));
  bool f32_product = a.dtype == DType::f32 && b.dtype == DType::f32 && c.dtype == DType::f32;
  bool bf16_product = a.dtype == DType::bf16 && b.dtype == DType::bf16 && c.dtype != DType::i32;
  TFM_CHECK(f32_product || bf16_product, "gemm: unsupported element types {} @ {} -> {}",
            dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(c.dtype));
}

// c = bias or c += bias (then relu), element by element: the product of an empty inner dimension.
void fill_empty_product(const GemmArgs& args) {
  const GemmOperand& c = args.c;
  TFM_CHECK(c.dtype == DType::f32, "gemm: an empty product into {} is not supported", describe(c));
  std::array<int64_t, kMaxGemmRank> index{};
  int64_t total = 1;
  for (int i = 0; i < c.rank; ++i) total *= c.dims[i];
  for (int64_t n = 0; n < total; ++n) {
    int64_t offset = 0, rest = n;
    for (int i = c.rank - 1; i >= 0; --i) {
      index[i] = rest % c.dims[i];
      rest /= c.dims[i];
      offset += index[i] * c.strides[i];
    }
    float* element = static_cast<float*>(c.data) + offset;
    float value = args.bias ? args.bias[index[c.rank - 1]] : 0.0f;
    *element = args.accumulate ? *element + value : value;
    if (args.relu && *element < 0.0f) *element = 0.0f;
  }
}

// The totals behind gemm_stats(), as integers so that relaxed atomic additions are exact.
std::atomic<int64_t> stat_calls{0};
std::atomic<int64_t> stat_nanoseconds{0};
std::atomic<int64_t> stat_flops{0};

// Per kind of product, while set_gemm_shape_stats(true).
std::atomic<bool> shape_stats_on{false};
std::mutex shape_stats_mutex;
std::unordered_map<std::string, GemmShapeStats>& shape_stats() {
  static auto* stats = new std::unordered_map<std::string, GemmShapeStats>();
  return *stats;
}

// The matrices of c's batch: a batch dim of a or b of 1 is broadcast, so c's dims count.
int64_t batch_matrices(const GemmArgs& args) {
  int64_t matrices = 1;
  for (int i = 0; i < args.c.rank - 2; ++i) matrices *= args.c.dims[i];
  return matrices;
}

// 2*M*N*K per matrix of c's batch.
int64_t product_flops(const GemmArgs& args) {
  return 2 * batch_matrices(args) * args.c.rows() * args.c.cols() * args.a.cols();
}

// Products run by each thread of a parallel region overlap in time: each counts its share of the
// wall time, so that the total stays comparable with the wall time of the work around it.
double thread_share(double seconds) {
  return omp_in_parallel() ? seconds / omp_get_num_threads() : seconds;
}

// Every batch dim 1: one matrix.
bool single_matrix(const GemmOperand& op) {
  for (int i = 0; i < op.rank - 2; ++i)
    if (op.dims[i] != 1) return false;
  return true;
}

template <typename T>
using BlockedKernel = void (*)(int64_t m, int64_t n, int64_t k, Strided<T> a, Strided<T> b,
                               const float* bias, bool accumulate, bool relu, float* c,
                               int64_t ldc);

// A product with a small c and a long sum, such as a weight gradient's sum over a batch's tokens:
// the threads split the sum, not c (whose few 14 x 32 tiles they would otherwise share). Each
// thread sums its share of the inner dimension into c (the first thread, with the bias and c's old
// values) or into a scratch of its own, and then the scratches are added into c, the rows shared
// between the threads.
template <typename T>
void split_sum_across_threads(BlockedKernel<T> kernel, int64_t m, int64_t n, int64_t k,
                              Strided<T> a, Strided<T> b, const float* bias, bool accumulate,
                              float* c, int64_t ldc) {
  const int most_threads = omp_get_max_threads();
  const size_t scratch_bytes = static_cast<size_t>((most_threads - 1) * m * n) * sizeof(float);
  float* scratch = static_cast<float*>(CachingAllocator::cpu().allocate(scratch_bytes));
#pragma omp parallel num_threads(most_threads)
  {
    // The threads the region got (the runtime may give fewer than asked for) share the sum.
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t first = k * t / threads, last = k * (t + 1) / threads;
    const Strided<T> a_part{a.data + first * a.col_stride, a.row_stride, a.col_stride};
    const Strided<T> b_part{b.data + first * b.row_stride, b.row_stride, b.col_stride};
    if (t == 0)
      kernel(m, n, last - first, a_part, b_part, bias, accumulate, false, c, ldc);
    else
      kernel(m, n, last - first, a_part, b_part, nullptr, false, false, scratch + (t - 1) * m * n,
             n);
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t i = 0; i < m; ++i)
      for (int part = 0; part < threads - 1; ++part) {
        const float* row = scratch + (part * m + i) * n;
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] += row[j];
      }
  }
  CachingAllocator::cpu().release(scratch, scratch_bytes);
}

// Whether split_sum_across_threads should run an m x k x n product: c of at most
// kSplitSumMostOutput elements, which the threads would otherwise share in strips, each packing
// all of a, and a sum of at least 512 terms a thread.
bool split_the_sum(int64_t m, int64_t n, int64_t k) {
  const int threads = omp_get_max_threads();
  return threads > 1 && !omp_in_parallel() && m * n <= kSplitSumMostOutput && k >= 512 * threads;
}

// Our blocked kernels (blocked_gemm_cpu.h) for one large matrix (every batch dim 1) of f32, or of
// bf16 operands with an f32 result; alpha 1, c's rows contiguous, a and b each contiguous along one
// of their dims; else false.
bool try_blocked_gemm(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  if (c.dtype != DType::f32 || a.dtype != b.dtype) return false;
  if (args.alpha != 1.0f || c.strides[c.rank - 1] != 1 || !single_matrix(c)) return false;
  auto unit_stride = [](const GemmOperand& op) {
    return op.strides[op.rank - 1] == 1 || op.strides[op.rank - 2] == 1;
  };
  if (!unit_stride(a) || !unit_stride(b)) return false;
  const int64_t m = c.rows(), n = c.cols(), k = a.cols(), ldc = c.strides[c.rank - 2];
  auto view = [](const GemmOperand& op, auto element) {
    using T = decltype(element);
    return Strided<T>{static_cast<const T*>(op.data), op.strides[op.rank - 2],
                      op.strides[op.rank - 1]};
  };
  float* out = static_cast<float*>(c.data);
  if (a.dtype == DType::f32 && blocked_gemm_applies(m, n, k)) {
    if (!args.relu && split_the_sum(m, n, k)) {
      split_sum_across_threads(blocked_gemm_f32, m, n, k, view(a, float{}), view(b, float{}),
                               args.bias, args.accumulate, out, ldc);
      return true;
    }
    blocked_gemm_f32(m, n, k, view(a, float{}), view(b, float{}), args.bias, args.accumulate,
                     args.relu, out, ldc);
    return true;
  }
  if (a.dtype == DType::bf16 && blocked_gemm_bf16_applies(m, n, k)) {
    BlockedKernel<bf16> kernel =
        bf16_products() == Bf16Products::widened ? blocked_gemm_bf16_widened : blocked_gemm_bf16;
    if (!args.relu && split_the_sum(m, n, k)) {
      split_sum_across_threads(kernel, m, n, k, view(a, bf16{}), view(b, bf16{}), args.bias,
                               args.accumulate, out, ldc);
      return true;
    }
    kernel(m, n, k, view(a, bf16{}), view(b, bf16{}), args.bias, args.accumulate, args.relu, out,
           ldc);
    return true;
  }
  return false;
}

// Calls fn(offset of the row's first element, the row's index in row-major order) for each row of
// an operand (every index of its dims but the last).
template <typename Fn>
void for_each_row(const GemmOperand& op, Fn fn) {
  int64_t rows = 1;
  for (int i = 0; i < op.rank - 1; ++i) rows *= op.dims[i];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0, rest = r;
    for (int i = op.rank - 2; i >= 0; --i) {
      offset += (rest % op.dims[i]) * op.strides[i];
      rest /= op.dims[i];
    }
    fn(offset, r);
  }
}

// A row-major f32 copy of a bf16 operand (only the elements it addresses), with the same dims.
GemmOperand dense_f32_copy(const GemmOperand& op, std::vector<float>& buffer) {
  const int64_t cols = op.cols(), col_stride = op.strides[op.rank - 1];
  int64_t total = cols;
  for (int i = 0; i < op.rank - 1; ++i) total *= op.dims[i];
  buffer.resize(static_cast<size_t>(total));
  const bf16* src = static_cast<const bf16*>(op.data);
  for_each_row(op, [&](int64_t offset, int64_t r) {
    float* dst = buffer.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) dst[j] = bf16_to_float(src[offset + j * col_stride]);
  });
  GemmOperand dense = op;
  dense.data = buffer.data();
  dense.dtype = DType::f32;
  int64_t stride = 1;
  for (int i = op.rank - 1; i >= 0; --i) {
    dense.strides[i] = stride;
    stride *= op.dims[i];
  }
  return dense;
}

void run_gemm(const GemmArgs& args);

// A bf16 product where oneDNN has none (onednn_multiplies_bf16()): a and b widened exactly to f32,
// multiplied in f32; a bf16 c widened for the sum and rounded back (to nearest even, as oneDNN).
void run_widened_gemm(const GemmArgs& args) {
  std::vector<float> a_buffer, b_buffer, c_buffer;
  GemmArgs widened = args;
  widened.a = dense_f32_copy(args.a, a_buffer);
  widened.b = dense_f32_copy(args.b, b_buffer);
  if (args.c.dtype == DType::f32) {
    run_gemm(widened);
    return;
  }
  widened.c = dense_f32_copy(args.c, c_buffer);
  run_gemm(widened);
  const GemmOperand& c = args.c;
  const int64_t cols = c.cols(), col_stride = c.strides[c.rank - 1];
  bf16* dst = static_cast<bf16*>(c.data);
  for_each_row(c, [&](int64_t offset, int64_t r) {
    const float* src = c_buffer.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) dst[offset + j * col_stride] = float_to_bf16(src[j]);
  });
}

void run_gemm(const GemmArgs& args);

// A product's row count and inner dimension are often a batch's token count, a new number with
// every batch, and each new shape needs a oneDNN primitive of its own: 0.2 ms to make in f32 and
// about 1.2 ms for AMX's bf16 kernels, more than a Multi30k layer's product takes. So a dimension
// that is neither a multiple of kShapeStep nor a multiple of kTailStep below it is cut in two: a
// part of a multiple of kShapeStep and a tail copied into a block padded with zeros to a multiple
// of kTailStep. A layer then has a few shapes, made once, whatever the batches.
constexpr int64_t kShapeStep = 256;
constexpr int64_t kTailStep = 32;

bool canonical_dim(int64_t d) {
  return d % kShapeStep == 0 || (d < kShapeStep && d % kTailStep == 0);
}

// The block [row0, row0 + rows) x [col0, col0 + cols) of a one-matrix operand, as a view.
GemmOperand block_view(const GemmOperand& op, int64_t row0, int64_t rows, int64_t col0,
                       int64_t cols) {
  GemmOperand view = op;
  const int64_t offset = row0 * op.strides[op.rank - 2] + col0 * op.strides[op.rank - 1];
  view.data = static_cast<char*>(op.data) + offset * static_cast<int64_t>(dtype_size(op.dtype));
  view.dims[op.rank - 2] = rows;
  view.dims[op.rank - 1] = cols;
  return view;
}

// A dense [rows, cols] block of host memory from the caching allocator (zero-filled when
// `zeroed`), released when it goes out of scope: row-major, or column-major where `like` is
// (then a copy into it moves whole columns, and the product sees the layout it already had).
class ScratchMatrix {
 public:
  ScratchMatrix(const GemmOperand& like, int64_t rows, int64_t cols, bool zeroed)
      : bytes_(static_cast<size_t>(rows * cols) * dtype_size(like.dtype)),
        data_(CachingAllocator::cpu().allocate(bytes_)) {
    if (zeroed) std::memset(data_, 0, bytes_);
    const bool column_major = like.strides[like.rank - 2] == 1 && like.strides[like.rank - 1] != 1;
    operand_ = like;
    operand_.data = data_;
    for (int i = 0; i < like.rank - 2; ++i) operand_.dims[i] = 1, operand_.strides[i] = rows * cols;
    operand_.dims[like.rank - 2] = rows;
    operand_.dims[like.rank - 1] = cols;
    operand_.strides[like.rank - 2] = column_major ? 1 : cols;
    operand_.strides[like.rank - 1] = column_major ? rows : 1;
  }
  ~ScratchMatrix() { CachingAllocator::cpu().release(data_, bytes_); }
  ScratchMatrix(const ScratchMatrix&) = delete;
  ScratchMatrix& operator=(const ScratchMatrix&) = delete;
  const GemmOperand& operand() const { return operand_; }

 private:
  size_t bytes_;
  void* data_;
  GemmOperand operand_;
};

// dst[i, j] = src[i, j] for every element of src's rows x cols (both one matrix, same type):
// whole rows where both are row-major, whole columns where both are column-major.
void copy_matrix(const GemmOperand& src, const GemmOperand& dst) {
  const int64_t rows = src.rows(), cols = src.cols(), size = dtype_size(src.dtype);
  const int64_t sr = src.strides[src.rank - 2], sc = src.strides[src.rank - 1];
  const int64_t dr = dst.strides[dst.rank - 2], dc = dst.strides[dst.rank - 1];
  const char* from = static_cast<const char*>(src.data);
  char* to = static_cast<char*>(dst.data);
  if (sc == 1 && dc == 1) {
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(to + i * dr * size, from + i * sr * size, static_cast<size_t>(cols * size));
    return;
  }
  if (sr == 1 && dr == 1) {
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(to + j * dc * size, from + j * sc * size, static_cast<size_t>(rows * size));
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(to + (i * dr + j * dc) * size, from + (i * sr + j * sc) * size,
                  static_cast<size_t>(size));
}

// c's rows [0, head) directly, the tail through a zero-padded block of a multiple of kTailStep
// rows. The padded rows' results are dropped.
void run_gemm_split_rows(const GemmArgs& args) {
  const GemmOperand &a = args.a, &c = args.c;
  const int64_t m = c.rows(), k = a.cols(), n = c.cols();
  const int64_t head = m / kShapeStep * kShapeStep, tail = m - head;
  if (head > 0) {
    GemmArgs part = args;
    part.a = block_view(a, 0, head, 0, k);
    part.c = block_view(c, 0, head, 0, n);
    run_gemm(part);
  }
  const int64_t padded = round_up(tail, kTailStep);
  ScratchMatrix a_tail(a, padded, k, true), c_tail(c, padded, n, args.accumulate);
  copy_matrix(block_view(a, head, tail, 0, k), block_view(a_tail.operand(), 0, tail, 0, k));
  if (args.accumulate)
    copy_matrix(block_view(c, head, tail, 0, n), block_view(c_tail.operand(), 0, tail, 0, n));
  GemmArgs part = args;
  part.a = a_tail.operand();
  part.c = c_tail.operand();
  run_gemm(part);
  copy_matrix(block_view(c_tail.operand(), 0, tail, 0, n), block_view(c, head, tail, 0, n));
}

// The inner dimension [0, head) directly, the tail's columns of a and rows of b through blocks
// padded with zeros (which add nothing to the sums), added to c.
void run_gemm_split_inner(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  const int64_t m = c.rows(), k = a.cols(), n = c.cols();
  const int64_t head = k / kShapeStep * kShapeStep, tail = k - head;
  GemmArgs first = args;
  first.relu = false;  // applied once the sum is whole
  if (head > 0) {
    first.a = block_view(a, 0, m, 0, head);
    first.b = block_view(b, 0, head, 0, n);
    run_gemm(first);
  }
  const int64_t padded = round_up(tail, kTailStep);
  ScratchMatrix a_tail(a, m, padded, true), b_tail(b, padded, n, true);
  copy_matrix(block_view(a, 0, m, head, tail), block_view(a_tail.operand(), 0, m, 0, tail));
  copy_matrix(block_view(b, head, tail, 0, n), block_view(b_tail.operand(), 0, tail, 0, n));
  GemmArgs second = first;
  second.a = a_tail.operand();
  second.b = b_tail.operand();
  if (head > 0) {
    second.bias = nullptr;  // added with the first part
    second.accumulate = true;
  }
  run_gemm(second);
  if (!args.relu) return;
  TFM_CHECK(c.dtype == DType::f32, "gemm: a ReLU on a {} result is not supported", describe(c));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float& x = static_cast<float*>(c.data)[i * c.strides[c.rank - 2] + j * c.strides[c.rank - 1]];
      x = std::max(x, 0.0f);
    }
}

// Cuts a one-matrix product whose rows or inner dimension is not a canonical_dim; false when
// there is nothing to cut, or when a cut would leave a part whose rows are not contiguous in
// memory (the row-major a of a cut inner dimension, say), for which oneDNN 2.6 has only its slower
// gemm:jit products.
bool try_split_for_few_shapes(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  if (!single_matrix(a) || !single_matrix(b) || !single_matrix(c)) return false;
  auto row_major = [](const GemmOperand& op) { return op.strides[op.rank - 1] == 1; };
  auto column_major = [](const GemmOperand& op) { return op.strides[op.rank - 2] == 1; };
  if (!canonical_dim(a.cols()) && column_major(a) && row_major(b)) {
    run_gemm_split_inner(args);
    return true;
  }
  if (!canonical_dim(c.rows()) && row_major(a) && row_major(c)) {
    run_gemm_split_rows(args);
    return true;
  }
  return false;
}

void run_gemm(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  for (int i = 0; i < c.rank; ++i)
    if (c.dims[i] == 0) return;
  if (a.cols() == 0) {
    fill_empty_product(args);
    return;
  }
  if (try_blocked_gemm(args)) return;
  if (a.dtype == DType::bf16 && !onednn_multiplies_bf16()) {
    run_widened_gemm(args);
    return;
  }
  if (try_split_for_few_shapes(args)) return;

  GemmKey key;
  key.rank = c.rank;
  const GemmOperand* ops[3] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    for (int d = 0; d < key.rank; ++d) {
      key.dims[i][d] = ops[i]->dims[d];
      key.strides[i][d] = ops[i]->strides[d];
    }
    key.dtypes[i] = ops[i]->dtype;
  }
  key.bias = args.bias != nullptr;
  key.accumulate = args.accumulate;
  key.relu = args.relu;
  key.alpha = args.alpha;
  key.threads = omp_get_max_threads();

  GemmPrimitive p;
  try {
    p = gemm_cache(!single_matrix(c)).get(key, [&] { return create_primitive(key); });
  } catch (const dnnl::error& e) {
    fail("gemm: oneDNN has no matmul for a {} @ b {} -> c {}: {}", describe(a), describe(b),
         describe(c), e.what());
  }

  dnnl::engine& engine = cpu_engine();
  std::unordered_map<int, dnnl::memory> exec_args = {
      {DNNL_ARG_SRC, dnnl::memory(p.a_md, engine, a.data)},
      {DNNL_ARG_WEIGHTS, dnnl::memory(p.b_md, engine, b.data)},
      {DNNL_ARG_DST, dnnl::memory(p.c_md, engine, c.data)}};
  if (args.bias)
    exec_args.emplace(DNNL_ARG_BIAS,
                      dnnl::memory(p.bias_md, engine, const_cast<float*>(args.bias)));
  void* scratchpad = nullptr;
  if (p.scratchpad_bytes > 0) {
    scratchpad = CachingAllocator::cpu().allocate(p.scratchpad_bytes);
    exec_args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory({{static_cast<int64_t>(p.scratchpad_bytes)},
                                                         dnnl::memory::data_type::u8,
                                                         dnnl::memory::format_tag::a},
                                                        engine, scratchpad));
  }
  try {
    dnnl::stream& stream = cpu_stream();
    p.primitive.execute(stream, exec_args);
    stream.wait();
  } catch (const dnnl::error& e) {
    if (scratchpad) CachingAllocator::cpu().release(scratchpad, p.scratchpad_bytes);
    fail("gemm: oneDNN matmul failed for a {} @ b {} -> c {}: {}", describe(a), describe(b),
         describe(c), e.what());
  }
  if (scratchpad) CachingAllocator::cpu().release(scratchpad, p.scratchpad_bytes);
}

}  // namespace

bool onednn_multiplies_bf16() {
  static const bool multiplies = [] {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a({1, 1}, dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc c({1, 1}, dt::f32, dnnl::memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, a, c), cpu_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return multiplies;
}

namespace {

// "bf16 1024x8000x128 N T", "f32 16x16x32 x256 N T +=" (GemmShapeStats).
std::string shape_of(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  const int64_t matrices = batch_matrices(args);
  auto layout = [](const GemmOperand& op) { return op.strides[op.rank - 1] == 1 ? "N" : "T"; };
  return fmt::format("{} {}x{}x{}{} {} {}{}", dtype_name(a.dtype), c.rows(), c.cols(), a.cols(),
                     matrices > 1 ? fmt::format(" x{}", matrices) : "", layout(a), layout(b),
                     args.accumulate ? " +=" : "");
}

// The one-matrix product `args` into a dense f32 scratch of c's shape, then finish(scratch).
template <class Finish>
void via_f32_scratch(const GemmArgs& args, Finish finish) {
  const int64_t m = args.c.rows(), n = args.c.cols();
  const size_t bytes = static_cast<size_t>(m * n) * sizeof(float);
  float* scratch = static_cast<float*>(CachingAllocator::cpu().allocate(bytes));
  GemmArgs f32 = args;
  f32.c = GemmOperand::dense(scratch, DType::f32, {m, n});
  run_gemm(f32);
  finish(scratch);
  CachingAllocator::cpu().release(scratch, bytes);
}

// A bf16 operand of one matrix as our kernels' view.
StridedBf16Matrix bf16_view(const GemmOperand& op) {
  return StridedBf16Matrix{static_cast<const bf16*>(op.data), op.strides[op.rank - 2],
                           op.strides[op.rank - 1]};
}

// Whether our vdpbf16ps kernel takes the one-matrix bf16 product `args` and rounds its c in its
// tiles' stores: the kernel chosen and large enough (blocked_gemm_bf16_applies), a sum of one depth
// block, a and b each contiguous along one dim.
bool vdpbf16ps_kernel_rounds(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  auto unit_stride = [](const GemmOperand& op) {
    return op.strides[op.rank - 1] == 1 || op.strides[op.rank - 2] == 1;
  };
  const int64_t k = a.cols();
  return k > 0 && k <= blocked_gemm_bf16_rounded_most_depth() && unit_stride(a) && unit_stride(b) &&
         bf16_products() == Bf16Products::dot && blocked_gemm_bf16_applies(c.rows(), c.cols(), k);
}

// A bf16 c without accumulation, one matrix with contiguous rows: the f32 result rounded as
// f32_to_bf16, so that the bits are those of the same product into an f32 c converted with
// f32_to_bf16 whichever kernel runs. Our vdpbf16ps kernel rounds in its tiles' stores where the
// sum is one depth block (no f32 c is written and read again); elsewhere the product runs into an
// f32 scratch that is then rounded. False for any other c.
bool try_gemm_rounded_to_bf16(const GemmArgs& args) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  if (c.dtype != DType::bf16 || args.accumulate || args.alpha != 1.0f || !single_matrix(a) ||
      !single_matrix(b) || !single_matrix(c) || c.strides[c.rank - 1] != 1)
    return false;
  const int64_t m = c.rows(), n = c.cols(), k = a.cols(), ldc = c.strides[c.rank - 2];
  bf16* out = static_cast<bf16*>(c.data);
  if (vdpbf16ps_kernel_rounds(args)) {
    blocked_gemm_bf16_rounded(m, n, k, bf16_view(a), bf16_view(b), args.bias, args.relu, out, ldc);
    return true;
  }
  via_f32_scratch(args, [&](const float* scratch) {
    if (ldc == n) {
      f32_to_bf16(scratch, out, m * n);
    } else {
      for (int64_t i = 0; i < m; ++i) f32_to_bf16(scratch + i * n, out + i * ldc, n);
    }
  });
  return true;
}

}  // namespace

void relu_backward_product_bf16(const GemmArgs& args, const bf16* relu_mask, float* db,
                                bool accumulate_db) {
  const GemmOperand &a = args.a, &b = args.b, &c = args.c;
  check_shapes(args);
  const int64_t m = c.rows(), n = c.cols(), k = a.cols();
  TFM_CHECK(c.dtype == DType::bf16 && single_matrix(a) && single_matrix(b) && single_matrix(c) &&
                c.strides[c.rank - 2] == n && c.strides[c.rank - 1] == 1 && !args.bias &&
                !args.accumulate && !args.relu && args.alpha == 1.0f,
            "relu_backward_product_bf16: c {} must be one dense bf16 matrix, with no bias, "
            "accumulation, ReLU or scale",
            describe(c));
  const auto start = std::chrono::steady_clock::now();
  if (vdpbf16ps_kernel_rounds(args)) {
    blocked_gemm_bf16_relu_backward(m, n, k, bf16_view(a), bf16_view(b), relu_mask,
                                    static_cast<bf16*>(c.data), n, db, accumulate_db);
  } else {
    // The product into an f32 scratch, then the masking pass: the same bits.
    via_f32_scratch(args, [&](const float* scratch) {
      relu_backward_bias_from_bf16(relu_mask, scratch, m, n, static_cast<bf16*>(c.data), db,
                                   accumulate_db);
    });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record_gemm(seconds, static_cast<double>(product_flops(args)), [&] { return shape_of(args); });
}

void gemm(const GemmArgs& args) {
  check_shapes(args);
  const auto start = std::chrono::steady_clock::now();
  if (!try_gemm_rounded_to_bf16(args)) run_gemm(args);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record_gemm(seconds, static_cast<double>(product_flops(args)), [&] { return shape_of(args); });
}

void set_gemm_shape_stats(bool on) {
  std::lock_guard<std::mutex> lock(shape_stats_mutex);
  shape_stats().clear();
  shape_stats_on.store(on, std::memory_order_relaxed);
}

std::vector<GemmShapeStats> gemm_shape_stats() {
  std::vector<GemmShapeStats> all;
  {
    std::lock_guard<std::mutex> lock(shape_stats_mutex);
    for (const auto& [shape, stats] : shape_stats()) all.push_back(stats);
  }
  std::sort(all.begin(), all.end(), [](const GemmShapeStats& x, const GemmShapeStats& y) {
    return x.seconds != y.seconds ? x.seconds > y.seconds : x.shape < y.shape;
  });
  return all;
}

GemmStats gemm_stats() {
  GemmStats stats;
  stats.calls = stat_calls.load(std::memory_order_relaxed);
  stats.seconds = static_cast<double>(stat_nanoseconds.load(std::memory_order_relaxed)) * 1e-9;
  stats.flops = static_cast<double>(stat_flops.load(std::memory_order_relaxed));
  return stats;
}

void record_gemm(double seconds, double flops, const std::function<std::string()>& kind) {
  seconds = thread_share(seconds);
  stat_calls.fetch_add(1, std::memory_order_relaxed);
  stat_nanoseconds.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
  stat_flops.fetch_add(static_cast<int64_t>(flops), std::memory_order_relaxed);
  if (!kind || !shape_stats_on.load(std::memory_order_relaxed)) return;
  const std::string shape = kind();
  std::lock_guard<std::mutex> lock(shape_stats_mutex);
  GemmShapeStats& stats = shape_stats()[shape];
  stats.shape = shape;
  stats.calls += 1;
  stats.seconds += seconds;
  stats.flops += flops;
}

void reset_gemm_stats() {
  stat_calls.store(0, std::memory_order_relaxed);
  stat_nanoseconds.store(0, std::memory_order_relaxed);
  stat_flops.store(0, std::memory_order_relaxed);
}

size_t gemm_cache_size() {
  return gemm_cache(false).size() + gemm_cache(true).size();
}

int64_t gemm_primitives_made() {
  return primitives_made.load(std::memory_order_relaxed);
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
