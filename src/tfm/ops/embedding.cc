// embedding and add_positions: the model's input layer.
#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::check_input;
using detail::KernelTable;

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
  const KernelTable& backend = detail::kernels_for("embedding", device);
  // Ids in host memory are checked here. A GPU's are not: reading them on the host would copy
  // them back and wait for the GPU at every lookup. They are checked where they are made (the
  // vocabulary's encode, the batcher), and a device kernel reads nothing out of bounds for a bad
  // id: it gives that row NaN, which the training's non-finite checks report.
  TFM_CHECK(backend.max_embedding_ids == 0 || n <= backend.max_embedding_ids,
            "embedding: {} ids are more than the {} kernel takes (2^31 - 1)", n, backend.name);
  if (backend.host_memory) {
    const int32_t* id = ids.data<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      TFM_CHECK(id[i] >= 0 && id[i] < vocab,
                "embedding: id {} at position {} is outside the vocabulary of size {}", id[i], i,
                vocab);
  }

  std::vector<int64_t> dims = ids.shape().to_vector();
  dims.push_back(d);
  Tensor out = Tensor::empty(Shape(dims), DType::f32, device);
  detail::entry("embedding", device, backend.embedding)(ids.device_data<int32_t>(), n,
                                                        table.device_data<float>(), vocab, d, scale,
                                                        out.device_data<float>());
  if (needs_grad({&table})) {
    out.set_requires_grad(true);
    // Formula in kernels/cpu/embedding_cpu.cc: rows hit by several ids sum their gradients.
    record_backward(out, [ids, table, out, scale, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      const KernelTable& kernels = detail::kernels_for("embedding", device);
      GradTarget target = grad_target(table);
      // A device kernel's scratch for its sort of the ids; none on the CPU.
      Tensor workspace = detail::workspace(kernels.embedding_backward_workspace, DType::i32, device,
                                           ids.numel(), table.dim(0));
      detail::entry("embedding", device, kernels.embedding_backward)(
          ids.device_data<int32_t>(), ids.numel(), g.device_data<float>(), table.dim(0),
          table.dim(1), scale, target.tensor.device_data<float>(), target.accumulate,
          detail::data_or_null<int32_t>(workspace));
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
  detail::kernel("add_positions", device, &KernelTable::add_positions)(
      x.device_data<float>(), table.device_data<float>(), batch, steps, d, offset,
      out.device_data<float>());
  if (needs_grad({&x, &table})) {
    out.set_requires_grad(true);
    // out = x + table[offset + t]: dx = g; the table's formula is in kernels/cpu/embedding_cpu.cc.
    record_backward(out, [x, table, out, batch, steps, d, offset, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      if (x.requires_grad()) {
        GradTarget target = grad_target(x);
        detail::kernel("add_positions", device, &KernelTable::write_grad)(
            target.tensor.device_data<float>(), g.device_data<float>(), g.numel(),
            target.accumulate, 1.0f);
      }
      if (table.requires_grad()) {
        GradTarget target = grad_target(table);
        detail::kernel("add_positions", device, &KernelTable::add_positions_backward_table)(
            g.device_data<float>(), batch, steps, d, offset, table.dim(0),
            target.tensor.device_data<float>(), target.accumulate);
      }
    });
  }
  return out;
}

}  // namespace tfm::internal::ops
