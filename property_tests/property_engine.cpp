// The property runner is the harness's campaign (property_runner.hpp): its
// floors are drawn on purpose, whatever the seed, and fail only where the
// property's generators cannot reach their class.
#include <gtest/gtest-spi.h>
#include <unistd.h>

#include <filesystem>

#include "ctxscore/fixture.hpp"
#include "ctxscore/harness/generators.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

namespace fs = std::filesystem;

// A class one draw in a hundred falls in holds every case of a stratum of
// half the run: drawn so, not met by luck.
TEST(PropertyEngine, AFloorsStratumFallsInItsClassHoweverRareTheClass) {
  std::int64_t cases = 0, in_class = 0;
  test::run_property(200, [&] {
    const int x = *rc::gen::inRange(0, 100);
    gen::count_class("x is 7", x == 7);
    ++cases;
    in_class += x == 7;
  }, {{"x is 7", 0.5}});
  EXPECT_GE(2 * in_class, 200 * 0.9) << in_class << " of " << cases << " evaluations in the class";
}

// A class the generators cannot reach fails the property, naming the class.
TEST(PropertyEngine, AFloorItsGeneratorsCannotReachFailsTheProperty) {
  EXPECT_NONFATAL_FAILURE(test::run_property(40, [] {
    const int x = *rc::gen::inRange(0, 100);
    gen::count_class("x past 100", x > 100);
  }, {{"x past 100", 0.25}}), "\"x past 100\" held in 0 of the");
}

// A property that fails on values of its own (no case) prints them shrunk.
TEST(PropertyEngine, AFailingPropertyPrintsItsShrunkValues) {
  EXPECT_NONFATAL_FAILURE(test::run_property(100, [] {
    const int x = *rc::gen::inRange(0, 1000);
    RC_ASSERT(x < 10);
  }), "shrunk values: int: 10");
}

// A property's case noted with its failure is shrunk (to two heads: the
// generators' smallest failing count) and written as a fixture.
TEST(PropertyEngine, AFailingCaseIsShrunkAndWrittenAsAFixture) {
  const fs::path dir = fs::temp_directory_path() / ("ctxscore_property_engine_" + std::to_string(::getpid()));
  harness::set_failure_dir(dir.string());
  EXPECT_NONFATAL_FAILURE(test::run_property(100, [] {
    const Case c = *gen::genCase(gen::CaseLimits{});
    if (c.heads > 1) {
      test::note_failure(c, "more than one head");
      RC_FAIL("more than one head");
    }
  }), "fixture: " + dir.string());
  harness::set_failure_dir("");
  std::int64_t written = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    ++written;
    EXPECT_EQ(read_fixture(f.path().string()).spec.heads, 2) << f.path();
  }
  EXPECT_EQ(written, 1);
  fs::remove_all(dir);
}

// Floors whose shares sum past 1 cannot each hold a stratum: refused.
TEST(PropertyEngine, FloorsWhoseSharesSumPastOneAreRefused) {
  try {
    harness::check_floor_shares({{"a", 0.6}, {"b", 0.5}});
    ADD_FAILURE() << "shares summing to 1.1 were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sum to 1.1"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(harness::check_floor_shares({{"a", 0.6}, {"b", 0.4}}));
}

}  // namespace
}  // namespace ctxscore
