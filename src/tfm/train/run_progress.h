// A training run's progress lines and "train" records: the updates between two of them summed
// (training.log_every), the time left, and the line's text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tfm/train/recipe.h"
#include "tfm/train/session.h"

namespace tfm::internal {

// "1:02:03" (hours, minutes, seconds).
std::string clock_text(double seconds);

// The updates since the last progress line.
class ProgressWindow {
 public:
  ProgressWindow() : start_(std::chrono::steady_clock::now()) {}

  // A finite update.
  void add(const UpdateResult& update);

  struct Totals {
    double seconds = 0;     // since the window started
    double loss = 0;        // per target token
    double perplexity = 0;  // exp(nll per target token)
    double seconds_per_update = 0;
    double tokens_per_second = 0;  // source and target tokens
  };
  // Over the updates added (at least one), the clock read now.
  Totals totals() const;
  // An empty window from now.
  void restart();

 private:
  double loss_ = 0, nll_ = 0;  // summed over target tokens
  int64_t target_tokens_ = 0, tokens_ = 0, updates_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// The seconds left at `step` by the step budget at `seconds_per_update` and by the time budget,
// whichever ends first; -1 when the run has neither.
double time_left(const TrainRecipe& recipe, int64_t step, double seconds_per_update,
                 double elapsed);

// Where the progress line's run stands.
struct ProgressPoint {
  int64_t step = 0;
  int64_t epoch = 0;          // 1-based
  double epoch_fraction = 0;  // of its batches done
  double learning_rate = 0;
  double elapsed = 0;     // seconds
  double remaining = -1;  // seconds; < 0: unknown
};

// "step 4 | epoch 1 (50%) | loss 5.1234 | ppl 123.45 | lr 0.00012 | 1234 tok/s | 0:00:03 elapsed
// | 0:00:05 left".
std::string progress_line(const ProgressPoint& at, const ProgressWindow::Totals& totals);

}  // namespace tfm::internal
