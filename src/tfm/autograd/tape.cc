#include "tfm/autograd/tape.h"

namespace tfm::internal {

namespace {
thread_local Tape* g_current_tape = nullptr;
// The tape whose backward runs on this thread (its observer sees the gradient writes).
thread_local Tape* g_backward_tape = nullptr;
}  // namespace

Tape* current_tape() {
  return g_current_tape;
}

TapeScope::TapeScope(Tape& tape) : previous_(g_current_tape) {
  g_current_tape = &tape;
}
TapeScope::~TapeScope() {
  g_current_tape = previous_;
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (g_current_tape == nullptr) return false;
  bool any = false;
  TapeObserver* observer = g_current_tape->observer();
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || !t->requires_grad()) continue;
    any = true;
    if (observer != nullptr) observer->on_use(t->autograd_meta(), g_current_tape->size());
  }
  return any;
}

void record_backward(Tensor& output, Tape::Backward backward) {
  TFM_CHECK(g_current_tape != nullptr, "record_backward called without a current tape");
  output.set_requires_grad(true);
  g_current_tape->record(std::move(backward));
}

GradTarget grad_target(const Tensor& t) {
  AutogradMeta* meta = t.autograd_meta();
  TFM_CHECK(meta != nullptr && meta->requires_grad, "gradient requested for a tensor without one");
  if (g_backward_tape != nullptr && g_backward_tape->observer() != nullptr)
    g_backward_tape->observer()->on_gradient_write(meta);
  GradTarget target;
  if (!meta->grad.defined() || meta->grad.shape() != t.shape() ||
      meta->grad.dtype() != DType::f32) {
    meta->grad = Tensor::empty(t.shape(), DType::f32, t.device());
    meta->grad_valid = false;
  }
  target.tensor = meta->grad;
  target.accumulate = meta->grad_valid;
  meta->grad_valid = true;
  return target;
}

void Tape::backward(const Tensor& output, const Tensor& seed) {
  TFM_CHECK(output.requires_grad(), "backward from a tensor that does not require a gradient");
  struct Running {
    Tape* previous;
    explicit Running(Tape* tape) : previous(g_backward_tape) { g_backward_tape = tape; }
    ~Running() { g_backward_tape = previous; }
  } running(this);
  GradTarget target = grad_target(output);
  if (seed.defined()) {
    TFM_CHECK(seed.shape() == output.shape(), "backward seed {} does not match output {}",
              seed.describe(), output.describe());
    target.tensor.copy_from(seed);
  } else {
    target.tensor.fill(1.0f);
  }
  while (!entries_.empty()) {
    Backward backward = std::move(entries_.back());
    entries_.pop_back();
    backward();
    if (observer_ != nullptr) observer_->on_backward_done(entries_.size());
  }
  observer_ = nullptr;
}

}  // namespace tfm::internal
