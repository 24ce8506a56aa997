#include "ctxscore/harness/phases.hpp"

#include <algorithm>
#include <chrono>

namespace ctxscore::harness {

namespace {

using Clock = std::chrono::steady_clock;

struct State {
  PhaseSeconds totals{};
  int running = -1;  // the innermost clock's phase, -1 when none
  Clock::time_point since;
};
// The harness judges on one thread: the state is that thread's.
thread_local State state;

void charge_running(Clock::time_point now) {
  if (state.running >= 0)
    state.totals[static_cast<std::size_t>(state.running)] += std::chrono::duration<double>(now - state.since).count();
  state.since = now;
}

}  // namespace

const char* phase_name(Phase p) {
  static const char* const kNames[kPhases] = {"setup", "reference", "implementation", "transfer", "judge"};
  return kNames[static_cast<std::size_t>(p)];
}

PhaseSeconds phase_seconds() {
  charge_running(Clock::now());
  return state.totals;
}

PhaseSeconds phase_difference(const PhaseSeconds& later, const PhaseSeconds& earlier) {
  PhaseSeconds d{};
  for (std::size_t k = 0; k < kPhases; ++k) d[k] = std::max(0.0, later[k] - earlier[k]);
  return d;
}

PhaseClock::PhaseClock(Phase p) : outer_(state.running) {
  charge_running(Clock::now());
  state.running = static_cast<int>(p);
}

PhaseClock::~PhaseClock() {
  charge_running(Clock::now());
  state.running = outer_;
}

void recharge(Phase from, Phase to, double seconds) {
  charge_running(Clock::now());
  seconds = std::min(seconds, state.totals[static_cast<std::size_t>(from)]);
  if (seconds <= 0) return;
  state.totals[static_cast<std::size_t>(from)] -= seconds;
  state.totals[static_cast<std::size_t>(to)] += seconds;
}

}  // namespace ctxscore::harness
