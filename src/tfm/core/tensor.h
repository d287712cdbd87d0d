// Tensor: a contiguous, row-major block of elements with a shape, an element type and a device.
// Copies are cheap handles that share storage. Host code reads elements through data<T>() / raw(),
// which refuse a tensor on another device (a host pointer into device memory is a crash waiting
// to happen: copy it with to(Device::cpu) first); the kernels an op dispatches to take
// device_data<T>() / device_raw(), the address in the tensor's own device memory. A tensor that
// requires a gradient carries an AutogradMeta holding its gradient buffer; the tape
// (autograd/tape.h) fills it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/core/error.h"
#include "tfm/core/shape.h"

namespace tfm::internal {

// Owns one block from the device's caching allocator.
struct Storage {
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t bytes = 0;
  Device device = Device::cpu;
};

class Tensor;
struct AutogradMeta;

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor full(const Shape& shape, float value);
  static Tensor from_floats(const Shape& shape, const std::vector<float>& values);
  static Tensor from_ints(const Shape& shape, const std::vector<int32_t>& values);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::cpu; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  // Host access: fails unless the tensor is on the CPU.
  void* raw() const {
    if (storage_->device != Device::cpu) host_access_error();
    return device_raw();
  }
  template <typename T>
  T* data() const {
    TFM_CHECK(dtype_of<T>() == dtype_, "tensor of dtype {} read as {}", dtype_name(dtype_),
              dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }
  // The address in the tensor's device memory, for a kernel of that device (ops/ dispatch).
  void* device_raw() const { return static_cast<char*>(storage_->data) + offset_; }
  template <typename T>
  T* device_data() const {
    TFM_CHECK(dtype_of<T>() == dtype_, "tensor of dtype {} read as {}", dtype_name(dtype_),
              dtype_name(dtype_of<T>()));
    return static_cast<T*>(device_raw());
  }

  // A view with another shape of the same number of elements, sharing storage (no autograd link:
  // use ops::reshape inside a recorded forward).
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) of the first dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // A deep copy, on the same device.
  Tensor clone() const;
  // A copy on `device` (without autograd record); on its own device: the tensor itself.
  Tensor to(Device device) const;
  void fill(float value);  // host tensors only
  // Copies the elements of src (same numel and dtype, any device) into this tensor.
  void copy_from(const Tensor& src);

  // All elements converted to float (f32, bf16 or i32).
  std::vector<float> to_floats() const;
  std::vector<int32_t> to_ints() const;
  std::string describe() const;  // e.g. "f32[2, 3]"

  // Autograd.
  bool requires_grad() const;
  void set_requires_grad(bool enabled);
  // The gradient after a backward pass (undefined when none reached this tensor).
  Tensor grad() const;
  void zero_grad();
  AutogradMeta* autograd_meta() const { return meta_.get(); }
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  [[noreturn]] void host_access_error() const;

  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::f32;
  std::shared_ptr<AutogradMeta> meta_;
};

// The index of the first NaN or infinity among a tensor's f32/bf16 elements (a device's tensor is
// read from a host copy), or -1 (always
// -1 for i32). Loaded weights, checkpoints and gradients are checked with it.
int64_t first_non_finite(const Tensor& tensor);

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;              // buffer kept between steps so that no step allocates it again
  bool grad_valid = false;  // false: the buffer holds nothing yet (zero_grad is free)
};

}  // namespace tfm::internal
