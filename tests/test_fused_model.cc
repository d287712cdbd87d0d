// The fused ops do not change training: a tiny model's loss and every parameter's gradient, with
// dropout (sub-layer and attention) and label smoothing on a padded batch, equal those of the
// unfused composition of the model (written out here from ops::linear, relu, dropout, add,
// layer_norm, attention and cross_entropy, drawing the dropout seeds in the model's order), for
// post-norm and pre-norm, with f32 and with bf16 products.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "op_test_values.h"
#include "tfm/autograd/tape.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::relative_error;

ModelConfig tiny_config(const std::string& norm) {
  ModelConfig c = preset("base");
  c.layers = 2;
  c.d_model = 16;
  c.d_ff = 48;
  c.heads = 2;
  c.d_k = 8;
  c.d_v = 6;
  c.vocab_size = 50;
  c.max_positions = 32;
  c.dropout = 0.2;
  c.attention_dropout = 0.1;
  c.label_smoothing = 0.1;
  c.norm = norm;
  return c;
}

// The model's training forward and loss from unfused ops, on its named parameters.
class UnfusedTransformer {
 public:
  UnfusedTransformer(const ModelConfig& config, const nn::NamedTensors& parameters)
      : c_(config), sinusoids_(nn::sinusoidal_positions(config.max_positions, config.d_model)) {
    for (const auto& [name, tensor] : parameters) p_[name] = tensor;
  }

  ops::CrossEntropyResult loss(const nn::Batch& batch, nn::ForwardContext& ctx) {
    product_ = ctx.precision();
    ops::AttentionMask source_mask, causal;
    source_mask.key_lengths = batch.src_lengths;
    causal.causal = true;
    Tensor x = embed(batch.src, ctx);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string l = "encoder.layers." + std::to_string(i) + ".";
      x = sublayer(l + "self_attn_norm.", x, ctx, [&](const Tensor& in) {
        return attention(l + "self_attn.", in, in, source_mask, ctx);
      });
      x = sublayer(l + "ffn_norm.", x, ctx, [&](const Tensor& in) { return ffn(l + "ffn.", in); });
    }
    if (c_.pre_norm()) x = norm("encoder.final_norm.", x);
    Tensor y = embed(batch.tgt_in, ctx);
    for (int64_t i = 0; i < c_.layers; ++i) {
      const std::string l = "decoder.layers." + std::to_string(i) + ".";
      y = sublayer(l + "self_attn_norm.", y, ctx, [&](const Tensor& in) {
        return attention(l + "self_attn.", in, in, causal, ctx);
      });
      y = sublayer(l + "cross_attn_norm.", y, ctx, [&](const Tensor& in) {
        return attention(l + "cross_attn.", in, x, source_mask, ctx);
      });
      y = sublayer(l + "ffn_norm.", y, ctx, [&](const Tensor& in) { return ffn(l + "ffn.", in); });
    }
    if (c_.pre_norm()) y = norm("decoder.final_norm.", y);
    const int64_t rows = y.numel() / c_.d_model;
    Tensor logits =
        ops::linear(ops::reshape(y, {rows, c_.d_model}), p_.at("embedding.weight"), {}, {product_});
    return ops::cross_entropy(logits, batch.tgt_out.view({rows}),
                              static_cast<float>(c_.label_smoothing), c_.pad_id);
  }

 private:
  Tensor drop(const Tensor& t, nn::ForwardContext& ctx) {
    float p = ctx.dropout(static_cast<float>(c_.dropout));
    return p > 0 ? ops::dropout(t, p, ctx.next_seed()) : t;
  }
  Tensor linear(const std::string& prefix, const Tensor& x) {
    auto bias = p_.find(prefix + "bias");
    return ops::linear(x, p_.at(prefix + "weight"), bias == p_.end() ? Tensor{} : bias->second,
                       {product_});
  }
  Tensor norm(const std::string& prefix, const Tensor& x) {
    return ops::layer_norm(x, p_.at(prefix + "weight"), p_.at(prefix + "bias"),
                           static_cast<float>(c_.layer_norm_eps));
  }
  Tensor embed(const Tensor& ids, nn::ForwardContext& ctx) {
    Tensor e =
        ops::embedding(ids, p_.at("embedding.weight"), std::sqrt(static_cast<float>(c_.d_model)));
    return drop(ops::add_positions(e, sinusoids_), ctx);
  }
  Tensor attention(const std::string& prefix, const Tensor& query_input, const Tensor& memory,
                   const ops::AttentionMask& mask, nn::ForwardContext& ctx) {
    Tensor q = linear(prefix + "q_proj.", query_input);
    Tensor k = linear(prefix + "k_proj.", memory);
    Tensor v = linear(prefix + "v_proj.", memory);
    float p = ctx.dropout(static_cast<float>(c_.attention_dropout));
    Tensor heads =
        ops::attention(q, k, v, static_cast<int>(c_.heads), mask, p, p > 0 ? ctx.next_seed() : 0);
    return linear(prefix + "out_proj.", heads);
  }
  Tensor ffn(const std::string& prefix, const Tensor& x) {
    return linear(prefix + "fc2.", ops::relu(linear(prefix + "fc1.", x)));
  }
  // Post-norm: LN(x + drop(f(x))); pre-norm: x + drop(f(LN(x))). The seed of drop is drawn after f
  // ran, as in the model.
  template <typename F>
  Tensor sublayer(const std::string& norm_prefix, const Tensor& x, nn::ForwardContext& ctx, F f) {
    if (c_.pre_norm()) {
      Tensor branch = f(norm(norm_prefix, x));
      return ops::add(x, drop(branch, ctx));
    }
    Tensor branch = f(x);
    return norm(norm_prefix, ops::add(x, drop(branch, ctx)));
  }

  ModelConfig c_;
  Tensor sinusoids_;
  std::map<std::string, Tensor> p_;
  DType product_ = DType::f32;  // of the loss() running now
};

nn::Batch padded_batch() {
  // Sources of 6, 4 and 2 tokens and targets of 5, 3 and 6 (bos/eos included), right-padded.
  Tensor src =
      Tensor::from_ints({3, 6}, {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 0, 15, 16, 0, 0, 0, 0});
  Tensor tgt_in =
      Tensor::from_ints({3, 6}, {2, 20, 21, 22, 23, 0, 2, 24, 25, 0, 0, 0, 2, 26, 27, 28, 29, 30});
  Tensor tgt_out =
      Tensor::from_ints({3, 6}, {20, 21, 22, 23, 3, 0, 24, 25, 3, 0, 0, 0, 26, 27, 28, 29, 30, 3});
  return nn::Batch::from_ids(src, tgt_in, tgt_out, 0);
}

struct Step {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;
};

template <typename LossFn>
Step training_step(const nn::Transformer& model, DType product, LossFn loss_fn) {
  for (Tensor& t : model.parameters()) t.zero_grad();
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    auto ctx = nn::ForwardContext::training(42, product);
    result = loss_fn(ctx);
  }
  tape.backward(result.loss);
  Step step;
  step.loss = result.loss.to_floats()[0];
  for (const auto& [name, tensor] : model.named_parameters())
    step.grads[name] = tensor.grad().to_floats();
  return step;
}

void expect_same_step(const std::string& norm, DType product, double grad_tolerance) {
  SCOPED_TRACE(norm + " norm, " + std::string(dtype_name(product)) + " products");
  ModelConfig config = tiny_config(norm);
  nn::Transformer model(config);
  model.init(17);
  nn::Batch batch = padded_batch();
  UnfusedTransformer unfused(config, model.named_parameters());
  Step expected = training_step(model, product,
                                [&](nn::ForwardContext& ctx) { return unfused.loss(batch, ctx); });
  Step got = training_step(model, product,
                           [&](nn::ForwardContext& ctx) { return model.loss(batch, ctx); });
  // The same seeds reach the same dropout masks: without them the losses would differ by far more.
  EXPECT_NEAR(got.loss, expected.loss, 1e-6 * std::fabs(expected.loss));
  ASSERT_EQ(got.grads.size(), expected.grads.size());
  for (const auto& [name, grad] : expected.grads) {
    ASSERT_FALSE(grad.empty()) << name << " got no gradient";
    EXPECT_LT(relative_error(got.grads.at(name), grad), grad_tolerance) << name;
  }
  // Dropout was on: the inference loss is another number.
  auto inference = nn::ForwardContext::inference(product);
  EXPECT_GT(std::fabs(model.loss(batch, inference).loss.to_floats()[0] - got.loss), 1e-3);
}

// On this batch (18 rows: a single chunk of the output loss, upstream gradient 1) the two agree bit
// for bit; the tolerance leaves room for the few f32 roundings that chunking or another upstream
// gradient would move (the loss scales its gradients after the products, the unfused backward
// before them).
TEST(FusedModel, TrainingStepEqualsTheUnfusedComposition) {
  expect_same_step("post", DType::f32, 1e-6);
  expect_same_step("pre", DType::f32, 1e-6);
}

TEST(FusedModel, TrainingStepWithBf16ProductsEqualsTheUnfusedComposition) {
  expect_same_step("post", DType::bf16, 1e-6);
  expect_same_step("pre", DType::bf16, 1e-6);
}

}  // namespace
}  // namespace tfm::internal
