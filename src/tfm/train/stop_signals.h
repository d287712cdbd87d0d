// SIGINT and SIGTERM during a training run, and what every rank agrees on after each update: the
// run's clock and whether to stop.
#pragma once

#include <chrono>

#include "tfm/dist/communicator.h"

namespace tfm::internal {

// Installs SIGINT/SIGTERM handlers for the run's lifetime: the loop stops after the update in
// progress, or between two of its accumulated batches (abandoning it), saves a checkpoint and
// returns; a second signal ends the process at once (exit status 128 + the signal), saying so.
class StopSignals {
 public:
  StopSignals();   // forgets a signal an earlier run received
  ~StopSignals();  // the previous handlers again
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

// Whether this process received SIGINT or SIGTERM since the StopSignals in force were installed.
bool stop_signal_received();

// The run's clock (seconds, counting those before a resume) and whether to stop. With several
// ranks, what every decision depends on is agreed after each update (agree(), a collective): rank
// 0's clock (time limits, checkpoint times, the fitted warmup) and whether any rank was asked to
// stop (mpirun forwards a signal to each rank at a slightly different moment). With one rank both
// are read live.
class RunClock {
 public:
  // Starts the clock now; `elapsed_before`: the seconds the run had trained before this process.
  RunClock(dist::Communicator& communicator, double elapsed_before);

  double elapsed() const;
  bool stop_requested() const;
  void agree();
  // Asked between two accumulated batches: a signal abandons the update (a collective with
  // several ranks, so that all abandon it together).
  bool stop_between_batches();
  // An abandoned update: the run stops.
  void stop() { agreed_stop_ = true; }

 private:
  double local_elapsed() const;

  dist::Communicator& communicator_;
  double elapsed_before_;
  std::chrono::steady_clock::time_point start_;
  double agreed_elapsed_;
  bool agreed_stop_ = false;
};

}  // namespace tfm::internal
