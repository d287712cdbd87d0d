#include "tfm/kernels/kernel_args.h"

#include "tfm/core/error.h"

namespace tfm::internal::kernels {

GemmOperand GemmOperand::strided(const void* data, DType dtype, std::initializer_list<int64_t> dims,
                                 std::initializer_list<int64_t> strides) {
  TFM_CHECK(dims.size() == strides.size() && dims.size() >= 2 && dims.size() <= kMaxGemmRank,
            "gemm operand: {} dims with {} strides (rank 2 to {} expected)", dims.size(),
            strides.size(), kMaxGemmRank);
  GemmOperand op;
  op.data = const_cast<void*>(data);
  op.dtype = dtype;
  op.rank = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), op.dims.begin());
  std::copy(strides.begin(), strides.end(), op.strides.begin());
  return op;
}

GemmOperand GemmOperand::dense(const void* data, DType dtype, std::initializer_list<int64_t> dims) {
  GemmOperand op = strided(data, dtype, dims, dims);
  int64_t stride = 1;
  for (int i = op.rank - 1; i >= 0; --i) {
    op.strides[i] = stride;
    stride *= op.dims[i];
  }
  return op;
}

GemmOperand GemmOperand::transposed() const {
  GemmOperand op = *this;
  std::swap(op.dims[rank - 2], op.dims[rank - 1]);
  std::swap(op.strides[rank - 2], op.strides[rank - 1]);
  return op;
}

}  // namespace tfm::internal::kernels
