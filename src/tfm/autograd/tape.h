// Reverse-mode automatic differentiation with a tape.
//
// During a training forward pass a Tape is current (TapeScope). Each op whose inputs require a
// gradient marks its output as requiring one and records a closure that, given the output's
// gradient, adds the inputs' gradients. Tape::backward runs the closures in reverse order and
// destroys each one after it ran, so activations are freed as early as possible. Without a current
// tape (inference) ops record nothing and keep no activations.
#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal {

// Watches a tape for gradient bucketing (train/gradient_buckets.h): which tape entry first used
// each tensor in the forward pass, how far a backward pass has come, and each gradient written. An
// op calls needs_grad() with its inputs before it records its entry, so the entries that write an
// input's gradient have at least the index reported for it: once the backward has run every entry
// from the end down to that index, the gradient is complete.
class TapeObserver {
 public:
  virtual ~TapeObserver() = default;
  // `input` is an input of the op about to record entry `entry`.
  virtual void on_use(const AutogradMeta* input, size_t entry) = 0;
  // The backward has run every entry from the last down to `entry`.
  virtual void on_backward_done(size_t entry) = 0;
  // A backward is about to write the gradient of `tensor`.
  virtual void on_gradient_write(const AutogradMeta* tensor) = 0;
};

class Tape {
 public:
  using Backward = std::function<void()>;

  // Reports uses, progress and gradient writes to `observer` (nullptr: none) until the end of the
  // next backward: an observer watches one forward and backward pass.
  void set_observer(TapeObserver* observer) { observer_ = observer; }
  TapeObserver* observer() const { return observer_; }

  void record(Backward backward) { entries_.push_back(std::move(backward)); }
  // Seeds d(output) with `seed` (ones when undefined, e.g. for a scalar loss) and runs every
  // recorded backward in reverse. The tape is empty afterwards.
  void backward(const Tensor& output, const Tensor& seed = {});
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<Backward> entries_;
  TapeObserver* observer_ = nullptr;
};

// The tape ops record into on this thread, or nullptr.
Tape* current_tape();

// Makes a tape current for the scope's lifetime.
class TapeScope {
 public:
  explicit TapeScope(Tape& tape);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* previous_;
};

// True when a tape is current and at least one input requires a gradient.
bool needs_grad(std::initializer_list<const Tensor*> inputs);

// Marks an op's output as requiring a gradient and records its backward on the current tape.
// A closure that captures the output by value must be built after output.set_requires_grad(true):
// a copy taken before shares no AutogradMeta and would never see the gradient. Ops therefore write
//   out.set_requires_grad(true); record_backward(out, [out, ...] { ... });
void record_backward(Tensor& output, Tape::Backward backward);

// Where a backward kernel writes the gradient of `t`. On the first write of a pass the buffer holds
// nothing and `accumulate` is false (the kernel overwrites); afterwards it is true (the kernel
// adds).
struct GradTarget {
  Tensor tensor;
  bool accumulate = false;
};
GradTarget grad_target(const Tensor& t);

}  // namespace tfm::internal
