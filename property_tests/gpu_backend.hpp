// The backend the GPU properties judge: the project's kernel in process, or
// the one CTXSCORE_PROPERTY_BACKEND names (a port takes its command line
// from CTXSCORE_PORT). Tests skip, saying why, where it cannot run.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/generators.hpp"
#include "property_runner.hpp"

namespace ctxscore::test {

inline std::string property_backend_name() {
  const char* name = std::getenv("CTXSCORE_PROPERTY_BACKEND");
  return name && *name ? name : "hip";
}

// Why the property backend cannot run here; empty when it can. An unknown
// name is not a reason to skip: it throws.
inline std::string property_backend_absence() {
  const std::string name = property_backend_name();
  for (const harness::BackendEntry& e : harness::backend_registry())
    if (e.name == name) return e.unavailable();
  harness::make_backend(name);  // throws, naming the backends
  return "";
}

// One backend per process (a port's process lives as long as the tests).
inline harness::Backend& property_backend() {
  static std::unique_ptr<harness::Backend> b = [] {
    const char* port = std::getenv("CTXSCORE_PORT");
    return harness::make_backend(property_backend_name(), port ? port : "");
  }();
  return *b;
}

// Whether this machine must run the gpu tests (CTXSCORE_REQUIRE_GPU set and
// not "0"): ci/test and ci/gpu set it where a GPU is present, so that a
// reason to skip there is a failure.
inline bool gpu_required() {
  const char* v = std::getenv("CTXSCORE_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

}  // namespace ctxscore::test

// Skips the test with `why`, or fails it where a GPU is required.
#define CTXSCORE_SKIP_OR_FAIL(why)                                                           \
  do {                                                                                       \
    if (::ctxscore::test::gpu_required()) GTEST_FAIL() << (why) << " (CTXSCORE_REQUIRE_GPU)"; \
    GTEST_SKIP() << (why);                                                                   \
  } while (0)

namespace ctxscore::test {

// A base for tests that run on the property backend.
class OnPropertyBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
    set_toolchain(property_backend().toolchain());
  }
  harness::Backend& backend() { return property_backend(); }
};

}  // namespace ctxscore::test
