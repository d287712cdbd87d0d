// Adam (Kingma and Ba), as torch.optim.Adam, with the paper's defaults beta1 = 0.9, beta2 = 0.98,
// eps = 1e-9 (section 5.3); with a weight decay, as torch.optim.AdamW (Loshchilov and Hutter's
// decoupled decay, of every parameter). State (m, v) is f32.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal {

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-9;
  double weight_decay = 0.0;  // > 0: p = (1 - lr weight_decay) p before each update
};

class Adam {
 public:
  Adam(std::vector<Tensor> parameters, AdamOptions options = {});

  // One update with learning rate lr from each parameter's gradient; parameters without a gradient
  // this step are left alone (their moments too).
  //   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
  //   p = (1 - lr wd) p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
  void step(double lr);
  void zero_grad();

  // Makes the moments one buffer each, laid out as `flat_parameters`, when that buffer holds every
  // parameter at the offset where `flat_gradients` holds its gradient (the parameters' current
  // gradient buffers: train/gradient_buckets.h, flatten's FlatLayout::reversed). step() then
  // updates all parameters in one pass whenever each has a gradient (one parallel loop instead of
  // one per tensor, most of them too small to share between threads). Before the first step and
  // restore; returns whether the layouts matched (if not, nothing changes and step() goes tensor by
  // tensor).
  bool use_flat(const Tensor& flat_parameters, const Tensor& flat_gradients);
  // Whether use_flat succeeded and every parameter has a gradient now: the gradients are then
  // exactly the elements of the flat gradient buffer.
  bool flat_gradients_complete() const;
  bool uses_flat() const { return flat_parameters_.defined(); }
  int64_t steps() const { return steps_; }
  // The step count alone (a rank given the state of another, TrainingSession::broadcast_state).
  void set_steps(int64_t steps) { steps_ = steps; }

  // State for checkpoints: the moments in parameter order.
  const std::vector<Tensor>& first_moments() const { return m_; }
  const std::vector<Tensor>& second_moments() const { return v_; }
  void restore(int64_t steps, const std::vector<Tensor>& m, const std::vector<Tensor>& v);

 private:
  std::vector<Tensor> parameters_;
  std::vector<Tensor> m_, v_;  // views of flat_m_ and flat_v_ after use_flat
  Tensor flat_parameters_, flat_gradients_, flat_m_, flat_v_;
  AdamOptions options_;
  int64_t steps_ = 0;
};

}  // namespace tfm::internal
