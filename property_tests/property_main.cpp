// Test entry point: prints the RapidCheck seed first, so any failure in the
// log can be replayed with RC_PARAMS="seed=<seed>".
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <iostream>

#include "ctxscore/harness/run_control.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (const std::string gpu = ctxscore::harness::apply_ctest_gpu_assignment(); !gpu.empty())
    std::cout << "CTest resource: " << gpu << " (CUDA_VISIBLE_DEVICES=" << std::getenv("CUDA_VISIBLE_DEVICES") << ")" << std::endl;
  const auto seed = rc::detail::configuration().testParams.seed;
  std::cout << "RapidCheck seed: " << seed << " (replay: RC_PARAMS=\"seed=" << seed << "\")" << std::endl;
  return RUN_ALL_TESTS();
}
