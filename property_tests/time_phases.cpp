// Where a check's time goes (phases.hpp): each second is charged to the
// innermost running clock, a port's stated call time moves from transfer to
// the implementation, and nothing is counted twice (label cpu).
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "ctxscore/harness/phases.hpp"

namespace ctxscore {
namespace {

using harness::Phase;
using harness::PhaseClock;

void busy(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

double at(const harness::PhaseSeconds& s, Phase p) { return s[static_cast<std::size_t>(p)]; }

TEST(TimePhases, ANestedClockPausesTheOneAroundIt) {
  const harness::PhaseSeconds before = harness::phase_seconds();
  const auto started = std::chrono::steady_clock::now();
  {
    const PhaseClock outer(Phase::setup);
    busy(0.02);
    {
      const PhaseClock inner(Phase::reference);
      busy(0.05);
    }
    busy(0.02);
  }
  busy(0.03);  // no clock runs: the harness's own time, charged to no phase
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const harness::PhaseSeconds d = harness::phase_difference(harness::phase_seconds(), before);
  EXPECT_GE(at(d, Phase::reference), 0.05);
  EXPECT_GE(at(d, Phase::setup), 0.04);
  EXPECT_LT(at(d, Phase::setup), 0.04 + 0.05);  // the inner clock's time is not the outer's too
  EXPECT_LE(std::accumulate(d.begin(), d.end(), 0.0), wall - 0.03 + 1e-3);
}

TEST(TimePhases, APortsStatedCallTimeMovesFromTransferToTheImplementation) {
  const harness::PhaseSeconds before = harness::phase_seconds();
  {
    const PhaseClock clock(Phase::transfer);
    busy(0.06);
    harness::recharge(Phase::transfer, Phase::implementation, 0.04);
  }
  const harness::PhaseSeconds d = harness::phase_difference(harness::phase_seconds(), before);
  EXPECT_NEAR(at(d, Phase::implementation), 0.04, 1e-9);
  EXPECT_GE(at(d, Phase::transfer), 0.02);
  EXPECT_LT(at(d, Phase::transfer), 0.06);
}

TEST(TimePhases, NoPhaseIsChargedMoreThanTheOneItIsMovedFromHolds) {
  const harness::PhaseSeconds before = harness::phase_seconds();
  harness::recharge(Phase::judge, Phase::implementation, 1e6);
  const harness::PhaseSeconds after = harness::phase_seconds();
  EXPECT_GE(at(after, Phase::judge), 0.0);
  EXPECT_LE(at(after, Phase::implementation) - at(before, Phase::implementation), at(before, Phase::judge) + 1e-9);
}

}  // namespace
}  // namespace ctxscore
