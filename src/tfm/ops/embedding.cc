// embedding and add_positions: the model's input layer.
#include <limits>

#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/embedding_cpu.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/elementwise_cuda.h"
#include "tfm/kernels/cuda/embedding_cuda.h"
#endif

namespace tfm::ops {

using detail::check_input;

Tensor embedding(const Tensor& ids, const Tensor& table, float scale) {
  check_input(ids, "embedding", "ids", DType::i32);
  check_input(table, "embedding", "table");
  TFM_CHECK(table.rank() == 2, "embedding: table must be [vocabulary, d], got {}",
            table.describe());
  TFM_CHECK(ids.rank() < Shape::kMaxRank, "embedding: ids {} leave no room for the d dimension",
            ids.describe());
  const int64_t vocab = table.dim(0);
  const int64_t d = table.dim(1);
  const int64_t n = ids.numel();
  const Device device = detail::op_device("embedding", ids, table);
  // CPU ids are checked here. CUDA ids are not: reading them on the host would copy them back and
  // wait for the GPU at every lookup. They are checked where they are made (the vocabulary's
  // encode, the batcher), and the CUDA kernel reads nothing out of bounds for a bad id: it gives
  // that row NaN (kernels/cuda/embedding_cuda.h), which the training's non-finite checks report.
  TFM_CHECK(device == Device::cpu || n <= std::numeric_limits<int32_t>::max(),
            "embedding: {} ids are more than the CUDA kernel takes (2^31 - 1)", n);
  if (device == Device::cpu) {
    const int32_t* id = ids.data<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      TFM_CHECK(id[i] >= 0 && id[i] < vocab,
                "embedding: id {} at position {} is outside the vocabulary of size {}", id[i], i,
                vocab);
  }

  std::vector<int64_t> dims = ids.shape().to_vector();
  dims.push_back(d);
  Tensor out = Tensor::empty(Shape(dims), DType::f32, device);
  TFM_DISPATCH_CUDA(
      "embedding", device,
      cpu::embedding(ids.data<int32_t>(), n, table.data<float>(), d, scale, out.data<float>()),
      cuda::embedding(ids.device_data<int32_t>(), n, table.device_data<float>(), vocab, d, scale,
                      out.device_data<float>()));
  if (needs_grad({&table})) {
    out.set_requires_grad(true);
    // Formula in kernels/cpu/embedding_cpu.cc: rows hit by several ids sum their gradients.
    record_backward(out, [ids, table, out, scale, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(table);
      Tensor workspace;  // the CUDA kernel's sort (kernels/cuda/embedding_cuda.h)
#ifdef TFM_HAVE_CUDA
      const int64_t workspace_size =
          device == Device::cuda ? cuda::embedding_backward_workspace(ids.numel(), table.dim(0))
                                 : 0;
      if (workspace_size > 0) workspace = Tensor::empty({workspace_size}, DType::i32, device);
#endif
      TFM_DISPATCH_CUDA(
          "embedding", device,
          cpu::embedding_backward(ids.data<int32_t>(), ids.numel(), g.data<float>(), table.dim(0),
                                  table.dim(1), scale, target.tensor.data<float>(),
                                  target.accumulate),
          cuda::embedding_backward(
              ids.device_data<int32_t>(), ids.numel(), g.device_data<float>(), table.dim(0),
              table.dim(1), scale, target.tensor.device_data<float>(), target.accumulate,
              workspace.defined() ? workspace.device_data<int32_t>() : nullptr));
    });
  }
  return out;
}

Tensor add_positions(const Tensor& x, const Tensor& table, int64_t offset) {
  check_input(x, "add_positions", "x");
  check_input(table, "add_positions", "table");
  TFM_CHECK(x.rank() == 3, "add_positions: x must be [batch, steps, d], got {}", x.describe());
  TFM_CHECK(table.rank() == 2 && table.dim(1) == x.dim(2),
            "add_positions: table must be [max_positions, {}] for x {}, got {}", x.dim(2),
            x.describe(), table.describe());
  const int64_t batch = x.dim(0), steps = x.dim(1), d = x.dim(2);
  TFM_CHECK(offset >= 0 && offset + steps <= table.dim(0),
            "add_positions: positions [{}, {}) do not fit a table of {} positions", offset,
            offset + steps, table.dim(0));

  const Device device = detail::op_device("add_positions", x, table);
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  TFM_DISPATCH_CUDA("add_positions", device,
                    cpu::add_positions(x.data<float>(), table.data<float>(), batch, steps, d,
                                       offset, out.data<float>()),
                    cuda::add_positions(x.device_data<float>(), table.device_data<float>(), batch,
                                        steps, d, offset, out.device_data<float>()));
  if (needs_grad({&x, &table})) {
    out.set_requires_grad(true);
    // out = x + table[offset + t]: dx = g; the table's formula is in kernels/cpu/embedding_cpu.cc.
    record_backward(out, [x, table, out, batch, steps, d, offset, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      if (x.requires_grad()) {
        GradTarget target = grad_target(x);
        TFM_DISPATCH_CUDA("add_positions", device,
                          cpu::write_grad(target.tensor.data<float>(), g.data<float>(), g.numel(),
                                          target.accumulate),
                          cuda::write_grad(target.tensor.device_data<float>(),
                                           g.device_data<float>(), g.numel(), target.accumulate));
      }
      if (table.requires_grad()) {
        GradTarget target = grad_target(table);
        TFM_DISPATCH_CUDA("add_positions", device,
                          cpu::add_positions_backward_table(
                              g.data<float>(), batch, steps, d, offset, table.dim(0),
                              target.tensor.data<float>(), target.accumulate),
                          cuda::add_positions_backward_table(
                              g.device_data<float>(), batch, steps, d, offset, table.dim(0),
                              target.tensor.device_data<float>(), target.accumulate));
      }
    });
  }
  return out;
}

}  // namespace tfm::ops
