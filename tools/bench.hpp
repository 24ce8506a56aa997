// `ctxscore bench`: backends timed side by side on the same cases, each as
// it measures itself (Backend::time), reported against the first backend
// named and the copy rate, and gated against an earlier report.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ctxscore/harness/backend.hpp"

namespace ctxscore::cli {

struct BenchBackend {
  std::string label;  // "hip", "reference", "port:NAME"
  std::unique_ptr<harness::Backend> backend;
};

struct BenchRow {
  std::string case_name, label, toolchain;
  harness::Timing timing;
  double bytes = 0;          // what one call must move (bytes_moved)
  double vs_first = 0;       // the first backend's time over this one's: above 1 is faster
};

struct BenchReport {
  std::vector<BenchRow> rows;
  std::vector<std::string> slower;  // the baseline comparison's failures, in words
  std::string table() const;
  nlohmann::ordered_json json() const;
};

// Bytes one call must move: the query rows of requests that scan a slot,
// one page per scanned (request, slot), the table entries it reads, and
// the scores it writes.
double bytes_moved(const Case& c);

// Times every backend on every case, `calls` calls each.
BenchReport bench(std::vector<BenchBackend>& backends, const std::vector<Case>& cases, int calls);

// Each (case, backend) of `baseline` (an earlier report's JSON) that this
// report measured more than `max_slowdown_pct` percent slower, or did not
// measure, into report.slower. Throws std::invalid_argument on a baseline
// that is not such a report.
void compare_with_baseline(BenchReport& report, const nlohmann::json& baseline, double max_slowdown_pct);

}  // namespace ctxscore::cli
