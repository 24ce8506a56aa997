// Where a check's time goes: each second of the harness's thread is charged
// to one phase, the innermost PhaseClock's (a nested clock pauses the one
// around it). Suites hold their checks' totals; time charged to no phase
// is the harness's own drawing, shrinking and bookkeeping.
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace ctxscore::harness {

enum class Phase : std::size_t {
  setup,           // laying cases out: buffers filled, caches poisoned
  reference,       // the oracle's exact scores and bounds
  implementation,  // the implementation's own calls, as it times them (a JIT's compiles among them)
  transfer,        // getting buffers to the implementation and scores back: the protocol's encode, pipe and decode, device copies
  judge,           // comparing scores, bits and selections
};
inline constexpr std::size_t kPhases = 5;
const char* phase_name(Phase p);

using PhaseSeconds = std::array<double, kPhases>;
// The process's totals so far, the running clock's time included.
PhaseSeconds phase_seconds();
// `later` less `earlier`, phase by phase.
PhaseSeconds phase_difference(const PhaseSeconds& later, const PhaseSeconds& earlier);

class PhaseClock {
 public:
  explicit PhaseClock(Phase p);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

 private:
  int outer_;
};

// Moves `seconds` already charged to `from` over to `to` (never more than
// `from` holds): a port's reply says how long its call took inside the wait
// the harness charged to transfer.
void recharge(Phase from, Phase to, double seconds);

}  // namespace ctxscore::harness
