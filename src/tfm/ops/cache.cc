// The key/value cache updates of incremental decoding (nn::KeyValueCache): copies of whole
// positions between [rows, capacity, width] buffers. Inference only.
#include <cstring>

#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

namespace {

using detail::KernelTable;

void check_buffer(const Tensor& t, const char* op, const char* name) {
  TFM_CHECK(t.defined() && t.rank() == 3 && (t.dtype() == DType::f32 || t.dtype() == DType::bf16),
            "{}: {} must be an f32 or bf16 [rows, positions, width] buffer, got {}", op, name,
            t.defined() ? t.describe() : "undefined");
}

// A position's size in bytes.
int64_t position_bytes(const Tensor& t) {
  return static_cast<int64_t>(static_cast<size_t>(t.dim(2)) * dtype_size(t.dtype()));
}
}  // namespace

void cache_write(const Tensor& cache, const Tensor& values, int64_t position) {
  check_buffer(cache, "cache_write", "cache");
  check_buffer(values, "cache_write", "values");
  TFM_CHECK(values.dim(0) <= cache.dim(0) && values.dim(2) == cache.dim(2) &&
                values.dtype() == cache.dtype() && position >= 0 &&
                position + values.dim(1) <= cache.dim(1),
            "cache_write: values {} do not fit cache {} at position {}", values.describe(),
            cache.describe(), position);
  const Device device = detail::op_device("cache_write", cache, values);
  detail::kernel("cache_write", device, &KernelTable::cache_write)(
      static_cast<char*>(cache.device_raw()), cache.dim(1),
      static_cast<const char*>(values.device_raw()), values.dim(0), values.dim(1),
      position_bytes(cache), position);
}

void cache_gather(const Tensor& src, const Tensor& slots, const std::vector<int64_t>& rows,
                  int64_t positions, const Tensor& dst) {
  check_buffer(src, "cache_gather", "src");
  check_buffer(dst, "cache_gather", "dst");
  const auto n = static_cast<int64_t>(rows.size());
  TFM_CHECK(dst.dim(0) >= n && dst.dim(2) == src.dim(2) && dst.dtype() == src.dtype() &&
                positions >= 0 && positions <= src.dim(1) && positions <= dst.dim(1),
            "cache_gather: {} rows of {} positions from {} do not fit {}", n, positions,
            src.describe(), dst.describe());
  const int64_t table_rows = slots.defined() ? slots.dim(0) : src.dim(0);
  for (int64_t r : rows)
    TFM_CHECK(r >= 0 && r < table_rows, "cache_gather: row {} of {}", r, table_rows);
  if (slots.defined())
    TFM_CHECK(slots.dtype() == DType::i32 && slots.rank() == 2 && slots.dim(1) >= positions,
              "cache_gather: slots {} must be i32 [rows, >= {}]", slots.describe(), positions);
  const Device device = detail::op_device("cache_gather", src, dst);
  const KernelTable& backend = detail::kernels_for("cache_gather", device);
  const int64_t* row_list = rows.data();
  Tensor device_rows, device_slots = slots;
  if (backend.host_memory) {
    TFM_CHECK(!slots.defined() || slots.device() == device,
              "cache_gather: slots {} are on {}, the buffers on the {}", slots.describe(),
              device_name(slots.device()), backend.name);
  } else {
    if (n == 0 || positions == 0) return;
    // The row list (host bookkeeping) and a host slot table go to the device; each copy waits for
    // the stream. int64 rows travel as pairs of i32 elements (tfm has no i64 dtype).
    Tensor host_rows = Tensor::empty({2 * n}, DType::i32);
    std::memcpy(host_rows.raw(), rows.data(), rows.size() * sizeof(int64_t));
    device_rows = host_rows.to(device);
    row_list = static_cast<const int64_t*>(device_rows.device_raw());
    if (slots.defined()) device_slots = slots.to(device);
  }
  detail::entry("cache_gather", device, backend.cache_gather)(
      static_cast<char*>(dst.device_raw()), dst.dim(1), static_cast<const char*>(src.device_raw()),
      src.dim(1), detail::data_or_null<int32_t>(device_slots), slots.defined() ? slots.dim(1) : 0,
      row_list, n, positions, position_bytes(src));
}

}  // namespace tfm::internal::ops
