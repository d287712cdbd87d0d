#include "tfm/train/run_progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tfm::internal {

std::string clock_text(double seconds) {
  auto s = static_cast<int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

void ProgressWindow::add(const UpdateResult& update) {
  loss_ += update.loss * static_cast<double>(update.target_tokens);
  nll_ += update.nll * static_cast<double>(update.target_tokens);
  target_tokens_ += update.target_tokens;
  tokens_ += update.target_tokens + update.source_tokens;
  ++updates_;
}

ProgressWindow::Totals ProgressWindow::totals() const {
  Totals sum;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  sum.loss = loss_ / static_cast<double>(target_tokens_);
  sum.perplexity = std::exp(nll_ / static_cast<double>(target_tokens_));
  sum.seconds_per_update = sum.seconds / static_cast<double>(updates_);
  sum.tokens_per_second = static_cast<double>(tokens_) / sum.seconds;
  return sum;
}

void ProgressWindow::restart() {
  loss_ = nll_ = 0;
  target_tokens_ = tokens_ = updates_ = 0;
  start_ = std::chrono::steady_clock::now();
}

double time_left(const TrainRecipe& recipe, int64_t step, double seconds_per_update,
                 double elapsed) {
  double remaining = -1;
  if (recipe.max_steps > 0)
    remaining = seconds_per_update * static_cast<double>(recipe.max_steps - step);
  if (recipe.max_minutes > 0) {
    double by_time = recipe.max_minutes * 60 - elapsed;
    remaining = remaining < 0 ? by_time : std::min(remaining, by_time);
  }
  return remaining;
}

std::string progress_line(const ProgressPoint& at, const ProgressWindow::Totals& totals) {
  return fmt::format(
      "step {} | epoch {} ({:.0f}%) | loss {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} tok/s | "
      "{} elapsed{}",
      at.step, at.epoch, 100 * at.epoch_fraction, totals.loss, totals.perplexity, at.learning_rate,
      totals.tokens_per_second, clock_text(at.elapsed),
      at.remaining >= 0 ? " | " + clock_text(at.remaining) + " left" : "");
}

}  // namespace tfm::internal
