// ops::matmul, ops::linear and ops::linear_relu: shape checks, the forward product, and the
// backward products. Every product is one strided call of the device's gemm (oneDNN's matmul on
// the CPU, kernels/cpu/matmul_cpu.h); transposes are views, and gradients are written into their
// GradTarget directly, adding (GemmArgs::accumulate) when the buffer already holds a gradient from
// another use of the same tensor.
#include <algorithm>

#include "tfm/autograd/tape.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::ops {

namespace {

using detail::KernelTable;
using kernels::GemmArgs;
using kernels::GemmOperand;

// The product of the dimensions before the last two.
int64_t batch_count(const Shape& shape) {
  int64_t n = 1;
  for (int i = 0; i < shape.rank() - 2; ++i) n *= shape[i];
  return n;
}

// op(x) of a rank-3 [batch, r, c] block as a product operand: x itself, or each matrix's
// transpose. batch 1 with a larger batch elsewhere broadcasts.
// The operands hold device addresses (device_raw): gemm() hands them to the device's library.
GemmOperand operand(const Tensor& t, int64_t batch, bool transposed) {
  GemmOperand op = GemmOperand::dense(t.device_raw(), t.dtype(), {batch, t.dim(-2), t.dim(-1)});
  return transposed ? op.transposed() : op;
}

GemmOperand flat_rows(const Tensor& t, int64_t rows, int64_t cols) {
  return GemmOperand::dense(t.device_raw(), t.dtype(), {rows, cols});
}

// A product on the device whose memory the operands point into: oneDNN or cuBLASLt.
void gemm_on(const char* op, Device device, const GemmArgs& args) {
  detail::kernel(op, device, &KernelTable::gemm)(args);
}

void run_gemm(Device device, const GemmOperand& a, const GemmOperand& b, const GemmOperand& c,
              bool accumulate) {
  GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.accumulate = accumulate;
  gemm_on("matmul", device, args);
}

// Shapes of a matmul, after its checks. Leading dimensions are flattened into `batch`.
struct MatmulDims {
  int64_t batch, m, k, n;
  bool shared_b;  // b is rank 2 and used by every batch
};

MatmulDims check_matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  TFM_CHECK(a.defined() && b.defined(), "matmul: an input is undefined");
  TFM_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32,
            "matmul: a {} and b {} must both be f32", a.describe(), b.describe());
  TFM_CHECK(a.rank() >= 2 && b.rank() >= 2, "matmul: a {} and b {} must have rank >= 2",
            a.describe(), b.describe());
  MatmulDims d;
  d.shared_b = b.rank() == 2 && a.rank() > 2;
  bool same_batch = a.rank() == b.rank();
  for (int i = 0; same_batch && i < a.rank() - 2; ++i) same_batch = a.dim(i) == b.dim(i);
  TFM_CHECK(d.shared_b || same_batch,
            "matmul: b {} must be rank 2 or share the leading dimensions of a {}", b.describe(),
            a.describe());
  d.batch = batch_count(a.shape());
  d.m = trans_a ? a.dim(-1) : a.dim(-2);
  d.k = trans_a ? a.dim(-2) : a.dim(-1);
  int64_t b_k = trans_b ? b.dim(-1) : b.dim(-2);
  d.n = trans_b ? b.dim(-2) : b.dim(-1);
  TFM_CHECK(d.k == b_k, "matmul: inner dimensions differ: a {}{} @ b {}{}", a.describe(),
            trans_a ? "^T" : "", b.describe(), trans_b ? "^T" : "");
  return d;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  MatmulDims d = check_matmul(a, b, trans_a, trans_b);
  const Device device = detail::op_device("matmul", a, b);
  Shape out_shape = a.shape();
  out_shape[-2] = d.m;
  out_shape[-1] = d.n;
  Tensor out = Tensor::empty(out_shape, DType::f32, device);
  GemmOperand c = GemmOperand::dense(out.device_raw(), DType::f32, {d.batch, d.m, d.n});

  // A shared b times a row-major a is one product over all rows of a: [batch*M, K] @ [K, N].
  bool fold_rows = d.shared_b && !trans_a;
  if (fold_rows) {
    GemmOperand op_b = flat_rows(b, b.dim(0), b.dim(1));
    run_gemm(device, flat_rows(a, d.batch * d.m, d.k), trans_b ? op_b.transposed() : op_b,
             flat_rows(out, d.batch * d.m, d.n), false);
  } else {
    run_gemm(device, operand(a, d.batch, trans_a), operand(b, d.shared_b ? 1 : d.batch, trans_b), c,
             false);
  }
  if (!needs_grad({&a, &b})) return out;

  // The closure's copy of `out` must share its autograd record, which this creates.
  out.set_requires_grad(true);
  record_backward(out, [a, b, out, d, trans_a, trans_b, fold_rows, device]() {
    Tensor g = out.grad();
    if (!g.defined()) return;
    GemmOperand dc = operand(g, d.batch, false);
    GemmOperand op_a = operand(a, d.batch, trans_a);
    GemmOperand op_b = operand(b, d.shared_b ? 1 : d.batch, trans_b);
    if (a.requires_grad()) {
      // d op(A) = dC op(B)^T. When a is stored transposed, dA = (d op(A))^T = op(B) dC^T, so the
      // result is always written row-major.
      GradTarget da = grad_target(a);
      GemmOperand out_a = operand(da.tensor, d.batch, false);
      if (!trans_a) {
        run_gemm(device, dc, op_b.transposed(), out_a, da.accumulate);
      } else {
        run_gemm(device, op_b, dc.transposed(), out_a, da.accumulate);
      }
    }
    if (b.requires_grad()) {
      // d op(B) = op(A)^T dC; when b is stored transposed, dB = dC^T op(A). A shared b sums this
      // over the batch: one product over all rows when a is row-major, otherwise one product per
      // batch adding into the first.
      GradTarget db = grad_target(b);
      if (fold_rows) {
        GemmOperand rows_a = flat_rows(a, d.batch * d.m, d.k);
        GemmOperand rows_g = flat_rows(g, d.batch * d.m, d.n);
        GemmOperand out_b = flat_rows(db.tensor, db.tensor.dim(0), db.tensor.dim(1));
        if (!trans_b) {
          run_gemm(device, rows_a.transposed(), rows_g, out_b, db.accumulate);
        } else {
          run_gemm(device, rows_g.transposed(), rows_a, out_b, db.accumulate);
        }
      } else if (d.shared_b) {
        GemmOperand out_b = flat_rows(db.tensor, db.tensor.dim(0), db.tensor.dim(1));
        if (d.batch == 0 && !db.accumulate) fill_in_place({db.tensor}, 0.0f);
        // Here a is stored transposed: a_i is [K, M] and op(A_i) = a_i^T.
        for (int64_t i = 0; i < d.batch; ++i) {
          GemmOperand a_i =
              GemmOperand::dense(a.device_data<float>() + i * d.k * d.m, DType::f32, {d.k, d.m});
          GemmOperand g_i =
              GemmOperand::dense(g.device_data<float>() + i * d.m * d.n, DType::f32, {d.m, d.n});
          bool accumulate = db.accumulate || i > 0;
          if (!trans_b) {
            run_gemm(device, a_i, g_i, out_b, accumulate);
          } else {
            run_gemm(device, g_i.transposed(), a_i.transposed(), out_b, accumulate);
          }
        }
      } else {
        GemmOperand out_b = operand(db.tensor, d.batch, false);
        if (!trans_b) {
          run_gemm(device, op_a.transposed(), dc, out_b, db.accumulate);
        } else {
          run_gemm(device, dc.transposed(), op_a, out_b, db.accumulate);
        }
      }
    }
  });
  return out;
}

namespace {

// db (+)= the column sums of g [rows, cols], with the scratch of a device kernel's two stages
// (none on the CPU), kept alive until the kernels are queued.
void bias_grad(const char* op, const Tensor& g, int64_t rows, int64_t cols, Tensor& db,
               bool accumulate) {
  const Device device = g.device();
  const KernelTable& backend = detail::kernels_for(op, device);
  Tensor workspace = detail::workspace(backend.sum_rows_workspace, DType::f32, device, rows, cols);
  detail::entry(op, device, backend.sum_rows)(g.device_data<float>(), rows, cols,
                                              db.device_data<float>(), accumulate,
                                              detail::data_or_null<float>(workspace));
}

// x rounded to bf16: the caller's copy (ProductOptions::x_bf16) when it has one, else a fresh one.
Tensor bf16_operand(const Tensor& x, const ProductOptions& product) {
  if (!product.x_bf16.defined()) return to_bf16(x);
  TFM_CHECK(product.x_bf16.dtype() == DType::bf16 && product.x_bf16.shape() == x.shape() &&
                product.x_bf16.device() == x.device(),
            "linear: the bf16 copy {} of x does not match x {}", product.x_bf16.describe(),
            x.describe());
  return product.x_bf16;
}

// The arguments of y = x W^T + b: f32 x [..., in], weight [out, in] and bias [out] or undefined.
void check_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TFM_CHECK(x.defined() && weight.defined(), "{}: an input is undefined", op);
  TFM_CHECK(x.dtype() == DType::f32 && weight.dtype() == DType::f32,
            "{}: x {} and weight {} must both be f32", op, x.describe(), weight.describe());
  TFM_CHECK(weight.rank() == 2 && x.rank() >= 1 && x.dim(-1) == weight.dim(1),
            "{}: x {} does not fit weight {} (expected x [..., {}] and weight [out, in])", op,
            x.describe(), weight.describe(), weight.rank() == 2 ? weight.dim(1) : -1);
  if (bias.defined()) {
    TFM_CHECK(bias.dtype() == DType::f32 && bias.rank() == 1 && bias.dim(0) == weight.dim(0),
              "{}: bias {} must be f32[{}] for weight {}", op, bias.describe(), weight.dim(0),
              weight.describe());
  }
}

// linear and linear_relu: y = x W^T + b, and y = max(0, x W^T + b) when `relu`; and with a packed
// weight in inference, y = swish or GELU of x W^T + b (`activation`: linear_swish, linear_gelu).
Tensor linear_product(const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const ProductOptions& product, bool relu,
                      kernels::PostOp activation = kernels::PostOp::none) {
  const char* op = relu                                   ? "linear_relu"
                   : activation == kernels::PostOp::swish ? "linear_swish"
                   : activation == kernels::PostOp::gelu  ? "linear_gelu"
                                                          : "linear";
  check_linear(op, x, weight, bias);
  int64_t in = weight.dim(1), out_features = weight.dim(0);
  TFM_CHECK(product.dtype == DType::f32 || product.dtype == DType::bf16,
            "{}: products in {} are not supported (f32 or bf16)", op, dtype_name(product.dtype));
  if (product.packed) {
    // An i8 weight serves products of either float precision (its activations are quantised).
    TFM_CHECK((product.packed->dtype() == product.dtype || product.packed->dtype() == DType::i8) &&
                  product.packed->out_features() == out_features &&
                  product.packed->in_features() == in,
              "{}: the packed weight {}[{}, {}] is not weight {} packed for {} products", op,
              dtype_name(product.packed->dtype()), product.packed->out_features(),
              product.packed->in_features(), weight.describe(), dtype_name(product.dtype));
  }
  int64_t rows = 1;
  for (int i = 0; i < x.rank() - 1; ++i) rows *= x.dim(i);
  Shape out_shape = x.shape();
  out_shape[-1] = out_features;
  const Device device = detail::op_device(op, x, weight, bias);
  Tensor out = Tensor::empty(out_shape, DType::f32, device);

  // Inference with the weight packed at load (in the product type): no gradient to record.
  if (product.packed && !needs_grad({&x, &weight, &bias})) {
    TFM_CHECK(product.packed->device() == device, "{}: the packed weight is on {}, x on {}", op,
              device_name(product.packed->device()), device_name(device));
    Tensor x_op = product.packed->dtype() == DType::bf16 ? bf16_operand(x, product) : x;
    const kernels::PostOp post = relu ? kernels::PostOp::relu : activation;
    detail::kernel(op, device, &KernelTable::packed_linear)(
        x_op.device_raw(), rows, product.packed->form(), detail::data_or_null<float>(bias),
        out.device_data<float>(), post);
    return out;
  }
  TFM_CHECK(activation == kernels::PostOp::none,
            "{}: only a packed weight in inference applies its activation in its product", op);

  // y = x W^T + b: W^T is a view of W with swapped strides. For bf16 products both operands are
  // rounded to bf16 (the weight once per call: its copy is what the backward multiplies with) and
  // the product accumulates in f32.
  const bool bf16_product = product.dtype == DType::bf16;
  Tensor x_op = bf16_product ? bf16_operand(x, product) : x;
  Tensor w_op = bf16_product ? to_bf16(weight) : weight;
  GemmArgs args;
  args.a = flat_rows(x_op, rows, in);
  args.b = flat_rows(w_op, out_features, in).transposed();
  args.c = flat_rows(out, rows, out_features);
  args.bias = bias.defined() ? bias.device_data<float>() : nullptr;
  args.relu = relu;
  gemm_on(op, device, args);
  if (!needs_grad({&x, &weight, &bias})) return out;

  // The closure's copy of `out` must share its autograd record, which this creates. It keeps the
  // operands as the product saw them (bf16 for bf16 products: half the memory of the f32 input).
  out.set_requires_grad(true);
  record_backward(out, [x, weight, bias, out, x_op, w_op, bf16_product, relu, rows, in,
                        out_features, device]() {
    Tensor g = out.grad();
    if (!g.defined()) return;
    // For bf16 products the incoming gradient is rounded to bf16 as well; results stay f32.
    Tensor g_op;
    const bool bias_grad_wanted = bias.defined() && bias.requires_grad();
    bool bias_grad_done = false;
    const KernelTable& backend = detail::kernels_for("linear_relu", device);
    if (relu && bf16_product && backend.relu_backward_bias_bf16 != nullptr) {
      // y = max(0, u): du = g where y > 0 (0 at the kink, as ops::relu). Under bf16 products the
      // products take du's bf16 copy and the bias's gradient its column sums: one pass writes
      // both, and du itself is never stored in f32.
      g_op = Tensor::empty(g.shape(), DType::bf16, g.device());
      float* db = nullptr;
      bool accumulate_db = false;
      if (bias_grad_wanted) {
        GradTarget target = grad_target(bias);
        db = target.tensor.device_data<float>();
        accumulate_db = target.accumulate;
        bias_grad_done = true;
      }
      backend.relu_backward_bias_bf16(out.device_data<float>(), g.device_data<float>(), rows,
                                      out_features, g_op.device_data<bf16>(), db, accumulate_db);
    } else if (relu) {
      // y = max(0, u): du = g where y > 0 (0 at the kink, as ops::relu), then u's
      // backward below. Under bf16 products the same pass writes du's bf16 copy.
      Tensor masked = Tensor::empty(g.shape(), DType::f32, g.device());
      if (bf16_product) {
        g_op = Tensor::empty(g.shape(), DType::bf16, g.device());
        detail::kernel("linear_relu", device, &KernelTable::relu_backward_bf16)(
            out.device_data<float>(), g.device_data<float>(), masked.device_data<float>(),
            g_op.device_data<bf16>(), g.numel());
      } else {
        detail::kernel("linear_relu", device, &KernelTable::relu_backward)(
            out.device_data<float>(), g.device_data<float>(), masked.device_data<float>(),
            g.numel(), false);
      }
      g = masked;
    }
    if (!g_op.defined()) g_op = bf16_product ? to_bf16(g) : g;
    GemmOperand g_rows = flat_rows(g_op, rows, out_features);
    if (x.requires_grad()) {
      // dx = g W  ([rows, out] @ [out, in]).
      GradTarget dx = grad_target(x);
      run_gemm(device, g_rows, flat_rows(w_op, out_features, in), flat_rows(dx.tensor, rows, in),
               dx.accumulate);
    }
    if (weight.requires_grad()) {
      // dW = g^T x, summed over every leading dimension of x  ([out, rows] @ [rows,
      // in]).
      GradTarget dw = grad_target(weight);
      run_gemm(device, g_rows.transposed(), flat_rows(x_op, rows, in),
               flat_rows(dw.tensor, out_features, in), dw.accumulate);
    }
    if (bias_grad_wanted && !bias_grad_done) {
      // db = sum over rows of g. Threads own blocks of columns, so no two write one
      // element.
      GradTarget db = grad_target(bias);
      bias_grad("linear", g, rows, out_features, db.tensor, db.accumulate);
    }
  });
  return out;
}

// relu_feed_forward with its hidden layer kept only in bf16, on a backend with
// relu_backward_product_bf16 (the caller checked).
//   h = bf16(relu(x W1^T + b1)), rounded in the product's store; y = h W2^T + b2.
// Backward, with g = dL/dy and g16 = bf16(g):
//   dW2 = g16^T h, db2 = sum_rows(g), dh = g16 W2,
//   du = dh where h > 0, its bf16 copy du16 and db1 = sum_rows(du) in dh's product
//   (KernelTable::relu_backward_product_bf16: dh is never stored),
//   dx = du16 W1, dW1 = du16^T x16.
// These are linear_relu's and linear's products on the same operands, so the bits are theirs; the
// mask reads h > 0 for y > 0, which differ only where 0 < y < 2^-133 rounds to 0 (as PyTorch's
// autocast, whose ReLU sees the bf16 product).
Tensor relu_feed_forward_bf16(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                              const Tensor& b2, const Device device) {
  const char* op = "relu_feed_forward";
  const int64_t d_model = w1.dim(1), d_ff = w1.dim(0), out_features = w2.dim(0);
  const int64_t rows = x.numel() / d_model;
  const Tensor x_op = to_bf16(x), w1_op = to_bf16(w1), w2_op = to_bf16(w2);
  Tensor hidden = Tensor::empty({rows, d_ff}, DType::bf16, device);
  GemmArgs first;
  first.a = flat_rows(x_op, rows, d_model);
  first.b = flat_rows(w1_op, d_ff, d_model).transposed();
  first.c = flat_rows(hidden, rows, d_ff);
  first.bias = b1.defined() ? b1.device_data<float>() : nullptr;
  first.relu = true;
  gemm_on(op, device, first);
  Shape out_shape = x.shape();
  out_shape[-1] = out_features;
  Tensor out = Tensor::empty(out_shape, DType::f32, device);
  GemmArgs second;
  second.a = flat_rows(hidden, rows, d_ff);
  second.b = flat_rows(w2_op, out_features, d_ff).transposed();
  second.c = flat_rows(out, rows, out_features);
  second.bias = b2.defined() ? b2.device_data<float>() : nullptr;
  gemm_on(op, device, second);
  if (!needs_grad({&x, &w1, &b1, &w2, &b2})) return out;

  out.set_requires_grad(true);
  record_backward(out, [x, w1, b1, w2, b2, out, x_op, w1_op, w2_op, hidden, rows, d_model, d_ff,
                        out_features, device, op]() {
    const Tensor g = out.grad();
    if (!g.defined()) return;
    const Tensor g_op = to_bf16(g);
    const GemmOperand g_rows = flat_rows(g_op, rows, out_features);
    if (w2.requires_grad()) {
      GradTarget dw = grad_target(w2);
      run_gemm(device, g_rows.transposed(), flat_rows(hidden, rows, d_ff),
               flat_rows(dw.tensor, out_features, d_ff), dw.accumulate);
    }
    if (b2.defined() && b2.requires_grad()) {
      GradTarget db = grad_target(b2);
      bias_grad(op, g, rows, out_features, db.tensor, db.accumulate);
    }
    Tensor du = Tensor::empty({rows, d_ff}, DType::bf16, device);
    float* db1 = nullptr;
    bool accumulate_db1 = false;
    if (b1.defined() && b1.requires_grad()) {
      GradTarget target = grad_target(b1);
      db1 = target.tensor.device_data<float>();
      accumulate_db1 = target.accumulate;
    }
    GemmArgs dh;
    dh.a = g_rows;
    dh.b = flat_rows(w2_op, out_features, d_ff);
    dh.c = flat_rows(du, rows, d_ff);
    detail::kernel(op, device, &KernelTable::relu_backward_product_bf16)(
        dh, hidden.device_data<bf16>(), db1, accumulate_db1);
    const GemmOperand du_rows = flat_rows(du, rows, d_ff);
    if (x.requires_grad()) {
      GradTarget dx = grad_target(x);
      run_gemm(device, du_rows, flat_rows(w1_op, d_ff, d_model),
               flat_rows(dx.tensor, rows, d_model), dx.accumulate);
    }
    if (w1.requires_grad()) {
      GradTarget dw = grad_target(w1);
      run_gemm(device, du_rows.transposed(), flat_rows(x_op, rows, d_model),
               flat_rows(dw.tensor, d_ff, d_model), dw.accumulate);
    }
  });
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const ProductOptions& product) {
  return linear_product(x, weight, bias, product, false);
}

std::vector<Tensor> packed_linears(const Tensor& x, const std::vector<const PackedWeight*>& weights,
                                   const std::vector<Tensor>& biases) {
  constexpr const char* kOp = "packed_linears";
  const auto count = static_cast<int>(weights.size());
  TFM_CHECK(count >= 1 && count <= 4 && biases.size() == weights.size(),
            "{}: {} weights and {} biases (1 to 4 of each)", kOp, weights.size(), biases.size());
  TFM_CHECK(x.defined() && x.dtype() == DType::f32 && x.rank() >= 1, "{}: x {} must be f32", kOp,
            x.defined() ? x.describe() : std::string("undefined"));
  const int64_t in = x.dim(-1), rows = x.numel() / std::max<int64_t>(in, 1);
  const Device device = x.device();
  std::vector<Tensor> out;
  std::vector<const kernels::PackedForm*> forms;
  std::vector<const float*> bias_data;
  std::vector<float*> out_data;
  for (int j = 0; j < count; ++j) {
    const PackedWeight* w = weights[static_cast<size_t>(j)];
    const Tensor& b = biases[static_cast<size_t>(j)];
    TFM_CHECK(w != nullptr && w->in_features() == in && w->device() == device &&
                  w->dtype() == weights[0]->dtype(),
              "{}: weight {} does not take x {} (in {}, on {}, all packed alike)", kOp, j,
              x.describe(), w ? w->in_features() : -1, device_name(device));
    TFM_CHECK(!b.defined() || (b.dtype() == DType::f32 && b.rank() == 1 &&
                               b.dim(0) == w->out_features() && b.device() == device),
              "{}: bias {} must be f32[{}]", kOp, b.describe(), w->out_features());
    TFM_CHECK(!needs_grad({&x, &b}), "{}: inference only (a tensor needs a gradient)", kOp);
    Shape shape = x.shape();
    shape[-1] = w->out_features();
    out.push_back(Tensor::empty(shape, DType::f32, device));
    forms.push_back(&w->form());
    bias_data.push_back(b.defined() ? b.device_data<float>() : nullptr);
    out_data.push_back(out.back().device_data<float>());
  }
  // x as each weight's product type takes it (f32 for an i8 weight).
  const Tensor x_op = weights[0]->dtype() == DType::bf16 ? to_bf16(x) : x;
  const KernelTable& backend = detail::kernels_for(kOp, device);
  if (backend.packed_linears != nullptr && count > 1) {
    backend.packed_linears(x_op.device_raw(), rows, forms.data(), bias_data.data(), out_data.data(),
                           count);
    return out;
  }
  for (int j = 0; j < count; ++j)
    detail::kernel(kOp, device, &KernelTable::packed_linear)(
        x_op.device_raw(), rows, *forms[static_cast<size_t>(j)], bias_data[static_cast<size_t>(j)],
        out_data[static_cast<size_t>(j)], kernels::PostOp::none);
  return out;
}

Tensor relu_feed_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                         const Tensor& b2, DType precision) {
  if (precision == DType::bf16) {
    const char* op = "relu_feed_forward";
    check_linear(op, x, w1, b1);
    TFM_CHECK(w2.defined() && w2.rank() == 2 && w2.dim(1) == w1.dim(0),
              "{}: fc2's weight {} does not take fc1's {} outputs (expected [out, {}])", op,
              w2.describe(), w1.dim(0), w1.dim(0));
    TFM_CHECK(w2.dtype() == DType::f32 &&
                  (!b2.defined() ||
                   (b2.dtype() == DType::f32 && b2.rank() == 1 && b2.dim(0) == w2.dim(0))),
              "{}: fc2's weight {} and bias {} must be f32 [out, {}] and [out]", op, w2.describe(),
              b2.defined() ? b2.describe() : "(none)", w1.dim(0));
    const Device device = detail::op_device(op, x, w1, b1, w2, b2);
    if (detail::kernels_for(op, device).relu_backward_product_bf16 != nullptr)
      return relu_feed_forward_bf16(x, w1, b1, w2, b2, device);
  }
  // f32 products, or a backend without relu_backward_product_bf16.
  return linear(linear_relu(x, w1, b1, {precision}), w2, b2, {precision});
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const ProductOptions& product) {
  return linear_product(x, weight, bias, product, true);
}

Tensor linear_swish(const Tensor& x, const Tensor& weight, const Tensor& bias,
                    const ProductOptions& product) {
  if (product.packed && !needs_grad({&x, &weight, &bias}))
    return linear_product(x, weight, bias, product, false, kernels::PostOp::swish);
  return swish(linear(x, weight, bias, product));
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const ProductOptions& product) {
  if (product.packed && !needs_grad({&x, &weight, &bias}))
    return linear_product(x, weight, bias, product, false, kernels::PostOp::gelu);
  return gelu(linear(x, weight, bias, product));
}

}  // namespace tfm::internal::ops
