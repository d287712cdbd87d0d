#include "tfm/nn/layers.h"

#include <cmath>

#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::nn {

Tensor make_parameter(const Shape& shape) {
  Tensor t = Tensor::zeros(shape);
  t.set_requires_grad(true);
  return t;
}

ParameterSource::ParameterSource(const NamedTensors& loaded) : adopting_(true) {
  for (const auto& [name, tensor] : loaded) loaded_.emplace(name, tensor);
}

Tensor ParameterSource::make(const std::string& name, const Shape& shape, float initial) const {
  if (!adopting_) {
    Tensor t = make_parameter(shape);
    if (initial != 0.0f) t.fill(initial);
    return t;
  }
  auto it = loaded_.find(name);
  TFM_CHECK(it != loaded_.end(), "parameter '{}' is missing", name);
  const Tensor& src = it->second;
  TFM_CHECK(src.defined() && src.shape() == shape && src.dtype() == DType::f32,
            "parameter '{}' is {}, expected f32{}", name,
            src.defined() ? src.describe() : "undefined", shape.str());
  // A handle on the same storage with autograd state of its own.
  Tensor t = src.view(shape);
  t.set_requires_grad(true);
  return t;
}

namespace {
void fill_uniform(Tensor& t, float bound, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool has_bias, const ParameterSource& source,
               const std::string& name)
    : weight(source.make(name + "weight", {out, in})) {
  if (has_bias) bias = source.make(name + "bias", {out});
}

Tensor Linear::forward(const Tensor& x, DType precision, const Tensor& x_bf16) const {
  return ops::linear(x, weight, bias, {precision, packed.get(), x_bf16});
}

void Linear::pack(DType precision) {
  packed = ops::pack_weight(weight, precision);
}

void Linear::init(std::mt19937_64& rng) {
  // Glorot: U(-a, a) with a = sqrt(6 / (fan_in + fan_out)).
  float bound = std::sqrt(6.0f / static_cast<float>(weight.dim(0) + weight.dim(1)));
  fill_uniform(weight, bound, rng);
  if (bias.defined()) bias.fill(0.0f);
}

void Linear::collect(const std::string& prefix, NamedTensors& out) const {
  out.emplace_back(prefix + "weight", weight);
  if (bias.defined()) out.emplace_back(prefix + "bias", bias);
}

LayerNorm::LayerNorm(int64_t dim, float epsilon, const ParameterSource& source,
                     const std::string& name)
    : weight(source.make(name + "weight", {dim}, 1.0f)),
      bias(source.make(name + "bias", {dim})),
      eps(epsilon) {}

Tensor LayerNorm::forward(const Tensor& x) const {
  return ops::layer_norm(x, weight, bias, eps);
}

void LayerNorm::collect(const std::string& prefix, NamedTensors& out) const {
  out.emplace_back(prefix + "weight", weight);
  out.emplace_back(prefix + "bias", bias);
}

Activation activation_named(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  TFM_CHECK(name == "swish", "unknown activation '{}' (valid: relu, gelu, swish)", name);
  return Activation::swish;
}

FeedForward::FeedForward(int64_t d_model, int64_t d_ff, const ParameterSource& source,
                         const std::string& name, Activation kind)
    : fc1(d_model, d_ff, true, source, name + "fc1."),
      fc2(d_ff, d_model, true, source, name + "fc2."),
      activation(kind) {}

Tensor FeedForward::forward(const Tensor& x, DType precision) const {
  if (activation == Activation::relu) {
    // Unpacked (training's) bf16 products keep the hidden layer in bf16 only.
    if (precision == DType::bf16 && !fc1.packed && !fc2.packed)
      return ops::relu_feed_forward(x, fc1.weight, fc1.bias, fc2.weight, fc2.bias, precision);
    // relu(fc1(x)) as one product with the relu applied on its output (ops::linear_relu).
    return fc2.forward(ops::linear_relu(x, fc1.weight, fc1.bias, {precision, fc1.packed.get()}),
                       precision);
  }
  // swish(fc1(x)) or gelu(fc1(x)) as one product where fc1 is packed (ops::linear_swish,
  // ops::linear_gelu), else the activation after the product.
  const ops::ProductOptions product{precision, fc1.packed.get()};
  return fc2.forward(activation == Activation::swish
                         ? ops::linear_swish(x, fc1.weight, fc1.bias, product)
                         : ops::linear_gelu(x, fc1.weight, fc1.bias, product),
                     precision);
}

void FeedForward::pack(DType precision) {
  fc1.pack(precision);
  fc2.pack(precision);
}

void FeedForward::init(std::mt19937_64& rng) {
  fc1.init(rng);
  fc2.init(rng);
}

void FeedForward::collect(const std::string& prefix, NamedTensors& out) const {
  fc1.collect(prefix + "fc1.", out);
  fc2.collect(prefix + "fc2.", out);
}

namespace {

// The [sin | cos] halves (sinusoid "halves" and "halves_t2t"): frequency w_i of column pair
// (i, d/2 + i), in double as the interleaved table below.
Tensor sinusoid_halves(int64_t positions, int64_t d_model, int64_t first, bool t2t) {
  Tensor table = Tensor::empty({positions, d_model});
  float* p = table.data<float>();
  const int64_t half = d_model / 2;
  std::vector<double> frequency;
  for (int64_t i = 0; i < half; ++i)
    frequency.push_back(
        t2t ? std::exp(-static_cast<double>(i) * std::log(10000.0) / static_cast<double>(half - 1))
            : std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d_model)));
  for (int64_t row = 0; row < positions; ++row) {
    const double pos = static_cast<double>(first + row);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos * frequency[static_cast<size_t>(i)];
      p[row * d_model + i] = static_cast<float>(std::sin(angle));
      p[row * d_model + half + i] = static_cast<float>(std::cos(angle));
    }
  }
  return table;
}

}  // namespace

Tensor sinusoidal_positions(int64_t positions, int64_t d_model, int64_t first,
                            const std::string& layout) {
  if (layout != "interleaved") {
    TFM_CHECK(layout == "halves" || layout == "halves_t2t",
              "unknown sinusoid layout '{}' (valid: interleaved, halves, halves_t2t)", layout);
    TFM_CHECK(d_model % 2 == 0 && (layout == "halves" || d_model >= 4),
              "sinusoid layout '{}' needs an even d_model{}, got {}", layout,
              layout == "halves" ? "" : " >= 4", d_model);
    return sinusoid_halves(positions, d_model, first, layout == "halves_t2t");
  }
  Tensor table = Tensor::empty({positions, d_model});
  float* p = table.data<float>();
  // 10000^(2i/d) once per column pair, not per position (the same values: building a model costs
  // little beyond its weights).
  std::vector<double> wavelength;
  for (int64_t i = 0; i < d_model; i += 2)
    wavelength.push_back(std::pow(10000.0, static_cast<double>(i) / static_cast<double>(d_model)));
  for (int64_t row = 0; row < positions; ++row) {
    const double pos = static_cast<double>(first + row);
    for (int64_t i = 0; i < d_model; i += 2) {
      // Computed in double: positions up to thousands times frequencies near 1 lose digits in f32.
      double angle = pos / wavelength[static_cast<size_t>(i / 2)];
      p[row * d_model + i] = static_cast<float>(std::sin(angle));
      if (i + 1 < d_model) p[row * d_model + i + 1] = static_cast<float>(std::cos(angle));
    }
  }
  return table;
}

}  // namespace tfm::internal::nn
