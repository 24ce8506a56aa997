// Test entry point: prints the RapidCheck seed first, so any failure in the
// log can be replayed with RC_PARAMS="seed=<seed>".
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <iostream>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto seed = rc::detail::configuration().testParams.seed;
  std::cout << "RapidCheck seed: " << seed << " (replay: RC_PARAMS=\"seed=" << seed << "\")" << std::endl;
  return RUN_ALL_TESTS();
}
