// Ending a run early and cleanly: SIGINT and SIGTERM, a time budget, and
// progress away from a terminal. A stop never half-judges a case: the loops
// check between cases, and a blocking wait on a port gives up at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ctxscore::harness {

// SIGINT and SIGTERM set a flag (and interrupt blocking waits) instead of
// killing the process, so the report of the cases judged so far is written.
void install_stop_signals();
// The signal that asked the run to stop; 0 when none did.
int stop_signal();

// Thrown out of a wait that a stop signal cut short. Deliberately not a
// std::exception: no handler that turns errors into verdicts may swallow it.
struct Interrupted {
  int signal = 0;
};
// Throws Interrupted when a stop signal has arrived.
void throw_if_stopped();

// `text` as a positive, finite number of seconds (a flag's or an environment
// value): nullopt for anything else, NaN and infinity included.
std::optional<double> positive_seconds(const std::string& text);

// A wall-clock budget: unlimited when constructed with seconds <= 0. Spent
// at once when `abandoned` turns true (a gate that stops at its first
// failing check ends the checks running beside it).
class TimeBudget {
 public:
  explicit TimeBudget(double seconds = 0, const std::atomic<bool>* abandoned = nullptr);
  bool spent() const;
  double seconds() const { return seconds_; }

 private:
  double seconds_;
  std::chrono::steady_clock::time_point start_;
  const std::atomic<bool>* abandoned_;
};

// A progress line on stderr about every `period` seconds when stderr is not a
// terminal (CI logs); on a terminal the caller's own live line is used.
class Progress {
 public:
  explicit Progress(double period = 10);
  bool due();  // true at most once per period, never on a terminal

 private:
  double period_;
  bool terminal_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace ctxscore::harness

namespace ctxscore::harness {

// CTest resource groups: a test declared with RESOURCE_GROUPS "gpus:1" and
// run with --resource-spec-file gets CTEST_RESOURCE_GROUP_0_GPUS="id:N,slots:1".
// This makes GPU N the process's only visible device (CUDA_VISIBLE_DEVICES
// and HIP_VISIBLE_DEVICES; an id indexes an existing CUDA_VISIBLE_DEVICES
// list), before any GPU call, for this process and the ports it starts.
// Returns "GPU N" when it assigned one, "" when CTest assigned none; throws
// std::runtime_error on a malformed assignment.
std::string apply_ctest_gpu_assignment();

}  // namespace ctxscore::harness
