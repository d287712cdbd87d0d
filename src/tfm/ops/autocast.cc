#include "tfm/ops/autocast.h"

#include <fmt/format.h>

#include <atomic>

#include "tfm/kernels/cpu/isa_dispatch.h"
#include "tfm/ops/dispatch.h"

namespace tfm::internal::ops {

namespace {

std::atomic<int64_t> conversion_calls{0};
std::atomic<int64_t> converted_elements{0};

}  // namespace

bool native_bf16_products() {
  // The kernel set in use decides (isa_dispatch.h): a level forced below avx512-bf16 has neither
  // vdpbf16ps nor oneDNN's bf16 products.
  const cpu::IsaKernels& k = *cpu::cpu_dispatch().kernels;
  if (k.onednn_uses_amx()) return true;
  // Where vdpbf16ps does no more multiply-adds a second than the FMA (an Intel Xeon without AMX),
  // bf16 products are widened to f32 (cpu::bf16_products()) and run no faster than f32's; 0: the
  // kernel set has no AVX512-BF16.
  const double rate = k.vdpbf16ps_to_fma_rate();
  return rate > 1;
}

std::string describe_products(DType precision, Device device) {
  if (precision != DType::bf16 || device != Device::cpu) return "";
  const cpu::IsaKernels& k = *cpu::cpu_dispatch().kernels;
  if (!k.onednn_multiplies_bf16()) return " (widened to f32: this CPU has no bf16 products)";
  if (!k.bf16_products_widened()) return "";
  return fmt::format(
      " (widened to f32: this CPU's vdpbf16ps does {:.2f}x the multiply-adds of its FMA)",
      k.vdpbf16ps_to_fma_rate());
}

std::string describe_cpu() {
  const cpu::IsaKernels& k = *cpu::cpu_dispatch().kernels;
  std::string text = cpu::describe_cpu_dispatch();
  const double rate = k.vdpbf16ps_to_fma_rate();
  std::string why;
  if (k.onednn_uses_amx())
    why = "oneDNN multiplies bf16 on AMX tiles";
  else if (rate == 0)
    why = "the kernels in use have no AVX512-BF16";
  else
    why = fmt::format("vdpbf16ps does {:.2f}x the multiply-adds a second of the FMA ({} 1)", rate,
                      rate > 1 ? ">" : "<=");
  text += fmt::format("vdpbf16ps / FMA rate  {:.2f} (measured now; 0: no AVX512-BF16)\n", rate);
  text +=
      fmt::format("precision auto        {}: {}\n", native_bf16_products() ? "bf16" : "f32", why);
  const std::string split = k.product_split();
  if (split.empty())
    text += "threads' split        none: the kernels in use have no blocked products\n";
  else if (split == "even")
    text += "threads' split        even: equal parts of each product (TFM_CPU_SPLIT=even)\n";
  else
    text +=
        "threads' split        measured: each thread's part of a product follows its measured "
        "rate; a decoding step's short products: a thread that runs out takes from the other's "
        "range (TFM_CPU_SPLIT=even: equal parts)\n";
  text += "int8 products         " + k.int8_products() + "\n";
  return text;
}

bool native_bf16_products(Device device) {
  if (device == Device::cpu) return native_bf16_products();
  const kernels::KernelTable* backend = kernels::registered_kernels(device);
  return backend != nullptr && backend->multiplies_bf16_natively != nullptr &&
         backend->multiplies_bf16_natively();
}

DType parse_precision(const std::string& name, const char* what, Device device) {
  if (name == "f32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "auto") return native_bf16_products(device) ? DType::bf16 : DType::f32;
  fail("{}: '{}' is not a precision (f32, bf16 or auto)", what, name);
}

Tensor to_bf16(const Tensor& x) {
  TFM_CHECK(x.defined() && x.dtype() == DType::f32, "to_bf16: {} must be f32",
            x.defined() ? x.describe() : std::string("an undefined tensor"));
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::bf16, device);
  detail::kernel("to_bf16", device, &kernels::KernelTable::f32_to_bf16)(
      x.device_data<float>(), out.device_data<bf16>(), x.numel());
  conversion_calls.fetch_add(1, std::memory_order_relaxed);
  converted_elements.fetch_add(x.numel(), std::memory_order_relaxed);
  return out;
}

Bf16Conversions bf16_conversions() {
  return {conversion_calls.load(std::memory_order_relaxed),
          converted_elements.load(std::memory_order_relaxed)};
}

}  // namespace tfm::internal::ops
