#include "tfm/train/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <span>

namespace tfm::internal {

namespace {

std::atomic<int> g_stop_signal{0};

// The first SIGINT/SIGTERM asks the loop to stop; a second one ends the process at once (only
// async-signal-safe calls here: an atomic exchange, write and _exit).
extern "C" void request_stop(int signal) {
  if (g_stop_signal.exchange(signal) == 0) return;
  static const char kMessage[] =
      "tfm: error: training interrupted again: ended at once without saving; --resume continues "
      "from the last checkpoint\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(128 + signal);
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  previous_int_ = std::signal(SIGINT, request_stop);
  previous_term_ = std::signal(SIGTERM, request_stop);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

bool stop_signal_received() {
  return g_stop_signal != 0;
}

RunClock::RunClock(dist::Communicator& communicator, double elapsed_before)
    : communicator_(communicator),
      elapsed_before_(elapsed_before),
      start_(std::chrono::steady_clock::now()),
      agreed_elapsed_(local_elapsed()) {}

double RunClock::local_elapsed() const {
  return elapsed_before_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double RunClock::elapsed() const {
  return communicator_.size() > 1 ? agreed_elapsed_ : local_elapsed();
}

bool RunClock::stop_requested() const {
  return communicator_.size() > 1 ? agreed_stop_ : stop_signal_received();
}

void RunClock::agree() {
  if (communicator_.size() == 1) return;
  double values[2] = {stop_signal_received() ? 1.0 : 0.0,
                      communicator_.rank() == 0 ? local_elapsed() : 0.0};
  communicator_.all_reduce_sum(std::span<double>(values));
  agreed_stop_ = values[0] > 0;
  agreed_elapsed_ = values[1];
}

bool RunClock::stop_between_batches() {
  if (communicator_.size() == 1) return stop_signal_received();
  double asked = stop_signal_received() ? 1.0 : 0.0;
  communicator_.all_reduce_sum(std::span<double>(&asked, 1));
  return asked > 0;
}

}  // namespace tfm::internal
