#include "tfm/core/tensor.h"

#include <algorithm>
#include <cstring>

#include "tfm/core/allocator.h"

namespace tfm::internal {

Storage::Storage(size_t size, Device dev) : bytes(size), device(dev) {
  data = CachingAllocator::for_device(dev).allocate(size);
}

Storage::~Storage() {
  CachingAllocator::for_device(device).release(data, bytes);
}

namespace {
// bytes from src to dst, on any devices (host to host: memmove, so they may overlap).
void copy_bytes(const Tensor& dst, const Tensor& src, size_t bytes) {
  if (bytes == 0) return;
  if (dst.device() == Device::cpu && src.device() == Device::cpu) {
    std::memmove(dst.device_raw(), src.device_raw(), bytes);
    return;
  }
  const Device device = dst.device() == Device::cpu ? src.device() : dst.device();
  device_memory(device).copy(dst.device_raw(), dst.device() != Device::cpu, src.device_raw(),
                             src.device() != Device::cpu, bytes);
}
}  // namespace

void Tensor::host_access_error() const {
  fail("a {} tensor on {} was read from host code: copy it with to(Device::cpu) first", describe(),
       device_name(device()));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  if (device != Device::cpu) return zeros(shape, dtype).to(device);
  Tensor t = empty(shape, dtype, device);
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::from_floats(const Shape& shape, const std::vector<float>& values) {
  TFM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
            "{} values given for a tensor of shape {}", values.size(), shape.str());
  Tensor t = empty(shape);
  if (t.nbytes() > 0) std::memcpy(t.raw(), values.data(), t.nbytes());  // no data() for none
  return t;
}

Tensor Tensor::from_ints(const Shape& shape, const std::vector<int32_t>& values) {
  TFM_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
            "{} values given for a tensor of shape {}", values.size(), shape.str());
  Tensor t = empty(shape, DType::i32);
  if (t.nbytes() > 0) std::memcpy(t.raw(), values.data(), t.nbytes());  // no data() for none
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  TFM_CHECK(shape.numel() == numel(), "cannot view {} as {}", describe(), shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  t.meta_.reset();
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  TFM_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= dim(0),
            "row slice [{}, {}) out of range for {}", begin, end, describe());
  Tensor t = *this;
  t.meta_.reset();
  int64_t row = dim(0) == 0 ? 0 : numel() / dim(0);
  t.offset_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  copy_bytes(t, *this, nbytes());
  return t;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor t = empty(shape_, dtype_, target);
  copy_bytes(t, *this, nbytes());
  return t;
}

void Tensor::fill(float value) {
  int64_t n = numel();
  switch (dtype_) {
    case DType::f32: {
      float* p = data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = value;
      break;
    }
    case DType::bf16: {
      bf16* p = data<bf16>();
      bf16 v = float_to_bf16(value);
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::i32: {
      int32_t* p = data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(value);
      break;
    }
    case DType::i8: {
      int8_t* p = static_cast<int8_t*>(raw());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int8_t>(value);
      break;
    }
  }
}

void Tensor::copy_from(const Tensor& src) {
  TFM_CHECK(src.numel() == numel() && src.dtype() == dtype_, "cannot copy {} into {}",
            src.describe(), describe());
  TFM_CHECK(src.device() == device() || src.device() == Device::cpu || device() == Device::cpu,
            "cannot copy a tensor on {} into one on {}", device_name(src.device()),
            device_name(device()));
  copy_bytes(*this, src, nbytes());
}

std::vector<float> Tensor::to_floats() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (dtype_) {
      case DType::f32:
        out[i] = data<float>()[i];
        break;
      case DType::bf16:
        out[i] = bf16_to_float(data<bf16>()[i]);
        break;
      case DType::i32:
        out[i] = static_cast<float>(data<int32_t>()[i]);
        break;
      case DType::i8:
        out[i] = static_cast<float>(static_cast<const int8_t*>(raw())[i]);
        break;
    }
  }
  return out;
}

std::vector<int32_t> Tensor::to_ints() const {
  const int32_t* p = data<int32_t>();
  return {p, p + numel()};
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_.str();
}

bool Tensor::requires_grad() const {
  return meta_ && meta_->requires_grad;
}

void Tensor::set_requires_grad(bool enabled) {
  if (!meta_) meta_ = std::make_shared<AutogradMeta>();
  meta_->requires_grad = enabled;
}

Tensor Tensor::grad() const {
  if (!meta_ || !meta_->grad_valid) return {};
  return meta_->grad;
}

void Tensor::zero_grad() {
  if (meta_) meta_->grad_valid = false;
}

namespace {
// An IEEE value is NaN or infinite exactly when its exponent bits are all ones.
template <typename Bits>
int64_t first_all_ones_exponent(const Bits* bits, int64_t n, Bits exponent_mask) {
  int64_t first = n;
  constexpr int64_t kBlock = 1 << 16;
#pragma omp parallel for reduction(min : first) schedule(static) if (n > 4 * kBlock)
  for (int64_t block = 0; block < n; block += kBlock) {
    const int64_t end = std::min(n, block + kBlock);
    bool any = false;
    for (int64_t i = block; i < end; ++i) any |= (bits[i] & exponent_mask) == exponent_mask;
    if (!any) continue;
    for (int64_t i = block; i < end; ++i)
      if ((bits[i] & exponent_mask) == exponent_mask) {
        first = std::min(first, i);
        break;
      }
  }
  return first == n ? -1 : first;
}
}  // namespace

int64_t first_non_finite(const Tensor& tensor) {
  if (!tensor.defined() || tensor.numel() == 0) return -1;
  // A device's tensor is read from a host copy (checkpoints and loaded weights: not in a step).
  if (tensor.device() != Device::cpu) return first_non_finite(tensor.to(Device::cpu));
  switch (tensor.dtype()) {
    case DType::f32:
      return first_all_ones_exponent(static_cast<const uint32_t*>(tensor.raw()), tensor.numel(),
                                     uint32_t{0x7f800000});
    case DType::bf16:
      return first_all_ones_exponent(static_cast<const uint16_t*>(tensor.raw()), tensor.numel(),
                                     uint16_t{0x7f80});
    case DType::i32:
    case DType::i8:
      return -1;
  }
  return -1;
}

}  // namespace tfm::internal
